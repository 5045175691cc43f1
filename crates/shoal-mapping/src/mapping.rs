//! The root mapping of an index and its object tree.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::field::json_kind;
use crate::{Dynamic, FieldMapping, MapperError};

/// A property of an object: a leaf field or a nested object.
#[derive(Debug, Clone, PartialEq)]
pub enum Property {
    Field(FieldMapping),
    Object(ObjectMapping),
}

/// An `object` mapping: named properties and an optional `dynamic` override.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectMapping {
    pub dynamic: Option<Dynamic>,
    pub enabled: bool,
    pub properties: BTreeMap<String, Property>,
}

impl Default for ObjectMapping {
    fn default() -> Self {
        ObjectMapping::new()
    }
}

impl ObjectMapping {
    pub fn new() -> ObjectMapping {
        ObjectMapping {
            dynamic: None,
            enabled: true,
            properties: BTreeMap::new(),
        }
    }

    fn parse_properties(&mut self, prefix: &str, props: &Value) -> Result<(), MapperError> {
        let props = props.as_object().ok_or_else(|| {
            MapperError::InvalidMapping(format!(
                "Expected map for property [properties] on field [{}] but got a {}",
                if prefix.is_empty() { "_doc" } else { prefix },
                json_kind(props)
            ))
        })?;
        for (name, body) in props {
            if name.is_empty() || name.trim().is_empty() {
                return Err(MapperError::IllegalArgument(
                    "name cannot be empty string".to_string(),
                ));
            }
            let body = body.as_object().ok_or_else(|| {
                MapperError::InvalidMapping(format!(
                    "Expected map for property [fields] on field [{name}] but got a {}",
                    json_kind(body)
                ))
            })?;
            // "a.b": {...} is shorthand for a: {properties: {b: {...}}}.
            let (head, tail) = match name.split_once('.') {
                Some((h, t)) if !h.is_empty() && !t.is_empty() => (h, Some(t)),
                _ => (name.as_str(), None),
            };
            let path = join(prefix, head);
            match tail {
                Some(rest) => {
                    let child = self
                        .properties
                        .entry(head.to_string())
                        .or_insert_with(|| Property::Object(ObjectMapping::new()));
                    let Property::Object(child) = child else {
                        return Err(MapperError::InvalidMapping(format!(
                            "Can't merge a non object mapping [{path}] with an object mapping"
                        )));
                    };
                    let mut nested = Map::new();
                    nested.insert(rest.to_string(), Value::Object(body.clone()));
                    child.parse_properties(&path, &Value::Object(nested))?;
                }
                None => {
                    let property = parse_property(&path, body)?;
                    self.properties.insert(head.to_string(), property);
                }
            }
        }
        Ok(())
    }

    fn to_json(&self) -> Map<String, Value> {
        let mut body = Map::new();
        if let Some(d) = self.dynamic {
            body.insert("dynamic".into(), d.to_json());
        }
        if !self.enabled {
            body.insert("enabled".into(), json!(false));
        }
        if !self.properties.is_empty() {
            let props: Map<String, Value> = self
                .properties
                .iter()
                .map(|(name, p)| (name.clone(), property_to_json(p)))
                .collect();
            body.insert("properties".into(), Value::Object(props));
        }
        body
    }

    fn merge(&mut self, prefix: &str, update: &ObjectMapping) -> Result<(), MapperError> {
        if update.dynamic.is_some() {
            self.dynamic = update.dynamic;
        }
        for (name, prop) in &update.properties {
            let path = join(prefix, name);
            match (self.properties.get_mut(name), prop) {
                (None, _) => {
                    self.properties.insert(name.clone(), prop.clone());
                }
                (Some(Property::Field(existing)), Property::Field(new)) => {
                    existing.merge(&path, new)?
                }
                (Some(Property::Object(existing)), Property::Object(new)) => {
                    existing.merge(&path, new)?
                }
                (Some(Property::Object(_)), Property::Field(new)) => {
                    return Err(MapperError::type_change(
                        &path,
                        "object",
                        new.field_type.name(),
                    ))
                }
                (Some(Property::Field(existing)), Property::Object(_)) => {
                    return Err(MapperError::type_change(
                        &path,
                        existing.field_type.name(),
                        "object",
                    ))
                }
            }
        }
        Ok(())
    }
}

impl MapperError {
    /// OpenSearch words an object/leaf clash as a type change as well.
    fn type_change(path: &str, from: &str, to: &str) -> MapperError {
        MapperError::Conflict(format!(
            "mapper [{path}] cannot be changed from type [{from}] to [{to}]"
        ))
    }
}

fn parse_property(path: &str, body: &Map<String, Value>) -> Result<Property, MapperError> {
    let type_name = body.get("type").and_then(Value::as_str);
    let is_object = matches!(type_name, None | Some("object"))
        && (body.contains_key("properties") || type_name == Some("object") || type_name.is_none());
    if !is_object {
        return Ok(Property::Field(FieldMapping::from_json(path, body)?));
    }
    if type_name.is_none()
        && !body.contains_key("properties")
        && !body.contains_key("enabled")
        && !body.contains_key("dynamic")
    {
        return Err(MapperError::InvalidMapping(format!(
            "No type specified for field [{path}]"
        )));
    }
    let mut object = ObjectMapping::new();
    for (key, value) in body {
        match key.as_str() {
            "type" => {}
            "dynamic" => object.dynamic = Some(Dynamic::parse(value)?),
            "enabled" => {
                object.enabled = crate::field::parse_bool(value).ok_or_else(|| {
                    MapperError::InvalidMapping(format!(
                        "Failed to parse value [{value}] as only [true] or [false] are allowed."
                    ))
                })?
            }
            "properties" => object.parse_properties(path, value)?,
            other => {
                return Err(MapperError::InvalidMapping(format!(
                    "unknown parameter [{other}] on mapper [{path}] of type [object]"
                )))
            }
        }
    }
    Ok(Property::Object(object))
}

fn property_to_json(property: &Property) -> Value {
    match property {
        Property::Field(f) => f.to_json(),
        Property::Object(o) => {
            let mut body = o.to_json();
            // OpenSearch names the type of an object without properties (`{"a": {}}` in a
            // document maps `a` so), which also keeps the mapping readable back.
            if o.properties.is_empty() {
                let mut typed = Map::new();
                typed.insert("type".into(), json!("object"));
                typed.extend(body);
                body = typed;
            }
            Value::Object(body)
        }
    }
}

pub(crate) fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The mapping of an index (`_doc` type): root object plus root-only parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub root: ObjectMapping,
    pub source_enabled: bool,
    pub date_detection: bool,
    pub numeric_detection: bool,
    pub meta: Option<Value>,
}

impl Default for Mapping {
    fn default() -> Self {
        Mapping {
            root: ObjectMapping::new(),
            source_enabled: true,
            date_detection: true,
            numeric_detection: false,
            meta: None,
        }
    }
}

impl Mapping {
    /// Parses the `mappings` body of create-index or put-mapping.
    /// Accepts the legacy `{"_doc": {...}}` wrapper as OpenSearch does.
    pub fn from_json(body: &Value) -> Result<Mapping, MapperError> {
        let mut mapping = Mapping::default();
        mapping.apply_json(body)?;
        Ok(mapping)
    }

    fn apply_json(&mut self, body: &Value) -> Result<(), MapperError> {
        let body = match body {
            Value::Object(map) => map,
            Value::Null => return Ok(()),
            other => {
                return Err(MapperError::InvalidMapping(format!(
                    "Failed to parse mapping [_doc]: Expected map for mapping but got a {}",
                    json_kind(other)
                )))
            }
        };
        if body.len() == 1 {
            if let Some(inner @ Value::Object(_)) = body.get("_doc") {
                return self.apply_json(inner);
            }
        }
        for (key, value) in body {
            match key.as_str() {
                "properties" => self.root.parse_properties("", value)?,
                "dynamic" => self.root.dynamic = Some(Dynamic::parse(value)?),
                "date_detection" => {
                    self.date_detection = crate::field::parse_bool(value).unwrap_or(true)
                }
                "numeric_detection" => {
                    self.numeric_detection = crate::field::parse_bool(value).unwrap_or(false)
                }
                "_source" => {
                    if let Some(enabled) = value.get("enabled") {
                        self.source_enabled = crate::field::parse_bool(enabled).unwrap_or(true);
                    }
                }
                "_meta" => self.meta = Some(value.clone()),
                "_routing" | "dynamic_templates" | "_field_names" | "dynamic_date_formats" => {}
                other => {
                    return Err(MapperError::InvalidMapping(format!(
                        "Root mapping definition has unsupported parameters:  [{other} : {value}]"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Renders the mapping as `GET /{index}/_mapping` shows it (without the index wrapper).
    pub fn to_json(&self) -> Value {
        let mut body = self.root.to_json();
        if let Some(meta) = &self.meta {
            body.insert("_meta".into(), meta.clone());
        }
        if !self.source_enabled {
            body.insert("_source".into(), json!({"enabled": false}));
        }
        if !self.date_detection {
            body.insert("date_detection".into(), json!(false));
        }
        if self.numeric_detection {
            body.insert("numeric_detection".into(), json!(true));
        }
        Value::Object(body)
    }

    /// Merges a put-mapping body; new fields are added, type changes refused.
    pub fn merge_json(&mut self, update: &Value) -> Result<(), MapperError> {
        let parsed = Mapping::from_json(update)?;
        self.merge(&parsed)
    }

    /// Merges another mapping (a put-mapping body or a dynamic update).
    pub fn merge(&mut self, update: &Mapping) -> Result<(), MapperError> {
        let mut merged = self.clone();
        merged.root.merge("", &update.root)?;
        if update.meta.is_some() {
            merged.meta = update.meta.clone();
        }
        *self = merged;
        Ok(())
    }

    /// The effective `dynamic` setting of the root.
    pub fn root_dynamic(&self) -> Dynamic {
        self.root.dynamic.unwrap_or(Dynamic::True)
    }

    /// Finds a leaf field by full dotted path, multi-fields included (`title.keyword`).
    pub fn field(&self, path: &str) -> Option<&FieldMapping> {
        resolve_in(&self.root, path)
    }

    /// Whether `path` names an object.
    pub fn is_object(&self, path: &str) -> bool {
        let mut object = &self.root;
        for part in path.split('.') {
            match object.properties.get(part) {
                Some(Property::Object(o)) => object = o,
                _ => return false,
            }
        }
        true
    }

    /// Every leaf field and multi-field with its full path, in path order.
    pub fn leaf_fields(&self) -> Vec<(String, &FieldMapping)> {
        let mut out = Vec::new();
        collect_leaves(&self.root, "", &mut out);
        out
    }
}

fn resolve_in<'a>(object: &'a ObjectMapping, path: &str) -> Option<&'a FieldMapping> {
    // Try every split point, since an object name can itself be a prefix of a field path.
    if let Some(Property::Field(f)) = object.properties.get(path) {
        return Some(f);
    }
    let mut search_from = 0;
    while let Some(pos) = path[search_from..].find('.') {
        let split = search_from + pos;
        let (head, rest) = (&path[..split], &path[split + 1..]);
        match object.properties.get(head) {
            Some(Property::Object(child)) => {
                if let Some(found) = resolve_in(child, rest) {
                    return Some(found);
                }
            }
            Some(Property::Field(field)) => {
                if let Some(found) = resolve_multi_field(field, rest) {
                    return Some(found);
                }
            }
            None => {}
        }
        search_from = split + 1;
    }
    None
}

fn resolve_multi_field<'a>(field: &'a FieldMapping, rest: &str) -> Option<&'a FieldMapping> {
    if let Some(sub) = field.fields.get(rest) {
        return Some(sub);
    }
    let (head, tail) = rest.split_once('.')?;
    resolve_multi_field(field.fields.get(head)?, tail)
}

fn collect_leaves<'a>(
    object: &'a ObjectMapping,
    prefix: &str,
    out: &mut Vec<(String, &'a FieldMapping)>,
) {
    for (name, prop) in &object.properties {
        let path = join(prefix, name);
        match prop {
            Property::Field(f) => collect_field(f, path, out),
            Property::Object(o) => collect_leaves(o, &path, out),
        }
    }
}

fn collect_field<'a>(
    field: &'a FieldMapping,
    path: String,
    out: &mut Vec<(String, &'a FieldMapping)>,
) {
    for (name, sub) in &field.fields {
        collect_field(sub, format!("{path}.{name}"), out);
    }
    out.push((path, field));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FieldType;

    #[test]
    fn dotted_property_names_become_objects() {
        let m = Mapping::from_json(&json!({"properties": {"a.b": {"type": "keyword"}}})).unwrap();
        assert!(m.is_object("a"));
        assert_eq!(m.field("a.b").unwrap().field_type, FieldType::Keyword);
        assert_eq!(
            m.to_json(),
            json!({"properties": {"a": {"properties": {"b": {"type": "keyword"}}}}})
        );
    }

    #[test]
    fn multi_fields_resolve_by_path() {
        let m = Mapping::from_json(&json!({"properties": {"title": {"type": "text", "fields": {"raw": {"type": "keyword"}}}}})).unwrap();
        assert_eq!(m.field("title.raw").unwrap().field_type, FieldType::Keyword);
        assert_eq!(m.leaf_fields().len(), 2);
    }

    #[test]
    fn changing_a_field_type_is_refused_with_opensearch_text() {
        let mut m = Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap();
        let err = m
            .merge_json(&json!({"properties": {"n": {"type": "keyword"}}}))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "mapper [n] cannot be changed from type [long] to [keyword]"
        );
        assert_eq!(err.error_type(), "illegal_argument_exception");
    }

    #[test]
    fn adding_fields_merges() {
        let mut m = Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap();
        m.merge_json(&json!({"properties": {"o": {"properties": {"x": {"type": "date"}}}}}))
            .unwrap();
        assert_eq!(m.field("o.x").unwrap().field_type, FieldType::Date);
        assert_eq!(m.field("n").unwrap().field_type, FieldType::Long);
    }

    #[test]
    fn nested_is_refused_clearly() {
        let err =
            Mapping::from_json(&json!({"properties": {"n": {"type": "nested"}}})).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
    }

    #[test]
    fn unknown_type_is_refused() {
        let err = Mapping::from_json(&json!({"properties": {"n": {"type": "bogus"}}})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "No handler for type [bogus] declared on field [n]"
        );
    }

    #[test]
    fn legacy_doc_wrapper_is_accepted() {
        let m =
            Mapping::from_json(&json!({"_doc": {"properties": {"n": {"type": "long"}}}})).unwrap();
        assert!(m.field("n").is_some());
    }
}
