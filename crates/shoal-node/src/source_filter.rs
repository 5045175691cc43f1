//! `_source` filtering for get APIs (`_source`, `_source_includes`, `_source_excludes`).

use serde_json::{Map, Value};

use crate::routing::wildcard_match;

/// Which parts of `_source` to return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceFilter {
    pub enabled: bool,
    pub includes: Vec<String>,
    pub excludes: Vec<String>,
}

impl SourceFilter {
    pub fn all() -> SourceFilter {
        SourceFilter { enabled: true, includes: Vec::new(), excludes: Vec::new() }
    }

    /// From URL parameters: `_source=false|true|a,b`, `_source_includes`, `_source_excludes`.
    pub fn from_params(source: Option<&str>, includes: Option<&str>, excludes: Option<&str>) -> SourceFilter {
        let split = |s: &str| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>();
        let mut filter = SourceFilter::all();
        match source {
            Some("false") => filter.enabled = false,
            Some("true") | None => {}
            Some(fields) => filter.includes = split(fields),
        }
        if let Some(i) = includes {
            filter.includes = split(i);
        }
        if let Some(e) = excludes {
            filter.excludes = split(e);
        }
        filter
    }

    pub fn is_identity(&self) -> bool {
        self.enabled && self.includes.is_empty() && self.excludes.is_empty()
    }

    /// Applies the filter to a source object.
    pub fn apply(&self, source: &Value) -> Value {
        if self.is_identity() {
            return source.clone();
        }
        match source {
            Value::Object(map) => Value::Object(self.filter_object(map, "")),
            other => other.clone(),
        }
    }

    fn filter_object(&self, map: &Map<String, Value>, prefix: &str) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, value) in map {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            if self.excludes.iter().any(|p| wildcard_match(p, &path)) {
                continue;
            }
            let included = self.includes.is_empty() || self.includes.iter().any(|p| wildcard_match(p, &path) || wildcard_match(&format!("{p}.*"), &path));
            if included {
                match value {
                    Value::Object(inner) if !self.excludes.is_empty() => {
                        out.insert(key.clone(), Value::Object(SourceFilter { enabled: true, includes: Vec::new(), excludes: self.excludes.clone() }.filter_object(inner, &path)));
                    }
                    _ => {
                        out.insert(key.clone(), value.clone());
                    }
                }
                continue;
            }
            // Descend when an include pattern may match something below this object.
            if let Value::Object(inner) = value {
                let may_match = self.includes.iter().any(|p| p.starts_with(&format!("{path}.")) || p.starts_with('*'));
                if may_match {
                    let sub = self.filter_object(inner, &path);
                    if !sub.is_empty() {
                        out.insert(key.clone(), Value::Object(sub));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn includes_and_excludes_with_objects() {
        let src = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": 4});
        let f = SourceFilter::from_params(None, Some("b.c,e"), None);
        assert_eq!(f.apply(&src), json!({"b": {"c": 2}, "e": 4}));
        let f = SourceFilter::from_params(None, None, Some("b.d"));
        assert_eq!(f.apply(&src), json!({"a": 1, "b": {"c": 2}, "e": 4}));
        let f = SourceFilter::from_params(Some("b"), None, None);
        assert_eq!(f.apply(&src), json!({"b": {"c": 2, "d": 3}}));
    }
}
