//! Reading query parameters the way OpenSearch's parsers do, with their error texts.

use serde_json::{Map, Value};

use super::parsing;
use crate::QueryError;

/// `[match] query does not support [xyz]`.
pub(crate) fn unknown_param(query: &str, key: &str) -> QueryError {
    parsing(format!("[{query}] query does not support [{key}]"))
}

fn bad_value(query: &str, key: &str, value: &Value) -> QueryError {
    parsing(format!(
        "[{query}] failed to parse field [{key}]: illegal value [{value}]"
    ))
}

pub(crate) fn read_f32(query: &str, key: &str, value: &Value) -> Result<f32, QueryError> {
    let f = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    f.filter(|f| f.is_finite())
        .map(|f| f as f32)
        .ok_or_else(|| bad_value(query, key, value))
}

pub(crate) fn read_boost(query: &str, value: &Value) -> Result<f32, QueryError> {
    let boost = read_f32(query, "boost", value)?;
    if boost < 0.0 {
        return Err(QueryError::IllegalArgument(
            "negative [boost] are not allowed.".to_string(),
        ));
    }
    Ok(boost)
}

pub(crate) fn read_bool(query: &str, key: &str, value: &Value) -> Result<bool, QueryError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" => Ok(false),
        _ => Err(bad_value(query, key, value)),
    }
}

pub(crate) fn read_usize(query: &str, key: &str, value: &Value) -> Result<usize, QueryError> {
    let n = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.map(|n| n.min(usize::MAX as u64) as usize)
        .ok_or_else(|| bad_value(query, key, value))
}

pub(crate) fn read_str<'a>(
    query: &str,
    key: &str,
    value: &'a Value,
) -> Result<&'a str, QueryError> {
    value.as_str().ok_or_else(|| bad_value(query, key, value))
}

/// A number or a string, as text (`minimum_should_match`, `fuzziness`).
pub(crate) fn read_text(query: &str, key: &str, value: &Value) -> Result<String, QueryError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(bad_value(query, key, value)),
    }
}

/// The one `{field: value}` entry of a field-level query (`term`, `match`, ...).
pub(crate) fn single_field<'a>(
    query: &str,
    body: &'a Map<String, Value>,
) -> Result<(&'a str, &'a Value), QueryError> {
    let mut entries = body.iter();
    let Some((field, value)) = entries.next() else {
        return Err(parsing(match query {
            "match" | "match_phrase" | "match_phrase_prefix" | "match_bool_prefix" => {
                format!("[{query}] requires fieldName")
            }
            _ => "field name is null or empty".to_string(),
        }));
    };
    if let Some((other, _)) = entries.next() {
        return Err(parsing(format!(
            "[{query}] query doesn't support multiple fields, found [{field}] and [{other}]"
        )));
    }
    Ok((field.as_str(), value))
}

/// Applies OpenSearch's `minimum_should_match` spec to `optional` clauses
/// (`3`, `-2`, `75%`, `-25%`, `3<90%`, `2<-25% 9<-3`).
pub(crate) fn minimum_should_match(optional: usize, spec: &str) -> Result<usize, QueryError> {
    let bad =
        || QueryError::IllegalArgument(format!("failed to parse minimum_should_match [{spec}]"));
    let spec = spec.trim();
    let n = optional as i64;
    if spec.contains('<') {
        let normalized = spec.replace(" <", "<").replace("< ", "<");
        let mut result = n;
        for part in normalized.split_whitespace() {
            let (bound, rest) = part.split_once('<').ok_or_else(bad)?;
            let bound: i64 = bound.parse().map_err(|_| bad())?;
            if n <= bound {
                return Ok(result.clamp(0, i64::MAX) as usize);
            }
            result = minimum_should_match(optional, rest)? as i64;
        }
        return Ok(result.max(0) as usize);
    }
    let result = if let Some(percent) = spec.strip_suffix('%') {
        let percent: i64 = percent.trim().parse().map_err(|_| bad())?;
        let calc = (n * percent) as f64 / 100.0;
        if calc < 0.0 {
            n + calc as i64
        } else {
            calc as i64
        }
    } else {
        let calc: i64 = spec.parse().map_err(|_| bad())?;
        if calc < 0 {
            n + calc
        } else {
            calc
        }
    };
    Ok(result.max(0) as usize)
}

/// The `fuzziness` parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fuzziness {
    Edits(u32),
    Auto { low: usize, high: usize },
}

impl Fuzziness {
    pub(crate) fn parse(query: &str, value: &Value) -> Result<Fuzziness, QueryError> {
        let text = read_text(query, "fuzziness", value)?;
        let upper = text.trim().to_ascii_uppercase();
        if upper == "AUTO" {
            return Ok(Fuzziness::Auto { low: 3, high: 6 });
        }
        if let Some(spec) = upper.strip_prefix("AUTO:") {
            let (low, high) = spec.split_once(',').ok_or_else(|| bad_fuzziness(&text))?;
            let low = low.trim().parse().map_err(|_| bad_fuzziness(&text))?;
            let high = high.trim().parse().map_err(|_| bad_fuzziness(&text))?;
            return Ok(Fuzziness::Auto { low, high });
        }
        match upper.parse::<f64>() {
            Ok(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Fuzziness::Edits((f as u32).min(2))),
            Ok(f) if (0.0..1.0).contains(&f) => Ok(Fuzziness::Auto { low: 3, high: 6 }),
            _ => Err(bad_fuzziness(&text)),
        }
    }

    /// Allowed edits for a term of `len` characters.
    pub(crate) fn edits(self, len: usize) -> u32 {
        match self {
            Fuzziness::Edits(n) => n.min(2),
            Fuzziness::Auto { low, high } => {
                if len < low {
                    0
                } else if len < high {
                    1
                } else {
                    2
                }
            }
        }
    }
}

fn bad_fuzziness(text: &str) -> QueryError {
    QueryError::IllegalArgument(format!("failed to parse [fuzziness] value [{text}]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_should_match_supports_opensearch_forms() {
        assert_eq!(minimum_should_match(5, "3").unwrap(), 3);
        assert_eq!(minimum_should_match(5, "-2").unwrap(), 3);
        assert_eq!(minimum_should_match(4, "75%").unwrap(), 3);
        assert_eq!(minimum_should_match(4, "-25%").unwrap(), 3);
        assert_eq!(minimum_should_match(3, "-25%").unwrap(), 3);
        assert_eq!(minimum_should_match(2, "3<90%").unwrap(), 2);
        assert_eq!(minimum_should_match(10, "3<90%").unwrap(), 9);
        assert_eq!(minimum_should_match(10, "2<-25% 9<-3").unwrap(), 7);
        assert_eq!(minimum_should_match(5, "2<-25% 9<-3").unwrap(), 4);
        assert!(minimum_should_match(5, "lots").is_err());
    }

    #[test]
    fn fuzziness_auto_depends_on_term_length() {
        let auto = Fuzziness::parse("match", &Value::from("AUTO")).unwrap();
        assert_eq!((auto.edits(2), auto.edits(4), auto.edits(8)), (0, 1, 2));
        let custom = Fuzziness::parse("match", &Value::from("AUTO:2,4")).unwrap();
        assert_eq!(
            (custom.edits(1), custom.edits(3), custom.edits(4)),
            (0, 1, 2)
        );
        assert_eq!(
            Fuzziness::parse("match", &Value::from(1)).unwrap(),
            Fuzziness::Edits(1)
        );
        assert!(Fuzziness::parse("match", &Value::from("lots")).is_err());
    }

    #[test]
    fn multiple_fields_are_refused_with_opensearch_text() {
        let body = serde_json::json!({"a": 1, "b": 2});
        let err = single_field("match", body.as_object().unwrap()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "[match] query doesn't support multiple fields, found [a] and [b]"
        );
    }
}
