//! The OpenSearch query DSL → tantivy queries. Entry point: [`build_query`].
//!
//! Fields live in tantivy JSON fields (see `shoal_mapping::schema`): a clause on field `a.b`
//! resolves its mapping, then queries the JSON path `a.b` inside `_kw`, `_num` or the
//! `_txt_<analyzer>` field with terms typed like the document parser indexed them.
//!
//! Modules: `compound` (bool, dis_max, constant_score, boosting, match_all/none),
//! `term_level` (term, terms, exists, ids), `patterns` (prefix, wildcard, regexp, fuzzy),
//! `range`, `full_text` (match family), `multi_match` (multi_match, combined_fields),
//! `string_query` (+ `qs_parser`, `sqs_parser`:
//! query_string and simple_query_string), `date_math`, `highlight`, and the helpers
//! `fields` (field resolution and typed terms), `multi_term` (term-dictionary scans),
//! `params` (parameter parsing).

mod compound;
mod date_math;
mod fields;
pub use fields::glob_match;
mod full_text;
mod highlight;
mod multi_match;
mod multi_term;
mod params;
mod patterns;
mod qs_parser;
mod range;
mod sqs_parser;
mod string_query;
mod term_level;
#[cfg(test)]
mod testutil;

use serde_json::{Map, Value};
use tantivy::query::{BoostQuery, Query};

pub use date_math::parse_date_math;
pub use highlight::query_terms_for_highlight;
pub use multi_match::read_fields as read_query_fields;

use crate::{QueryContext, QueryError};

/// Queries OpenSearch knows but Shoal does not implement: refused with a clear 400.
const UNSUPPORTED: &[&str] = &[
    "nested",
    "has_child",
    "has_parent",
    "parent_id",
    "terms_set",
    "script",
    "script_score",
    "geo_bounding_box",
    "geo_distance",
    "geo_polygon",
    "geo_shape",
    "shape",
    "xy_shape",
    "more_like_this",
    "function_score",
    "percolate",
    "wrapper",
    "span_term",
    "span_first",
    "span_near",
    "span_or",
    "span_not",
    "span_containing",
    "span_within",
    "span_multi",
    "field_masking_span",
    "intervals",
    "distance_feature",
    "rank_feature",
    "pinned",
    "knn",
    "neural",
    "neural_sparse",
    "hybrid",
    "template",
    "type",
];

/// Translates one query clause (`{"match": {...}}`) into a tantivy query.
///
/// Errors are OpenSearch's: `QueryError::Parsing` for malformed or unknown clauses
/// (`unknown query [xyz]`), `QueryError::IllegalArgument` for values that do not fit a field
/// and for constructs Shoal does not support.
pub fn build_query(query: &Value, ctx: &QueryContext) -> Result<Box<dyn Query>, QueryError> {
    let (name, body) = clause(query)?;
    match name {
        "match_all" => compound::match_all(body),
        "match_none" => compound::match_none(body),
        "bool" => compound::bool_query(body, ctx),
        "constant_score" => compound::constant_score(body, ctx),
        "dis_max" => compound::dis_max(body, ctx),
        "boosting" => compound::boosting(body, ctx),
        "term" => term_level::term(body, ctx),
        "terms" => term_level::terms(body, ctx),
        "exists" => term_level::exists(body, ctx),
        "prefix" => patterns::prefix(body, ctx),
        "wildcard" => patterns::wildcard(body, ctx),
        "regexp" => patterns::regexp(body, ctx),
        "fuzzy" => patterns::fuzzy(body, ctx),
        "ids" => term_level::ids(body, ctx),
        "range" => range::range(body, ctx),
        "match" | "match_phrase" | "match_phrase_prefix" | "match_bool_prefix" => {
            full_text::match_query(name, body, ctx)
        }
        "multi_match" => multi_match::multi_match(body, ctx),
        "combined_fields" => multi_match::combined_fields(body, ctx),
        "query_string" => string_query::query_string(body, ctx),
        "simple_query_string" => string_query::simple_query_string(body, ctx),
        _ if UNSUPPORTED.contains(&name) => {
            Err(illegal(format!("[{name}] query is not supported by Shoal")))
        }
        _ => Err(parsing(format!("unknown query [{name}]"))),
    }
}

/// Splits `{"name": {body}}`, with OpenSearch's errors for other shapes.
fn clause(query: &Value) -> Result<(&str, &Map<String, Value>), QueryError> {
    let Value::Object(outer) = query else {
        return Err(parsing(
            "[_na] query malformed, must start with start_object",
        ));
    };
    let mut entries = outer.iter();
    let Some((name, body)) = entries.next() else {
        return Err(parsing("query malformed, empty clause found"));
    };
    if entries.next().is_some() {
        return Err(parsing(format!(
            "[{name}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]"
        )));
    }
    let Value::Object(body) = body else {
        return Err(parsing(format!(
            "[{name}] query malformed, no start_object after query name"
        )));
    };
    Ok((name.as_str(), body))
}

pub(crate) fn parsing(message: impl Into<String>) -> QueryError {
    QueryError::Parsing(message.into())
}

pub(crate) fn illegal(message: impl Into<String>) -> QueryError {
    QueryError::IllegalArgument(message.into())
}

/// tantivy's BM25 multiplies every term score by `k1 + 1`, which Lucene dropped; scaling by
/// its inverse gives OpenSearch's scores (same idf, same length normalization).
pub(crate) fn bm25(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(BoostQuery::new(query, 1.0 / 2.2))
}

/// Applies a `boost` (no wrapper when it is 1).
pub(crate) fn boosted(query: Box<dyn Query>, boost: f32) -> Box<dyn Query> {
    if boost == 1.0 {
        query
    } else {
        Box::new(BoostQuery::new(query, boost))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testutil::Fixture;

    #[test]
    fn unknown_queries_are_parsing_errors_with_opensearch_text() {
        let fx = Fixture::standard();
        let err = fx.error(json!({"xyz": {}}));
        assert_eq!(err.to_string(), "unknown query [xyz]");
        assert_eq!(err.error_type(), "parsing_exception");
    }

    #[test]
    fn unsupported_queries_are_refused_clearly() {
        let fx = Fixture::standard();
        let err = fx.error(json!({"nested": {"path": "a", "query": {"match_all": {}}}}));
        assert_eq!(err.to_string(), "[nested] query is not supported by Shoal");
        assert_eq!(err.error_type(), "illegal_argument_exception");
        assert!(fx
            .error(json!({"terms_set": {}}))
            .to_string()
            .contains("not supported by Shoal"));
    }

    #[test]
    fn bm25_scores_equal_lucene_formula_without_the_k1_plus_one_factor() {
        let fx = Fixture::new(
            json!({"properties": {"t": {"type": "text"}}}),
            &[
                ("1", json!({"t": "a b"})),
                ("2", json!({"t": "a"})),
                ("3", json!({"t": "c d e"})),
            ],
        );
        let score = fx.score_of(json!({"match": {"t": "a"}}), "2");
        // idf = ln(1 + (N - n + 0.5) / (n + 0.5)); tf = f / (f + k1 (1 - b + b dl / avgdl)).
        let idf = (1.0f32 + (3.0 - 2.0 + 0.5) / (2.0 + 0.5)).ln();
        let tf = 1.0 / (1.0 + 1.2 * (1.0 - 0.75 + 0.75 * 1.0 / 2.0));
        assert!((score - idf * tf).abs() < 1e-4, "{score} vs {}", idf * tf);
    }

    #[test]
    fn boost_and_name_are_accepted_everywhere() {
        let fx = Fixture::standard();
        let b = |q: serde_json::Value| q;
        let clauses = vec![
            b(json!({"term": {"tag": {"value": "pet", "boost": 1, "_name": "n"}}})),
            b(json!({"terms": {"tag": ["pet"], "boost": 1, "_name": "n"}})),
            b(json!({"exists": {"field": "tag", "boost": 1, "_name": "n"}})),
            b(json!({"prefix": {"tag": {"value": "pe", "boost": 1, "_name": "n"}}})),
            b(json!({"wildcard": {"tag": {"value": "pe*", "boost": 1, "_name": "n"}}})),
            b(json!({"regexp": {"tag": {"value": "pe.", "boost": 1, "_name": "n"}}})),
            b(json!({"fuzzy": {"tag": {"value": "pat", "boost": 1, "_name": "n"}}})),
            b(json!({"ids": {"values": ["3"], "boost": 1, "_name": "n"}})),
            b(json!({"range": {"count": {"gte": 15, "lt": 16, "boost": 1, "_name": "n"}}})),
            b(json!({"match": {"title": {"query": "cat", "boost": 1, "_name": "n"}}})),
            b(json!({"match_phrase": {"title": {"query": "lazy cat", "boost": 1, "_name": "n"}}})),
            b(
                json!({"match_phrase_prefix": {"title": {"query": "lazy c", "boost": 1, "_name": "n"}}}),
            ),
            b(
                json!({"multi_match": {"query": "cat", "fields": ["title"], "boost": 1, "_name": "n"}}),
            ),
            b(json!({"query_string": {"query": "title:cat", "boost": 1, "_name": "n"}})),
            b(
                json!({"simple_query_string": {"query": "cat", "fields": ["title"], "boost": 1, "_name": "n"}}),
            ),
            b(
                json!({"constant_score": {"filter": {"term": {"count": 15}}, "boost": 1, "_name": "n"}}),
            ),
            b(json!({"dis_max": {"queries": [{"term": {"count": 15}}], "boost": 1, "_name": "n"}})),
            b(
                json!({"boosting": {"positive": {"term": {"count": 15}}, "negative": {"match_none": {}}, "negative_boost": 0.5, "boost": 1, "_name": "n"}}),
            ),
        ];
        for clause in clauses {
            let text = clause.to_string();
            let q = json!({"bool": {"must": clause, "filter": {"ids": {"values": ["3"]}}, "boost": 1, "_name": "outer"}});
            assert_eq!(fx.matching(q), vec!["3".to_string()], "{text}");
        }
    }

    #[test]
    fn malformed_clauses_are_parsing_errors() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"term": "x"})).to_string(),
            "[term] query malformed, no start_object after query name"
        );
        assert_eq!(
            fx.error(json!({})).to_string(),
            "query malformed, empty clause found"
        );
        assert_eq!(
            fx.error(json!({"term": {"tag": "a"}, "match": {"title": "b"}}))
                .to_string(),
            "[term] malformed query, expected [END_OBJECT] but found [FIELD_NAME]"
        );
        assert_eq!(
            fx.error(json!("match_all")).to_string(),
            "[_na] query malformed, must start with start_object"
        );
    }
}
