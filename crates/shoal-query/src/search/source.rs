//! `_source` filtering: `_source: false`, a pattern or a list of patterns, or
//! `{"includes": [...], "excludes": [...]}`, applied the way OpenSearch's
//! `XContentMapValues.filter` does (patterns match full dotted paths, `*` matches anything).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::QueryError;

/// What to return of `_source`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFilter {
    /// `false` when `_source: false`: hits carry no `_source` at all.
    pub fetch: bool,
    pub includes: Vec<String>,
    pub excludes: Vec<String>,
}

impl Default for SourceFilter {
    fn default() -> Self {
        SourceFilter {
            fetch: true,
            includes: Vec::new(),
            excludes: Vec::new(),
        }
    }
}

impl SourceFilter {
    /// Whether the source is returned untouched.
    pub fn is_identity(&self) -> bool {
        self.fetch && self.includes.is_empty() && self.excludes.is_empty()
    }

    /// Parses the body's `_source` value.
    pub fn from_json(value: &Value) -> Result<SourceFilter, QueryError> {
        match value {
            Value::Bool(fetch) => Ok(SourceFilter {
                fetch: *fetch,
                ..SourceFilter::default()
            }),
            Value::String(s) => Ok(SourceFilter {
                includes: vec![s.clone()],
                ..SourceFilter::default()
            }),
            Value::Array(items) => Ok(SourceFilter {
                includes: string_list(items, "_source")?,
                ..SourceFilter::default()
            }),
            Value::Object(map) => {
                let mut filter = SourceFilter::default();
                for (key, value) in map {
                    let list = match value {
                        Value::String(s) => vec![s.clone()],
                        Value::Array(items) => string_list(items, key)?,
                        other => {
                            return Err(QueryError::Parsing(format!(
                                "Unknown key for a {} in [{key}].",
                                token_name(other)
                            )))
                        }
                    };
                    match key.as_str() {
                        "includes" | "include" => filter.includes = list,
                        "excludes" | "exclude" => filter.excludes = list,
                        _ => {
                            return Err(QueryError::Parsing(format!(
                                "Unknown key for a {} in [{key}].",
                                token_name(value)
                            )))
                        }
                    }
                }
                Ok(filter)
            }
            other => Err(QueryError::Parsing(format!(
                "Expected one of [VALUE_BOOLEAN, START_OBJECT] but found [{}]",
                token_name(other)
            ))),
        }
    }

    /// Applies the URL parameters `_source`, `_source_includes`, `_source_excludes`.
    pub fn apply_params(&mut self, params: &HashMap<String, String>) {
        if let Some(value) = params.get("_source") {
            match value.as_str() {
                "true" => self.fetch = true,
                "false" => self.fetch = false,
                list => {
                    self.fetch = true;
                    self.includes = split_list(list);
                }
            }
        }
        for key in ["_source_includes", "_source_include"] {
            if let Some(list) = params.get(key) {
                self.fetch = true;
                self.includes = split_list(list);
            }
        }
        for key in ["_source_excludes", "_source_exclude"] {
            if let Some(list) = params.get(key) {
                self.fetch = true;
                self.excludes = split_list(list);
            }
        }
    }
}

fn split_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

fn string_list(items: &[Value], key: &str) -> Result<Vec<String>, QueryError> {
    items
        .iter()
        .map(|item| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(QueryError::Parsing(format!(
                "Unknown key for a {} in [{key}].",
                token_name(other)
            ))),
        })
        .collect()
}

/// The Jackson token name of a JSON value, as OpenSearch's parse errors spell it.
pub(crate) fn token_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "VALUE_NULL",
        Value::Bool(_) => "VALUE_BOOLEAN",
        Value::Number(_) => "VALUE_NUMBER",
        Value::String(_) => "VALUE_STRING",
        Value::Array(_) => "START_ARRAY",
        Value::Object(_) => "START_OBJECT",
    }
}

/// Filters a `_source` document. Returns `Value::Null` when `fetch` is false.
pub fn filter_source(source: &Value, filter: &SourceFilter) -> Value {
    if !filter.fetch {
        return Value::Null;
    }
    if filter.includes.is_empty() && filter.excludes.is_empty() {
        return source.clone();
    }
    match source {
        Value::Object(map) => {
            let included = filter.includes.is_empty();
            Value::Object(filter_map(map, "", included, filter))
        }
        other => other.clone(),
    }
}

fn filter_map(
    map: &Map<String, Value>,
    prefix: &str,
    included: bool,
    filter: &SourceFilter,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in map {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if let Some(filtered) = filter_value(value, &path, included, filter) {
            out.insert(key.clone(), filtered);
        }
    }
    out
}

/// `included`: an ancestor path (or this one) matched an include pattern.
fn filter_value(value: &Value, path: &str, included: bool, filter: &SourceFilter) -> Option<Value> {
    if filter.excludes.iter().any(|p| glob_match(p, path)) {
        return None;
    }
    let matched = included || filter.includes.iter().any(|p| glob_match(p, path));
    match value {
        Value::Object(map) => {
            if !matched
                && !filter
                    .includes
                    .iter()
                    .any(|p| glob_prefix_possible(p, &format!("{path}.")))
            {
                return None;
            }
            let inner = filter_map(map, path, matched, filter);
            (matched || !inner.is_empty()).then_some(Value::Object(inner))
        }
        Value::Array(items) => {
            let could_descend = matched
                || filter
                    .includes
                    .iter()
                    .any(|p| glob_prefix_possible(p, &format!("{path}.")));
            if !could_descend {
                return None;
            }
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::Object(map) => {
                        let inner = filter_map(map, path, matched, filter);
                        if matched || !inner.is_empty() {
                            out.push(Value::Object(inner));
                        }
                    }
                    Value::Array(_) => {
                        if let Some(v) = filter_value(item, path, matched, filter) {
                            out.push(v);
                        }
                    }
                    scalar => {
                        if matched {
                            out.push(scalar.clone());
                        }
                    }
                }
            }
            (matched || !out.is_empty()).then_some(Value::Array(out))
        }
        scalar => matched.then(|| scalar.clone()),
    }
}

/// Glob match where `*` matches any run of characters (dots included).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    glob(pattern.as_bytes(), text.as_bytes(), false, false)
}

/// Glob match where `*` matches any run of characters and `?` any one byte.
pub(crate) fn wildcard_match(pattern: &str, text: &str) -> bool {
    glob(pattern.as_bytes(), text.as_bytes(), false, true)
}

/// Whether some string starting with `prefix` could match `pattern`.
fn glob_prefix_possible(pattern: &str, prefix: &str) -> bool {
    glob(pattern.as_bytes(), prefix.as_bytes(), true, false)
}

fn glob(pattern: &[u8], text: &[u8], prefix_mode: bool, question_mark: bool) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if t == text.len() {
            if prefix_mode {
                return true;
            }
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            return p == pattern.len();
        }
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
            continue;
        }
        if p < pattern.len() && (pattern[p] == text[t] || question_mark && pattern[p] == b'?') {
            p += 1;
            t += 1;
            continue;
        }
        match star {
            Some((sp, st)) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(includes: &[&str], excludes: &[&str]) -> SourceFilter {
        SourceFilter {
            fetch: true,
            includes: includes.iter().map(|s| s.to_string()).collect(),
            excludes: excludes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn includes_keep_only_matching_paths_and_whole_objects() {
        let source = json!({"a": {"b": 1, "c": 2}, "d": 3, "e": {"f": 4}});
        assert_eq!(
            filter_source(&source, &filter(&["a"], &[])),
            json!({"a": {"b": 1, "c": 2}})
        );
        assert_eq!(
            filter_source(&source, &filter(&["a.c", "d"], &[])),
            json!({"a": {"c": 2}, "d": 3})
        );
        assert_eq!(
            filter_source(&source, &filter(&["*.f"], &[])),
            json!({"e": {"f": 4}})
        );
    }

    #[test]
    fn excludes_remove_paths_and_keep_emptied_objects() {
        let source = json!({"a": {"b": 1}, "d": 3});
        assert_eq!(
            filter_source(&source, &filter(&[], &["a.b"])),
            json!({"a": {}, "d": 3})
        );
        assert_eq!(
            filter_source(&source, &filter(&[], &["a*"])),
            json!({"d": 3})
        );
        assert_eq!(
            filter_source(&source, &filter(&["a", "d"], &["d"])),
            json!({"a": {"b": 1}})
        );
    }

    #[test]
    fn arrays_of_objects_are_filtered_per_element() {
        let source = json!({"tags": [{"n": 1, "x": 2}, {"n": 3}], "v": [1, 2]});
        assert_eq!(
            filter_source(&source, &filter(&["tags.n", "v"], &[])),
            json!({"tags": [{"n": 1}, {"n": 3}], "v": [1, 2]})
        );
    }

    #[test]
    fn source_false_and_parsing_forms() {
        assert!(!SourceFilter::from_json(&json!(false)).unwrap().fetch);
        assert_eq!(
            SourceFilter::from_json(&json!("a.*")).unwrap().includes,
            ["a.*"]
        );
        let f = SourceFilter::from_json(&json!({"includes": "a", "excludes": ["b"]})).unwrap();
        assert_eq!(
            (f.includes, f.excludes),
            (vec!["a".to_string()], vec!["b".to_string()])
        );
        assert!(SourceFilter::from_json(&json!({"bogus": "a"})).is_err());
        assert_eq!(
            filter_source(
                &json!({"a": 1}),
                &SourceFilter {
                    fetch: false,
                    ..Default::default()
                }
            ),
            Value::Null
        );
    }
}
