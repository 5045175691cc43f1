//! Where a queried field lives in the shard schema, and how query values become the
//! typed terms the document parser indexed.

use std::net::IpAddr;

use serde_json::Value;
use shoal_mapping::date::DateFormat;
use shoal_mapping::{Analyzer, FieldMapping, FieldType, IndexedIn};
use tantivy::columnar::NumericalValue;
use tantivy::query::{ConstScoreQuery, EmptyQuery, Query, RangeQuery, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DateTime, Term};

use super::date_math::parse_date_math_named;
use super::multi_term::{ip_to_u128, Scoring, TermMatcher, TermScanQuery};
use super::{bm25, illegal};
use crate::{QueryContext, QueryError};

/// A mapped, searchable field.
#[derive(Clone, Debug)]
pub(crate) struct FieldRef<'c> {
    pub path: String,
    pub mapping: &'c FieldMapping,
    pub indexed: IndexedIn,
}

/// What a field name in a query refers to.
pub(crate) enum Target<'c> {
    Field(FieldRef<'c>),
    /// The `_id` metadata field.
    Id,
    /// The `_index` metadata field.
    Index,
    /// Not in the mapping: the query matches nothing.
    Unmapped,
}

/// Resolves a field path (multi-fields included) against the mapping.
pub(crate) fn resolve<'c>(ctx: &QueryContext<'c>, path: &str) -> Result<Target<'c>, QueryError> {
    match path {
        "_id" => return Ok(Target::Id),
        "_index" => return Ok(Target::Index),
        _ => {}
    }
    let Some(mapping) = ctx.mapping.field(path) else {
        return Ok(Target::Unmapped);
    };
    let indexed = ctx.schema.indexed_in(mapping);
    if indexed == IndexedIn::NotIndexed {
        // A shard-level failure in OpenSearch (query_shard_exception in a search phase failure).
        return Err(crate::search::shard_error(
            "query_shard_exception",
            format!(
                "failed to create query: Cannot search on field [{path}] since it is not indexed."
            ),
        ));
    }
    Ok(Target::Field(FieldRef {
        path: path.to_string(),
        mapping,
        indexed,
    }))
}

impl FieldRef<'_> {
    pub fn field_type(&self) -> FieldType {
        self.mapping.field_type
    }

    pub fn type_name(&self) -> &'static str {
        self.mapping.field_type.name()
    }

    pub fn is_text(&self) -> bool {
        matches!(self.indexed, IndexedIn::Text(..))
    }

    /// Keyword-like: exact string terms (keyword, ip).
    pub fn is_keyword(&self) -> bool {
        matches!(self.indexed, IndexedIn::Keyword(_))
    }

    /// The tantivy JSON field holding this field's terms.
    pub fn json_field(&self) -> Field {
        match self.indexed {
            IndexedIn::Text(f, _) | IndexedIn::Keyword(f) | IndexedIn::Numeric(f) => f,
            IndexedIn::NotIndexed => unreachable!("not-indexed fields are refused by resolve()"),
        }
    }

    /// The term of this path with no value yet.
    pub fn path_term(&self) -> Term {
        Term::from_field_json_path(self.json_field(), &self.path, true)
    }

    pub fn str_term(&self, text: &str) -> Term {
        let mut term = self.path_term();
        term.append_type_and_str(text);
        term
    }

    /// The analyzer of full-text queries, unless the query overrides it.
    pub fn search_analyzer(&self) -> Analyzer {
        self.mapping.query_analyzer()
    }

    /// A multi-term scan of this field's string terms.
    pub fn scan(&self, matcher: TermMatcher, scoring: Scoring) -> Box<dyn Query> {
        Box::new(TermScanQuery::json(
            self.json_field(),
            &self.path,
            matcher,
            scoring,
        ))
    }

    pub fn date_format(&self) -> Result<DateFormat, QueryError> {
        DateFormat::parse(self.mapping.date_format()).map_err(illegal)
    }
}

/// Whether an analyzer lowercases (used to normalize wildcard and fuzzy terms).
pub(crate) fn analyzer_lowercases(analyzer: Analyzer) -> bool {
    matches!(
        analyzer,
        Analyzer::Standard | Analyzer::Simple | Analyzer::English
    )
}

/// A query value converted to what the field indexed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Str(String),
    I64(i64),
    F64(f64),
    Bool(bool),
    /// An inclusive range of epoch millis (a date term covers its whole precision).
    Dates(i64, i64),
    /// An inclusive range of IP addresses (CIDR notation).
    Ips(u128, u128),
    /// A value no document can hold (e.g. `1.5` on a `long`).
    Nothing,
}

/// The text of a JSON scalar as OpenSearch reads it for string fields.
pub(crate) fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Converts a term-query value for `field`. `time_zone` applies to dates.
pub(crate) fn scalar_for(
    ctx: &QueryContext,
    field: &FieldRef,
    value: &Value,
    time_zone: Option<&str>,
) -> Result<Scalar, QueryError> {
    let text = || {
        value_text(value).ok_or_else(|| {
            QueryError::Parsing(format!(
                "[{}] unsupported value type for field [{}]: {value}",
                field.type_name(),
                field.path
            ))
        })
    };
    Ok(match field.field_type() {
        FieldType::Text | FieldType::Keyword | FieldType::Binary => Scalar::Str(text()?),
        FieldType::Ip => {
            let s = text()?;
            if let Some((addr, bits)) = s.split_once('/') {
                let (lower, upper) = cidr_range(addr, bits)
                    .ok_or_else(|| illegal(format!("Expected [ip/prefix] but was [{s}]")))?;
                Scalar::Ips(lower, upper)
            } else {
                let ip: IpAddr = s
                    .parse()
                    .map_err(|_| illegal(format!("'{s}' is not an IP string literal.")))?;
                Scalar::Str(canonical_ip(ip))
            }
        }
        FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => {
            match parse_integer(value, field.field_type())? {
                Some(n) => Scalar::I64(n),
                None => Scalar::Nothing,
            }
        }
        FieldType::Double | FieldType::Float | FieldType::HalfFloat | FieldType::ScaledFloat => {
            let f = parse_float(value)?;
            Scalar::F64(stored_float(field.mapping, f))
        }
        FieldType::Boolean => Scalar::Bool(parse_bool(value)?),
        FieldType::Date => {
            let s = text()?;
            let format = field.date_format()?;
            let name = Some(field.mapping.date_format());
            let lower =
                parse_date_math_named(&s, Some(&format), name, ctx.now_millis, false, time_zone)?;
            let upper =
                parse_date_math_named(&s, Some(&format), name, ctx.now_millis, true, time_zone)?;
            Scalar::Dates(lower, upper)
        }
    })
}

/// The query matching documents whose field holds `scalar`. String terms score with BM25,
/// other values score 1.0 like OpenSearch's point queries.
pub(crate) fn scalar_query(field: &FieldRef, scalar: Scalar) -> Box<dyn Query> {
    let constant =
        |query: Box<dyn Query>| -> Box<dyn Query> { Box::new(ConstScoreQuery::new(query, 1.0)) };
    match scalar {
        Scalar::Str(text) => bm25(Box::new(TermQuery::new(
            field.str_term(&text),
            IndexRecordOption::WithFreqs,
        ))),
        Scalar::Nothing => Box::new(EmptyQuery),
        Scalar::Dates(lower, upper) => {
            use std::ops::Bound::Included;
            Box::new(RangeQuery::new(
                Included(date_term(field, lower)),
                Included(date_term(field, upper)),
            ))
        }
        Scalar::Ips(lower, upper) => {
            field.scan(TermMatcher::IpRange { lower, upper }, Scoring::Constant)
        }
        other => constant(Box::new(TermQuery::new(
            numeric_term(field, &other),
            IndexRecordOption::Basic,
        ))),
    }
}

/// A `_num` term for an I64, F64 or Bool scalar, normalized like tantivy's indexer does.
pub(crate) fn numeric_term(field: &FieldRef, scalar: &Scalar) -> Term {
    let mut term = field.path_term();
    match scalar {
        Scalar::I64(n) => term.append_type_and_fast_value(*n),
        Scalar::F64(f) => match NumericalValue::F64(*f).normalize() {
            NumericalValue::I64(n) => term.append_type_and_fast_value(n),
            NumericalValue::U64(n) => term.append_type_and_fast_value(n),
            NumericalValue::F64(f) => term.append_type_and_fast_value(f),
        },
        Scalar::Bool(b) => term.append_type_and_fast_value(*b),
        Scalar::Dates(millis, _) => {
            term.append_type_and_fast_value(DateTime::from_timestamp_millis(*millis))
        }
        _ => unreachable!("numeric_term takes numeric scalars"),
    }
    term
}

pub(crate) fn date_term(field: &FieldRef, millis: i64) -> Term {
    let mut term = field.path_term();
    term.append_type_and_fast_value(DateTime::from_timestamp_millis(millis));
    term
}

/// The value a float field indexed for `f` (floats lose precision, scaled floats round).
pub(crate) fn stored_float(mapping: &FieldMapping, f: f64) -> f64 {
    match mapping.field_type {
        FieldType::Float | FieldType::HalfFloat => f as f32 as f64,
        FieldType::ScaledFloat => {
            let factor = mapping.scaling_factor.unwrap_or(1.0);
            (f * factor).round() / factor
        }
        _ => f,
    }
}

/// An integer query value; `Ok(None)` when it has a fractional part (matches nothing).
pub(crate) fn parse_integer(
    value: &Value,
    field_type: FieldType,
) -> Result<Option<i64>, QueryError> {
    let n: f64 = match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return check_bounds(i as i128, field_type, value).map(Some);
            }
            if let Some(u) = n.as_u64() {
                return check_bounds(u as i128, field_type, value).map(Some);
            }
            n.as_f64().unwrap_or(f64::NAN)
        }
        Value::String(s) => {
            if let Ok(i) = s.trim().parse::<i128>() {
                return check_bounds(i, field_type, value).map(Some);
            }
            s.trim().parse::<f64>().map_err(|_| number_format(s))?
        }
        other => return Err(number_format(&other.to_string())),
    };
    if !n.is_finite() {
        return Err(number_format(&value.to_string()));
    }
    if n.fract() != 0.0 {
        return Ok(None);
    }
    check_bounds(n as i128, field_type, value).map(Some)
}

fn check_bounds(n: i128, field_type: FieldType, value: &Value) -> Result<i64, QueryError> {
    let (min, max) = field_type.integer_bounds().unwrap_or((i64::MIN, i64::MAX));
    if n < min as i128 || n > max as i128 {
        let name = match field_type {
            FieldType::Integer => "an integer",
            FieldType::Short => "a short",
            FieldType::Byte => "a byte",
            _ => "a long",
        };
        let shown = value_text(value).unwrap_or_else(|| value.to_string());
        return Err(illegal(format!(
            "Value [{shown}] is out of range for {name}"
        )));
    }
    Ok(n as i64)
}

pub(crate) fn parse_float(value: &Value) -> Result<f64, QueryError> {
    let f = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match f {
        Some(f) if f.is_finite() => Ok(f),
        _ => Err(number_format(
            &value_text(value).unwrap_or_else(|| value.to_string()),
        )),
    }
}

pub(crate) fn parse_bool(value: &Value) -> Result<bool, QueryError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" || s.is_empty() => Ok(false),
        other => Err(illegal(format!(
            "Can't parse boolean value [{}], expected [true] or [false]",
            value_text(other).unwrap_or_else(|| other.to_string())
        ))),
    }
}

fn number_format(text: &str) -> QueryError {
    illegal(format!(
        "failed to create query: For input string: \"{text}\""
    ))
}

pub(crate) fn canonical_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn cidr_range(addr: &str, bits: &str) -> Option<(u128, u128)> {
    let ip: IpAddr = addr.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    let bits = match ip {
        IpAddr::V4(_) if bits <= 32 => bits + 96,
        IpAddr::V6(_) if bits <= 128 => bits,
        _ => return None,
    };
    let base = ip_to_u128(ip);
    let mask = if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits)
    };
    Some((base & mask, (base & mask) | !mask))
}

/// `title^2` → (`title`, 2.0).
pub(crate) fn parse_field_boost(spec: &str) -> Result<(String, f32), QueryError> {
    match spec.rsplit_once('^') {
        Some((name, boost)) => {
            let boost: f32 = boost.trim().parse().map_err(|_| {
                QueryError::Parsing(format!("failed to parse field boost [{spec}]"))
            })?;
            Ok((name.trim().to_string(), boost))
        }
        None => Ok((spec.trim().to_string(), 1.0)),
    }
}

/// A field a multi-field query runs on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldSpec {
    pub path: String,
    pub boost: f32,
    /// Found through a wildcard pattern: values that do not fit the field are skipped.
    pub lenient: bool,
}

/// Expands field patterns (`title*`, `*`, `*.keyword`) over the mapped, searchable fields.
/// Names without wildcards are kept even when unmapped (they then match nothing).
pub(crate) fn expand_fields(ctx: &QueryContext, specs: &[(String, f32)]) -> Vec<FieldSpec> {
    let mut out: Vec<FieldSpec> = Vec::new();
    let mut push = |path: String, boost: f32, lenient: bool| {
        if let Some(existing) = out.iter_mut().find(|f| f.path == path) {
            existing.boost = existing.boost.max(boost);
        } else {
            out.push(FieldSpec {
                path,
                boost,
                lenient,
            });
        }
    };
    for (pattern, boost) in specs {
        if !pattern.contains('*') {
            push(pattern.clone(), *boost, false);
            continue;
        }
        for (path, mapping) in ctx.mapping.leaf_fields() {
            if ctx.schema.indexed_in(mapping) != IndexedIn::NotIndexed && glob_match(pattern, &path)
            {
                push(path, *boost, true);
            }
        }
    }
    out
}

/// `*`-only glob matching, as OpenSearch's `Regex.simpleMatch`.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(pos) => rest = &rest[pos + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_simple_match() {
        assert!(glob_match("title*", "title.keyword"));
        assert!(glob_match("*", "a.b"));
        assert!(glob_match("*.keyword", "title.keyword"));
        assert!(glob_match("a*c*e", "abcde"));
        assert!(!glob_match("a*c*e", "abde"));
        assert!(!glob_match("title", "title.keyword"));
    }

    #[test]
    fn field_boost_suffix_is_parsed() {
        assert_eq!(
            parse_field_boost("title^2.5").unwrap(),
            ("title".to_string(), 2.5)
        );
        assert_eq!(
            parse_field_boost("body").unwrap(),
            ("body".to_string(), 1.0)
        );
        assert!(parse_field_boost("body^x").is_err());
    }

    #[test]
    fn integers_reject_fractions_and_out_of_range_values() {
        assert_eq!(
            parse_integer(&Value::from(5), FieldType::Long).unwrap(),
            Some(5)
        );
        assert_eq!(
            parse_integer(&Value::from("7"), FieldType::Long).unwrap(),
            Some(7)
        );
        assert_eq!(
            parse_integer(&Value::from(1.5), FieldType::Long).unwrap(),
            None
        );
        assert_eq!(
            parse_integer(&Value::from(2.0), FieldType::Long).unwrap(),
            Some(2)
        );
        let err = parse_integer(&Value::from(300), FieldType::Byte).unwrap_err();
        assert_eq!(err.to_string(), "Value [300] is out of range for a byte");
        let err = parse_integer(&Value::from("abc"), FieldType::Long).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to create query: For input string: \"abc\""
        );
    }

    #[test]
    fn cidr_covers_its_block() {
        let (lo, hi) = cidr_range("192.168.0.0", "16").unwrap();
        let inside = ip_to_u128("192.168.3.4".parse().unwrap());
        let outside = ip_to_u128("192.169.0.1".parse().unwrap());
        assert!(lo <= inside && inside <= hi);
        assert!(outside > hi);
    }
}
