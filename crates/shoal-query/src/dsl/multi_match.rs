//! `multi_match` (best_fields, most_fields, cross_fields, phrase, phrase_prefix,
//! bool_prefix) and `combined_fields`: match queries over several fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use shoal_mapping::analysis::analyze_with_offsets;
use shoal_mapping::Analyzer;
use tantivy::query::Query;

use super::compound::{dis_max_of, union_of};
use super::fields::{
    expand_fields, parse_field_boost, resolve, value_text, FieldRef, FieldSpec, Target,
};
use super::full_text::{
    combine_terms, fuzzy_or_term, match_field, read_option, token_name, zero_terms, MatchKind,
    MatchOptions,
};
use super::params::{read_f32, read_str, unknown_param};
use super::{boosted, parsing};
use crate::{QueryContext, QueryError};

/// The `multi_match` types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiType {
    BestFields,
    MostFields,
    CrossFields,
    Phrase,
    PhrasePrefix,
    BoolPrefix,
}

pub(crate) fn multi_match(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut opts = MatchOptions::default();
    let mut boost = 1.0;
    let mut text = None;
    let mut fields: Vec<(String, f32)> = Vec::new();
    let mut kind = MultiType::BestFields;
    let mut tie_breaker = None;
    for (key, value) in body {
        match key.as_str() {
            "query" => text = Some(value),
            "fields" => fields = read_fields("multi_match", value)?,
            "type" => {
                kind = match read_str("multi_match", key, value)?
                    .to_ascii_lowercase()
                    .as_str()
                {
                    "best_fields" => MultiType::BestFields,
                    "most_fields" => MultiType::MostFields,
                    "cross_fields" => MultiType::CrossFields,
                    "phrase" => MultiType::Phrase,
                    "phrase_prefix" => MultiType::PhrasePrefix,
                    "bool_prefix" => MultiType::BoolPrefix,
                    other => {
                        return Err(parsing(format!(
                            "failed to parse [multi_match] query type [{other}]. unknown type."
                        )))
                    }
                }
            }
            "tie_breaker" => tie_breaker = Some(read_f32("multi_match", key, value)?),
            "boost" => boost = super::params::read_boost("multi_match", value)?,
            k if read_option("multi_match", k, value, &mut opts)? => {}
            _ => return Err(unknown_param("multi_match", key)),
        }
    }
    let text = text.ok_or_else(|| parsing("No text specified for multi_match query"))?;
    if value_text(text).is_none() {
        return Err(parsing(format!(
            "[multi_match] unknown token [{}] after [query]",
            token_name(text)
        )));
    }
    if fields.is_empty() {
        fields = ctx.default_fields.clone();
    }
    let specs = expand_fields(ctx, &fields);
    let query = multi_field_query(ctx, &specs, text, kind, tie_breaker, &opts)?;
    Ok(boosted(query, boost))
}

/// `"fields": ["title^2", "body"]` or `"fields": "title"`.
pub fn read_fields(query: &str, value: &Value) -> Result<Vec<(String, f32)>, QueryError> {
    match value {
        Value::String(s) => Ok(vec![parse_field_boost(s)?]),
        Value::Array(items) => items
            .iter()
            .map(|item| parse_field_boost(read_str(query, "fields", item)?))
            .collect(),
        _ => Err(parsing(format!(
            "[{query}] query does not support [fields] of this type"
        ))),
    }
}

fn multi_field_query(
    ctx: &QueryContext,
    specs: &[FieldSpec],
    text: &Value,
    kind: MultiType,
    tie_breaker: Option<f32>,
    opts: &MatchOptions,
) -> Result<Box<dyn Query>, QueryError> {
    if kind == MultiType::CrossFields {
        return cross_fields(ctx, specs, text, tie_breaker.unwrap_or(0.0), opts);
    }
    let match_kind = match kind {
        MultiType::Phrase => MatchKind::Phrase,
        MultiType::PhrasePrefix => MatchKind::PhrasePrefix,
        MultiType::BoolPrefix => MatchKind::BoolPrefix,
        _ => MatchKind::Bool,
    };
    let mut per_field = Vec::new();
    for spec in specs {
        let field_opts = MatchOptions {
            lenient: opts.lenient || spec.lenient,
            ..opts.clone()
        };
        if let Some(q) = match_field(ctx, &spec.path, text, match_kind, &field_opts)? {
            per_field.push(boosted(q, spec.boost));
        }
    }
    if per_field.is_empty() {
        return Ok(zero_terms(opts));
    }
    Ok(match kind {
        MultiType::MostFields | MultiType::BoolPrefix => union_of(per_field),
        _ => dis_max_of(per_field, tie_breaker.unwrap_or(0.0)),
    })
}

/// `cross_fields`: term-centric. Fields sharing an analyzer form a group; each term of the
/// query is a dis_max over the group's fields, and terms combine with operator and
/// minimum_should_match. Approximation: Lucene also blends the terms' document frequencies
/// across fields, which Shoal does not.
fn cross_fields(
    ctx: &QueryContext,
    specs: &[FieldSpec],
    text: &Value,
    tie_breaker: f32,
    opts: &MatchOptions,
) -> Result<Box<dyn Query>, QueryError> {
    let mut groups: BTreeMap<Analyzer, Vec<(FieldRef, f32)>> = BTreeMap::new();
    let mut others: Vec<Box<dyn Query>> = Vec::new();
    for spec in specs {
        let lenient = opts.lenient || spec.lenient;
        match resolve(ctx, &spec.path) {
            Ok(Target::Field(field)) if field.is_text() => {
                let analyzer = opts.analyzer.unwrap_or_else(|| field.search_analyzer());
                groups
                    .entry(analyzer)
                    .or_default()
                    .push((field, spec.boost));
            }
            Ok(_) => {
                let field_opts = MatchOptions {
                    lenient,
                    ..opts.clone()
                };
                if let Some(q) = match_field(ctx, &spec.path, text, MatchKind::Bool, &field_opts)? {
                    others.push(boosted(q, spec.boost));
                }
            }
            Err(_) if lenient => {}
            Err(e) => return Err(e),
        }
    }
    let text = value_text(text).unwrap_or_default();
    let mut group_queries = Vec::new();
    for (analyzer, fields) in groups {
        let tokens = analyze_with_offsets(analyzer, &text);
        if tokens.is_empty() {
            continue;
        }
        let clauses = tokens
            .iter()
            .map(|token| {
                let per_field = fields
                    .iter()
                    .map(|(field, boost)| boosted(fuzzy_or_term(field, &token.text, opts), *boost))
                    .collect();
                dis_max_of(per_field, tie_breaker)
            })
            .collect();
        group_queries.push(combine_terms(clauses, opts)?);
    }
    group_queries.extend(others);
    if group_queries.is_empty() {
        return Ok(zero_terms(opts));
    }
    Ok(dis_max_of(group_queries, tie_breaker))
}

/// `combined_fields`, approximated by `cross_fields` with summed field scores.
pub(crate) fn combined_fields(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut opts = MatchOptions::default();
    let mut boost = 1.0;
    let mut text = None;
    let mut fields = Vec::new();
    for (key, value) in body {
        match key.as_str() {
            "query" => text = Some(value),
            "fields" => fields = read_fields("combined_fields", value)?,
            "boost" => boost = super::params::read_boost("combined_fields", value)?,
            "operator"
            | "minimum_should_match"
            | "zero_terms_query"
            | "auto_generate_synonyms_phrase_query"
            | "_name" => {
                read_option("combined_fields", key, value, &mut opts)?;
            }
            _ => return Err(unknown_param("combined_fields", key)),
        }
    }
    let text = text.ok_or_else(|| parsing("[combined_fields] requires 'query' field"))?;
    if fields.is_empty() {
        return Err(parsing("[combined_fields] requires 'fields' field"));
    }
    let specs = expand_fields(ctx, &fields);
    Ok(boosted(cross_fields(ctx, &specs, text, 1.0, &opts)?, boost))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn multi_match_best_fields_takes_the_best_field_with_boosts() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "cat", "fields": ["title", "body"]}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "dogs", "fields": ["title", "body"]}})),
            v(&["1", "2"])
        );
        // Boosting body makes doc 1 (dogs only in body) win over doc 2 (dogs in title and body).
        let body_heavy =
            fx.ids(json!({"multi_match": {"query": "dog", "fields": ["title", "body^10"]}}));
        assert_eq!(body_heavy.len(), 2);
        let single = fx.score_of(json!({"match": {"title": "bear"}}), "4");
        let best = fx.score_of(
            json!({"multi_match": {"query": "bear", "fields": ["title", "body"]}}),
            "4",
        );
        let body = fx.score_of(json!({"match": {"body": "bear"}}), "4");
        assert!((best - single.max(body)).abs() < 1e-5);
        let tie = fx.score_of(json!({"multi_match": {"query": "bear", "fields": ["title", "body"], "tie_breaker": 1.0}}), "4");
        assert!((tie - (single + body)).abs() < 1e-4);
    }

    #[test]
    fn multi_match_field_wildcards_and_defaults() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "alice", "fields": ["author.*"]}})),
            v(&["1", "3"])
        );
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "honey"}})),
            v(&["4"])
        );
        // `*` is lenient: numbers are matched where they parse, ignored elsewhere.
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "15", "fields": ["*"]}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "bear", "fields": ["title*"]}})),
            v(&["4"])
        );
    }

    #[test]
    fn multi_match_types() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(json!({"multi_match": {"query": "quick brown", "type": "phrase", "fields": ["title", "body"]}})), v(&["1", "2"]));
        assert_eq!(fx.matching(json!({"multi_match": {"query": "lazy d", "type": "phrase_prefix", "fields": ["title", "body"]}})), v(&["1"]));
        let most = fx.score_of(json!({"multi_match": {"query": "bear", "type": "most_fields", "fields": ["title", "body"]}}), "4");
        let sum = fx.score_of(json!({"match": {"title": "bear"}}), "4")
            + fx.score_of(json!({"match": {"body": "bear"}}), "4");
        assert!((most - sum).abs() < 1e-4);
        // cross_fields: every term in some field.
        assert_eq!(
            fx.matching(json!({"multi_match": {"query": "alice sleeping", "type": "cross_fields", "operator": "and", "fields": ["title", "author.name"]}})),
            v(&["3"])
        );
        assert_eq!(fx.matching(json!({"combined_fields": {"query": "alice sleeping", "operator": "and", "fields": ["title", "author.name"]}})), v(&["3"]));
        assert_eq!(fx.matching(json!({"multi_match": {"query": "bear hone", "type": "bool_prefix", "fields": ["body"]}})), v(&["4"]));
        assert!(fx
            .error(json!({"multi_match": {"query": "x", "type": "weird"}}))
            .to_string()
            .contains("weird"));
        assert_eq!(
            fx.error(json!({"multi_match": {"fields": ["title"]}}))
                .to_string(),
            "No text specified for multi_match query"
        );
    }
}
