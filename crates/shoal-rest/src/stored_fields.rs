//! `stored_fields` of the document APIs (`GET /{index}/_doc/{id}`, `_mget`): the fields
//! mapped with `store: true`, each as an array of its values, as OpenSearch returns them.
//!
//! Shoal keeps no field apart from `_source`, so a stored field's values are read from the
//! document's `_source` and shaped by the field's type, which gives what OpenSearch stored
//! at index time. A listed field without `store: true` is left out, as in OpenSearch.

use serde_json::{Map, Value};
use shoal_mapping::{FieldType, Mapping};
use shoal_node::error::{ApiError, ApiResult};

/// The names a request listed in `stored_fields`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredFields(Vec<String>);

impl StoredFields {
    /// From the URL parameter (comma-separated).
    pub(crate) fn from_param(value: &str) -> StoredFields {
        StoredFields(
            value
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }

    /// From an `_mget` document: a string or an array of strings.
    pub(crate) fn from_json(value: &Value) -> ApiResult<StoredFields> {
        match value {
            Value::String(s) => Ok(StoredFields::from_param(s)),
            Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "[stored_fields] expected strings, found [{v}]"
                        ))
                    })
                })
                .collect::<ApiResult<_>>()
                .map(StoredFields),
            other => Err(ApiError::bad_request(format!(
                "[stored_fields] expected a string or an array of strings, found [{other}]"
            ))),
        }
    }

    /// Whether `_source` is among them (else a listed request answers without it).
    pub(crate) fn wants_source(&self) -> bool {
        self.0.iter().any(|n| n == "_source")
    }

    /// The `fields` object for a document with `source`, or `None` when no listed field is
    /// stored or holds a value.
    pub(crate) fn render(&self, mapping: &Mapping, source: &Value) -> Option<Value> {
        let mut fields = Map::new();
        for name in &self.0 {
            let Some(field) = mapping.field(name).filter(|f| f.store == Some(true)) else {
                continue;
            };
            let mut values = Vec::new();
            collect_values(source, name, &mut values);
            let shaped: Vec<Value> = values
                .into_iter()
                .filter_map(|v| shape(field.field_type, v))
                .collect();
            if !shaped.is_empty() {
                fields.insert(name.clone(), Value::Array(shaped));
            }
        }
        (!fields.is_empty()).then_some(Value::Object(fields))
    }
}

/// The values at the dotted `path` of `value`, arrays flattened; a key may itself hold dots.
fn collect_values<'a>(value: &'a Value, path: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_values(v, path, out)),
        Value::Object(map) => {
            if let Some(leaf) = map.get(path) {
                flatten_into(leaf, out);
            }
            for (at, _) in path.match_indices('.') {
                if let Some(inner) = map.get(&path[..at]) {
                    collect_values(inner, &path[at + 1..], out);
                }
            }
        }
        _ => {}
    }
}

fn flatten_into<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| flatten_into(v, out)),
        Value::Null => {}
        other => out.push(other),
    }
}

/// A source value as the field's type stores it: integers and floats as numbers, booleans
/// as booleans, everything else as its text; a value the type cannot hold is left out (it
/// was refused or ignored as malformed when the document was indexed).
fn shape(field_type: FieldType, value: &Value) -> Option<Value> {
    let text = || match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    match field_type {
        FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => {
            let n = value
                .as_i64()
                .or_else(|| value.as_f64().map(|f| f.trunc() as i64))
                .or_else(|| text()?.trim().parse::<f64>().ok().map(|f| f.trunc() as i64))?;
            Some(Value::from(n))
        }
        FieldType::Double | FieldType::Float | FieldType::HalfFloat | FieldType::ScaledFloat => {
            let f = value
                .as_f64()
                .or_else(|| text()?.trim().parse::<f64>().ok())?;
            Some(Value::from(f))
        }
        FieldType::Boolean => match value {
            Value::Bool(b) => Some(Value::Bool(*b)),
            Value::String(s) if s == "true" => Some(Value::Bool(true)),
            Value::String(s) if s == "false" || s.is_empty() => Some(Value::Bool(false)),
            _ => None,
        },
        _ => text().map(Value::String),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mapping(properties: Value) -> Mapping {
        Mapping::from_json(&json!({ "properties": properties })).expect("mapping")
    }

    #[test]
    fn stored_fields_come_from_source_shaped_by_type_and_unstored_ones_are_left_out() {
        let mapping = mapping(json!({
            "foo": {"type": "keyword", "store": true},
            "count": {"type": "integer", "store": true},
            "plain": {"type": "keyword"},
            "obj": {"properties": {"n": {"type": "long", "store": true}}}
        }));
        let source =
            json!({"foo": "bar", "count": "7", "plain": "x", "obj": [{"n": 1}, {"n": [2, 3]}]});
        let fields = StoredFields::from_param("foo,count,plain,obj.n,missing");
        assert_eq!(
            fields.render(&mapping, &source),
            Some(json!({"foo": ["bar"], "count": [7], "obj.n": [1, 2, 3]}))
        );
        assert!(!fields.wants_source());
        assert!(StoredFields::from_json(&json!(["foo", "_source"]))
            .unwrap()
            .wants_source());
    }

    #[test]
    fn no_stored_value_renders_no_fields_and_a_bad_list_is_refused() {
        let mapping = mapping(json!({"foo": {"type": "keyword", "store": true}}));
        let fields = StoredFields::from_param("foo");
        assert_eq!(fields.render(&mapping, &json!({"other": 1})), None);
        assert!(StoredFields::from_json(&json!({"a": 1})).is_err());
        assert!(StoredFields::from_json(&json!([1])).is_err());
    }
}
