//! The search request body and URL parameters, parsed and validated like OpenSearch's
//! `SearchSourceBuilder` (same error types and texts).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::aggs::AggRequest;
use super::highlight::HighlightSpec;
use super::sort::{parse_sort, parse_sort_param, SortSpec};
use super::source::{token_name, SourceFilter};
use crate::QueryError;

/// OpenSearch's default `track_total_hits`.
pub const DEFAULT_TRACK_TOTAL_HITS: u64 = 10_000;

/// How precisely `hits.total` is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrackTotalHits {
    /// `false`: no `hits.total` in the response.
    Disabled,
    /// `true`: exact count.
    Exact,
    /// A number: exact up to it, then `{"value": n, "relation": "gte"}`.
    UpTo(u64),
}

/// A parsed search request.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    /// The query clause; `None` means `match_all`.
    pub query: Option<Value>,
    /// `post_filter`: filters hits but not aggregations.
    pub post_filter: Option<Value>,
    pub from: usize,
    pub size: usize,
    /// Empty means by score.
    pub sort: Vec<SortSpec>,
    pub track_scores: bool,
    pub source: SourceFilter,
    pub track_total_hits: TrackTotalHits,
    /// `rest_total_hits_as_int=true`: `hits.total` as a plain number.
    pub total_hits_as_int: bool,
    pub search_after: Option<Vec<Value>>,
    pub terminate_after: Option<u64>,
    pub timeout: Option<Duration>,
    pub aggs: Option<AggRequest>,
    pub highlight: Option<HighlightSpec>,
    pub min_score: Option<f32>,
    pub version: bool,
    pub seq_no_primary_term: bool,
    /// `typed_keys=true`: aggregation names prefixed with their type (`sterms#name`).
    pub typed_keys: bool,
    /// `search.max_buckets` (a cluster setting the node fills in; not part of the body).
    pub max_buckets: usize,
    /// `stored_fields: "_none_"`: hits carry no `_id` (nor `_source`).
    pub hide_id: bool,
    /// The `stored_fields` asked for, applied once the whole request is read (they turn
    /// `_source` off unless it is listed or asked for itself).
    stored_fields: Option<Vec<String>>,
    /// Whether `_source` was set in the body or the URL.
    source_asked: bool,
    /// Whether `track_total_hits` was set in the body or the URL.
    track_total_hits_asked: bool,
}

impl Default for SearchRequest {
    fn default() -> Self {
        SearchRequest {
            query: None,
            post_filter: None,
            from: 0,
            size: 10,
            sort: Vec::new(),
            track_scores: false,
            source: SourceFilter::default(),
            track_total_hits: TrackTotalHits::UpTo(DEFAULT_TRACK_TOTAL_HITS),
            total_hits_as_int: false,
            search_after: None,
            terminate_after: None,
            timeout: None,
            aggs: None,
            highlight: None,
            min_score: None,
            version: false,
            seq_no_primary_term: false,
            typed_keys: false,
            max_buckets: crate::search::aggs::render::MAX_BUCKETS,
            hide_id: false,
            stored_fields: None,
            source_asked: false,
            track_total_hits_asked: false,
        }
    }
}

/// `search_type`: Shoal runs `query_then_fetch`. DFS would change scores (index-wide term
/// statistics) and is refused rather than ignored; the `*_and_fetch` types are refused by
/// OpenSearch's REST layer too.
fn check_search_type(search_type: &str) -> Result<(), QueryError> {
    match search_type {
        "query_then_fetch" => Ok(()),
        "dfs_query_then_fetch" => Err(QueryError::IllegalArgument(
            "[search_type=dfs_query_then_fetch] is not supported by Shoal yet: scores use each shard's own term statistics; remove search_type".into(),
        )),
        "query_and_fetch" | "dfs_query_and_fetch" => Err(QueryError::IllegalArgument(format!(
            "Unsupported search type [{search_type}]"
        ))),
        other => Err(QueryError::IllegalArgument(format!(
            "No search type for [{other}]"
        ))),
    }
}

fn refuse(what: &str) -> QueryError {
    QueryError::IllegalArgument(format!("[{what}] is not supported by Shoal yet"))
}

impl SearchRequest {
    /// Parses a `_search` body (`Value::Null` for no body) and its URL parameters; URL
    /// parameters override the body as in OpenSearch.
    pub fn parse(
        body: &Value,
        params: &HashMap<String, String>,
    ) -> Result<SearchRequest, QueryError> {
        let mut req = SearchRequest::default();
        match body {
            Value::Null => {}
            Value::Object(map) => req.parse_body(map)?,
            other => {
                return Err(QueryError::Parsing(format!(
                    "Unexpected token [{}] when parsing the search request body",
                    token_name(other)
                )))
            }
        }
        req.apply_params(params)?;
        req.settle_stored_fields();
        if req.search_after.is_some() && req.sort.is_empty() {
            return Err(QueryError::IllegalArgument(
                "Sort must contain at least one field.".into(),
            ));
        }
        Ok(req)
    }

    fn parse_body(&mut self, map: &Map<String, Value>) -> Result<(), QueryError> {
        for (key, value) in map {
            match key.as_str() {
                "query" => self.query = Some(Value::Object(expect_object(key, value)?.clone())),
                "post_filter" => {
                    self.post_filter = Some(Value::Object(expect_object(key, value)?.clone()))
                }
                "from" => self.from = non_negative(key, value)?,
                "size" => self.size = non_negative(key, value)?,
                "sort" => self.sort = parse_sort(value)?,
                "_source" => {
                    self.source = SourceFilter::from_json(value)?;
                    self.source_asked = true;
                }
                "track_total_hits" => {
                    self.track_total_hits = parse_track_total_hits(value)?;
                    self.track_total_hits_asked = true;
                }
                "track_scores" => self.track_scores = boolean(key, value)?,
                "search_after" => match value {
                    Value::Array(items) => self.search_after = Some(items.clone()),
                    other => {
                        return Err(QueryError::Parsing(format!(
                            "Unknown key for a {} in [{key}].",
                            token_name(other)
                        )))
                    }
                },
                "terminate_after" => {
                    let n = integer(key, value)?;
                    if n < 0 {
                        return Err(QueryError::IllegalArgument(
                            "terminateAfter must be > 0".into(),
                        ));
                    }
                    self.terminate_after = (n > 0).then_some(n as u64);
                }
                "timeout" => self.timeout = parse_timeout(&scalar_text(key, value)?)?,
                "aggs" | "aggregations" => {
                    if self.aggs.is_some() {
                        return Err(QueryError::Parsing(format!(
                            "Found two aggregation type definitions in [{key}]"
                        )));
                    }
                    self.aggs = Some(AggRequest::parse(expect_object(key, value)?)?)
                }
                "highlight" => {
                    self.highlight = Some(HighlightSpec::from_json(expect_object(key, value)?)?)
                }
                "min_score" => {
                    self.min_score = Some(value.as_f64().ok_or_else(|| {
                        QueryError::Parsing(format!(
                            "[min_score] expected a number but got [{}]",
                            token_name(value)
                        ))
                    })? as f32)
                }
                "version" => self.version = boolean(key, value)?,
                "seq_no_primary_term" => self.seq_no_primary_term = boolean(key, value)?,
                "explain" => {
                    if boolean(key, value)? {
                        return Err(refuse("explain"));
                    }
                }
                "profile" => {
                    if boolean(key, value)? {
                        return Err(refuse("profile"));
                    }
                }
                "stored_fields" => self.apply_stored_fields(value)?,
                "docvalue_fields" | "fields" | "script_fields" => {
                    if !matches!(value, Value::Array(a) if a.is_empty()) {
                        return Err(refuse(key));
                    }
                }
                "stats" | "ext" | "indices_boost_ignored" => {}
                "rescore" | "collapse" | "suggest" | "indices_boost" | "slice" | "pit"
                | "runtime_mappings" | "search_pipeline" | "knn" | "point_in_time"
                | "verbose_pipeline" => return Err(refuse(key)),
                _ => {
                    return Err(QueryError::Parsing(format!(
                        "Unknown key for a {} in [{key}].",
                        token_name(value)
                    )))
                }
            }
        }
        Ok(())
    }

    /// `stored_fields`: Shoal stores no field apart from `_source`, so only the metadata names
    /// (and `_none_`) are accepted; any other name is refused rather than left out of hits.
    fn apply_stored_fields(&mut self, value: &Value) -> Result<(), QueryError> {
        let names: Vec<String> = match value {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => return Err(refuse("stored_fields")),
        };
        let metadata_only = names
            .iter()
            .all(|n| matches!(n.as_str(), "_source" | "_id" | "_routing"));
        if names != ["_none_"] && !metadata_only {
            return Err(refuse("stored_fields"));
        }
        self.stored_fields = Some(names);
        Ok(())
    }

    /// As OpenSearch: listed stored fields leave `_source` out unless it is among them or was
    /// asked for; `_none_` leaves out `_id` too.
    fn settle_stored_fields(&mut self) {
        let Some(names) = &self.stored_fields else {
            return;
        };
        if names == &["_none_"] {
            self.source.fetch = false;
            self.hide_id = true;
        } else if !names.iter().any(|n| n == "_source") && !self.source_asked {
            self.source.fetch = false;
        }
    }

    fn apply_params(&mut self, params: &HashMap<String, String>) -> Result<(), QueryError> {
        if let Some(q) = params.get("q") {
            let mut qs = Map::new();
            qs.insert("query".into(), json!(q));
            for (param, key) in [
                ("df", "default_field"),
                ("default_operator", "default_operator"),
                ("analyzer", "analyzer"),
            ] {
                if let Some(v) = params.get(param) {
                    qs.insert(key.into(), json!(v));
                }
            }
            for (param, key) in [
                ("lenient", "lenient"),
                ("analyze_wildcard", "analyze_wildcard"),
            ] {
                if let Some(v) = params.get(param) {
                    qs.insert(key.into(), json!(v == "true"));
                }
            }
            self.query = Some(json!({ "query_string": Value::Object(qs) }));
        }
        if let Some(v) = params.get("from") {
            self.from = param_usize("from", v)?;
        }
        if let Some(v) = params.get("size") {
            self.size = param_usize("size", v)?;
        }
        if let Some(v) = params.get("sort") {
            self.sort = parse_sort_param(v)?;
        }
        self.source.apply_params(params);
        self.source_asked |= ["_source", "_source_includes", "_source_excludes"]
            .iter()
            .any(|k| params.contains_key(*k));
        if let Some(v) = params.get("track_total_hits") {
            let value = match v.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                n => json!(n.parse::<i64>().map_err(|_| {
                    QueryError::IllegalArgument(format!(
                        "Failed to parse value [{n}] as only [true] or [false] are allowed."
                    ))
                })?),
            };
            self.track_total_hits = parse_track_total_hits(&value)?;
            self.track_total_hits_asked = true;
        }
        if let Some(v) = params.get("rest_total_hits_as_int") {
            self.total_hits_as_int = v == "true" || v.is_empty();
            self.count_hits_exactly_for_an_int_total()?;
        }
        if let Some(v) = params.get("typed_keys") {
            self.typed_keys = v == "true" || v.is_empty();
        }
        if let Some(v) = params.get("track_scores") {
            self.track_scores = v == "true";
        }
        if let Some(v) = params.get("terminate_after") {
            let n = param_usize("terminate_after", v)?;
            self.terminate_after = (n > 0).then_some(n as u64);
        }
        if let Some(v) = params.get("timeout") {
            self.timeout = parse_timeout(v)?;
        }
        if let Some(v) = params.get("version") {
            self.version = v == "true";
        }
        if let Some(v) = params.get("seq_no_primary_term") {
            self.seq_no_primary_term = v == "true";
        }
        if params.get("explain").is_some_and(|v| v == "true") {
            return Err(refuse("explain"));
        }
        if let Some(search_type) = params.get("search_type") {
            check_search_type(search_type)?;
        }
        if let Some(v) = params.get("stored_fields") {
            self.apply_stored_fields(&Value::Array(
                v.split(',').map(|s| json!(s.trim())).collect(),
            ))?;
        }
        if params.get("docvalue_fields").is_some_and(|v| !v.is_empty()) {
            return Err(refuse("docvalue_fields"));
        }
        Ok(())
    }

    /// `rest_total_hits_as_int` reports a plain number, so it counts every hit; a bound asked
    /// for cannot be honoured with it and is refused, as OpenSearch does.
    fn count_hits_exactly_for_an_int_total(&mut self) -> Result<(), QueryError> {
        if !self.total_hits_as_int {
            return Ok(());
        }
        match self.track_total_hits {
            TrackTotalHits::UpTo(n) if self.track_total_hits_asked => {
                Err(QueryError::IllegalArgument(format!(
                    "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got {n}"
                )))
            }
            TrackTotalHits::UpTo(_) => {
                self.track_total_hits = TrackTotalHits::Exact;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A scroll's page size must not exceed `index.max_result_window` (checked per index).
    pub fn check_scroll_batch(&self, max_result_window: usize) -> Result<(), QueryError> {
        if self.size <= max_result_window {
            return Ok(());
        }
        Err(QueryError::SearchPhase {
            reason: "all shards failed".into(),
            cause_type: "illegal_argument_exception".into(),
            cause_reason: format!(
                "Batch size is too large, size must be less than or equal to: [{max_result_window}] but was [{}]. Scroll batch sizes cost as much memory as result windows so they are controlled by the [index.max_result_window] index level setting.",
                self.size
            ),
        })
    }

    /// `from + size` must not exceed `index.max_result_window` (checked per index).
    pub fn check_result_window(&self, max_result_window: usize) -> Result<(), QueryError> {
        let window = self.from + self.size;
        if window > max_result_window {
            return Err(QueryError::SearchPhase {
                reason: "all shards failed".into(),
                cause_type: "illegal_argument_exception".into(),
                cause_reason: format!(
                    "Result window is too large, from + size must be less than or equal to: [{max_result_window}] but was [{window}]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting."
                ),
            });
        }
        if self.search_after.is_some() && self.from > 0 {
            return Err(QueryError::SearchPhase {
                reason: "all shards failed".into(),
                cause_type: "illegal_argument_exception".into(),
                cause_reason: "`from` parameter must be set to 0 when `search_after` is used."
                    .into(),
            });
        }
        Ok(())
    }

    /// Whether scores are needed to order hits or to report them.
    pub fn sorts_by_score(&self) -> bool {
        self.sort.is_empty()
            || self
                .sort
                .iter()
                .any(|s| s.target == super::sort::SortTarget::Score)
    }

    /// The sort criteria, `_score` when none were given.
    pub fn effective_sort(&self) -> Vec<SortSpec> {
        if self.sort.is_empty() {
            vec![SortSpec::new(super::sort::SortTarget::Score)]
        } else {
            self.sort.clone()
        }
    }
}

fn expect_object<'a>(key: &str, value: &'a Value) -> Result<&'a Map<String, Value>, QueryError> {
    value.as_object().ok_or_else(|| {
        QueryError::Parsing(format!(
            "[{key}] expected START_OBJECT but found [{}]",
            token_name(value)
        ))
    })
}

fn scalar_text(key: &str, value: &Value) -> Result<String, QueryError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(QueryError::Parsing(format!(
            "Unknown key for a {} in [{key}].",
            token_name(other)
        ))),
    }
}

fn integer(key: &str, value: &Value) -> Result<i64, QueryError> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .ok_or_else(|| QueryError::Parsing(format!("[{key}] failed to parse field [{n}]"))),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| QueryError::Parsing(format!("[{key}] failed to parse field [{s}]"))),
        other => Err(QueryError::Parsing(format!(
            "Unknown key for a {} in [{key}].",
            token_name(other)
        ))),
    }
}

fn non_negative(key: &str, value: &Value) -> Result<usize, QueryError> {
    let n = integer(key, value)?;
    if n < 0 {
        return Err(QueryError::IllegalArgument(format!(
            "[{key}] parameter cannot be negative, found [{n}]"
        )));
    }
    Ok(n as usize)
}

fn param_usize(key: &str, value: &str) -> Result<usize, QueryError> {
    let n: i64 = value.trim().parse().map_err(|_| {
        QueryError::IllegalArgument(format!(
            "Failed to parse int parameter [{key}] with value [{value}]"
        ))
    })?;
    if n < 0 {
        return Err(QueryError::IllegalArgument(format!(
            "[{key}] parameter cannot be negative, found [{n}]"
        )));
    }
    Ok(n as usize)
}

fn boolean(key: &str, value: &Value) -> Result<bool, QueryError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" => Ok(false),
        other => Err(QueryError::Parsing(format!(
            "[{key}] Failed to parse value [{}] as only [true] or [false] are allowed.",
            match other {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            }
        ))),
    }
}

fn parse_track_total_hits(value: &Value) -> Result<TrackTotalHits, QueryError> {
    match value {
        Value::Bool(true) => Ok(TrackTotalHits::Exact),
        Value::Bool(false) => Ok(TrackTotalHits::Disabled),
        Value::Number(_) | Value::String(_) => {
            let n = integer("track_total_hits", value)?;
            match n {
                -1 => Ok(TrackTotalHits::Disabled),
                n if n < 0 => Err(QueryError::IllegalArgument(format!(
                    "[track_total_hits] parameter must be positive or equals to -1, got {n}"
                ))),
                n if n >= i32::MAX as i64 => Ok(TrackTotalHits::Exact),
                n => Ok(TrackTotalHits::UpTo(n as u64)),
            }
        }
        other => Err(QueryError::Parsing(format!(
            "Unknown key for a {} in [track_total_hits].",
            token_name(other)
        ))),
    }
}

/// Parses a `timeout` (`10ms`, `1s`, `-1` for none).
fn parse_timeout(text: &str) -> Result<Option<Duration>, QueryError> {
    let t = text.trim();
    if t == "-1" || t == "0" {
        return Ok(None);
    }
    super::datemath::parse_time_millis(t)
        .map(|ms| Some(Duration::from_millis(ms.max(0) as u64)))
        .ok_or_else(|| {
            QueryError::Parsing(format!(
                "failed to parse setting [timeout] with value [{t}] as a time value: unit is missing or unrecognized"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::sort::{Missing, SortOrder, SortTarget};

    fn parse(body: Value) -> Result<SearchRequest, QueryError> {
        SearchRequest::parse(&body, &HashMap::new())
    }

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn search_type_query_then_fetch_is_run_and_every_other_type_refused() {
        let with = |t: &str| {
            SearchRequest::parse(
                &Value::Null,
                &HashMap::from([("search_type".to_string(), t.to_string())]),
            )
        };
        assert!(with("query_then_fetch").is_ok());
        for refused in [
            "dfs_query_then_fetch",
            "query_and_fetch",
            "dfs_query_and_fetch",
            "junk",
        ] {
            assert!(
                matches!(with(refused), Err(QueryError::IllegalArgument(_))),
                "{refused}"
            );
        }
    }

    #[test]
    fn listed_stored_fields_leave_source_out_unless_asked_and_none_hides_the_id() {
        let listed = SearchRequest::parse(&json!({"stored_fields": []}), &HashMap::new()).unwrap();
        assert!(!listed.source.fetch && !listed.hide_id);
        let asked = SearchRequest::parse(
            &json!({"stored_fields": ["_id"], "_source": true}),
            &HashMap::new(),
        )
        .unwrap();
        assert!(asked.source.fetch);
        let none =
            SearchRequest::parse(&json!({"stored_fields": "_none_"}), &HashMap::new()).unwrap();
        assert!(!none.source.fetch && none.hide_id);
        assert!(
            SearchRequest::parse(&json!({"stored_fields": ["title"]}), &HashMap::new()).is_err()
        );
    }

    #[test]
    fn unknown_top_level_keys_are_parsing_exceptions() {
        let err = parse(json!({"xyz": {}})).unwrap_err();
        assert_eq!(
            err,
            QueryError::Parsing("Unknown key for a START_OBJECT in [xyz].".into())
        );
        let err = parse(json!({"xyz": 1})).unwrap_err();
        assert_eq!(err.to_string(), "Unknown key for a VALUE_NUMBER in [xyz].");
    }

    #[test]
    fn negative_from_and_size_are_refused() {
        assert_eq!(
            parse(json!({"from": -1})).unwrap_err().to_string(),
            "[from] parameter cannot be negative, found [-1]"
        );
        assert_eq!(
            parse(json!({"size": -5})).unwrap_err().error_type(),
            "illegal_argument_exception"
        );
    }

    #[test]
    fn url_parameters_override_the_body() {
        let req = SearchRequest::parse(
            &json!({"from": 5, "size": 5, "query": {"match_all": {}}}),
            &params(&[
                ("size", "3"),
                ("q", "title:fox"),
                ("sort", "n:desc,_score"),
                ("_source", "false"),
            ]),
        )
        .unwrap();
        assert_eq!((req.from, req.size), (5, 3));
        assert_eq!(
            req.query,
            Some(json!({"query_string": {"query": "title:fox"}}))
        );
        assert_eq!(req.sort[0].target, SortTarget::Field("n".into()));
        assert_eq!(req.sort[0].order, SortOrder::Desc);
        assert_eq!(req.sort[1].target, SortTarget::Score);
        assert!(!req.source.fetch);
    }

    #[test]
    fn sort_forms_parse() {
        let req = parse(json!({"sort": ["a", {"b": "desc"}, {"c": {"order": "desc", "missing": "_first", "unmapped_type": "long"}}, "_score"]})).unwrap();
        assert_eq!(req.sort.len(), 4);
        assert_eq!(req.sort[0].order, SortOrder::Asc);
        assert_eq!(req.sort[1].order, SortOrder::Desc);
        assert_eq!(req.sort[2].missing, Missing::First);
        assert_eq!(req.sort[2].unmapped_type.as_deref(), Some("long"));
        assert_eq!(req.sort[3].order, SortOrder::Desc);
        assert!(parse(json!({"sort": {"a": {"bogus": 1}}})).is_err());
    }

    #[test]
    fn track_total_hits_forms() {
        assert_eq!(
            parse(json!({})).unwrap().track_total_hits,
            TrackTotalHits::UpTo(10_000)
        );
        assert_eq!(
            parse(json!({"track_total_hits": true}))
                .unwrap()
                .track_total_hits,
            TrackTotalHits::Exact
        );
        assert_eq!(
            parse(json!({"track_total_hits": false}))
                .unwrap()
                .track_total_hits,
            TrackTotalHits::Disabled
        );
        assert_eq!(
            parse(json!({"track_total_hits": 100}))
                .unwrap()
                .track_total_hits,
            TrackTotalHits::UpTo(100)
        );
        assert_eq!(
            parse(json!({"track_total_hits": -5}))
                .unwrap_err()
                .to_string(),
            "[track_total_hits] parameter must be positive or equals to -1, got -5"
        );
    }

    #[test]
    fn result_window_is_checked_like_opensearch() {
        let req = parse(json!({"from": 10000, "size": 1})).unwrap();
        let err = req.check_result_window(10_000).unwrap_err();
        assert_eq!(err.error_type(), "search_phase_execution_exception");
        match err {
            QueryError::SearchPhase {
                cause_type,
                cause_reason,
                ..
            } => {
                assert_eq!(cause_type, "illegal_argument_exception");
                assert!(cause_reason.starts_with(
                    "Result window is too large, from + size must be less than or equal to: [10000] but was [10001]."
                ));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(json!({"size": 10000}))
            .unwrap()
            .check_result_window(10_000)
            .is_ok());
    }

    #[test]
    fn explain_and_unsupported_features_are_refused_clearly() {
        assert_eq!(
            parse(json!({"explain": true})).unwrap_err().to_string(),
            "[explain] is not supported by Shoal yet"
        );
        assert!(parse(json!({"explain": false})).is_ok());
        assert!(parse(json!({"rescore": {}})).is_err());
        assert!(parse(json!({"docvalue_fields": ["a"]})).is_err());
        assert!(
            !parse(json!({"stored_fields": "_none_"}))
                .unwrap()
                .source
                .fetch
        );
    }

    #[test]
    fn search_after_needs_a_sort_and_timeout_parses() {
        assert!(parse(json!({"search_after": [1]})).is_err());
        let req = parse(
            json!({"search_after": [1], "sort": ["n"], "timeout": "10ms", "terminate_after": 5}),
        )
        .unwrap();
        assert_eq!(req.timeout, Some(Duration::from_millis(10)));
        assert_eq!(req.terminate_after, Some(5));
        assert!(parse(json!({"timeout": "10 parsecs"})).is_err());
    }
}
