//! `query_string` and `simple_query_string`: their parameters, and the translation of the
//! parsed [`Node`] tree into queries over the default or explicit fields.

use serde_json::{Map, Value};
use shoal_mapping::analysis::analyze;
use tantivy::query::{AllQuery, ConstScoreQuery, EmptyQuery, Occur, Query};

use super::compound::{combine_bool, dis_max_of, union_of};
use super::fields::{analyzer_lowercases, expand_fields, resolve, FieldSpec, Target};
use super::full_text::{match_field, parse_analyzer, parse_operator, MatchKind, MatchOptions};
use super::multi_match::read_fields;
use super::multi_term::{Scoring, TermMatcher};
use super::params::{
    read_bool, read_boost, read_f32, read_str, read_text, read_usize, unknown_param, Fuzziness,
};
use super::patterns::{fuzzy_matcher, multi_term_query, normalize_for, regexp_matcher};
use super::qs_parser::{self, Leaf, Node};
use super::range::{range_query, RangeSpec};
use super::term_level::exists_query;
use super::{boosted, parsing, sqs_parser};
use crate::{QueryContext, QueryError};

/// How a query string runs: fields, combination, and per-term options.
#[derive(Debug, Clone)]
pub(crate) struct StringOptions {
    pub fields: Vec<FieldSpec>,
    /// `Some(t)`: a term over several fields is a dis_max with tie breaker `t`; `None`: a sum.
    pub tie_breaker: Option<f32>,
    pub match_opts: MatchOptions,
    pub fuzziness: Fuzziness,
    pub time_zone: Option<String>,
    pub msm: Option<String>,
}

impl StringOptions {
    fn new() -> StringOptions {
        StringOptions {
            fields: Vec::new(),
            tie_breaker: Some(0.0),
            match_opts: MatchOptions::default(),
            fuzziness: Fuzziness::Auto { low: 3, high: 6 },
            time_zone: None,
            msm: None,
        }
    }
}

pub(crate) fn query_string(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let (text, opts, boost) = query_string_options(body, ctx)?;
    if text.trim().is_empty() {
        return Ok(Box::new(EmptyQuery));
    }
    let node = qs_parser::parse(&text, opts.match_opts.and).map_err(|detail| {
        parsing(format!(
            "Failed to parse query [{text}]: Cannot parse '{text}': {detail}"
        ))
    })?;
    Ok(boosted(build_top(ctx, &node, &opts)?, boost))
}

/// Reads the `query_string` parameters: the query text, the options, the boost.
pub(crate) fn query_string_options(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<(String, StringOptions, f32), QueryError> {
    const Q: &str = "query_string";
    let mut opts = StringOptions::new();
    let mut text = None;
    let mut boost = 1.0;
    let mut default_field: Option<String> = None;
    let mut fields: Option<Vec<(String, f32)>> = None;
    for (key, value) in body {
        match key.as_str() {
            "query" => text = Some(read_text(Q, key, value)?),
            "default_field" => default_field = Some(read_str(Q, key, value)?.to_string()),
            "fields" => fields = Some(read_fields(Q, value)?),
            "default_operator" => opts.match_opts.and = parse_operator(Q, value)?,
            "analyzer" | "quote_analyzer" => {
                opts.match_opts.analyzer = Some(parse_analyzer(Q, value)?)
            }
            "fuzziness" => opts.fuzziness = Fuzziness::parse(Q, value)?,
            "fuzzy_prefix_length" => opts.match_opts.prefix_length = read_usize(Q, key, value)?,
            "fuzzy_max_expansions" => opts.match_opts.max_expansions = read_usize(Q, key, value)?,
            "fuzzy_transpositions" => opts.match_opts.transpositions = read_bool(Q, key, value)?,
            "phrase_slop" => opts.match_opts.slop = read_usize(Q, key, value)? as u32,
            "lenient" => opts.match_opts.lenient = read_bool(Q, key, value)?,
            "time_zone" => opts.time_zone = Some(read_str(Q, key, value)?.to_string()),
            "minimum_should_match" if !value.is_null() => {
                opts.msm = Some(read_text(Q, key, value)?)
            }
            "tie_breaker" => opts.tie_breaker = Some(read_f32(Q, key, value)?),
            "type" => {
                if read_str(Q, key, value)?.eq_ignore_ascii_case("most_fields") {
                    opts.tie_breaker = None;
                }
            }
            "boost" => boost = read_boost(Q, value)?,
            "minimum_should_match"
            | "allow_leading_wildcard"
            | "enable_position_increments"
            | "analyze_wildcard"
            | "auto_generate_synonyms_phrase_query"
            | "rewrite"
            | "fuzzy_rewrite"
            | "quote_field_suffix"
            | "escape"
            | "max_determinized_states"
            | "_name"
            | "split_on_whitespace"
            | "auto_generate_phrase_queries"
            | "all_fields" => {}
            _ => return Err(unknown_param(Q, key)),
        }
    }
    let text = text.ok_or_else(|| parsing("[query_string] must be provided with a [query]"))?;
    if default_field.is_some() && fields.is_some() {
        return Err(parsing(
            "[query_string] cannot use [fields] parameter in conjunction with [default_field]",
        ));
    }
    let specs = match (fields, default_field) {
        (Some(fields), _) => fields,
        (None, Some(field)) => vec![(field, 1.0)],
        (None, None) => ctx.default_fields.clone(),
    };
    opts.fields = expand_fields(ctx, &specs);
    Ok((text, opts, boost))
}

pub(crate) fn simple_query_string(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let (text, opts, boost) = simple_query_string_options(body, ctx)?;
    let query = match sqs_parser::parse(&text, opts.match_opts.and) {
        Some(node) => build_top(ctx, &node, &opts)?,
        None => Box::new(EmptyQuery),
    };
    Ok(boosted(query, boost))
}

pub(crate) fn simple_query_string_options(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<(String, StringOptions, f32), QueryError> {
    const Q: &str = "simple_query_string";
    let mut opts = StringOptions::new();
    opts.tie_breaker = None;
    let mut text = None;
    let mut boost = 1.0;
    let mut fields = ctx.default_fields.clone();
    for (key, value) in body {
        match key.as_str() {
            "query" => text = Some(read_text(Q, key, value)?),
            "fields" => fields = read_fields(Q, value)?,
            "default_operator" => opts.match_opts.and = parse_operator(Q, value)?,
            "analyzer" => opts.match_opts.analyzer = Some(parse_analyzer(Q, value)?),
            "fuzzy_prefix_length" => opts.match_opts.prefix_length = read_usize(Q, key, value)?,
            "fuzzy_max_expansions" => opts.match_opts.max_expansions = read_usize(Q, key, value)?,
            "fuzzy_transpositions" => opts.match_opts.transpositions = read_bool(Q, key, value)?,
            "lenient" => opts.match_opts.lenient = read_bool(Q, key, value)?,
            "minimum_should_match" if !value.is_null() => {
                opts.msm = Some(read_text(Q, key, value)?)
            }
            "boost" => boost = read_boost(Q, value)?,
            "minimum_should_match"
            | "flags"
            | "quote_field_suffix"
            | "analyze_wildcard"
            | "auto_generate_synonyms_phrase_query"
            | "_name"
            | "all_fields" => {}
            _ => return Err(unknown_param(Q, key)),
        }
    }
    let text = text.ok_or_else(|| parsing("[simple_query_string] query text missing"))?;
    if fields.is_empty() {
        fields = ctx.default_fields.clone();
    }
    opts.fields = expand_fields(ctx, &fields);
    Ok((text, opts, boost))
}

/// The whole tree: `minimum_should_match` applies to its top-level boolean.
fn build_top(
    ctx: &QueryContext,
    node: &Node,
    opts: &StringOptions,
) -> Result<Box<dyn Query>, QueryError> {
    let query = match node {
        Node::Bool(clauses) => build_bool(ctx, clauses, None, opts, opts.msm.as_deref())?,
        other => build(ctx, other, None, opts)?,
    };
    Ok(query.unwrap_or_else(|| Box::new(EmptyQuery)))
}

fn build_bool(
    ctx: &QueryContext,
    clauses: &[(Occur, Node)],
    scope: Option<&str>,
    opts: &StringOptions,
    msm: Option<&str>,
) -> Result<Option<Box<dyn Query>>, QueryError> {
    let (mut must, mut should, mut must_not) = (Vec::new(), Vec::new(), Vec::new());
    for (occur, child) in clauses {
        // Clauses whose text analyzed to nothing (stop words) disappear.
        let Some(query) = build(ctx, child, scope, opts)? else {
            continue;
        };
        match occur {
            Occur::Must => must.push(query),
            Occur::Should => should.push(query),
            Occur::MustNot => must_not.push(query),
        }
    }
    if must.is_empty() && should.is_empty() && must_not.is_empty() {
        return Ok(None);
    }
    combine_bool(must, should, Vec::new(), must_not, msm).map(Some)
}

/// A sub-tree; `scope` is the field set by an enclosing `field:`. `None`: no terms.
fn build(
    ctx: &QueryContext,
    node: &Node,
    scope: Option<&str>,
    opts: &StringOptions,
) -> Result<Option<Box<dyn Query>>, QueryError> {
    match node {
        Node::MatchAll => Ok(Some(Box::new(ConstScoreQuery::new(
            Box::new(AllQuery),
            1.0,
        )))),
        Node::Bool(clauses) => build_bool(ctx, clauses, scope, opts, None),
        Node::Field(field, inner) => build(ctx, inner, Some(field), opts),
        Node::Boost(inner, boost) => {
            Ok(build(ctx, inner, scope, opts)?.map(|q| boosted(q, *boost)))
        }
        Node::Leaf(Leaf::Wildcard(pattern)) if pattern == "*" && scope.is_none_or(|f| f == "*") => {
            Ok(Some(Box::new(ConstScoreQuery::new(
                Box::new(AllQuery),
                1.0,
            ))))
        }
        Node::Leaf(leaf) => {
            let fields = match scope {
                Some(field) => expand_fields(ctx, &[(field.to_string(), 1.0)]),
                None => opts.fields.clone(),
            };
            let mut per_field = Vec::new();
            for spec in &fields {
                if let Some(q) = leaf_query(ctx, spec, leaf, opts)? {
                    per_field.push(boosted(q, spec.boost));
                }
            }
            Ok(match (per_field.len(), opts.tie_breaker) {
                (0, _) => None,
                (_, Some(tie)) => Some(dis_max_of(per_field, tie)),
                (_, None) => Some(union_of(per_field)),
            })
        }
    }
}

/// One leaf on one field. Fields where the value does not fit are skipped when lenient.
fn leaf_query(
    ctx: &QueryContext,
    spec: &FieldSpec,
    leaf: &Leaf,
    opts: &StringOptions,
) -> Result<Option<Box<dyn Query>>, QueryError> {
    let lenient = opts.match_opts.lenient || spec.lenient;
    let mopts = MatchOptions {
        lenient,
        msm: None,
        ..opts.match_opts.clone()
    };
    let path = spec.path.as_str();
    let result = match leaf {
        Leaf::Text(text) => match_field(
            ctx,
            path,
            &Value::String(text.clone()),
            MatchKind::Bool,
            &mopts,
        ),
        Leaf::Phrase { text, slop } => {
            let mopts = MatchOptions {
                slop: slop.unwrap_or(mopts.slop),
                ..mopts.clone()
            };
            match_field(
                ctx,
                path,
                &Value::String(text.clone()),
                MatchKind::Phrase,
                &mopts,
            )
        }
        Leaf::Wildcard(pattern) if pattern == "*" => Ok(Some(exists_query(ctx, path))),
        Leaf::Wildcard(pattern) => multi_term_query(
            ctx,
            "wildcard",
            path,
            |f| Ok(TermMatcher::wildcard(&normalize_for(f, pattern), false)),
            Scoring::Constant,
        )
        .map(Some),
        Leaf::Prefix(prefix) => multi_term_query(
            ctx,
            "prefix",
            path,
            |f| Ok(TermMatcher::Prefix(normalize_for(f, prefix))),
            Scoring::Constant,
        )
        .map(Some),
        Leaf::Fuzzy { text, edits } => fuzzy_leaf(ctx, path, text, *edits, opts),
        Leaf::Regex(pattern) => multi_term_query(
            ctx,
            "regexp",
            path,
            |_| regexp_matcher(pattern, false),
            Scoring::Constant,
        )
        .map(Some),
        Leaf::Range {
            lower,
            upper,
            include_lower,
            include_upper,
        } => {
            let spec = RangeSpec {
                lower: lower.clone().map(Value::String),
                upper: upper.clone().map(Value::String),
                include_lower: *include_lower,
                include_upper: *include_upper,
                format: None,
                time_zone: opts.time_zone.clone(),
            };
            range_query(ctx, path, &spec).map(Some)
        }
        Leaf::Exists => Ok(Some(exists_query(ctx, path))),
    };
    match result {
        Err(_) if lenient => Ok(None),
        other => other,
    }
}

fn fuzzy_leaf(
    ctx: &QueryContext,
    path: &str,
    text: &str,
    edits: Option<u32>,
    opts: &StringOptions,
) -> Result<Option<Box<dyn Query>>, QueryError> {
    let fuzziness = edits.map(Fuzziness::Edits).unwrap_or(opts.fuzziness);
    // Text fields fuzz the normalized term (the first token of its analysis).
    let term = match resolve(ctx, path)? {
        Target::Field(field) if field.is_text() => {
            let analyzer = opts
                .match_opts
                .analyzer
                .unwrap_or_else(|| field.search_analyzer());
            let normalized = if analyzer_lowercases(analyzer) {
                text.to_lowercase()
            } else {
                text.to_string()
            };
            match analyze(analyzer, &normalized).into_iter().next() {
                Some(token) => token,
                None => return Ok(None),
            }
        }
        _ => text.to_string(),
    };
    let mo = &opts.match_opts;
    let matcher = fuzzy_matcher(&term, fuzziness, mo.prefix_length, mo.transpositions);
    multi_term_query(
        ctx,
        "fuzzy",
        path,
        |_| Ok(matcher),
        Scoring::Expand {
            max_expansions: mo.max_expansions,
        },
    )
    .map(Some)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dsl::testutil::{ids as v, Fixture};

    fn qs(query: &str) -> serde_json::Value {
        json!({"query_string": {"query": query}})
    }

    #[test]
    fn query_string_terms_fields_and_operators() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(qs("title:quick")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("title:quick AND title:fox")), v(&["1"]));
        assert_eq!(fx.matching(qs("title:(bear OR cat)")), v(&["3", "4"]));
        assert_eq!(fx.matching(qs("title:brown -tag:wild")), v(&["1", "2"]));
        assert_eq!(
            fx.matching(qs("title:brown AND NOT tag:wild")),
            v(&["1", "2"])
        );
        assert_eq!(fx.matching(qs("+title:brown +body:dog")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("NOT tag:animal")), v(&["3", "4", "5"]));
        assert_eq!(
            fx.matching(qs("(title:cat OR title:bear) AND count:>=20")),
            v(&["4"])
        );
        assert_eq!(fx.matching(qs("author.name:alice")), v(&["1", "3"]));
    }

    #[test]
    fn query_string_default_field_and_operator() {
        let fx = Fixture::standard();
        // Default field `*`: all fields, lenient.
        assert_eq!(fx.matching(qs("honey")), v(&["4"]));
        assert_eq!(fx.matching(qs("15")), v(&["3"]));
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "quick fox", "default_field": "title"}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "quick fox", "default_field": "title", "default_operator": "AND"}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(
                json!({"query_string": {"query": "cat honey", "fields": ["title", "body^2"]}})
            ),
            v(&["3", "4"])
        );
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "title:brown", "default_field": "body"}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "quick brown bear", "default_field": "title", "minimum_should_match": 2}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "quick brown fox", "default_field": "title", "minimum_should_match": "100%"}})),
            v(&["1"])
        );
    }

    #[test]
    fn query_string_phrases_wildcards_fuzzy_regex() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(qs("title:\"quick brown\"")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("title:\"quick fox\"~1")), v(&["1"]));
        assert_eq!(fx.matching(qs("title:qu*")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("title:Qu?ck")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("tag:an*")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("title:quikc~")), v(&["1", "2"]));
        assert_eq!(fx.matching(qs("title:bar~1")), v(&["4"]));
        assert_eq!(fx.matching(qs("tag:/w.*d/")), v(&["4"]));
        assert_eq!(fx.matching(qs("rating:*")), v(&["1", "2", "3"]));
        assert_eq!(fx.matching(qs("_exists_:ip")), v(&["1", "2", "3"]));
        assert_eq!(fx.count(qs("*")), 5);
        assert_eq!(fx.count(qs("*:*")), 5);
        assert_eq!(fx.matching(qs(r"code:Foo\-Bar")), v(&["1"]));
        assert_eq!(fx.matching(qs("title*:bear")), v(&["4"]));
    }

    #[test]
    fn query_string_ranges() {
        let fx = Fixture::standard();
        assert_eq!(fx.matching(qs("count:[10 TO 15]")), v(&["2", "3"]));
        assert_eq!(fx.matching(qs("count:{10 TO *]")), v(&["3", "4"]));
        assert_eq!(fx.matching(qs("count:<10")), v(&["1"]));
        assert_eq!(fx.matching(qs("price:>=20")), v(&["2", "4"]));
        assert_eq!(
            fx.matching(qs("date:[2020-01-01 TO 2020-01-15]")),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(qs("date:[now-2M/M TO now]")),
            v(&["1", "2", "3"])
        );
        assert_eq!(fx.matching(qs("tag:[p TO t]")), v(&["3"]));
    }

    #[test]
    fn query_string_boosts_reorder_results() {
        let fx = Fixture::standard();
        let plain = fx.ids(qs("title:bear OR title:cat"));
        assert_eq!(plain.len(), 2);
        let first = if plain[0] == "4" { "cat" } else { "bear" };
        let boosted = fx.ids(qs(&format!("title:bear OR title:cat OR title:{first}^10")));
        assert_ne!(boosted[0], plain[0]);
    }

    #[test]
    fn query_string_syntax_errors_and_bad_params() {
        let fx = Fixture::standard();
        let err = fx.error(qs("title:(quick"));
        assert_eq!(err.error_type(), "parsing_exception");
        assert!(
            err.to_string()
                .starts_with("Failed to parse query [title:(quick]"),
            "{err}"
        );
        assert_eq!(
            fx.error(json!({"query_string": {"default_field": "title"}}))
                .to_string(),
            "[query_string] must be provided with a [query]"
        );
        assert_eq!(
            fx.error(json!({"query_string": {"query": "a", "bogus": 1}}))
                .to_string(),
            "[query_string] query does not support [bogus]"
        );
        // Not lenient on an explicit numeric field.
        assert!(fx
            .error(qs("count:abc"))
            .to_string()
            .contains("For input string"));
        assert_eq!(
            fx.matching(json!({"query_string": {"query": "count:abc", "lenient": true}})),
            v(&[])
        );
        assert_eq!(fx.matching(qs("")), v(&[]));
    }

    #[test]
    fn simple_query_string_syntax() {
        let fx = Fixture::standard();
        let sqs = |q: &str| json!({"simple_query_string": {"query": q, "fields": ["title"]}});
        assert_eq!(fx.matching(sqs("bear cat")), v(&["3", "4"]));
        assert_eq!(fx.matching(sqs("brown +quick")), v(&["1", "2"]));
        assert_eq!(
            fx.matching(sqs("brown -fox")),
            v(&["1", "2", "3", "4", "5"])
        );
        assert_eq!(
            fx.matching(json!({"simple_query_string": {"query": "brown -fox", "fields": ["title"], "default_operator": "and"}})),
            v(&["2", "4"])
        );
        assert_eq!(fx.matching(sqs("\"quick brown\"")), v(&["1", "2"]));
        assert_eq!(fx.matching(sqs("\"quick fox\"~1")), v(&["1"]));
        assert_eq!(fx.matching(sqs("bro*")), v(&["1", "2", "4"]));
        assert_eq!(fx.matching(sqs("quikc~1")), v(&["1", "2"]));
        assert_eq!(fx.matching(sqs("(cat | bear) +lazy")), v(&["3"]));
        assert_eq!(fx.matching(sqs("cat | bear")), v(&["3", "4"]));
    }

    #[test]
    fn simple_query_string_never_fails_on_bad_syntax_and_searches_all_fields() {
        let fx = Fixture::standard();
        for q in ["(((", "\"quick", "+-|", "~", "quick)"] {
            fx.scored(json!({"simple_query_string": {"query": q}}));
        }
        assert_eq!(
            fx.matching(json!({"simple_query_string": {"query": "honey"}})),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(json!({"simple_query_string": {"query": "\"quick", "fields": ["title"]}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"simple_query_string": {"query": "alice", "fields": ["title", "author.name^2"]}})),
            v(&["1", "3"])
        );
        assert_eq!(
            fx.error(json!({"simple_query_string": {"query": "a", "bogus": 1}}))
                .to_string(),
            "[simple_query_string] query does not support [bogus]"
        );
    }
}
