//! Date formats as OpenSearch names them (`strict_date_optional_time||epoch_millis`,
//! Java-style patterns such as `yyyy-MM-dd HH:mm:ss`). Dates are milliseconds since epoch.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};

pub const DEFAULT_DATE_FORMAT: &str = "strict_date_optional_time||epoch_millis";

/// One alternative of a `||`-separated format.
#[derive(Debug, Clone, PartialEq)]
enum FormatPart {
    DateOptionalTime,
    EpochMillis,
    EpochSecond,
    /// A Java pattern converted to a chrono format string.
    Pattern {
        chrono: String,
        has_time: bool,
        has_zone: bool,
    },
}

/// A parsed date format.
#[derive(Debug, Clone, PartialEq)]
pub struct DateFormat {
    parts: Vec<FormatPart>,
}

impl DateFormat {
    pub fn parse(spec: &str) -> Result<DateFormat, String> {
        let mut parts = Vec::new();
        for name in spec.split("||") {
            let name = name.trim();
            let part = match name {
                "strict_date_optional_time"
                | "date_optional_time"
                | "strict_date_time"
                | "date_time"
                | "strict_date_optional_time_nanos"
                | "strict_date_time_no_millis"
                | "date_time_no_millis"
                | "strict_date"
                | "date"
                | "strict_year_month_day"
                | "year_month_day"
                | "strict_year_month"
                | "year_month"
                | "strict_year"
                | "year" => FormatPart::DateOptionalTime,
                "epoch_millis" => FormatPart::EpochMillis,
                "epoch_second" => FormatPart::EpochSecond,
                "basic_date" => java_pattern("yyyyMMdd")?,
                "basic_date_time" => java_pattern("yyyyMMdd'T'HHmmss.SSSZ")?,
                "basic_date_time_no_millis" => java_pattern("yyyyMMdd'T'HHmmssZ")?,
                "" => return Err("empty date format".to_string()),
                pattern => java_pattern(pattern)?,
            };
            parts.push(part);
        }
        Ok(DateFormat { parts })
    }

    /// Parses a date string into epoch milliseconds, trying each alternative in order.
    pub fn parse_millis(&self, text: &str) -> Option<i64> {
        let text = text.trim();
        self.parts.iter().find_map(|part| parse_with(part, text))
    }

    /// Prints epoch milliseconds with the first alternative of the format.
    pub fn format_millis(&self, millis: i64) -> String {
        match self.parts.first() {
            Some(FormatPart::EpochMillis) => millis.to_string(),
            Some(FormatPart::EpochSecond) => (millis / 1000).to_string(),
            Some(FormatPart::Pattern { chrono, .. }) => to_utc(millis).format(chrono).to_string(),
            Some(FormatPart::DateOptionalTime) | None => format_iso(millis),
        }
    }

    /// Whether a JSON number is read as epoch millis (or seconds) by this format.
    pub fn numeric_unit_millis(&self) -> Option<i64> {
        self.parts.iter().find_map(|part| match part {
            FormatPart::EpochMillis => Some(1),
            FormatPart::EpochSecond => Some(1000),
            _ => None,
        })
    }
}

/// Formats epoch millis as `2020-01-01T00:00:00.000Z`, OpenSearch's default output.
pub fn format_iso(millis: i64) -> String {
    to_utc(millis).format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

fn to_utc(millis: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(millis)
        .single()
        .unwrap_or_default()
}

fn parse_with(part: &FormatPart, text: &str) -> Option<i64> {
    match part {
        FormatPart::DateOptionalTime => parse_date_optional_time(text),
        FormatPart::EpochMillis => parse_epoch(text, 1),
        FormatPart::EpochSecond => parse_epoch(text, 1000),
        FormatPart::Pattern {
            chrono,
            has_time,
            has_zone,
        } => {
            if *has_zone {
                return DateTime::parse_from_str(text, chrono)
                    .ok()
                    .map(|d| d.timestamp_millis());
            }
            if *has_time {
                return NaiveDateTime::parse_from_str(text, chrono)
                    .ok()
                    .map(|d| d.and_utc().timestamp_millis());
            }
            NaiveDate::parse_from_str(text, chrono)
                .ok()
                .map(|d| d.and_time(NaiveTime::MIN).and_utc().timestamp_millis())
        }
    }
}

fn parse_epoch(text: &str, unit_millis: i64) -> Option<i64> {
    if let Ok(n) = text.parse::<i64>() {
        return n.checked_mul(unit_millis);
    }
    let f = text.parse::<f64>().ok()?;
    f.is_finite().then(|| (f * unit_millis as f64) as i64)
}

/// `yyyy[-MM[-dd[('T'|' ')HH[:mm[:ss[.fraction]]]]]][zone]`, zone = `Z` | `±HH[:]mm` | `±HH`.
fn parse_date_optional_time(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative_year = bytes.first() == Some(&b'-');
    if negative_year {
        pos = 1;
    }
    let year = read_digits(bytes, &mut pos, 4, 4)? as i32;
    let year = if negative_year { -year } else { year };
    let mut month = 1;
    let mut day = 1;
    if eat(bytes, &mut pos, b'-') {
        month = read_digits(bytes, &mut pos, 1, 2)? as u32;
        if eat(bytes, &mut pos, b'-') {
            day = read_digits(bytes, &mut pos, 1, 2)? as u32;
        }
    }
    let date = NaiveDate::from_ymd_opt(year, month, day)?;
    let (mut hour, mut minute, mut second, mut nanos) = (0, 0, 0, 0u32);
    if pos < bytes.len() && bytes[pos] == b'T' {
        pos += 1;
        hour = read_digits(bytes, &mut pos, 2, 2)? as u32;
        if eat(bytes, &mut pos, b':') {
            minute = read_digits(bytes, &mut pos, 2, 2)? as u32;
            if eat(bytes, &mut pos, b':') {
                second = read_digits(bytes, &mut pos, 2, 2)? as u32;
                if pos < bytes.len() && (bytes[pos] == b'.' || bytes[pos] == b',') {
                    pos += 1;
                    let start = pos;
                    let fraction = read_digits(bytes, &mut pos, 1, 9)?;
                    let digits = (pos - start) as u32;
                    nanos = (fraction * 10u64.pow(9 - digits)) as u32;
                }
            }
        }
    }
    let time = NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)?;
    let offset_seconds = parse_zone(&bytes[pos..])?;
    let local = NaiveDateTime::new(date, time).and_utc().timestamp_millis();
    Some(local - offset_seconds * 1000)
}

fn parse_zone(bytes: &[u8]) -> Option<i64> {
    match bytes {
        [] | [b'Z'] | [b'z'] => Some(0),
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let mut pos = 0;
            let hours = read_digits(rest, &mut pos, 2, 2)? as i64;
            eat(rest, &mut pos, b':');
            let minutes = if pos < rest.len() {
                read_digits(rest, &mut pos, 2, 2)? as i64
            } else {
                0
            };
            if pos != rest.len() {
                return None;
            }
            let offset = hours * 3600 + minutes * 60;
            Some(if *sign == b'-' { -offset } else { offset })
        }
        _ => None,
    }
}

fn read_digits(bytes: &[u8], pos: &mut usize, min: usize, max: usize) -> Option<u64> {
    let start = *pos;
    let mut value = 0u64;
    while *pos < bytes.len() && *pos - start < max && bytes[*pos].is_ascii_digit() {
        value = value * 10 + (bytes[*pos] - b'0') as u64;
        *pos += 1;
    }
    (*pos - start >= min).then_some(value)
}

fn eat(bytes: &[u8], pos: &mut usize, expected: u8) -> bool {
    if *pos < bytes.len() && bytes[*pos] == expected {
        *pos += 1;
        return true;
    }
    false
}

/// Converts a Java `DateTimeFormatter` pattern to a chrono format string.
fn java_pattern(pattern: &str) -> Result<FormatPart, String> {
    let mut out = String::new();
    let chars: Vec<char> = pattern.chars().collect();
    let (mut has_time, mut has_zone) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                push_literal(&mut out, chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        let mut run = 1;
        while i + run < chars.len() && chars[i + run] == c {
            run += 1;
        }
        let spec = match (c, run) {
            ('y' | 'u', 2) => "%y",
            ('y' | 'u', _) => "%Y",
            ('M', 1 | 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', _) => "%d",
            ('D', _) => "%j",
            ('H', _) => {
                has_time = true;
                "%H"
            }
            ('h', _) => {
                has_time = true;
                "%I"
            }
            ('a', _) => "%p",
            ('m', _) => "%M",
            ('s', _) => "%S",
            ('S', 1..=3) => "%3f",
            ('S', 4..=6) => "%6f",
            ('S', _) => "%9f",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('Z', _) | ('x', _) => {
                has_zone = true;
                "%z"
            }
            ('X', _) | ('z', _) => {
                has_zone = true;
                "%:z"
            }
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!(
                    "unsupported date pattern letter [{c}] in [{pattern}]"
                ))
            }
            _ => {
                for _ in 0..run {
                    push_literal(&mut out, c);
                }
                i += run;
                continue;
            }
        };
        out.push_str(spec);
        i += run;
    }
    Ok(FormatPart::Pattern {
        chrono: out,
        has_time,
        has_zone,
    })
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(format: &str, text: &str) -> Option<i64> {
        DateFormat::parse(format).unwrap().parse_millis(text)
    }

    #[test]
    fn default_format_reads_iso_dates_and_epoch_millis() {
        assert_eq!(millis(DEFAULT_DATE_FORMAT, "1970-01-02"), Some(86_400_000));
        assert_eq!(
            millis(DEFAULT_DATE_FORMAT, "1970-01-01T00:00:01.5Z"),
            Some(1500)
        );
        assert_eq!(
            millis(DEFAULT_DATE_FORMAT, "1970-01-01T01:00:00+01:00"),
            Some(0)
        );
        assert_eq!(
            millis(DEFAULT_DATE_FORMAT, "1420070400001"),
            Some(1420070400001)
        );
        assert_eq!(millis(DEFAULT_DATE_FORMAT, "not a date"), None);
        assert_eq!(millis(DEFAULT_DATE_FORMAT, "2020-13-01"), None);
    }

    #[test]
    fn java_patterns_parse() {
        assert_eq!(
            millis("yyyy-MM-dd HH:mm:ss", "1970-01-01 00:00:10"),
            Some(10_000)
        );
        assert_eq!(millis("yyyy/MM/dd", "1970/01/02"), Some(86_400_000));
        assert_eq!(millis("epoch_second", "2"), Some(2000));
    }

    #[test]
    fn default_output_is_iso_with_millis() {
        let f = DateFormat::parse(DEFAULT_DATE_FORMAT).unwrap();
        assert_eq!(f.format_millis(1500), "1970-01-01T00:00:01.500Z");
    }
}
