//! Term-level queries: `term`, `terms`, `exists`, `ids` (the pattern ones are in
//! `patterns`). Values are not analyzed (like OpenSearch, a `term` on a text field looks for the
//! raw token).

use serde_json::{Map, Value};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, EmptyQuery, Query, TermQuery, TermSetQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::Term;

use super::fields::{
    glob_match, numeric_term, resolve, scalar_for, scalar_query, value_text, Scalar, Target,
};
use super::multi_term::{Scoring, TermMatcher, TermScanQuery};
use super::params::{read_bool, read_boost, read_str, single_field, unknown_param};
use super::{boosted, illegal, parsing};
use crate::{QueryContext, QueryError};

/// The long (`{"f": {"value": .., "boost": ..}}`) or short (`{"f": value}`) form of a
/// field-level term query.
pub(crate) struct TermParams<'a> {
    pub field: &'a str,
    pub value: &'a Value,
    pub boost: f32,
    pub case_insensitive: bool,
    /// Other keys of the long form, for the query to read.
    pub extra: Vec<(&'a str, &'a Value)>,
}

/// `value_keys`: the names the value may have (`value`, or `wildcard` for wildcard).
pub(crate) fn term_params<'a>(
    query: &str,
    body: &'a Map<String, Value>,
    value_keys: &[&str],
    extra_keys: &[&str],
) -> Result<TermParams<'a>, QueryError> {
    let (field, raw) = single_field(query, body)?;
    let mut params = TermParams {
        field,
        value: &Value::Null,
        boost: 1.0,
        case_insensitive: false,
        extra: Vec::new(),
    };
    match raw {
        Value::Object(map) => {
            for (key, v) in map {
                match key.as_str() {
                    k if value_keys.contains(&k) => params.value = v,
                    "boost" => params.boost = read_boost(query, v)?,
                    "_name" | "rewrite" => {}
                    "case_insensitive" => params.case_insensitive = read_bool(query, key, v)?,
                    k if extra_keys.contains(&k) => params.extra.push((k, v)),
                    _ => return Err(unknown_param(query, key)),
                }
            }
        }
        Value::Array(_) => {
            return Err(parsing(format!(
                "[{query}] query does not support array of values"
            )))
        }
        other => params.value = other,
    }
    if params.value.is_null() {
        return Err(parsing(format!(
            "[{query}] query requires a value for field [{field}]"
        )));
    }
    Ok(params)
}

pub(crate) fn term(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let p = term_params("term", body, &["value"], &[])?;
    Ok(boosted(
        term_query(ctx, p.field, p.value, p.case_insensitive)?,
        p.boost,
    ))
}

/// The query of `{"term": {path: value}}` (also used by `match` on non-text fields).
pub(crate) fn term_query(
    ctx: &QueryContext,
    path: &str,
    value: &Value,
    case_insensitive: bool,
) -> Result<Box<dyn Query>, QueryError> {
    let text =
        || value_text(value).ok_or_else(|| parsing(format!("[term] unsupported value [{value}]")));
    match resolve(ctx, path)? {
        Target::Unmapped => Ok(Box::new(EmptyQuery)),
        Target::Index => Ok(index_query(ctx, &[text()?])),
        Target::Id if case_insensitive => {
            let matcher = TermMatcher::regex(&regex::escape(&text()?), true, String::new())
                .map_err(|e| illegal(e.to_string()))?;
            Ok(Box::new(TermScanQuery::plain(
                ctx.schema.id,
                matcher,
                Scoring::Constant,
            )))
        }
        Target::Id => Ok(id_query(ctx, &[text()?])),
        Target::Field(field) => {
            let scalar = scalar_for(ctx, &field, value, None)?;
            match scalar {
                Scalar::Str(s) if case_insensitive => {
                    let matcher = TermMatcher::regex(&regex::escape(&s), true, String::new())
                        .map_err(|e| illegal(e.to_string()))?;
                    Ok(field.scan(matcher, Scoring::Constant))
                }
                scalar => Ok(scalar_query(&field, scalar)),
            }
        }
    }
}

/// `_index` queries: everything or nothing, as this shard belongs to one index.
fn index_query(ctx: &QueryContext, names: &[String]) -> Box<dyn Query> {
    if names.iter().any(|n| glob_match(n, ctx.index)) {
        Box::new(ConstScoreQuery::new(Box::new(AllQuery), 1.0))
    } else {
        Box::new(EmptyQuery)
    }
}

fn id_query(ctx: &QueryContext, ids: &[String]) -> Box<dyn Query> {
    let terms = ids
        .iter()
        .map(|id| Term::from_field_text(ctx.schema.id, id));
    Box::new(ConstScoreQuery::new(
        Box::new(TermSetQuery::new(terms)),
        1.0,
    ))
}

pub(crate) fn terms(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    let mut target: Option<(&str, &Vec<Value>)> = None;
    for (key, value) in body {
        match key.as_str() {
            "boost" => boost = read_boost("terms", value)?,
            "_name" => {}
            field => match value {
                Value::Array(values) => {
                    if target.is_some() {
                        return Err(parsing("[terms] query does not support multiple fields"));
                    }
                    target = Some((field, values));
                }
                Value::Object(_) => return Err(illegal(
                    "[terms] query lookup (terms from another document) is not supported by Shoal",
                )),
                _ => return Err(unknown_param("terms", field)),
            },
        }
    }
    let (path, values) = target.ok_or_else(|| parsing("No field specified for terms query"))?;
    Ok(boosted(terms_query(ctx, path, values)?, boost))
}

/// Documents holding any of `values` in `path`; constant score 1.0.
pub(crate) fn terms_query(
    ctx: &QueryContext,
    path: &str,
    values: &[Value],
) -> Result<Box<dyn Query>, QueryError> {
    let texts = || -> Result<Vec<String>, QueryError> {
        values
            .iter()
            .map(|v| {
                value_text(v).ok_or_else(|| parsing(format!("[terms] unsupported value [{v}]")))
            })
            .collect()
    };
    let field = match resolve(ctx, path)? {
        Target::Unmapped => return Ok(Box::new(EmptyQuery)),
        Target::Index => return Ok(index_query(ctx, &texts()?)),
        Target::Id => return Ok(id_query(ctx, &texts()?)),
        Target::Field(field) => field,
    };
    let mut terms = Vec::new();
    let mut others: Vec<Box<dyn Query>> = Vec::new();
    for value in values {
        match scalar_for(ctx, &field, value, None)? {
            Scalar::Str(s) => terms.push(field.str_term(&s)),
            scalar @ (Scalar::I64(_) | Scalar::F64(_) | Scalar::Bool(_)) => {
                terms.push(numeric_term(&field, &scalar))
            }
            Scalar::Nothing => {}
            scalar => others.push(scalar_query(&field, scalar)),
        }
    }
    if !terms.is_empty() {
        others.push(Box::new(TermSetQuery::new(terms)));
    }
    let query: Box<dyn Query> = match others.len() {
        0 => return Ok(Box::new(EmptyQuery)),
        1 => others.pop().expect("one query"),
        _ => Box::new(BooleanQuery::union(others)),
    };
    Ok(Box::new(ConstScoreQuery::new(query, 1.0)))
}

pub(crate) fn exists(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    let mut field = None;
    for (key, value) in body {
        match key.as_str() {
            "field" => field = Some(read_str("exists", key, value)?),
            "boost" => boost = read_boost("exists", value)?,
            "_name" => {}
            _ => return Err(unknown_param("exists", key)),
        }
    }
    let field = field.ok_or_else(|| parsing("[exists] must be provided with a [field]"))?;
    Ok(boosted(exists_query(ctx, field), boost))
}

/// Documents with a value in `path` (a field, an object, or a `*` pattern); score 1.0.
pub(crate) fn exists_query(ctx: &QueryContext, path: &str) -> Box<dyn Query> {
    if path == "_id" || path == "_index" {
        return Box::new(ConstScoreQuery::new(Box::new(AllQuery), 1.0));
    }
    let names: Vec<String> = if path.contains('*') {
        ctx.mapping
            .leaf_fields()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| glob_match(path, p))
            .collect()
    } else if ctx.mapping.field(path).is_some() || ctx.mapping.is_object(path) {
        vec![path.to_string()]
    } else {
        Vec::new()
    };
    if names.is_empty() {
        return Box::new(EmptyQuery);
    }
    let terms = names
        .iter()
        .map(|n| Term::from_field_text(ctx.schema.field_names, n));
    let query: Box<dyn Query> = if names.len() == 1 {
        Box::new(TermQuery::new(
            terms.into_iter().next().expect("one"),
            IndexRecordOption::Basic,
        ))
    } else {
        Box::new(TermSetQuery::new(terms))
    };
    Box::new(ConstScoreQuery::new(query, 1.0))
}

pub(crate) fn ids(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    let mut values = Vec::new();
    for (key, value) in body {
        match key.as_str() {
            "values" => {
                let list = value
                    .as_array()
                    .ok_or_else(|| parsing("[ids] failed to parse field [values]"))?;
                for v in list {
                    values.push(
                        value_text(v)
                            .ok_or_else(|| parsing("[ids] failed to parse field [values]"))?,
                    );
                }
            }
            "boost" => boost = read_boost("ids", value)?,
            "_name" | "type" | "types" => {}
            _ => return Err(unknown_param("ids", key)),
        }
    }
    if values.is_empty() {
        return Ok(Box::new(EmptyQuery));
    }
    Ok(Box::new(ConstScoreQuery::new(
        id_query(ctx, &values),
        boost,
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::QueryError;

    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn term_on_keyword_matches_exact_value_only() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"term": {"tag": "animal"}})),
            v(&["1", "2"])
        );
        assert_eq!(fx.matching(json!({"term": {"tag": "Animal"}})), v(&[]));
        assert_eq!(
            fx.matching(json!({"term": {"tag": {"value": "Animal", "case_insensitive": true}}})),
            v(&["1", "2"])
        );
        assert_eq!(fx.matching(json!({"term": {"author.id": "a3"}})), v(&["3"]));
        assert_eq!(
            fx.matching(json!({"term": {"title.keyword": "Brown bear"}})),
            v(&["4"])
        );
    }

    #[test]
    fn term_on_text_uses_the_raw_token_without_analysis() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"term": {"title": "quick"}})),
            v(&["1", "2"])
        );
        assert_eq!(fx.matching(json!({"term": {"title": "Quick"}})), v(&[]));
    }

    #[test]
    fn term_on_numbers_booleans_dates_and_ips() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(json!({"term": {"count": 10}})), v(&["2"]));
        assert_eq!(fx.matching(json!({"term": {"count": "15"}})), v(&["3"]));
        assert_eq!(fx.matching(json!({"term": {"count": 10.5}})), v(&[]));
        assert_eq!(fx.matching(json!({"term": {"price": 20}})), v(&["2"]));
        assert_eq!(fx.matching(json!({"term": {"price": 10.5}})), v(&["1"]));
        assert_eq!(fx.matching(json!({"term": {"rating": 0.1}})), v(&["3"]));
        assert_eq!(fx.matching(json!({"term": {"active": false}})), v(&["2"]));
        assert_eq!(
            fx.matching(json!({"term": {"active": "true"}})),
            v(&["1", "3"])
        );
        // A date term covers the precision written: the whole day here.
        assert_eq!(
            fx.matching(json!({"term": {"date": "2020-01-01"}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"term": {"date": "2020-02-01T00:00:00.500Z"}})),
            v(&["3"])
        );
        assert_eq!(fx.matching(json!({"term": {"ip": "10.0.0.2"}})), v(&["2"]));
        assert_eq!(
            fx.matching(json!({"term": {"ip": "10.0.0.0/8"}})),
            v(&["2", "3"])
        );
    }

    #[test]
    fn term_scores_are_constant_for_numbers_and_boosted() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.scored(json!({"term": {"count": 5}})),
            vec![("1".to_string(), 1.0)]
        );
        assert_eq!(
            fx.scored(json!({"term": {"count": {"value": 5, "boost": 3}}})),
            vec![("1".to_string(), 3.0)]
        );
        let plain = fx.score_of(json!({"term": {"tag": "wild"}}), "4");
        let boosted = fx.score_of(
            json!({"term": {"tag": {"value": "wild", "boost": 2.0}}}),
            "4",
        );
        assert!((boosted - 2.0 * plain).abs() < 1e-5 && plain > 0.0);
    }

    #[test]
    fn term_on_unmapped_field_matches_nothing_and_metadata_fields_work() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(json!({"term": {"nope": "x"}})), v(&[]));
        assert_eq!(fx.matching(json!({"term": {"_id": "3"}})), v(&["3"]));
        assert_eq!(fx.matching(json!({"term": {"_index": "test"}})).len(), 5);
        assert_eq!(fx.matching(json!({"term": {"_index": "other"}})), v(&[]));
    }

    #[test]
    fn term_errors_use_opensearch_texts() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"term": {"tag": "a", "title": "b"}}))
                .to_string(),
            "[term] query doesn't support multiple fields, found [tag] and [title]"
        );
        assert_eq!(
            fx.error(json!({"term": {"tag": ["a"]}})).to_string(),
            "[term] query does not support array of values"
        );
        assert_eq!(
            fx.error(json!({"term": {"tag": {"value": "a", "bogus": 1}}}))
                .to_string(),
            "[term] query does not support [bogus]"
        );
        assert_eq!(
            fx.error(json!({"term": {"count": "abc"}})).to_string(),
            "failed to create query: For input string: \"abc\""
        );
        assert_eq!(
            fx.error(json!({"term": {}})).to_string(),
            "field name is null or empty"
        );
        match fx.error(json!({"term": {"hidden": "secret"}})) {
            QueryError::SearchPhase {
                cause_type,
                cause_reason,
                ..
            } => {
                assert_eq!(cause_type, "query_shard_exception");
                assert_eq!(cause_reason, "failed to create query: Cannot search on field [hidden] since it is not indexed.");
            }
            other => panic!("expected a shard failure, got {other:?}"),
        }
        assert_eq!(
            fx.error(json!({"term": {"tag": {"value": "a", "boost": -1}}}))
                .to_string(),
            "negative [boost] are not allowed."
        );
    }

    #[test]
    fn terms_matches_any_value_with_constant_score() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"terms": {"tag": ["pet", "wild"]}})),
            v(&["3", "4"])
        );
        assert_eq!(
            fx.matching(json!({"terms": {"count": [5, "20", 7]}})),
            v(&["1", "4"])
        );
        assert_eq!(
            fx.matching(json!({"terms": {"date": ["2020-01-15", "2019-12-31"]}})),
            v(&["2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"terms": {"_id": ["1", "5"]}})),
            v(&["1", "5"])
        );
        assert_eq!(fx.matching(json!({"terms": {"tag": []}})), v(&[]));
        let scored = fx.scored(json!({"terms": {"tag": ["pet", "wild"], "boost": 2}}));
        assert!(scored.iter().all(|(_, s)| *s == 2.0));
    }

    #[test]
    fn terms_lookup_and_bad_shapes_are_refused() {
        let fx = Fixture::standard();
        let err = fx.error(json!({"terms": {"tag": {"index": "i", "id": "1", "path": "tag"}}}));
        assert_eq!(err.error_type(), "illegal_argument_exception");
        assert!(err.to_string().contains("not supported by Shoal"));
        assert_eq!(
            fx.error(json!({"terms": {"tag": "x"}})).to_string(),
            "[terms] query does not support [tag]"
        );
        assert_eq!(
            fx.error(json!({"terms": {"tag": ["x"], "title": ["y"]}}))
                .to_string(),
            "[terms] query does not support multiple fields"
        );
    }

    #[test]
    fn exists_uses_field_names_including_objects_and_patterns() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"exists": {"field": "rating"}})),
            v(&["1", "2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"exists": {"field": "author"}})),
            v(&["1", "2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"exists": {"field": "author.*"}})),
            v(&["1", "2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"exists": {"field": "title.keyword"}}))
                .len(),
            5
        );
        assert_eq!(fx.matching(json!({"exists": {"field": "nope"}})), v(&[]));
        assert_eq!(
            fx.error(json!({"exists": {}})).to_string(),
            "[exists] must be provided with a [field]"
        );
    }

    #[test]
    fn ids_matches_listed_ids() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"ids": {"values": ["4", "2", "99"]}})),
            v(&["2", "4"])
        );
        assert_eq!(fx.matching(json!({"ids": {"values": []}})), v(&[]));
    }
}
