//! Turns a `_source` document into tantivy values following the mapping, and infers
//! the mapping of fields seen for the first time (dynamic mapping).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::{Map, Value};
use tantivy::schema::OwnedValue;
use tantivy::{DateTime, TantivyDocument};

use crate::date::DateFormat;
use crate::mapping::join;
use crate::schema::ShardSchema;
use crate::{
    Analyzer, Dynamic, FieldMapping, FieldType, IndexedIn, MapperError, Mapping, ObjectMapping,
    Property,
};

/// The result of parsing one document.
#[derive(Debug)]
pub struct ParsedDocument {
    /// User fields and `_field_names`; the engine adds `_id`, `_seq_no` and the others.
    pub doc: TantivyDocument,
    /// Fields seen for the first time, to merge into the index mapping before the write
    /// is acknowledged. `None` when the document only uses mapped fields.
    pub dynamic_update: Option<Mapping>,
}

/// Parses documents against one mapping.
pub struct DocumentParser<'a> {
    mapping: &'a Mapping,
    schema: &'a ShardSchema,
}

/// Values collected per tantivy JSON field, keyed by dotted path.
#[derive(Default)]
struct Collected {
    keyword: BTreeMap<String, Vec<OwnedValue>>,
    numeric: BTreeMap<String, Vec<OwnedValue>>,
    text: BTreeMap<Analyzer, BTreeMap<String, Vec<OwnedValue>>>,
    field_names: BTreeSet<String>,
    new_fields: ObjectMapping,
    has_new_fields: bool,
}

impl<'a> DocumentParser<'a> {
    pub fn new(mapping: &'a Mapping, schema: &'a ShardSchema) -> DocumentParser<'a> {
        DocumentParser { mapping, schema }
    }

    /// Parses raw `_source` bytes. `id` only appears in error messages.
    pub fn parse(&self, id: &str, source: &[u8]) -> Result<ParsedDocument, MapperError> {
        let value: Value = serde_json::from_slice(source).map_err(|e| {
            MapperError::NotJson(format!("{e}: [line: {}, column: {}]", e.line(), e.column()))
        })?;
        self.parse_value(id, &value)
    }

    /// Parses an already decoded `_source`.
    pub fn parse_value(&self, id: &str, source: &Value) -> Result<ParsedDocument, MapperError> {
        let Value::Object(object) = source else {
            return Err(MapperError::Parsing(
                "failed to parse, document is empty or not a JSON object".to_string(),
            ));
        };
        let mut collected = Collected::default();
        let root_dynamic = self.mapping.root_dynamic();
        self.walk_object(id, "", object, root_dynamic, &mut collected)?;
        Ok(self.build(collected))
    }

    fn walk_object(
        &self,
        id: &str,
        prefix: &str,
        object: &Map<String, Value>,
        dynamic: Dynamic,
        out: &mut Collected,
    ) -> Result<(), MapperError> {
        for (key, value) in object {
            if !key.is_empty() && key.chars().all(|c| c == '.') {
                return Err(MapperError::Parsing(format!(
                    "field name cannot contain only the character [.]"
                )));
            }
            if key.is_empty() || key.split('.').any(str::is_empty) {
                return Err(MapperError::Parsing(format!(
                    "object field starting or ending with a [.] makes object resolution ambiguous: [{key}]"
                )));
            }
            // `{"a.b": 1}` is the same as `{"a": {"b": 1}}`; walk the intermediate objects
            // so their `dynamic` settings apply.
            let mut path = prefix.to_string();
            let mut effective = dynamic;
            let parts: Vec<&str> = key.split('.').collect();
            for part in &parts[..parts.len() - 1] {
                path = join(&path, part);
                effective = self.object_dynamic(&path, effective);
            }
            let path = join(&path, parts[parts.len() - 1]);
            self.walk_value(id, &path, value, effective, out)?;
        }
        Ok(())
    }

    fn walk_value(
        &self,
        id: &str,
        path: &str,
        value: &Value,
        dynamic: Dynamic,
        out: &mut Collected,
    ) -> Result<(), MapperError> {
        match value {
            Value::Null => self.index_null(path, out),
            Value::Array(items) => {
                for item in items {
                    self.walk_value(id, path, item, dynamic, out)?;
                }
                Ok(())
            }
            Value::Object(object) => {
                if let Some(field) = self.lookup(path, out) {
                    return Err(MapperError::Parsing(format!(
                        "failed to parse field [{path}] of type [{}] in document with id '{id}'. Preview of field's value: '{}'",
                        field.field_type.name(),
                        preview(value)
                    )));
                }
                if self.object_disabled(path) {
                    return Ok(());
                }
                if !self.mapping.is_object(path) && !is_object_in(&out.new_fields, path) {
                    match dynamic {
                        Dynamic::Strict => return Err(strict_error(path)),
                        Dynamic::False => return Ok(()),
                        Dynamic::True => {
                            insert_object(&mut out.new_fields, path);
                            out.has_new_fields = true;
                        }
                    }
                }
                let child_dynamic = self.object_dynamic(path, dynamic);
                self.walk_object(id, path, object, child_dynamic, out)
            }
            scalar => {
                let field = match self.lookup(path, out) {
                    Some(field) => field,
                    None => match dynamic {
                        Dynamic::Strict => return Err(strict_error(path)),
                        Dynamic::False => return Ok(()),
                        Dynamic::True => {
                            let inferred = self.infer(scalar);
                            insert_field(&mut out.new_fields, path, inferred.clone());
                            out.has_new_fields = true;
                            inferred
                        }
                    },
                };
                self.index_leaf(id, path, &field, scalar, out)
            }
        }
    }

    fn index_null(&self, path: &str, out: &mut Collected) -> Result<(), MapperError> {
        let Some(field) = self.mapping.field(path) else {
            return Ok(());
        };
        let Some(null_value) = field.null_value.clone() else {
            return Ok(());
        };
        self.index_leaf("", path, &field.clone(), &null_value, out)
    }

    /// The mapping of a leaf, from the index mapping or from this document's new fields.
    fn lookup(&self, path: &str, out: &Collected) -> Option<FieldMapping> {
        if let Some(field) = self.mapping.field(path) {
            return Some(field.clone());
        }
        find_field(&out.new_fields, path).cloned()
    }

    fn object_dynamic(&self, path: &str, inherited: Dynamic) -> Dynamic {
        object_at(&self.mapping.root, path)
            .and_then(|o| o.dynamic)
            .unwrap_or(inherited)
    }

    fn object_disabled(&self, path: &str) -> bool {
        object_at(&self.mapping.root, path).is_some_and(|o| !o.enabled)
    }

    /// OpenSearch's default dynamic mapping of a JSON scalar.
    fn infer(&self, value: &Value) -> FieldMapping {
        match value {
            Value::Bool(_) => FieldMapping::new(FieldType::Boolean),
            Value::Number(n) if n.is_f64() => FieldMapping::new(FieldType::Float),
            Value::Number(_) => FieldMapping::new(FieldType::Long),
            Value::String(s) => {
                if self.mapping.date_detection {
                    if let Some(format) = detected_date_format(s) {
                        let mut date = FieldMapping::new(FieldType::Date);
                        date.format = format;
                        return date;
                    }
                }
                if self.mapping.numeric_detection {
                    if s.parse::<i64>().is_ok() {
                        return FieldMapping::new(FieldType::Long);
                    }
                    if s.parse::<f64>().is_ok() {
                        return FieldMapping::new(FieldType::Float);
                    }
                }
                FieldMapping::dynamic_string()
            }
            _ => FieldMapping::dynamic_string(),
        }
    }

    fn index_leaf(
        &self,
        id: &str,
        path: &str,
        field: &FieldMapping,
        value: &Value,
        out: &mut Collected,
    ) -> Result<(), MapperError> {
        let converted = match convert(field, value) {
            Ok(converted) => converted,
            Err(_) if field.ignore_malformed == Some(true) => return Ok(()),
            Err(cause) => {
                return Err(MapperError::FieldValue {
                    reason: format!(
                        "failed to parse field [{path}] of type [{}] in document with id '{id}'. Preview of field's value: '{}'",
                        field.field_type.name(),
                        preview(value)
                    ),
                    cause: cause.unwrap_or_else(|| format!("failed to parse [{}] as [{}]", number_text(value), field.field_type.name())),
                })
            }
        };
        if let Some(converted) = converted {
            let target = match self.schema.indexed_in(field) {
                IndexedIn::Text(_, analyzer) => Some(out.text.entry(analyzer).or_default()),
                IndexedIn::Keyword(_) => Some(&mut out.keyword),
                IndexedIn::Numeric(_) => Some(&mut out.numeric),
                IndexedIn::NotIndexed => None,
            };
            if let Some(target) = target {
                target.entry(path.to_string()).or_default().push(converted);
                add_field_names(&mut out.field_names, path);
            }
        }
        for (name, sub) in &field.fields {
            self.index_leaf(id, &format!("{path}.{name}"), sub, value, out)?;
        }
        Ok(())
    }

    fn build(&self, collected: Collected) -> ParsedDocument {
        let mut doc = TantivyDocument::default();
        add_json(&mut doc, self.schema.keyword, collected.keyword);
        add_json(&mut doc, self.schema.numeric, collected.numeric);
        for (analyzer, values) in collected.text {
            add_json(&mut doc, self.schema.text_field(analyzer), values);
        }
        for name in &collected.field_names {
            doc.add_text(self.schema.field_names, name);
        }
        let dynamic_update = collected.has_new_fields.then(|| Mapping {
            root: collected.new_fields,
            ..Mapping::default()
        });
        ParsedDocument {
            doc,
            dynamic_update,
        }
    }
}

fn add_json(
    doc: &mut TantivyDocument,
    field: tantivy::schema::Field,
    values: BTreeMap<String, Vec<OwnedValue>>,
) {
    if values.is_empty() {
        return;
    }
    let object: BTreeMap<String, OwnedValue> = values
        .into_iter()
        .map(|(path, mut vals)| {
            let value = if vals.len() == 1 {
                vals.pop().expect("one value")
            } else {
                OwnedValue::Array(vals)
            };
            (path, value)
        })
        .collect();
    doc.add_object(field, object);
}

fn add_field_names(names: &mut BTreeSet<String>, path: &str) {
    names.insert(path.to_string());
    let mut end = path.len();
    while let Some(pos) = path[..end].rfind('.') {
        names.insert(path[..pos].to_string());
        end = pos;
    }
}

/// Converts a JSON scalar to the value indexed for the field. `Ok(None)` = nothing to
/// index (e.g. above `ignore_above`); `Err(cause)` = the value does not fit the type.
fn convert(field: &FieldMapping, value: &Value) -> Result<Option<OwnedValue>, Option<String>> {
    let coerce = field.coerce.unwrap_or(true);
    match field.field_type {
        FieldType::Text => Ok(Some(OwnedValue::Str(scalar_to_string(value).ok_or(None)?))),
        FieldType::Keyword => {
            let s = scalar_to_string(value).ok_or(None)?;
            if field
                .ignore_above
                .is_some_and(|limit| s.chars().count() > limit as usize)
            {
                return Ok(None);
            }
            Ok(Some(OwnedValue::Str(s)))
        }
        FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => {
            let (min, max) = field.field_type.integer_bounds().expect("integer type");
            let n = to_integer(value, coerce)?;
            if n < min as i128 || n > max as i128 {
                return Err(Some(format!(
                    "Value [{}] is out of range for {}",
                    number_text(value),
                    match field.field_type {
                        FieldType::Long => "a long",
                        FieldType::Integer => "an integer",
                        FieldType::Short => "a short",
                        _ => "a byte",
                    }
                )));
            }
            Ok(Some(OwnedValue::I64(n as i64)))
        }
        FieldType::Double | FieldType::Float | FieldType::HalfFloat | FieldType::ScaledFloat => {
            let f = to_float(value, coerce).ok_or(None)?;
            if !f.is_finite() {
                return Err(Some(format!(
                    "[{}] supports only finite values",
                    field.field_type.name()
                )));
            }
            let stored = match field.field_type {
                FieldType::Float | FieldType::HalfFloat => f as f32 as f64,
                FieldType::ScaledFloat => {
                    let factor = field.scaling_factor.unwrap_or(1.0);
                    (f * factor).round() / factor
                }
                _ => f,
            };
            Ok(Some(OwnedValue::F64(stored)))
        }
        FieldType::Boolean => match value {
            Value::Bool(b) => Ok(Some(OwnedValue::Bool(*b))),
            Value::String(s) if s == "true" => Ok(Some(OwnedValue::Bool(true))),
            Value::String(s) if s == "false" || s.is_empty() => Ok(Some(OwnedValue::Bool(false))),
            _ => Err(Some(format!(
                "Failed to parse value [{}] as only [true] or [false] are allowed.",
                number_text(value)
            ))),
        },
        FieldType::Date => {
            let format = DateFormat::parse(field.date_format()).map_err(Some)?;
            let millis = match value {
                Value::String(s) => format.parse_millis(s),
                Value::Number(n) => format
                    .numeric_unit_millis()
                    .and_then(|unit| n.as_f64().map(|f| (f * unit as f64) as i64)),
                _ => None,
            }
            .ok_or_else(|| {
                Some(format!(
                    "failed to parse date field [{}] with format [{}]",
                    number_text(value),
                    field.date_format()
                ))
            })?;
            // tantivy keeps dates as i64 nanoseconds (years 1677 to 2262): refuse what it cannot
            // hold rather than overflow.
            if millis.checked_mul(1_000_000).is_none() {
                return Err(Some(format!(
                    "failed to parse date field [{}] with format [{}]: outside the range Shoal can index (1677-09-21 to 2262-04-11)",
                    number_text(value),
                    field.date_format()
                )));
            }
            Ok(Some(OwnedValue::Date(DateTime::from_timestamp_millis(
                millis,
            ))))
        }
        FieldType::Binary => match value {
            Value::String(_) => Ok(None),
            _ => Err(Some("binary values must be base64 strings".to_string())),
        },
        FieldType::Ip => {
            let s = value.as_str().ok_or(None)?;
            let ip: IpAddr = s
                .parse()
                .map_err(|_| Some(format!("'{s}' is not an IP string literal.")))?;
            Ok(Some(OwnedValue::Str(canonical_ip(ip))))
        }
    }
}

/// The canonical text of an IP address as indexed: IPv4 dotted, IPv6 compressed.
pub fn canonical_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn to_integer(value: &Value, coerce: bool) -> Result<i128, Option<String>> {
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i as i128);
            }
            if let Some(u) = n.as_u64() {
                return Ok(u as i128);
            }
            let f = n.as_f64().ok_or(None)?;
            if !coerce && f.fract() != 0.0 {
                return Err(None);
            }
            Ok(f.trunc() as i128)
        }
        Value::String(s) if coerce => {
            if let Ok(i) = s.trim().parse::<i128>() {
                return Ok(i);
            }
            let f = s
                .trim()
                .parse::<f64>()
                .map_err(|_| Some(format!("For input string: \"{s}\"")))?;
            if !f.is_finite() {
                return Err(None);
            }
            Ok(f.trunc() as i128)
        }
        _ => Err(None),
    }
}

fn to_float(value: &Value, coerce: bool) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if coerce => s.trim().parse::<f64>().ok(),
        _ => None,
    }
}

fn scalar_to_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn number_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn preview(value: &Value) -> String {
    let text = number_text(value);
    if text.chars().count() > 20 {
        text.chars().take(20).collect::<String>() + "..."
    } else {
        text
    }
}

/// OpenSearch's `dynamic_date_formats`: `strict_date_optional_time` (mapped with the default
/// format, `Some(None)`) and `yyyy/MM/dd HH:mm:ss||yyyy/MM/dd` (mapped with that format).
fn detected_date_format(s: &str) -> Option<Option<String>> {
    // Only strings that start like a date qualify, so words and plain numbers stay text.
    let starts_like_date = s.len() >= 8
        && s.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && matches!(s.as_bytes()[4], b'-' | b'/');
    if !starts_like_date {
        return None;
    }
    if DateFormat::parse("strict_date_optional_time")
        .ok()?
        .parse_millis(s)
        .is_some()
    {
        return Some(None);
    }
    let slashed = "yyyy/MM/dd HH:mm:ss||yyyy/MM/dd||epoch_millis";
    DateFormat::parse(slashed).ok()?.parse_millis(s)?;
    Some(Some(slashed.to_string()))
}

fn strict_error(path: &str) -> MapperError {
    let (parent, field) = match path.rsplit_once('.') {
        Some((parent, field)) => (parent.to_string(), field.to_string()),
        None => ("_doc".to_string(), path.to_string()),
    };
    MapperError::StrictDynamic { field, parent }
}

fn object_at<'m>(root: &'m ObjectMapping, path: &str) -> Option<&'m ObjectMapping> {
    let mut object = root;
    for part in path.split('.') {
        match object.properties.get(part) {
            Some(Property::Object(o)) => object = o,
            _ => return None,
        }
    }
    Some(object)
}

fn is_object_in(root: &ObjectMapping, path: &str) -> bool {
    object_at(root, path).is_some()
}

fn find_field<'m>(root: &'m ObjectMapping, path: &str) -> Option<&'m FieldMapping> {
    let (parent, name) = match path.rsplit_once('.') {
        Some((parent, name)) => (object_at(root, parent)?, name),
        None => (root, path),
    };
    match parent.properties.get(name) {
        Some(Property::Field(f)) => Some(f),
        _ => None,
    }
}

fn insert_object(root: &mut ObjectMapping, path: &str) {
    let mut object = root;
    for part in path.split('.') {
        let entry = object
            .properties
            .entry(part.to_string())
            .or_insert_with(|| Property::Object(ObjectMapping::new()));
        object = match entry {
            Property::Object(o) => o,
            Property::Field(_) => return,
        };
    }
}

fn insert_field(root: &mut ObjectMapping, path: &str, field: FieldMapping) {
    let (parent, name) = match path.rsplit_once('.') {
        Some((parent, name)) => {
            insert_object(root, parent);
            (object_at_mut(root, parent), name)
        }
        None => (Some(root), path),
    };
    if let Some(parent) = parent {
        parent
            .properties
            .insert(name.to_string(), Property::Field(field));
    }
}

fn object_at_mut<'m>(root: &'m mut ObjectMapping, path: &str) -> Option<&'m mut ObjectMapping> {
    let mut object = root;
    for part in path.split('.') {
        match object.properties.get_mut(part) {
            Some(Property::Object(o)) => object = o,
            _ => return None,
        }
    }
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> ShardSchema {
        ShardSchema::build(|b| {
            b.add_bytes_field("_source", tantivy::schema::BytesOptions::default())
        })
    }

    fn parse(mapping: &Mapping, source: Value) -> Result<ParsedDocument, MapperError> {
        let schema = schema();
        DocumentParser::new(mapping, &schema).parse_value("1", &source)
    }

    #[test]
    fn dynamic_strings_become_text_with_keyword_subfield() {
        let parsed = parse(&Mapping::default(), json!({"title": "Hello"})).unwrap();
        let update = parsed.dynamic_update.unwrap();
        assert_eq!(
            update.to_json(),
            json!({"properties": {"title": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}}})
        );
    }

    #[test]
    fn dynamic_types_follow_opensearch_rules() {
        let parsed = parse(
            &Mapping::default(),
            json!({"n": 1, "f": 1.5, "b": true, "d": "2020-01-01", "o": {"x": "2020/01/02"}, "nothing": null}),
        )
        .unwrap();
        let m = parsed.dynamic_update.unwrap();
        assert_eq!(m.field("n").unwrap().field_type, FieldType::Long);
        assert_eq!(m.field("f").unwrap().field_type, FieldType::Float);
        assert_eq!(m.field("b").unwrap().field_type, FieldType::Boolean);
        assert_eq!(m.field("d").unwrap().field_type, FieldType::Date);
        assert_eq!(m.field("o.x").unwrap().field_type, FieldType::Date);
        assert!(m.field("nothing").is_none());
    }

    #[test]
    fn mapped_documents_produce_no_update() {
        let mapping = Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap();
        assert!(parse(&mapping, json!({"n": "42"}))
            .unwrap()
            .dynamic_update
            .is_none());
    }

    #[test]
    fn wrong_type_names_field_and_document() {
        let mapping = Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap();
        let err = parse(&mapping, json!({"n": "abc"})).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "failed to parse field [n] of type [long] in document with id '1'. Preview of field's value: 'abc'"
            ),
            "{err}"
        );
    }

    #[test]
    fn integer_range_is_enforced() {
        let mapping = Mapping::from_json(&json!({"properties": {"n": {"type": "byte"}}})).unwrap();
        assert!(parse(&mapping, json!({"n": 300})).is_err());
        assert!(parse(&mapping, json!({"n": 100})).is_ok());
    }

    #[test]
    fn strict_refuses_new_fields() {
        let mapping = Mapping::from_json(
            &json!({"dynamic": "strict", "properties": {"a": {"type": "long"}}}),
        )
        .unwrap();
        let err = parse(&mapping, json!({"b": 1})).unwrap_err();
        assert_eq!(
            err.to_string(),
            "mapping set to strict, dynamic introduction of [b] within [_doc] is not allowed"
        );
    }

    #[test]
    fn dynamic_false_ignores_new_fields() {
        let mapping = Mapping::from_json(&json!({"dynamic": false})).unwrap();
        let parsed = parse(&mapping, json!({"b": 1})).unwrap();
        assert!(parsed.dynamic_update.is_none());
    }

    #[test]
    fn dotted_keys_are_object_paths() {
        let parsed = parse(&Mapping::default(), json!({"a.b": 1})).unwrap();
        let m = parsed.dynamic_update.unwrap();
        assert!(m.is_object("a"));
        assert_eq!(m.field("a.b").unwrap().field_type, FieldType::Long);
    }

    #[test]
    fn object_where_a_leaf_is_mapped_is_refused() {
        let mapping = Mapping::from_json(&json!({"properties": {"n": {"type": "long"}}})).unwrap();
        assert!(parse(&mapping, json!({"n": {"x": 1}})).is_err());
    }

    #[test]
    fn field_names_include_parent_objects() {
        let mut names = BTreeSet::new();
        add_field_names(&mut names, "a.b.c");
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["a", "a.b", "a.b.c"]);
    }

    #[test]
    fn empty_objects_map_as_objects_that_survive_a_round_trip() {
        let parsed = parse(&Mapping::default(), json!({"a": {}, "b": {"c": {}}})).unwrap();
        let update = parsed.dynamic_update.unwrap();
        let stored = update.to_json();
        assert_eq!(
            stored,
            json!({"properties": {"a": {"type": "object"}, "b": {"properties": {"c": {"type": "object"}}}}})
        );
        let mut mapping = Mapping::default();
        mapping
            .merge(&Mapping::from_json(&stored).unwrap())
            .unwrap();
        let again = parse(&mapping, json!({"a": {}, "b": {"c": {}}})).unwrap();
        assert!(again.dynamic_update.is_none());
    }

    #[test]
    fn empty_arrays_and_nulls_add_no_field() {
        let parsed = parse(
            &Mapping::default(),
            json!({"a": [], "n": null, "x": [null]}),
        )
        .unwrap();
        assert!(parsed.dynamic_update.is_none());
        let mapping = Mapping::from_json(
            &json!({"properties": {"n": {"type": "keyword", "null_value": "NULL"}}}),
        )
        .unwrap();
        let parsed = parse(&mapping, json!({"n": null})).unwrap();
        assert!(parsed.dynamic_update.is_none());
        let doc = tantivy::schema::document::Document::to_json(&parsed.doc, &schema().schema);
        assert!(doc.contains("NULL"), "null_value indexed: {doc}");
    }

    #[test]
    fn dates_tantivy_cannot_hold_are_refused_not_overflowed() {
        let mapping = Mapping::from_json(&json!({"properties": {"t": {"type": "date"}}})).unwrap();
        let err = parse(&mapping, json!({"t": "1600-01-01"})).unwrap_err();
        assert!(format!("{err:?}").contains("outside the range"), "{err:?}");
        assert!(parse(&mapping, json!({"t": "2200-01-01"})).is_ok());
    }
}
