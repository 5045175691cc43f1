//! `range` queries on numbers, dates (with date math), keywords and text (lexicographic),
//! IPs and booleans. Numbers and dates use the `_num` fast columns (dates keep their
//! millisecond precision there), keywords the `_kw` fast column.

use std::ops::Bound;

use serde_json::{Map, Value};
use shoal_mapping::date::DateFormat;
use shoal_mapping::FieldType;
use tantivy::query::{ConstScoreQuery, EmptyQuery, Query, RangeQuery, TermSetQuery};
use tantivy::Term;

use super::date_math::parse_date_math_named;
use super::fields::{
    date_term, numeric_term, parse_bool, parse_float, resolve, value_text, FieldRef, Scalar, Target,
};
use super::multi_term::{ip_to_u128, Scoring, TermMatcher, TermScanQuery};
use super::params::{read_bool, read_boost, read_str, single_field, unknown_param};
use super::term_level::exists_query;
use super::{boosted, illegal, parsing};
use crate::{QueryContext, QueryError};

/// The bounds of a range, as written in the query.
#[derive(Debug, Clone, Default)]
pub(crate) struct RangeSpec {
    pub lower: Option<Value>,
    pub include_lower: bool,
    pub upper: Option<Value>,
    pub include_upper: bool,
    pub format: Option<String>,
    pub time_zone: Option<String>,
}

pub(crate) fn range(
    body: &Map<String, Value>,
    ctx: &QueryContext,
) -> Result<Box<dyn Query>, QueryError> {
    // `boost` and `_name` may also sit next to the field (OpenSearch accepts both places).
    let mut boost = 1.0;
    let mut fields = Map::new();
    for (key, value) in body {
        match key.as_str() {
            "boost" if !value.is_object() => boost = read_boost("range", value)?,
            "_name" if !value.is_object() => {}
            _ => {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
    let (field, params) = single_field("range", &fields)?;
    let Value::Object(params) = params else {
        return Err(unknown_param("range", field));
    };
    let mut spec = RangeSpec {
        include_lower: true,
        include_upper: true,
        ..RangeSpec::default()
    };
    let bound = |v: &Value| (!v.is_null()).then(|| v.clone());
    for (key, value) in params {
        match key.as_str() {
            "from" => spec.lower = bound(value),
            "to" => spec.upper = bound(value),
            "gt" => (spec.lower, spec.include_lower) = (bound(value), false),
            "gte" => (spec.lower, spec.include_lower) = (bound(value), true),
            "lt" => (spec.upper, spec.include_upper) = (bound(value), false),
            "lte" => (spec.upper, spec.include_upper) = (bound(value), true),
            "include_lower" => spec.include_lower = read_bool("range", key, value)?,
            "include_upper" => spec.include_upper = read_bool("range", key, value)?,
            "format" => spec.format = Some(read_str("range", key, value)?.to_string()),
            "time_zone" => spec.time_zone = Some(read_str("range", key, value)?.to_string()),
            "boost" => boost = read_boost("range", value)?,
            "relation" => {
                let relation = read_str("range", key, value)?.to_ascii_uppercase();
                if !matches!(relation.as_str(), "INTERSECTS" | "CONTAINS" | "WITHIN") {
                    return Err(parsing(format!(
                        "[range] query does not support relation [{relation}]"
                    )));
                }
            }
            "_name" => {}
            _ => return Err(unknown_param("range", key)),
        }
    }
    Ok(boosted(range_query(ctx, field, &spec)?, boost))
}

/// Documents whose `path` holds a value within `spec`; constant score 1.0.
pub(crate) fn range_query(
    ctx: &QueryContext,
    path: &str,
    spec: &RangeSpec,
) -> Result<Box<dyn Query>, QueryError> {
    if spec.lower.is_none() && spec.upper.is_none() {
        return Ok(match resolve(ctx, path)? {
            Target::Unmapped => Box::new(EmptyQuery),
            _ => exists_query(ctx, path),
        });
    }
    let field = match resolve(ctx, path)? {
        Target::Unmapped => return Ok(Box::new(EmptyQuery)),
        Target::Index => {
            return Err(illegal(
                "[range] queries on [_index] are not supported by Shoal",
            ))
        }
        Target::Id => {
            let (lower, upper) = string_bounds(spec)?;
            let matcher = TermMatcher::Range { lower, upper };
            return Ok(Box::new(TermScanQuery::plain(
                ctx.schema.id,
                matcher,
                Scoring::Constant,
            )));
        }
        Target::Field(field) => field,
    };
    let query: Box<dyn Query> = match field.field_type() {
        FieldType::Text => {
            let (lower, upper) = string_bounds(spec)?;
            field.scan(TermMatcher::Range { lower, upper }, Scoring::Constant)
        }
        FieldType::Keyword => {
            let (lower, upper) = string_bounds(spec)?;
            let lower = lower.map(|s| field.str_term(&s));
            let upper = upper.map(|s| field.str_term(&s));
            fast_range(lower, upper)
        }
        FieldType::Ip => ip_range(&field, spec)?,
        FieldType::Boolean => bool_range(&field, spec)?,
        FieldType::Date => date_range(ctx, &field, spec)?,
        FieldType::Long | FieldType::Integer | FieldType::Short | FieldType::Byte => {
            integer_range(ctx, &field, spec)?
        }
        _ => float_range(&field, spec)?,
    };
    Ok(query)
}

fn fast_range(lower: Bound<Term>, upper: Bound<Term>) -> Box<dyn Query> {
    if matches!((&lower, &upper), (Bound::Unbounded, Bound::Unbounded)) {
        return Box::new(EmptyQuery);
    }
    Box::new(RangeQuery::new(lower, upper))
}

fn bound_of<T>(value: Option<T>, inclusive: bool) -> Bound<T> {
    match value {
        None => Bound::Unbounded,
        Some(v) if inclusive => Bound::Included(v),
        Some(v) => Bound::Excluded(v),
    }
}

fn string_bounds(spec: &RangeSpec) -> Result<(Bound<String>, Bound<String>), QueryError> {
    let text = |v: &Option<Value>| -> Result<Option<String>, QueryError> {
        v.as_ref()
            .map(|v| {
                value_text(v).ok_or_else(|| parsing(format!("[range] unsupported bound [{v}]")))
            })
            .transpose()
    };
    Ok((
        bound_of(text(&spec.lower)?, spec.include_lower),
        bound_of(text(&spec.upper)?, spec.include_upper),
    ))
}

/// Integer fields: fractional bounds round inwards (`gte 1.5` → `gte 2`, `lt 1.5` → `lte 1`).
fn integer_range(
    ctx: &QueryContext,
    field: &FieldRef,
    spec: &RangeSpec,
) -> Result<Box<dyn Query>, QueryError> {
    let (min, max) = field
        .field_type()
        .integer_bounds()
        .unwrap_or((i64::MIN, i64::MAX));
    let convert = |value: &Option<Value>,
                   inclusive: bool,
                   is_lower: bool|
     -> Result<Option<i128>, QueryError> {
        let Some(value) = value else { return Ok(None) };
        let exact = match value {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        let n: i128 = match exact {
            Some(n) if inclusive => n as i128,
            Some(n) if is_lower => n as i128 + 1,
            Some(n) => n as i128 - 1,
            None => {
                let f = parse_float(value)?;
                let r = if is_lower {
                    if f.fract() == 0.0 && !inclusive {
                        f + 1.0
                    } else {
                        f.ceil()
                    }
                } else if f.fract() == 0.0 && !inclusive {
                    f - 1.0
                } else {
                    f.floor()
                };
                r.clamp(-1e30, 1e30) as i128
            }
        };
        Ok(Some(n))
    };
    let lower = convert(&spec.lower, spec.include_lower, true)?;
    let upper = convert(&spec.upper, spec.include_upper, false)?;
    let (lo, hi) = (lower.unwrap_or(min as i128), upper.unwrap_or(max as i128));
    if lo > hi || lo > max as i128 || hi < min as i128 {
        return Ok(Box::new(EmptyQuery));
    }
    // Bounds beyond the type's range mean no bound at all.
    let lower = lower.filter(|n| *n > min as i128).map(|n| n as i64);
    let upper = upper.filter(|n| *n < max as i128).map(|n| n as i64);
    if lower.is_none() && upper.is_none() {
        return Ok(exists_query(ctx, &field.path));
    }
    let term = |n: i64| numeric_term(field, &Scalar::I64(n));
    Ok(fast_range(
        bound_of(lower.map(term), true),
        bound_of(upper.map(term), true),
    ))
}

/// Floating-point fields: bounds are rounded the way the field stores values.
fn float_range(field: &FieldRef, spec: &RangeSpec) -> Result<Box<dyn Query>, QueryError> {
    let mapping = field.mapping;
    let convert = |value: &Option<Value>,
                   inclusive: bool,
                   is_lower: bool|
     -> Result<Option<(f64, bool)>, QueryError> {
        let Some(value) = value else { return Ok(None) };
        let f = parse_float(value)?;
        Ok(Some(match mapping.field_type {
            FieldType::ScaledFloat => {
                let factor = mapping.scaling_factor.unwrap_or(1.0);
                let scaled = f * factor;
                let k = if is_lower {
                    if inclusive {
                        scaled.ceil()
                    } else {
                        next_up(scaled).ceil()
                    }
                } else if inclusive {
                    scaled.floor()
                } else {
                    next_down(scaled).floor()
                };
                (k / factor, true)
            }
            FieldType::Float | FieldType::HalfFloat => (f as f32 as f64, inclusive),
            _ => (f, inclusive),
        }))
    };
    let lower = convert(&spec.lower, spec.include_lower, true)?;
    let upper = convert(&spec.upper, spec.include_upper, false)?;
    if let (Some((l, li)), Some((u, ui))) = (lower, upper) {
        if l > u || (l == u && !(li && ui)) {
            return Ok(Box::new(EmptyQuery));
        }
    }
    let to_bound = |b: Option<(f64, bool)>| match b {
        None => Bound::Unbounded,
        Some((f, inclusive)) => {
            let mut term = field.path_term();
            term.append_type_and_fast_value(f);
            bound_of(Some(term), inclusive)
        }
    };
    Ok(fast_range(to_bound(lower), to_bound(upper)))
}

fn next_up(f: f64) -> f64 {
    if f.is_nan() || f == f64::INFINITY {
        return f;
    }
    if f == 0.0 {
        return f64::from_bits(1);
    }
    let bits = f.to_bits();
    f64::from_bits(if f > 0.0 { bits + 1 } else { bits - 1 })
}

fn next_down(f: f64) -> f64 {
    -next_up(-f)
}

fn date_range(
    ctx: &QueryContext,
    field: &FieldRef,
    spec: &RangeSpec,
) -> Result<Box<dyn Query>, QueryError> {
    let format_name = spec
        .format
        .clone()
        .unwrap_or_else(|| field.mapping.date_format().to_string());
    let format = DateFormat::parse(&format_name)
        .map_err(|reason| parsing(format!("Invalid format: [{format_name}]: {reason}")))?;
    let tz = spec.time_zone.as_deref();
    // gte/lt round down, gt/lte round up (to the last millisecond of the unit).
    let parse = |value: &Option<Value>, round_up: bool| -> Result<Option<i64>, QueryError> {
        let Some(value) = value else { return Ok(None) };
        let text = value_text(value)
            .ok_or_else(|| parsing(format!("[range] unsupported date bound [{value}]")))?;
        parse_date_math_named(
            &text,
            Some(&format),
            Some(&format_name),
            ctx.now_millis,
            round_up,
            tz,
        )
        .map(Some)
    };
    let lower = parse(&spec.lower, !spec.include_lower)?;
    let upper = parse(&spec.upper, spec.include_upper)?;
    if let (Some(l), Some(u)) = (lower, upper) {
        if l > u || (l == u && !(spec.include_lower && spec.include_upper)) {
            return Ok(Box::new(EmptyQuery));
        }
    }
    Ok(fast_range(
        bound_of(lower.map(|m| date_term(field, m)), spec.include_lower),
        bound_of(upper.map(|m| date_term(field, m)), spec.include_upper),
    ))
}

fn ip_range(field: &FieldRef, spec: &RangeSpec) -> Result<Box<dyn Query>, QueryError> {
    let parse = |value: &Option<Value>| -> Result<Option<u128>, QueryError> {
        let Some(value) = value else { return Ok(None) };
        let text = value_text(value).unwrap_or_default();
        let ip: std::net::IpAddr = text
            .parse()
            .map_err(|_| illegal(format!("'{text}' is not an IP string literal.")))?;
        Ok(Some(ip_to_u128(ip)))
    };
    let lower = match parse(&spec.lower)? {
        None => 0,
        Some(n) if spec.include_lower => n,
        Some(n) => match n.checked_add(1) {
            Some(n) => n,
            None => return Ok(Box::new(EmptyQuery)),
        },
    };
    let upper = match parse(&spec.upper)? {
        None => u128::MAX,
        Some(n) if spec.include_upper => n,
        Some(n) => match n.checked_sub(1) {
            Some(n) => n,
            None => return Ok(Box::new(EmptyQuery)),
        },
    };
    Ok(field.scan(TermMatcher::IpRange { lower, upper }, Scoring::Constant))
}

fn bool_range(field: &FieldRef, spec: &RangeSpec) -> Result<Box<dyn Query>, QueryError> {
    let lower = spec.lower.as_ref().map(parse_bool).transpose()?;
    let upper = spec.upper.as_ref().map(parse_bool).transpose()?;
    let terms: Vec<Term> = [false, true]
        .into_iter()
        .filter(|b| match lower {
            None => true,
            Some(l) => u8::from(*b) > u8::from(l) || (*b == l && spec.include_lower),
        })
        .filter(|b| match upper {
            None => true,
            Some(u) => u8::from(*b) < u8::from(u) || (*b == u && spec.include_upper),
        })
        .map(|b| numeric_term(field, &Scalar::Bool(b)))
        .collect();
    if terms.is_empty() {
        return Ok(Box::new(EmptyQuery));
    }
    Ok(Box::new(ConstScoreQuery::new(
        Box::new(TermSetQuery::new(terms)),
        1.0,
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::dsl::testutil::{ids as v, Fixture};

    #[test]
    fn numeric_ranges_honour_bound_kinds() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gte": 10, "lt": 20}}})),
            v(&["2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gt": 10, "lte": 20}}})),
            v(&["3", "4"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gt": 9.5, "lt": "15.5"}}})),
            v(&["2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"from": 5, "to": 10, "include_lower": false}}})),
            v(&["2"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gte": 30}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gte": 20, "lte": 10}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"range": {"price": {"gt": 10.5}}})),
            v(&["2", "4"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"price": {"gte": 10.5, "lte": 20}}})),
            v(&["1", "2"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"rating": {"lte": 0.1}}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gte": null}}})),
            v(&["1", "2", "3", "4"])
        );
    }

    #[test]
    fn numeric_bounds_beyond_the_type_range_do_not_overflow() {
        let fx = Fixture::standard();
        let all = v(&["1", "2", "3", "4"]);
        let q = json!({"range": {"count": {"gte": i64::MIN, "lte": i64::MAX}}});
        assert_eq!(fx.matching(q), all);
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gt": i64::MAX}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"lt": i64::MIN}}})),
            v(&[])
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"lt": "1e30"}}})),
            all
        );
        assert_eq!(
            fx.matching(json!({"range": {"count": {"gt": -1e30, "lt": 6}}})),
            v(&["1"])
        );
    }

    #[test]
    fn scaled_and_half_floats_round_like_the_index() {
        let fx = Fixture::new(
            json!({"properties": {
                "s": {"type": "scaled_float", "scaling_factor": 100},
                "h": {"type": "half_float"},
                "i": {"type": "integer"}
            }}),
            &[
                ("1", json!({"s": 1.234, "h": 0.1, "i": 7})),
                ("2", json!({"s": 1.235, "h": 2.5, "i": -3})),
            ],
        );
        assert_eq!(fx.matching(json!({"term": {"s": 1.23}})), v(&["1"]));
        assert_eq!(fx.matching(json!({"term": {"s": 1.2349}})), v(&["1"]));
        assert_eq!(
            fx.matching(json!({"range": {"s": {"gte": 1.235}}})),
            v(&["2"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"s": {"lte": 1.239}}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"s": {"gt": 1.23}}})),
            v(&["2"])
        );
        assert_eq!(fx.matching(json!({"term": {"h": 0.1}})), v(&["1"]));
        assert_eq!(
            fx.matching(json!({"range": {"h": {"gte": 0.1, "lte": 0.1}}})),
            v(&["1"])
        );
        assert_eq!(fx.matching(json!({"range": {"i": {"gt": -3}}})), v(&["1"]));
        assert_eq!(
            fx.matching(json!({"terms": {"i": [-3, 7]}})),
            v(&["1", "2"])
        );
        assert!(fx
            .error(json!({"term": {"i": 3_000_000_000i64}}))
            .to_string()
            .contains("out of range for an integer"));
    }

    #[test]
    fn range_scores_are_the_boost() {
        let fx = Fixture::standard();
        let scored = fx.scored(json!({"range": {"count": {"gte": 10, "boost": 2.5}}}));
        assert_eq!(scored.len(), 3);
        assert!(scored.iter().all(|(_, s)| *s == 2.5));
        let outer = fx.scored(json!({"range": {"count": {"gte": 10}, "boost": 2.0, "_name": "r"}}));
        assert!(outer.len() == 3 && outer.iter().all(|(_, s)| *s == 2.0));
    }

    #[test]
    fn keyword_and_text_ranges_are_lexicographic() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"tag": {"gte": "p", "lt": "t"}}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"tag": {"gt": "pet"}}})),
            v(&["3", "4"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"author.id": {"lte": "a3"}}})),
            v(&["1", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"title": {"gte": "s", "lt": "t"}}})),
            v(&["3", "5"])
        );
    }

    #[test]
    fn ip_ranges_compare_addresses_not_text() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"ip": {"gte": "10.0.0.3", "lte": "10.0.0.255"}}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"ip": {"gt": "10.0.0.2"}}})),
            v(&["1", "3"])
        );
    }

    #[test]
    fn date_ranges_keep_millisecond_precision() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "2020-02-01T00:00:00.500Z"}}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gt": "2020-02-01T00:00:00.499Z"}}})),
            v(&["3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"lt": "2020-01-01"}}})),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(
                json!({"range": {"date": {"gte": 1577836800000i64, "lt": 1579046400000i64}}})
            ),
            v(&["1"])
        );
    }

    #[test]
    fn date_range_rounding_follows_opensearch() {
        let fx = Fixture::standard();
        // lte rounds up: the whole of January 15th is included.
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "2020-01-01", "lte": "2020-01-15"}}})),
            v(&["1", "2"])
        );
        // gt rounds up: nothing of January 1st qualifies.
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gt": "2020-01-01", "lte": "2020-01-31"}}})),
            v(&["2"])
        );
        // gt with /M: after the end of December 2019.
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gt": "2019-12-15||/M"}}})),
            v(&["1", "2", "3"])
        );
        // lt with /M rounds down: before Feb 1st.
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "2020-01-01", "lt": "2020-02-15||/M"}}})),
            v(&["1", "2"])
        );
    }

    #[test]
    fn date_math_relative_to_now() {
        let fx = Fixture::standard();
        // now = 2020-03-15T10:30:45Z
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "now-2M/M"}}})),
            v(&["1", "2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "now-60d/d", "lt": "now-42d/d"}}})),
            v(&["2", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"lt": "now-1y"}}})),
            v(&[])
        );
    }

    #[test]
    fn date_ranges_use_format_and_time_zone() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"day": {"gte": "01/02/2020"}}})),
            v(&["1"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "15.01.2020", "format": "dd.MM.yyyy"}}})),
            v(&["2", "3"])
        );
        // Local midnight in +01:00 is 2019-12-31T23:00Z (doc 4 is after it); doc 1 (10:00Z)
        // is 11:00 local, so `lte 10:30` local excludes it and `lte 11:30` includes it.
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "2020-01-01T00:00:00", "lte": "2020-01-01T10:30:00", "time_zone": "+01:00"}}})),
            v(&["4"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"date": {"gte": "2020-01-01T00:00:00", "lte": "2020-01-01T11:30:00", "time_zone": "+01:00"}}})),
            v(&["1", "4"])
        );
    }

    #[test]
    fn range_errors_use_opensearch_texts() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.error(json!({"range": {"count": 5}})).to_string(),
            "[range] query does not support [count]"
        );
        assert_eq!(
            fx.error(json!({"range": {"count": {"gte": 1, "bogus": 2}}}))
                .to_string(),
            "[range] query does not support [bogus]"
        );
        assert_eq!(
            fx.error(json!({"range": {"date": {"gte": "not-a-date"}}})).to_string(),
            "failed to parse date field [not-a-date] with format [strict_date_optional_time||epoch_millis]"
        );
        assert!(fx
            .error(json!({"range": {"count": {"gte": "x"}}}))
            .to_string()
            .contains("For input string"));
    }

    #[test]
    fn boolean_ranges() {
        let fx = Fixture::standard();
        assert_eq!(
            fx.matching(json!({"range": {"active": {"gt": false}}})),
            v(&["1", "3"])
        );
        assert_eq!(
            fx.matching(json!({"range": {"active": {"lte": true}}})),
            v(&["1", "2", "3"])
        );
    }
}
