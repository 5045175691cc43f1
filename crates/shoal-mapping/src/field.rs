//! One field's mapping: its type and the parameters OpenSearch accepts for it.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::MapperError;

/// The field types Shoal supports, named as in OpenSearch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    Text,
    Keyword,
    Long,
    Integer,
    Short,
    Byte,
    Double,
    Float,
    HalfFloat,
    ScaledFloat,
    Boolean,
    Date,
    Ip,
    /// Base64 bytes kept in `_source` only (not searchable), as OpenSearch's default.
    Binary,
}

/// How a numeric value is stored in the `_num` JSON field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumericKind {
    I64,
    F64,
}

impl FieldType {
    pub fn parse(name: &str) -> Option<FieldType> {
        Some(match name {
            "text" => FieldType::Text,
            "keyword" => FieldType::Keyword,
            "long" => FieldType::Long,
            "integer" => FieldType::Integer,
            "short" => FieldType::Short,
            "byte" => FieldType::Byte,
            "double" => FieldType::Double,
            "float" => FieldType::Float,
            "half_float" => FieldType::HalfFloat,
            "scaled_float" => FieldType::ScaledFloat,
            "boolean" => FieldType::Boolean,
            "date" => FieldType::Date,
            "ip" => FieldType::Ip,
            "binary" => FieldType::Binary,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            FieldType::Text => "text",
            FieldType::Keyword => "keyword",
            FieldType::Long => "long",
            FieldType::Integer => "integer",
            FieldType::Short => "short",
            FieldType::Byte => "byte",
            FieldType::Double => "double",
            FieldType::Float => "float",
            FieldType::HalfFloat => "half_float",
            FieldType::ScaledFloat => "scaled_float",
            FieldType::Boolean => "boolean",
            FieldType::Date => "date",
            FieldType::Ip => "ip",
            FieldType::Binary => "binary",
        }
    }

    /// The numeric storage of this type, if it is numeric.
    pub fn numeric_kind(self) -> Option<NumericKind> {
        match self {
            FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => {
                Some(NumericKind::I64)
            }
            FieldType::Double
            | FieldType::Float
            | FieldType::HalfFloat
            | FieldType::ScaledFloat => Some(NumericKind::F64),
            _ => None,
        }
    }

    /// Inclusive bounds of an integer type, as OpenSearch enforces them.
    pub fn integer_bounds(self) -> Option<(i64, i64)> {
        match self {
            FieldType::Long => Some((i64::MIN, i64::MAX)),
            FieldType::Integer => Some((i32::MIN as i64, i32::MAX as i64)),
            FieldType::Short => Some((i16::MIN as i64, i16::MAX as i64)),
            FieldType::Byte => Some((i8::MIN as i64, i8::MAX as i64)),
            _ => None,
        }
    }
}

/// The built-in analyzers Shoal offers for `text` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Analyzer {
    Standard,
    Simple,
    Whitespace,
    Keyword,
    English,
}

impl Analyzer {
    pub const ALL: [Analyzer; 5] = [
        Analyzer::Standard,
        Analyzer::Simple,
        Analyzer::Whitespace,
        Analyzer::Keyword,
        Analyzer::English,
    ];

    pub fn parse(name: &str) -> Option<Analyzer> {
        Some(match name {
            "standard" | "default" => Analyzer::Standard,
            "simple" => Analyzer::Simple,
            "whitespace" => Analyzer::Whitespace,
            "keyword" => Analyzer::Keyword,
            "english" => Analyzer::English,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Analyzer::Standard => "standard",
            Analyzer::Simple => "simple",
            Analyzer::Whitespace => "whitespace",
            Analyzer::Keyword => "keyword",
            Analyzer::English => "english",
        }
    }
}

/// The `dynamic` mapping parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dynamic {
    True,
    False,
    Strict,
}

impl Dynamic {
    pub fn parse(value: &Value) -> Result<Dynamic, MapperError> {
        match value {
            Value::Bool(true) => Ok(Dynamic::True),
            Value::Bool(false) => Ok(Dynamic::False),
            Value::String(s) if s == "true" => Ok(Dynamic::True),
            Value::String(s) if s == "false" => Ok(Dynamic::False),
            Value::String(s) if s == "strict" => Ok(Dynamic::Strict),
            other => Err(MapperError::InvalidMapping(format!(
                "Could not convert [dynamic] to boolean or strict: {other}"
            ))),
        }
    }

    pub fn to_json(self) -> Value {
        match self {
            Dynamic::True => json!("true"),
            Dynamic::False => json!("false"),
            Dynamic::Strict => json!("strict"),
        }
    }
}

/// The mapping of one leaf field (and its multi-fields).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldMapping {
    pub field_type: FieldType,
    /// The declared type when it is a variant Shoal indexes like another type:
    /// `match_only_text` (as `text`) and `date_nanos` (as `date`, millisecond precision).
    pub declared_type: Option<&'static str>,
    pub analyzer: Option<Analyzer>,
    pub search_analyzer: Option<Analyzer>,
    pub ignore_above: Option<u32>,
    pub index: bool,
    pub doc_values: Option<bool>,
    pub store: Option<bool>,
    pub format: Option<String>,
    pub scaling_factor: Option<f64>,
    pub null_value: Option<Value>,
    pub coerce: Option<bool>,
    pub ignore_malformed: Option<bool>,
    pub boost: Option<f64>,
    /// Per-field `meta` (free-form strings, returned by `GET _mapping`).
    pub meta: Option<Value>,
    /// Multi-fields: the same value indexed another way (`title.keyword`).
    pub fields: BTreeMap<String, FieldMapping>,
}

impl FieldMapping {
    pub fn new(field_type: FieldType) -> FieldMapping {
        FieldMapping {
            field_type,
            declared_type: None,
            analyzer: None,
            search_analyzer: None,
            ignore_above: None,
            index: true,
            doc_values: None,
            store: None,
            format: None,
            scaling_factor: None,
            null_value: None,
            coerce: None,
            ignore_malformed: None,
            boost: None,
            meta: None,
            fields: BTreeMap::new(),
        }
    }

    /// What OpenSearch maps a dynamically seen string to: `text` with a `keyword`
    /// sub-field that ignores values above 256 characters.
    pub fn dynamic_string() -> FieldMapping {
        let mut keyword = FieldMapping::new(FieldType::Keyword);
        keyword.ignore_above = Some(256);
        let mut text = FieldMapping::new(FieldType::Text);
        text.fields.insert("keyword".to_string(), keyword);
        text
    }

    /// The analyzer used at index time.
    pub fn index_analyzer(&self) -> Analyzer {
        self.analyzer.unwrap_or(Analyzer::Standard)
    }

    /// The analyzer used for full-text queries on this field.
    pub fn query_analyzer(&self) -> Analyzer {
        self.search_analyzer
            .unwrap_or_else(|| self.index_analyzer())
    }

    /// The date format, or OpenSearch's default one.
    pub fn date_format(&self) -> &str {
        self.format
            .as_deref()
            .unwrap_or(crate::date::DEFAULT_DATE_FORMAT)
    }

    /// Parses a field definition (`{"type": "keyword", ...}`) at `path`.
    pub fn from_json(path: &str, body: &Map<String, Value>) -> Result<FieldMapping, MapperError> {
        let type_name = match body.get("type") {
            Some(Value::String(name)) => name.as_str(),
            _ => {
                return Err(MapperError::InvalidMapping(format!(
                    "No type specified for field [{path}]"
                )))
            }
        };
        let (field_type, declared_type) = match (FieldType::parse(type_name), type_name) {
            (Some(t), _) => (t, None),
            (None, "match_only_text") => (FieldType::Text, Some("match_only_text")),
            (None, "date_nanos") => (FieldType::Date, Some("date_nanos")),
            (None, _) => match type_name {
                "nested" => {
                return Err(MapperError::InvalidMapping(format!(
                    "field [{path}] of type [nested] is not supported by Shoal yet: map it as [object] instead"
                )))
            }
                _ => {
                    return Err(MapperError::InvalidMapping(format!(
                        "No handler for type [{type_name}] declared on field [{path}]"
                    )))
                }
            },
        };
        let mut field = FieldMapping::new(field_type);
        field.declared_type = declared_type;
        for (key, value) in body {
            field.apply_parameter(path, key, value)?;
        }
        if field_type == FieldType::ScaledFloat && field.scaling_factor.is_none() {
            return Err(MapperError::InvalidMapping(format!(
                "Field [scaling_factor] is required for field [{path}]"
            )));
        }
        if field_type == FieldType::Date {
            crate::date::DateFormat::parse(field.date_format()).map_err(|reason| {
                MapperError::InvalidMapping(format!(
                    "Invalid format: [{}]: {reason}",
                    field.date_format()
                ))
            })?;
        }
        Ok(field)
    }

    fn apply_parameter(&mut self, path: &str, key: &str, value: &Value) -> Result<(), MapperError> {
        let bad = |what: &str| {
            MapperError::InvalidMapping(format!(
                "Failed to parse mapping [_doc]: {what} for field [{path}] parameter [{key}]: {value}"
            ))
        };
        match key {
            "type" => {}
            "analyzer" | "search_analyzer" | "search_quote_analyzer" => {
                if self.field_type != FieldType::Text {
                    return Err(unknown_parameter(path, key, self.field_type));
                }
                let name = value.as_str().ok_or_else(|| bad("expected a string"))?;
                let analyzer = Analyzer::parse(name).ok_or_else(|| {
                    MapperError::InvalidMapping(format!(
                        "analyzer [{name}] has not been configured in mappings"
                    ))
                })?;
                if key == "analyzer" {
                    self.analyzer = Some(analyzer);
                } else if key == "search_analyzer" {
                    self.search_analyzer = Some(analyzer);
                }
            }
            "ignore_above" => {
                if self.field_type != FieldType::Keyword {
                    return Err(unknown_parameter(path, key, self.field_type));
                }
                let n = value
                    .as_u64()
                    .ok_or_else(|| bad("expected a non-negative integer"))?;
                self.ignore_above = Some(n.min(u32::MAX as u64) as u32);
            }
            "index" => self.index = parse_bool(value).ok_or_else(|| bad("expected a boolean"))?,
            "doc_values" => {
                self.doc_values = Some(parse_bool(value).ok_or_else(|| bad("expected a boolean"))?)
            }
            "store" => {
                self.store = Some(parse_bool(value).ok_or_else(|| bad("expected a boolean"))?)
            }
            "coerce" => {
                self.coerce = Some(parse_bool(value).ok_or_else(|| bad("expected a boolean"))?)
            }
            "ignore_malformed" => {
                self.ignore_malformed =
                    Some(parse_bool(value).ok_or_else(|| bad("expected a boolean"))?)
            }
            "format" => {
                if self.field_type != FieldType::Date {
                    return Err(unknown_parameter(path, key, self.field_type));
                }
                self.format = Some(
                    value
                        .as_str()
                        .ok_or_else(|| bad("expected a string"))?
                        .to_string(),
                );
            }
            "scaling_factor" => {
                let factor = value.as_f64().ok_or_else(|| bad("expected a number"))?;
                if !(factor.is_finite() && factor > 0.0) {
                    return Err(MapperError::InvalidMapping(format!(
                        "[scaling_factor] must be a positive number, got [{factor}]"
                    )));
                }
                self.scaling_factor = Some(factor);
            }
            "null_value" => self.null_value = Some(value.clone()),
            "meta" => self.meta = Some(value.clone()),
            "boost" => self.boost = Some(value.as_f64().ok_or_else(|| bad("expected a number"))?),
            "fields" => {
                let subfields = value.as_object().ok_or_else(|| bad("expected an object"))?;
                for (name, sub) in subfields {
                    let sub_path = format!("{path}.{name}");
                    let sub = sub.as_object().ok_or_else(|| {
                        MapperError::InvalidMapping(format!(
                            "Expected map for property [fields] on field [{name}] but got a {}",
                            json_kind(sub)
                        ))
                    })?;
                    self.fields
                        .insert(name.clone(), FieldMapping::from_json(&sub_path, sub)?);
                }
            }
            // Accepted and ignored: they only tune things Shoal does not expose yet.
            "norms"
            | "index_options"
            | "position_increment_gap"
            | "eager_global_ordinals"
            | "similarity"
            | "term_vector"
            | "copy_to"
            | "fielddata"
            | "normalizer"
            | "locale"
            | "split_queries_on_whitespace" => {}
            _ => return Err(unknown_parameter(path, key, self.field_type)),
        }
        Ok(())
    }

    /// Renders the field as OpenSearch does in `GET /_mapping` (defaults omitted).
    pub fn to_json(&self) -> Value {
        let mut body = Map::new();
        body.insert(
            "type".into(),
            json!(self.declared_type.unwrap_or(self.field_type.name())),
        );
        if let Some(a) = self.analyzer {
            body.insert("analyzer".into(), json!(a.name()));
        }
        if let Some(a) = self.search_analyzer {
            body.insert("search_analyzer".into(), json!(a.name()));
        }
        if let Some(b) = self.boost {
            body.insert("boost".into(), json!(b));
        }
        if let Some(c) = self.coerce {
            body.insert("coerce".into(), json!(c));
        }
        if let Some(d) = self.doc_values {
            body.insert("doc_values".into(), json!(d));
        }
        if !self.fields.is_empty() {
            let fields: Map<String, Value> = self
                .fields
                .iter()
                .map(|(k, f)| (k.clone(), f.to_json()))
                .collect();
            body.insert("fields".into(), Value::Object(fields));
        }
        if let Some(f) = &self.format {
            body.insert("format".into(), json!(f));
        }
        if let Some(n) = self.ignore_above {
            body.insert("ignore_above".into(), json!(n));
        }
        if let Some(m) = self.ignore_malformed {
            body.insert("ignore_malformed".into(), json!(m));
        }
        if !self.index {
            body.insert("index".into(), json!(false));
        }
        if let Some(meta) = &self.meta {
            body.insert("meta".into(), meta.clone());
        }
        if let Some(v) = &self.null_value {
            body.insert("null_value".into(), v.clone());
        }
        if let Some(f) = self.scaling_factor {
            body.insert("scaling_factor".into(), json!(f));
        }
        if let Some(s) = self.store {
            body.insert("store".into(), json!(s));
        }
        Value::Object(body)
    }

    /// Merges an updated definition of the same field, refusing what OpenSearch refuses.
    pub fn merge(&mut self, path: &str, update: &FieldMapping) -> Result<(), MapperError> {
        if update.field_type != self.field_type {
            return Err(MapperError::Conflict(format!(
                "mapper [{path}] cannot be changed from type [{}] to [{}]",
                self.field_type.name(),
                update.field_type.name()
            )));
        }
        if update.analyzer.is_some() && update.analyzer != self.analyzer
            || update.analyzer.is_none() && self.analyzer.is_some()
        {
            return Err(MapperError::Conflict(format!(
                "Mapper for [{path}] conflicts with existing mapper:\n\tCannot update parameter [analyzer] from [{}] to [{}]",
                self.analyzer.unwrap_or(Analyzer::Standard).name(),
                update.analyzer.unwrap_or(Analyzer::Standard).name()
            )));
        }
        if update.index != self.index {
            return Err(MapperError::Conflict(format!(
                "Mapper for [{path}] conflicts with existing mapper:\n\tCannot update parameter [index] from [{}] to [{}]",
                self.index, update.index
            )));
        }
        if update.format.is_some() && update.format != self.format {
            return Err(MapperError::Conflict(format!(
                "Mapper for [{path}] conflicts with existing mapper:\n\tCannot update parameter [format] from [{}] to [{}]",
                self.date_format(),
                update.date_format()
            )));
        }
        // Updatable parameters.
        if update.ignore_above.is_some() {
            self.ignore_above = update.ignore_above;
        }
        if update.search_analyzer.is_some() {
            self.search_analyzer = update.search_analyzer;
        }
        if update.meta.is_some() {
            self.meta = update.meta.clone();
        }
        for (name, sub) in &update.fields {
            let sub_path = format!("{path}.{name}");
            match self.fields.get_mut(name) {
                Some(existing) => existing.merge(&sub_path, sub)?,
                None => {
                    self.fields.insert(name.clone(), sub.clone());
                }
            }
        }
        Ok(())
    }
}

fn unknown_parameter(path: &str, key: &str, field_type: FieldType) -> MapperError {
    MapperError::InvalidMapping(format!(
        "unknown parameter [{key}] on mapper [{path}] of type [{}]",
        field_type.name()
    ))
}

pub(crate) fn parse_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) if s == "true" => Some(true),
        Value::String(s) if s == "false" => Some(false),
        _ => None,
    }
}

pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
