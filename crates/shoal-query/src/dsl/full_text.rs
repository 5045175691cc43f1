//! Full-text queries: `match`, `match_phrase`, `match_phrase_prefix`, `match_bool_prefix`
//! (multi-field ones are in `multi_match`). Text fields analyze the query with their search
//! analyzer; other fields (keyword, numbers, dates, booleans) behave as a `term` query.

use serde_json::{Map, Value};
use shoal_mapping::analysis::analyze_with_offsets;
use shoal_mapping::Analyzer;
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, EmptyQuery, Occur, PhrasePrefixQuery, PhraseQuery,
    Query, TermQuery,
};
use tantivy::schema::IndexRecordOption;

use super::fields::{resolve, value_text, FieldRef, Target};
use super::multi_term::{Scoring, TermMatcher};
use super::params::{
    minimum_should_match, read_bool, read_str, read_text, read_usize, single_field, unknown_param,
    Fuzziness,
};
use super::patterns::fuzzy_matcher;
use super::term_level::term_query;
use super::{bm25, boosted, illegal, parsing};
use crate::{QueryContext, QueryError};

/// The flavours of the match family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchKind {
    Bool,
    Phrase,
    PhrasePrefix,
    BoolPrefix,
}

/// Options shared by the match family, `multi_match` and the query-string queries.
#[derive(Debug, Clone)]
pub(crate) struct MatchOptions {
    pub and: bool,
    pub msm: Option<String>,
    pub fuzziness: Option<Fuzziness>,
    pub prefix_length: usize,
    pub max_expansions: usize,
    pub transpositions: bool,
    pub analyzer: Option<Analyzer>,
    pub zero_terms_all: bool,
    pub lenient: bool,
    pub slop: u32,
}

impl Default for MatchOptions {
    fn default() -> Self {
        MatchOptions {
            and: false,
            msm: None,
            fuzziness: None,
            prefix_length: 0,
            max_expansions: 50,
            transpositions: true,
            analyzer: None,
            zero_terms_all: false,
            lenient: false,
            slop: 0,
        }
    }
}

pub(crate) fn parse_analyzer(query: &str, value: &Value) -> Result<Analyzer, QueryError> {
    let name = read_str(query, "analyzer", value)?;
    Analyzer::parse(name).ok_or_else(|| illegal(format!("[{query}] analyzer [{name}] not found")))
}

pub(crate) fn parse_operator(query: &str, value: &Value) -> Result<bool, QueryError> {
    match read_str(query, "operator", value)?
        .to_ascii_lowercase()
        .as_str()
    {
        "and" => Ok(true),
        "or" => Ok(false),
        other => Err(illegal(format!(
            "operator [{other}] is not supported, use [and] or [or]"
        ))),
    }
}

/// Reads one option shared by the match family; false when `key` is not one of them.
pub(crate) fn read_option(
    query: &str,
    key: &str,
    value: &Value,
    opts: &mut MatchOptions,
) -> Result<bool, QueryError> {
    match key {
        "operator" => opts.and = parse_operator(query, value)?,
        "minimum_should_match" if value.is_null() => {}
        "minimum_should_match" => opts.msm = Some(read_text(query, key, value)?),
        "fuzziness" => opts.fuzziness = Some(Fuzziness::parse(query, value)?),
        "prefix_length" => opts.prefix_length = read_usize(query, key, value)?,
        "max_expansions" => opts.max_expansions = read_usize(query, key, value)?,
        "fuzzy_transpositions" => opts.transpositions = read_bool(query, key, value)?,
        "analyzer" => opts.analyzer = Some(parse_analyzer(query, value)?),
        "lenient" => opts.lenient = read_bool(query, key, value)?,
        "slop" | "phrase_slop" => opts.slop = read_usize(query, key, value)? as u32,
        "zero_terms_query" => {
            opts.zero_terms_all = match read_str(query, key, value)?.to_ascii_lowercase().as_str() {
                "none" => false,
                "all" => true,
                other => {
                    return Err(parsing(format!(
                        "Unsupported zero_terms_query value [{other}]"
                    )))
                }
            }
        }
        "fuzzy_rewrite"
        | "rewrite"
        | "auto_generate_synonyms_phrase_query"
        | "cutoff_frequency"
        | "_name" => {}
        _ => return Ok(false),
    }
    Ok(true)
}

/// Parameters each member of the family accepts (besides `query` and `boost`).
fn accepts(kind: MatchKind, key: &str) -> bool {
    let common = ["analyzer", "_name", "zero_terms_query"];
    if common.contains(&key) {
        return true;
    }
    match kind {
        MatchKind::Bool => !matches!(key, "slop" | "phrase_slop"),
        MatchKind::Phrase => key == "slop",
        MatchKind::PhrasePrefix => matches!(key, "slop" | "max_expansions"),
        MatchKind::BoolPrefix => {
            !matches!(key, "slop" | "phrase_slop" | "lenient" | "zero_terms_query")
        }
    }
}

pub(crate) fn match_query(
    name: &str,
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let kind = match name {
        "match_phrase" => MatchKind::Phrase,
        "match_phrase_prefix" => MatchKind::PhrasePrefix,
        "match_bool_prefix" => MatchKind::BoolPrefix,
        _ => MatchKind::Bool,
    };
    let (field, params) = single_field(name, body)?;
    let mut opts = MatchOptions::default();
    let mut boost = 1.0;
    let text: &Value = match params {
        Value::Object(map) => {
            let mut text = None;
            for (key, value) in map {
                match key.as_str() {
                    "query" => text = Some(value),
                    "boost" => boost = super::params::read_boost(name, value)?,
                    k if accepts(kind, k) && read_option(name, k, value, &mut opts)? => {}
                    _ => return Err(unknown_param(name, key)),
                }
            }
            text.ok_or_else(|| parsing(format!("[{name}] requires query value")))?
        }
        Value::Array(_) => {
            return Err(parsing(format!(
                "[{name}] unknown token [START_ARRAY] after [{field}]"
            )))
        }
        other => other,
    };
    if value_text(text).is_none() {
        return Err(parsing(format!(
            "[{name}] unknown token [{}] after [query]",
            token_name(text)
        )));
    }
    let query = match match_field(ctx, field, text, kind, &opts)? {
        Some(query) => query,
        None => zero_terms(&opts),
    };
    Ok(boosted(query, boost))
}

pub(crate) fn token_name(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "START_ARRAY",
        Value::Object(_) => "START_OBJECT",
        Value::Null => "VALUE_NULL",
        _ => "VALUE",
    }
}

/// The answer when analysis removed every term.
pub(crate) fn zero_terms(opts: &MatchOptions) -> Box<dyn Query> {
    if opts.zero_terms_all {
        Box::new(ConstScoreQuery::new(Box::new(AllQuery), 1.0))
    } else {
        Box::new(EmptyQuery)
    }
}

/// One field of a match-family query. `Ok(None)` when the analyzed text has no terms.
pub(crate) fn match_field(
    ctx: &QueryContext,
    path: &str,
    text: &Value,
    kind: MatchKind,
    opts: &MatchOptions,
) -> Result<Option<Box<dyn Query>>, QueryError> {
    let target = match resolve(ctx, path) {
        Ok(target) => target,
        Err(_) if opts.lenient => return Ok(Some(Box::new(EmptyQuery))),
        Err(e) => return Err(e),
    };
    let field = match target {
        Target::Unmapped => return Ok(Some(Box::new(EmptyQuery))),
        Target::Id | Target::Index => return term_query(ctx, path, text, false).map(Some),
        Target::Field(field) => field,
    };
    if !field.is_text() {
        return non_text_match(ctx, &field, text, kind, opts).map(Some);
    }
    let text = value_text(text).unwrap_or_default();
    let analyzer = opts.analyzer.unwrap_or_else(|| field.search_analyzer());
    let tokens = analyze_with_offsets(analyzer, &text);
    if tokens.is_empty() {
        return Ok(None);
    }
    let term = |token: &str| -> Box<dyn Query> {
        bm25(Box::new(TermQuery::new(
            field.str_term(token),
            IndexRecordOption::WithFreqs,
        )))
    };
    let base_position = tokens[0].position;
    let query: Box<dyn Query> = match kind {
        MatchKind::Bool | MatchKind::BoolPrefix => {
            let last = tokens.len() - 1;
            let clauses: Vec<Box<dyn Query>> = tokens
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    if kind == MatchKind::BoolPrefix && i == last {
                        field.scan(TermMatcher::Prefix(t.text.clone()), Scoring::Constant)
                    } else {
                        fuzzy_or_term(&field, &t.text, opts)
                    }
                })
                .collect();
            combine_terms(clauses, opts)?
        }
        MatchKind::Phrase if tokens.len() == 1 => term(&tokens[0].text),
        MatchKind::Phrase => {
            let terms = tokens
                .iter()
                .map(|t| (t.position - base_position, field.str_term(&t.text)))
                .collect();
            bm25(Box::new(PhraseQuery::new_with_offset_and_slop(
                terms, opts.slop,
            )))
        }
        MatchKind::PhrasePrefix if tokens.len() == 1 => field.scan(
            TermMatcher::Prefix(tokens[0].text.clone()),
            Scoring::Expand {
                max_expansions: opts.max_expansions,
            },
        ),
        MatchKind::PhrasePrefix => {
            let terms = tokens
                .iter()
                .map(|t| (t.position - base_position, field.str_term(&t.text)))
                .collect();
            let mut query = PhrasePrefixQuery::new_with_offset(terms);
            query.set_max_expansions(opts.max_expansions.min(u32::MAX as usize) as u32);
            bm25(Box::new(query))
        }
    };
    Ok(Some(query))
}

pub(crate) fn fuzzy_or_term(field: &FieldRef, token: &str, opts: &MatchOptions) -> Box<dyn Query> {
    if let Some(fuzziness) = opts.fuzziness {
        let matcher = fuzzy_matcher(token, fuzziness, opts.prefix_length, opts.transpositions);
        if !matches!(matcher, TermMatcher::Fuzzy { max_edits: 0, .. }) {
            return field.scan(
                matcher,
                Scoring::Expand {
                    max_expansions: opts.max_expansions,
                },
            );
        }
    }
    bm25(Box::new(TermQuery::new(
        field.str_term(token),
        IndexRecordOption::WithFreqs,
    )))
}

/// Combines per-term clauses with `operator` and `minimum_should_match`.
pub(crate) fn combine_terms(
    mut clauses: Vec<Box<dyn Query>>,
    opts: &MatchOptions,
) -> Result<Box<dyn Query>, QueryError> {
    if clauses.len() == 1 {
        return Ok(clauses.pop().expect("one clause"));
    }
    if opts.and {
        return Ok(Box::new(BooleanQuery::new(
            clauses.into_iter().map(|q| (Occur::Must, q)).collect(),
        )));
    }
    let required = match &opts.msm {
        Some(spec) => minimum_should_match(clauses.len(), spec)?.max(1),
        None => 1,
    };
    if required > clauses.len() {
        return Ok(Box::new(EmptyQuery));
    }
    Ok(Box::new(BooleanQuery::union_with_minimum_required_clauses(
        clauses, required,
    )))
}

/// `match` on keyword, numeric, date, boolean and ip fields: a term query (prefix for the
/// prefix flavours on keywords, fuzzy when asked on keywords).
fn non_text_match(
    ctx: &QueryContext,
    field: &FieldRef,
    text: &Value,
    kind: MatchKind,
    opts: &MatchOptions,
) -> Result<Box<dyn Query>, QueryError> {
    let lenient = |result: Result<Box<dyn Query>, QueryError>| match result {
        Err(_) if opts.lenient => Ok(Box::new(EmptyQuery) as Box<dyn Query>),
        other => other,
    };
    if field.is_keyword() && field.field_type() == shoal_mapping::FieldType::Keyword {
        let s = value_text(text).unwrap_or_default();
        if matches!(kind, MatchKind::PhrasePrefix | MatchKind::BoolPrefix) {
            return Ok(field.scan(TermMatcher::Prefix(s), Scoring::Constant));
        }
        if kind == MatchKind::Bool && opts.fuzziness.is_some() {
            return Ok(fuzzy_or_term(field, &s, opts));
        }
    }
    lenient(term_query(ctx, &field.path, text, false))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn match_analyzes_and_ors_terms_by_default() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"match": {"title": "QUICK bear"}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"match": {"title": {"query": "quick brown", "operator": "and"}}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(
                json!({"match": {"title": {"query": "quick brown fox", "minimum_should_match": 3}}})
            ),
            v(&["1"])
        );
        assert_eq!(fx.matching(json!({"match": {"title": {"query": "quick brown fox", "minimum_should_match": "-1"}}})), v(&["1", "2"]));
        assert_eq!(fx.matching(json!({"match": {"title": {"query": "quick brown fox bear", "minimum_should_match": "50%"}}})), v(&["1", "2", "4"]));
        // Single term: minimum_should_match does not apply.
        assert_eq!(
            fx.matching(json!({"match": {"title": {"query": "bear", "minimum_should_match": 5}}})),
            v(&["4"])
        );
    }

    #[test]
    fn match_uses_the_field_analyzer_or_the_override() {
        let fx = Fixture::standard();
        // english: "running" → "run", "dogs" → "dog"
        assert_eq!(fx.matching(json!({"match": {"body": "run"}})), v(&["2"]));
        assert_eq!(
            fx.matching(json!({"match": {"body": "dog"}})),
            v(&["1", "2"])
        );
        // whitespace analyzer keeps case and punctuation.
        assert_eq!(
            fx.matching(json!({"match": {"code": "Foo-Bar"}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"match": {"code": {"query": "FOO-BAR", "analyzer": "standard"}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(
                json!({"match": {"code": {"query": "foo-bar baz", "analyzer": "whitespace"}}})
            ),
            v(&["1", "2"])
        );
    }

    #[test]
    fn match_zero_terms_query_and_stop_words() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(json!({"match": {"body": "the"}})), v(&[]));
        assert_eq!(
            fx.matching(json!({"match": {"body": {"query": "the", "zero_terms_query": "all"}}}))
                .len(),
            5
        );
    }

    #[test]
    fn match_fuzziness_expands_terms() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"match": {"title": {"query": "quikc brwn", "fuzziness": "AUTO"}}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(fx.matching(json!({"match": {"title": {"query": "quikc", "fuzziness": 1, "fuzzy_transpositions": false}}})), v(&[]));
        assert_eq!(
            fx.matching(
                json!({"match": {"title": {"query": "bear", "fuzziness": 1, "prefix_length": 1}}})
            ),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(json!({"match": {"tag": {"query": "anmal", "fuzziness": 1}}})),
            v(&["1", "2"])
        );
    }

    #[test]
    fn match_on_non_text_fields_is_a_term_query() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"match": {"tag": "animal"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"match": {"title.keyword": "Brown bear"}})),
            v(&["4"])
        );
        assert_eq!(fx.matching(json!({"match": {"count": "15"}})), v(&["3"]));
        assert_eq!(
            fx.matching(json!({"match": {"active": true}})),
            v(&["1", "3"])
        );
        assert_eq!(
            fx.matching(json!({"match": {"date": "2020-01-15"}})),
            v(&["2"])
        );
        assert_eq!(fx.matching(json!({"match": {"_id": "2"}})), v(&["2"]));
        assert!(fx
            .error(json!({"match": {"count": "many"}}))
            .to_string()
            .contains("For input string"));
        assert_eq!(
            fx.matching(json!({"match": {"count": {"query": "many", "lenient": true}}})),
            v(&[])
        );
    }

    #[test]
    fn match_phrase_requires_order_and_honours_slop() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"match_phrase": {"title": "quick brown"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"match_phrase": {"title": "brown quick"}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"match_phrase": {"title": "quick fox"}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"match_phrase": {"title": {"query": "quick fox", "slop": 1}}})),
            v(&["1"])
        );
        // english stop words leave position gaps, as in Lucene.
        assert_eq!(
            fx.matching(json!({"match_phrase": {"body": "jumps over the lazy"}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"match_phrase": {"title": "bear"}})),
            v(&["4"])
        );
    }

    #[test]
    fn match_phrase_prefix_expands_the_last_term() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"match_phrase_prefix": {"title": "quick bro"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"match_phrase_prefix": {"title": "brown b"}})),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(
                json!({"match_phrase_prefix": {"title": {"query": "sl", "max_expansions": 10}}})
            ),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"match_bool_prefix": {"title": "bear qui"}})),
            v(&["1", "2", "4"])
        );
    }

    #[test]
    fn match_errors_use_opensearch_texts() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"match": {"title": "a", "body": "b"}}))
                .to_string(),
            "[match] query doesn't support multiple fields, found [title] and [body]"
        );
        assert_eq!(
            fx.error(json!({"match": {}})).to_string(),
            "[match] requires fieldName"
        );
        assert_eq!(
            fx.error(json!({"match": {"title": {"query": "a", "slop": 2}}}))
                .to_string(),
            "[match] query does not support [slop]"
        );
        assert_eq!(
            fx.error(json!({"match_phrase": {"title": {"query": "a", "fuzziness": 2}}}))
                .to_string(),
            "[match_phrase] query does not support [fuzziness]"
        );
        assert_eq!(
            fx.error(json!({"match": {"title": {"operator": "and"}}}))
                .to_string(),
            "[match] requires query value"
        );
        assert!(fx
            .error(json!({"match": {"title": {"query": "a", "analyzer": "klingon"}}}))
            .to_string()
            .contains("klingon"));
    }
}
