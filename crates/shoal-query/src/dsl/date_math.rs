//! Date math as OpenSearch evaluates it: `now`, `now-1d/d`, `2020-01-01||+1M/M`, with
//! `format`, `time_zone`, and the rounding of range bounds (`round_up` for `gt`/`lte`).

use std::str::FromStr;

use chrono::{
    DateTime, Datelike, FixedOffset, LocalResult, Months, NaiveDate, NaiveDateTime, NaiveTime,
    TimeDelta, TimeZone, Timelike, Utc,
};
use shoal_mapping::date::{DateFormat, DEFAULT_DATE_FORMAT};

use crate::QueryError;

/// Evaluates a date or date-math expression to epoch milliseconds.
///
/// `format` parses the anchor date (OpenSearch's `strict_date_optional_time||epoch_millis`
/// when `None`). `round_up` is true for the bounds OpenSearch rounds up (`gt`, `lte`): rounding
/// (`/d`) then goes to the last millisecond of the unit, and date components missing from the
/// anchor are filled with their maximum (`2020-01-01` → `2020-01-01T23:59:59.999`).
/// `time_zone` (`+01:00`, `Europe/Paris`, `UTC`) applies to dates without an offset and to
/// rounding; it never shifts `now` or epoch values.
pub fn parse_date_math(
    expr: &str,
    format: Option<&DateFormat>,
    now_millis: i64,
    round_up: bool,
    time_zone: Option<&str>,
) -> Result<i64, QueryError> {
    parse_date_math_named(expr, format, None, now_millis, round_up, time_zone)
}

/// [`parse_date_math`] with the format's text, for error messages.
pub(crate) fn parse_date_math_named(
    expr: &str,
    format: Option<&DateFormat>,
    format_name: Option<&str>,
    now_millis: i64,
    round_up: bool,
    time_zone: Option<&str>,
) -> Result<i64, QueryError> {
    let zone = time_zone.map(Zone::parse).transpose()?.unwrap_or(Zone::Utc);
    let expr = expr.trim();
    let format_name = match (format_name, format) {
        (Some(name), _) => name,
        (None, None) => DEFAULT_DATE_FORMAT,
        (None, Some(_)) => "",
    };
    let default_format;
    let format = match format {
        Some(f) => f,
        None => {
            default_format = DateFormat::parse(DEFAULT_DATE_FORMAT).expect("default format parses");
            &default_format
        }
    };
    let (anchor, math) = if let Some(rest) = expr.strip_prefix("now") {
        (now_millis, rest)
    } else if let Some(index) = expr.find("||") {
        let anchor = parse_date(&expr[..index], format, format_name, &zone, false)?;
        (anchor, &expr[index + 2..])
    } else {
        return parse_date(expr, format, format_name, &zone, round_up);
    };
    apply_math(anchor, math, round_up, &zone)
}

/// A parsed `time_zone` parameter.
#[derive(Debug, Clone)]
pub(crate) enum Zone {
    Utc,
    Fixed(FixedOffset),
    Named(chrono_tz::Tz),
}

impl Zone {
    pub(crate) fn parse(text: &str) -> Result<Zone, QueryError> {
        let t = text.trim();
        if matches!(t, "Z" | "z" | "UTC" | "utc" | "GMT" | "UT") {
            return Ok(Zone::Utc);
        }
        if let Some(offset) = parse_offset(t.as_bytes()) {
            return FixedOffset::east_opt(offset as i32)
                .map(Zone::Fixed)
                .ok_or_else(|| {
                    QueryError::IllegalArgument(format!("Unknown time-zone ID: {text}"))
                });
        }
        chrono_tz::Tz::from_str(t)
            .map(Zone::Named)
            .map_err(|_| QueryError::IllegalArgument(format!("Unknown time-zone ID: {text}")))
    }

    fn to_local(&self, millis: i64) -> NaiveDateTime {
        let utc = DateTime::<Utc>::from_timestamp_millis(millis)
            .unwrap_or_default()
            .naive_utc();
        match self {
            Zone::Utc => utc,
            Zone::Fixed(offset) => utc + TimeDelta::seconds(offset.local_minus_utc() as i64),
            Zone::Named(tz) => tz.from_utc_datetime(&utc).naive_local(),
        }
    }

    fn to_utc_millis(&self, local: NaiveDateTime) -> i64 {
        match self {
            Zone::Utc => local.and_utc().timestamp_millis(),
            Zone::Fixed(offset) => (local - TimeDelta::seconds(offset.local_minus_utc() as i64))
                .and_utc()
                .timestamp_millis(),
            Zone::Named(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(d) => d.timestamp_millis(),
                LocalResult::Ambiguous(earliest, _) => earliest.timestamp_millis(),
                // In a daylight-saving gap: the instant an hour later exists.
                LocalResult::None => tz
                    .from_local_datetime(&(local + TimeDelta::hours(1)))
                    .earliest()
                    .map(|d| d.timestamp_millis() - 3_600_000)
                    .unwrap_or_else(|| local.and_utc().timestamp_millis()),
            },
        }
    }
}

/// `±HH`, `±HHmm`, `±HH:mm` → seconds east of UTC.
fn parse_offset(bytes: &[u8]) -> Option<i64> {
    let (sign, rest) = match bytes.first()? {
        b'+' => (1, &bytes[1..]),
        b'-' => (-1, &bytes[1..]),
        _ => return None,
    };
    let digits: Vec<u8> = rest.iter().copied().filter(|b| *b != b':').collect();
    if !digits.iter().all(u8::is_ascii_digit) || rest.iter().filter(|b| **b == b':').count() > 1 {
        return None;
    }
    let num = |s: &[u8]| s.iter().fold(0i64, |acc, d| acc * 10 + (d - b'0') as i64);
    let (h, m) = match digits.len() {
        1 | 2 => (num(&digits), 0),
        4 => (num(&digits[..2]), num(&digits[2..])),
        _ => return None,
    };
    if h > 18 || m > 59 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

/// How much of a date was written, to fill the rest when rounding up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Precision {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Fraction,
}

struct IsoDate {
    local: NaiveDateTime,
    offset_seconds: Option<i64>,
    precision: Precision,
}

/// `yyyy[-MM[-dd[Thh[:mm[:ss[.fraction]]]]]][Z|±hh[:mm]]`.
fn parse_iso(text: &str) -> Option<IsoDate> {
    let b = text.as_bytes();
    let mut pos = 0;
    let negative = b.first() == Some(&b'-');
    if negative {
        pos = 1;
    }
    let year = digits(b, &mut pos, 4, 4)? as i32;
    let year = if negative { -year } else { year };
    let (mut month, mut day, mut precision) = (1, 1, Precision::Year);
    if eat(b, &mut pos, b'-') {
        month = digits(b, &mut pos, 1, 2)? as u32;
        precision = Precision::Month;
        if eat(b, &mut pos, b'-') {
            day = digits(b, &mut pos, 1, 2)? as u32;
            precision = Precision::Day;
        }
    }
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let (mut h, mut mi, mut s, mut nanos) = (0, 0, 0, 0u32);
    if precision == Precision::Day && (eat(b, &mut pos, b'T') || eat(b, &mut pos, b't')) {
        h = digits(b, &mut pos, 2, 2)? as u32;
        precision = Precision::Hour;
        if eat(b, &mut pos, b':') {
            mi = digits(b, &mut pos, 2, 2)? as u32;
            precision = Precision::Minute;
            if eat(b, &mut pos, b':') {
                s = digits(b, &mut pos, 2, 2)? as u32;
                precision = Precision::Second;
                if pos < b.len() && (b[pos] == b'.' || b[pos] == b',') {
                    pos += 1;
                    let start = pos;
                    let fraction = digits(b, &mut pos, 1, 9)?;
                    nanos = (fraction * 10u64.pow(9 - (pos - start) as u32)) as u32;
                    precision = Precision::Fraction;
                }
            }
        }
    }
    let time = NaiveTime::from_hms_nano_opt(h, mi, s, nanos)?;
    let rest = &b[pos..];
    let offset_seconds = match rest {
        [] => None,
        [b'Z'] | [b'z'] => Some(0),
        _ => Some(parse_offset(rest)?),
    };
    Some(IsoDate {
        local: NaiveDateTime::new(date, time),
        offset_seconds,
        precision,
    })
}

fn digits(b: &[u8], pos: &mut usize, min: usize, max: usize) -> Option<u64> {
    let start = *pos;
    let mut value = 0u64;
    while *pos < b.len() && *pos - start < max && b[*pos].is_ascii_digit() {
        value = value * 10 + (b[*pos] - b'0') as u64;
        *pos += 1;
    }
    (*pos - start >= min).then_some(value)
}

fn eat(b: &[u8], pos: &mut usize, c: u8) -> bool {
    if *pos < b.len() && b[*pos] == c {
        *pos += 1;
        return true;
    }
    false
}

/// Whether the format reads ISO dates (so that our precision-aware ISO parser may be used).
fn reads_iso(format: &DateFormat) -> bool {
    format.parse_millis("1970-01-02T03:04:05.006Z") == Some(97_445_006)
        && format.parse_millis("1970-01") == Some(0)
}

fn looks_like_epoch(text: &str) -> bool {
    let t = text.strip_prefix('-').unwrap_or(text);
    !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit() || c == b'.')
}

fn parse_date(
    text: &str,
    format: &DateFormat,
    format_name: &str,
    zone: &Zone,
    round_up: bool,
) -> Result<i64, QueryError> {
    let text = text.trim();
    let iso_first = reads_iso(format) && !(looks_like_epoch(text) && text.len() > 4);
    if iso_first {
        if let Some(iso) = parse_iso(text) {
            let mut local = iso.local;
            if round_up {
                local = fill_missing_up(local, iso.precision);
            }
            return Ok(match iso.offset_seconds {
                Some(offset) => local.and_utc().timestamp_millis() - offset * 1000,
                None => zone.to_utc_millis(local),
            });
        }
    }
    if let Some(millis) = format.parse_millis(text) {
        if looks_like_epoch(text) {
            return Ok(millis);
        }
        let mut local = DateTime::<Utc>::from_timestamp_millis(millis)
            .unwrap_or_default()
            .naive_utc();
        if round_up && !text.contains(':') && local.time() == NaiveTime::MIN {
            local = fill_missing_up(local, Precision::Day);
        }
        return Ok(zone.to_utc_millis(local));
    }
    let with = if format_name.is_empty() {
        String::new()
    } else {
        format!(" with format [{format_name}]")
    };
    Err(QueryError::Parsing(format!(
        "failed to parse date field [{text}]{with}"
    )))
}

/// OpenSearch's round-up parser: missing time components take their maximum value
/// (missing month and day stay 1).
fn fill_missing_up(local: NaiveDateTime, precision: Precision) -> NaiveDateTime {
    let (h, m, s, ms) = match precision {
        Precision::Year | Precision::Month | Precision::Day => (23, 59, 59, 999),
        Precision::Hour => (local.hour(), 59, 59, 999),
        Precision::Minute => (local.hour(), local.minute(), 59, 999),
        Precision::Second => (local.hour(), local.minute(), local.second(), 999),
        Precision::Fraction => return local,
    };
    local.date().and_hms_milli_opt(h, m, s, ms).unwrap_or(local)
}

fn apply_math(anchor: i64, math: &str, round_up: bool, zone: &Zone) -> Result<i64, QueryError> {
    let mut millis = anchor;
    let chars: Vec<char> = math.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let op = chars[i];
        i += 1;
        let (round, sign) = match op {
            '/' => (true, 0),
            '+' => (false, 1),
            '-' => (false, -1),
            _ => {
                return Err(QueryError::Parsing(format!(
                    "operator not supported for date math [{math}]"
                )))
            }
        };
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        if round && i > start {
            return Err(QueryError::Parsing(format!(
                "rounding `/` can only be used on single unit types [{math}]"
            )));
        }
        let amount: i64 = if i > start {
            chars[start..i]
                .iter()
                .collect::<String>()
                .parse()
                .map_err(|_| {
                    QueryError::Parsing(format!("number too large in date math [{math}]"))
                })?
        } else {
            1
        };
        let Some(&unit) = chars.get(i) else {
            return Err(QueryError::Parsing(format!("truncated date math [{math}]")));
        };
        i += 1;
        if !matches!(unit, 'y' | 'M' | 'w' | 'd' | 'h' | 'H' | 'm' | 's') {
            return Err(QueryError::Parsing(format!(
                "unit [{unit}] not supported for date math [{math}]"
            )));
        }
        millis = if round {
            round_to(millis, unit, round_up, zone)
        } else {
            add(millis, unit, sign * amount, zone)
                .ok_or_else(|| QueryError::Parsing(format!("date math overflow [{math}]")))?
        };
    }
    Ok(millis)
}

fn add(millis: i64, unit: char, amount: i64, zone: &Zone) -> Option<i64> {
    let fixed = |unit_millis: i64| millis.checked_add(amount.checked_mul(unit_millis)?);
    match unit {
        'h' | 'H' => fixed(3_600_000),
        'm' => fixed(60_000),
        's' => fixed(1_000),
        _ => {
            let local = zone.to_local(millis);
            let moved = match unit {
                'd' => local.checked_add_signed(TimeDelta::try_days(amount)?)?,
                'w' => local.checked_add_signed(TimeDelta::try_weeks(amount)?)?,
                'M' | 'y' => {
                    let months = if unit == 'y' {
                        amount.checked_mul(12)?
                    } else {
                        amount
                    };
                    let m = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
                    if months >= 0 {
                        local.checked_add_months(m)?
                    } else {
                        local.checked_sub_months(m)?
                    }
                }
                _ => return None,
            };
            Some(zone.to_utc_millis(moved))
        }
    }
}

fn round_to(millis: i64, unit: char, round_up: bool, zone: &Zone) -> i64 {
    let local = zone.to_local(millis);
    let date = local.date();
    let start = match unit {
        'y' => NaiveDate::from_ymd_opt(date.year(), 1, 1)
            .unwrap_or(date)
            .and_time(NaiveTime::MIN),
        'M' => NaiveDate::from_ymd_opt(date.year(), date.month(), 1)
            .unwrap_or(date)
            .and_time(NaiveTime::MIN),
        'w' => (date - TimeDelta::days(date.weekday().num_days_from_monday() as i64))
            .and_time(NaiveTime::MIN),
        'd' => date.and_time(NaiveTime::MIN),
        'h' | 'H' => date.and_hms_opt(local.hour(), 0, 0).unwrap_or(local),
        'm' => date
            .and_hms_opt(local.hour(), local.minute(), 0)
            .unwrap_or(local),
        _ => date
            .and_hms_opt(local.hour(), local.minute(), local.second())
            .unwrap_or(local),
    };
    let start_millis = zone.to_utc_millis(start);
    if !round_up {
        return start_millis;
    }
    let next = add(start_millis, unit, 1, zone).unwrap_or(i64::MAX);
    next.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2020-03-15T10:30:45.123Z
    const NOW: i64 = 1_584_268_245_123;

    fn iso(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    fn eval(expr: &str, round_up: bool) -> i64 {
        parse_date_math(expr, None, NOW, round_up, None).unwrap()
    }

    #[test]
    fn now_is_the_request_clock() {
        assert_eq!(eval("now", false), NOW);
        assert_eq!(eval("now", true), NOW);
    }

    #[test]
    fn now_minus_one_day_rounded_to_day_rounds_down_or_up() {
        assert_eq!(eval("now-1d/d", false), iso("2020-03-14T00:00:00Z"));
        assert_eq!(eval("now-1d/d", true), iso("2020-03-14T23:59:59.999Z"));
    }

    #[test]
    fn anchored_math_adds_calendar_months_then_rounds() {
        assert_eq!(eval("2020-01-31||+1M", false), iso("2020-02-29T00:00:00Z"));
        assert_eq!(
            eval("2020-01-01||+1M/M", false),
            iso("2020-02-01T00:00:00Z")
        );
        assert_eq!(
            eval("2020-01-01||+1M/M", true),
            iso("2020-02-29T23:59:59.999Z")
        );
        assert_eq!(eval("now+1h-30m/h", false), iso("2020-03-15T11:00:00Z"));
        assert_eq!(eval("now/w", false), iso("2020-03-09T00:00:00Z"));
        assert_eq!(eval("now-1y/y", true), iso("2019-12-31T23:59:59.999Z"));
        assert_eq!(eval("now-2s", false), NOW - 2000);
    }

    #[test]
    fn round_up_fills_missing_time_components() {
        assert_eq!(eval("2020-01-01", false), iso("2020-01-01T00:00:00Z"));
        assert_eq!(eval("2020-01-01", true), iso("2020-01-01T23:59:59.999Z"));
        assert_eq!(
            eval("2020-01-01T10:15", true),
            iso("2020-01-01T10:15:59.999Z")
        );
        assert_eq!(
            eval("2020-01-01T10:15:00.5Z", true),
            iso("2020-01-01T10:15:00.500Z")
        );
        assert_eq!(eval("1577836800000", true), 1_577_836_800_000);
    }

    #[test]
    fn time_zone_shifts_dates_and_rounding_but_not_now_or_epochs() {
        let tz = Some("+01:00");
        assert_eq!(
            parse_date_math("2020-01-01", None, NOW, false, tz).unwrap(),
            iso("2019-12-31T23:00:00Z")
        );
        assert_eq!(
            parse_date_math("2020-01-01T00:00:00Z", None, NOW, false, tz).unwrap(),
            iso("2020-01-01T00:00:00Z")
        );
        assert_eq!(
            parse_date_math("now/d", None, NOW, false, tz).unwrap(),
            iso("2020-03-14T23:00:00Z")
        );
        assert_eq!(parse_date_math("now", None, NOW, false, tz).unwrap(), NOW);
        assert_eq!(
            parse_date_math("100000", None, NOW, false, tz).unwrap(),
            100_000
        );
        // Four digits are a year, as with strict_date_optional_time first.
        assert_eq!(
            parse_date_math("1000", None, NOW, false, None).unwrap(),
            iso("1000-01-01T00:00:00Z")
        );
        let paris = parse_date_math("2020-07-01", None, NOW, false, Some("Europe/Paris")).unwrap();
        assert_eq!(paris, iso("2020-06-30T22:00:00Z"));
    }

    #[test]
    fn custom_formats_parse_the_anchor() {
        let format = DateFormat::parse("dd/MM/yyyy").unwrap();
        let v = parse_date_math("02/01/2020||+1d", Some(&format), NOW, false, None).unwrap();
        assert_eq!(v, iso("2020-01-03T00:00:00Z"));
        let up = parse_date_math("02/01/2020", Some(&format), NOW, true, None).unwrap();
        assert_eq!(up, iso("2020-01-02T23:59:59.999Z"));
    }

    #[test]
    fn bad_date_math_is_a_parsing_error_with_opensearch_text() {
        let err = parse_date_math("now*1d", None, NOW, false, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "operator not supported for date math [*1d]"
        );
        let err = parse_date_math("now+1x", None, NOW, false, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unit [x] not supported for date math [+1x]"
        );
        let err = parse_date_math("now/2d", None, NOW, false, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rounding `/` can only be used on single unit types [/2d]"
        );
        let err = parse_date_math("yesterday", None, NOW, false, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to parse date field [yesterday] with format [strict_date_optional_time||epoch_millis]"
        );
        assert!(parse_date_math("now", None, NOW, false, Some("Mars/Olympus")).is_err());
    }
}
