//! Compound queries: `bool`, `constant_score`, `dis_max`, `boosting`, plus `match_all` and
//! `match_none`.

use std::fmt;

use serde_json::{Map, Value};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, DisjunctionMaxQuery, EmptyQuery, EnableScoring,
    Explanation, Occur, Query, Scorer, Weight,
};
use tantivy::{DocId, DocSet, Score, SegmentReader, Term};

use super::params::{minimum_should_match, read_boost, read_f32, read_text, unknown_param};
use super::{boosted, build_query, parsing};
use crate::{QueryContext, QueryError};

pub(crate) fn match_all(body: &Map<String, Value>) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    for (key, value) in body {
        match key.as_str() {
            "boost" => boost = read_boost("match_all", value)?,
            "_name" => {}
            _ => return Err(unknown_param("match_all", key)),
        }
    }
    Ok(Box::new(ConstScoreQuery::new(Box::new(AllQuery), boost)))
}

pub(crate) fn match_none(body: &Map<String, Value>) -> Result<Box<dyn Query>, QueryError> {
    for (key, value) in body {
        match key.as_str() {
            "boost" => {
                read_boost("match_none", value)?;
            }
            "_name" => {}
            _ => return Err(unknown_param("match_none", key)),
        }
    }
    Ok(Box::new(EmptyQuery))
}

/// A query clause or a list of them (`"must": {...}` or `"must": [{...}, ...]`).
fn clauses(
    key: &str,
    value: &Value,
    ctx: &QueryContext,
) -> Result<Vec<Box<dyn Query>>, QueryError> {
    match value {
        Value::Object(_) => Ok(vec![build_query(value, ctx)?]),
        Value::Array(items) => items.iter().map(|item| build_query(item, ctx)).collect(),
        _ => Err(parsing(format!("[bool] query does not support [{key}]"))),
    }
}

/// Whether a query is known to match nothing (clauses on unmapped fields, lenient misses).
pub(crate) fn is_match_none(query: &dyn Query) -> bool {
    query.is::<EmptyQuery>()
}

/// A clause that must match without contributing to the score.
pub(crate) fn non_scoring(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(query, 0.0))
}

pub(crate) fn bool_query(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let (mut must, mut should, mut filter, mut must_not) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut msm = None;
    let mut boost = 1.0;
    for (key, value) in body {
        match key.as_str() {
            "must" => must.extend(clauses(key, value, ctx)?),
            "should" => should.extend(clauses(key, value, ctx)?),
            "filter" => filter.extend(clauses(key, value, ctx)?),
            "must_not" | "mustNot" => must_not.extend(clauses(key, value, ctx)?),
            "minimum_should_match" | "minimum_number_should_match" if !value.is_null() => {
                msm = Some(read_text("bool", key, value)?)
            }
            "minimum_should_match" | "minimum_number_should_match" => {}
            "boost" => boost = read_boost("bool", value)?,
            "_name" | "adjust_pure_negative" | "disable_coord" => {}
            _ => return Err(unknown_param("bool", key)),
        }
    }
    let query = combine_bool(must, should, filter, must_not, msm.as_deref())?;
    Ok(boosted(query, boost))
}

/// Lucene/OpenSearch boolean semantics: should clauses are optional when must or filter
/// clauses exist (unless `minimum_should_match` says otherwise), at least one is required
/// otherwise; filter and must_not clauses do not score; a purely negative query matches
/// every other document with score 0; an empty one matches everything with score 1.
pub(crate) fn combine_bool(
    must: Vec<Box<dyn Query>>,
    should: Vec<Box<dyn Query>>,
    filter: Vec<Box<dyn Query>>,
    must_not: Vec<Box<dyn Query>>,
    msm: Option<&str>,
) -> Result<Box<dyn Query>, QueryError> {
    if must.is_empty() && should.is_empty() && filter.is_empty() && must_not.is_empty() {
        return Ok(Box::new(ConstScoreQuery::new(Box::new(AllQuery), 1.0)));
    }
    let optional = should.len();
    let mut required = match msm {
        Some(spec) => minimum_should_match(optional, spec)?,
        None => 0,
    };
    if must.is_empty() && filter.is_empty() && optional > 0 {
        required = required.max(1);
    }
    if required > optional {
        return Ok(Box::new(EmptyQuery));
    }
    let positive = !(must.is_empty() && filter.is_empty() && should.is_empty());
    // A single scoring clause needs no boolean wrapper.
    if must.len() + should.len() == 1 && filter.is_empty() && must_not.is_empty() && required <= 1 {
        return Ok(must.into_iter().chain(should).next().expect("one clause"));
    }
    let mut subqueries: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    subqueries.extend(must.into_iter().map(|q| (Occur::Must, q)));
    subqueries.extend(filter.into_iter().map(|q| (Occur::Must, non_scoring(q))));
    subqueries.extend(should.into_iter().map(|q| (Occur::Should, q)));
    subqueries.extend(must_not.into_iter().map(|q| (Occur::MustNot, q)));
    if !positive {
        subqueries.push((Occur::Must, non_scoring(Box::new(AllQuery))));
    }
    Ok(Box::new(BooleanQuery::with_minimum_required_clauses(
        subqueries, required,
    )))
}

pub(crate) fn constant_score(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    let mut filter = None;
    for (key, value) in body {
        match key.as_str() {
            "filter" => filter = Some(build_query(value, ctx)?),
            "boost" => boost = read_boost("constant_score", value)?,
            "_name" => {}
            _ => return Err(unknown_param("constant_score", key)),
        }
    }
    let filter = filter.ok_or_else(|| parsing("[constant_score] requires a 'filter' element"))?;
    Ok(Box::new(ConstScoreQuery::new(filter, boost)))
}

pub(crate) fn dis_max(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let mut boost = 1.0;
    let mut tie_breaker = 0.0;
    let mut queries = Vec::new();
    for (key, value) in body {
        match key.as_str() {
            "queries" => match value {
                Value::Array(items) => {
                    for item in items {
                        queries.push(build_query(item, ctx)?);
                    }
                }
                Value::Object(_) => queries.push(build_query(value, ctx)?),
                _ => return Err(parsing("[dis_max] queries must be an array or an object")),
            },
            "tie_breaker" => tie_breaker = read_f32("dis_max", key, value)?,
            "boost" => boost = read_boost("dis_max", value)?,
            "_name" => {}
            _ => return Err(unknown_param("dis_max", key)),
        }
    }
    if queries.is_empty() {
        return Err(parsing(
            "[dis_max] requires 'queries' field with at least one clause",
        ));
    }
    Ok(boosted(dis_max_of(queries, tie_breaker), boost))
}

/// The best clause's score plus `tie_breaker` times the others'.
pub(crate) fn dis_max_of(queries: Vec<Box<dyn Query>>, tie_breaker: f32) -> Box<dyn Query> {
    let mut queries: Vec<Box<dyn Query>> = queries
        .into_iter()
        .filter(|q| !is_match_none(q.as_ref()))
        .collect();
    match queries.len() {
        0 => Box::new(EmptyQuery),
        1 => queries.pop().expect("one query"),
        _ => Box::new(DisjunctionMaxQuery::with_tie_breaker(queries, tie_breaker)),
    }
}

/// The sum of the clauses that match something (a disjunction).
pub(crate) fn union_of(queries: Vec<Box<dyn Query>>) -> Box<dyn Query> {
    let mut queries: Vec<Box<dyn Query>> = queries
        .into_iter()
        .filter(|q| !is_match_none(q.as_ref()))
        .collect();
    match queries.len() {
        0 => Box::new(EmptyQuery),
        1 => queries.pop().expect("one query"),
        _ => Box::new(BooleanQuery::union(queries)),
    }
}

pub(crate) fn boosting(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    let (mut positive, mut negative, mut negative_boost) = (None, None, None);
    let mut boost = 1.0;
    for (key, value) in body {
        match key.as_str() {
            "positive" => positive = Some(build_query(value, ctx)?),
            "negative" => negative = Some(build_query(value, ctx)?),
            "negative_boost" => negative_boost = Some(read_f32("boosting", key, value)?),
            "boost" => boost = read_boost("boosting", value)?,
            "_name" => {}
            _ => return Err(unknown_param("boosting", key)),
        }
    }
    let positive = positive.ok_or_else(|| parsing("[boosting] query requires 'positive' query"))?;
    let negative = negative.ok_or_else(|| parsing("[boosting] query requires 'negative' query"))?;
    let negative_boost = negative_boost.filter(|b| *b >= 0.0).ok_or_else(|| {
        parsing("[boosting] query requires 'negative_boost' to be set to be a positive value'")
    })?;
    Ok(boosted(
        Box::new(BoostingQuery {
            positive,
            negative,
            negative_boost,
        }),
        boost,
    ))
}

/// Scores documents of `positive`, multiplied by `negative_boost` when they also match
/// `negative` (Lucene's `BoostingQuery`, as OpenSearch's `boosting`).
struct BoostingQuery {
    positive: Box<dyn Query>,
    negative: Box<dyn Query>,
    negative_boost: Score,
}

impl Clone for BoostingQuery {
    fn clone(&self) -> Self {
        BoostingQuery {
            positive: self.positive.box_clone(),
            negative: self.negative.box_clone(),
            negative_boost: self.negative_boost,
        }
    }
}

impl fmt::Debug for BoostingQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Boosting(positive={:?}, negative={:?}, x{})",
            self.positive, self.negative, self.negative_boost
        )
    }
}

impl Query for BoostingQuery {
    fn weight(&self, enable_scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let positive = self.positive.weight(enable_scoring)?;
        let searcher = match enable_scoring {
            EnableScoring::Enabled { searcher, .. } => searcher,
            // Without scores the negative clause changes nothing.
            EnableScoring::Disabled { .. } => return Ok(positive),
        };
        let negative = self
            .negative
            .weight(EnableScoring::disabled_from_searcher(searcher))?;
        Ok(Box::new(BoostingWeight {
            positive,
            negative,
            negative_boost: self.negative_boost,
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        self.positive.query_terms(visitor);
    }
}

struct BoostingWeight {
    positive: Box<dyn Weight>,
    negative: Box<dyn Weight>,
    negative_boost: Score,
}

impl Weight for BoostingWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        Ok(Box::new(BoostingScorer {
            positive: self.positive.scorer(reader, boost)?,
            negative: self.negative.scorer(reader, 1.0)?,
            negative_boost: self.negative_boost,
        }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let positive = self.positive.explain(reader, doc)?;
        let mut negative = self.negative.scorer(reader, 1.0)?;
        if negative.seek(doc) == doc {
            let mut explanation = Explanation::new(
                "boosting: matches negative",
                positive.value() * self.negative_boost,
            );
            explanation.add_detail(positive);
            return Ok(explanation);
        }
        Ok(positive)
    }

    fn count(&self, reader: &SegmentReader) -> tantivy::Result<u32> {
        self.positive.count(reader)
    }
}

struct BoostingScorer {
    positive: Box<dyn Scorer>,
    negative: Box<dyn Scorer>,
    negative_boost: Score,
}

impl DocSet for BoostingScorer {
    fn advance(&mut self) -> DocId {
        self.positive.advance()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.positive.seek(target)
    }

    fn doc(&self) -> DocId {
        self.positive.doc()
    }

    fn size_hint(&self) -> u32 {
        self.positive.size_hint()
    }
}

impl Scorer for BoostingScorer {
    fn score(&mut self) -> Score {
        let doc = self.positive.doc();
        let score = self.positive.score();
        if self.negative.doc() < doc {
            self.negative.seek(doc);
        }
        if self.negative.doc() == doc {
            score * self.negative_boost
        } else {
            score
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn match_all_scores_its_boost_and_match_none_matches_nothing() {
        let fx = Fixture::standard();
        let all = fx.scored(json!({"match_all": {"boost": 1.5}}));
        assert_eq!(all.len(), 5);
        assert!(all.iter().all(|(_, s)| *s == 1.5));
        assert_eq!(fx.matching(json!({"match_none": {}})), v(&[]));
    }

    #[test]
    fn bool_combines_must_should_filter_and_must_not() {
        let fx = Fixture::standard();
        let q = json!({"bool": {
            "must": {"match": {"title": "brown"}},
            "filter": [{"range": {"count": {"gte": 10}}}],
            "must_not": [{"term": {"tag": "wild"}}]
        }});
        assert_eq!(fx.matching(q), v(&["2"]));
        // should is optional next to must, but adds score.
        let q = json!({"bool": {"must": {"match": {"title": "brown"}}, "should": {"term": {"tag": "wild"}}}});
        assert_eq!(fx.ids(q)[0], "4");
        assert_eq!(fx.count(json!({"bool": {"must": {"match": {"title": "brown"}}, "should": {"term": {"tag": "nothing"}}}})), 3);
    }

    #[test]
    fn should_only_bool_requires_one_clause_and_honours_minimum_should_match() {
        let fx = Fixture::standard();
        let should = json!([{"term": {"tag": "animal"}}, {"term": {"tag": "fast"}}, {"term": {"count": 20}}]);
        assert_eq!(
            fx.matching(json!({"bool": {"should": should}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"bool": {"should": should, "minimum_should_match": 2}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"bool": {"should": should, "minimum_should_match": "-2"}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"bool": {"should": should, "minimum_should_match": "60%"}})),
            v(&["1", "2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"bool": {"should": should, "minimum_should_match": 4}})),
            v(&[])
        );
        // With a filter, should clauses become optional unless minimum_should_match is set.
        let filter = json!({"range": {"count": {"gte": 1}}});
        assert_eq!(
            fx.count(json!({"bool": {"filter": filter, "should": should}})),
            4
        );
        assert_eq!(
            fx.matching(
                json!({"bool": {"filter": filter, "should": should, "minimum_should_match": 1}})
            ),
            v(&["1", "2", "4"])
        );
        // must_not does not make should clauses optional.
        assert_eq!(
            fx.matching(json!({"bool": {"should": should, "must_not": {"term": {"count": 5}}}})),
            v(&["2", "4"])
        );
    }

    #[test]
    fn filter_and_must_not_do_not_score() {
        let fx = Fixture::standard();
        let scored = fx.scored(json!({"bool": {"filter": {"term": {"tag": "animal"}}}}));
        assert_eq!(scored.len(), 2);
        assert!(scored.iter().all(|(_, s)| *s == 0.0));
        let negative = fx.scored(json!({"bool": {"must_not": {"term": {"tag": "animal"}}}}));
        assert_eq!(
            negative
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .len(),
            3
        );
        assert!(negative.iter().all(|(_, s)| *s == 0.0));
        let must = fx.score_of(
            json!({"bool": {"must": {"match": {"title": "quick"}}}}),
            "2",
        );
        let with_filter = fx.score_of(
            json!({"bool": {"must": {"match": {"title": "quick"}}, "filter": {"term": {"tag": "animal"}}}}),
            "2",
        );
        assert!((must - with_filter).abs() < 1e-6);
        assert_eq!(fx.scored(json!({"bool": {}})).len(), 5);
    }

    #[test]
    fn bool_boost_multiplies_scores() {
        let fx = Fixture::standard();
        let base = fx.score_of(
            json!({"bool": {"must": [{"match": {"title": "quick"}}, {"match": {"body": "fox"}}]}}),
            "1",
        );
        let boosted = fx.score_of(
            json!({"bool": {"must": [{"match": {"title": "quick"}}, {"match": {"body": "fox"}}], "boost": 3}}),
            "1",
        );
        assert!((boosted - 3.0 * base).abs() < 1e-4, "{boosted} vs {base}");
    }

    #[test]
    fn constant_score_gives_the_boost() {
        let fx = Fixture::standard();
        let scored = fx.scored(
            json!({"constant_score": {"filter": {"match": {"title": "brown"}}, "boost": 1.2}}),
        );
        assert_eq!(scored.len(), 3);
        assert!(scored.iter().all(|(_, s)| (*s - 1.2).abs() < 1e-6));
        assert_eq!(
            fx.error(json!({"constant_score": {"boost": 2}}))
                .to_string(),
            "[constant_score] requires a 'filter' element"
        );
    }

    #[test]
    fn dis_max_takes_the_best_clause_plus_tie_breaker() {
        let fx = Fixture::standard();
        let a = json!({"constant_score": {"filter": {"term": {"tag": "animal"}}, "boost": 2}});
        let b = json!({"constant_score": {"filter": {"term": {"tag": "fast"}}, "boost": 1}});
        let scored = fx.scored(json!({"dis_max": {"queries": [a, b]}}));
        assert_eq!(scored.iter().find(|(id, _)| id == "1").unwrap().1, 2.0);
        let scored = fx.scored(json!({"dis_max": {"queries": [a, b], "tie_breaker": 0.5}}));
        assert_eq!(scored.iter().find(|(id, _)| id == "1").unwrap().1, 2.5);
        assert_eq!(scored.iter().find(|(id, _)| id == "2").unwrap().1, 2.0);
        assert_eq!(
            fx.error(json!({"dis_max": {"queries": []}})).to_string(),
            "[dis_max] requires 'queries' field with at least one clause"
        );
    }

    #[test]
    fn boosting_demotes_documents_matching_negative() {
        let fx = Fixture::standard();
        let positive = json!({"match": {"title": "brown"}});
        let plain = fx.ids(positive.clone());
        let demoted = fx.ids(json!({"boosting": {"positive": positive, "negative": {"term": {"tag": "fast"}}, "negative_boost": 0.1}}));
        assert_eq!(plain.len(), 3);
        assert_eq!(demoted.len(), 3);
        assert_eq!(demoted.last().unwrap(), "1");
        let full = fx.score_of(positive.clone(), "1");
        let reduced = fx.score_of(
            json!({"boosting": {"positive": positive, "negative": {"term": {"tag": "fast"}}, "negative_boost": 0.5}}),
            "1",
        );
        assert!((reduced - full * 0.5).abs() < 1e-6);
        assert!(fx
            .error(json!({"boosting": {"positive": {"match_all": {}}}}))
            .to_string()
            .contains("negative"));
    }

    #[test]
    fn bool_rejects_unknown_keys() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"bool": {"shuold": []}})).to_string(),
            "[bool] query does not support [shuold]"
        );
        assert_eq!(
            fx.error(json!({"bool": {"must": "x"}})).to_string(),
            "[bool] query does not support [must]"
        );
    }
}
