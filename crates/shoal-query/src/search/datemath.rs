//! Dates in search requests: date math (`now-1d/d`, `2020-01-01||+1M`), time zones, and the
//! rounding of date histograms (fixed and calendar intervals, in any time zone).

use chrono::{
    Datelike, Duration, Months, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Timelike,
    Utc,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shoal_mapping::date::DateFormat;

/// A `time_zone` parameter: a fixed offset or a named (DST-aware) zone.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Zone {
    Fixed(i32),
    Named(#[serde(with = "crate::search::wire::tz")] chrono_tz::Tz),
}

impl Zone {
    pub const UTC: Zone = Zone::Fixed(0);

    pub fn parse(text: &str) -> Result<Zone, String> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("utc") || t == "Z" || t.eq_ignore_ascii_case("gmt") {
            return Ok(Zone::UTC);
        }
        if let Some(sign) = t.chars().next().filter(|c| *c == '+' || *c == '-') {
            let digits: String = t[1..].chars().filter(|c| *c != ':').collect();
            let (h, m) = match digits.len() {
                1 | 2 => (digits.parse::<i32>().ok(), Some(0)),
                4 => (
                    digits[..2].parse::<i32>().ok(),
                    digits[2..].parse::<i32>().ok(),
                ),
                _ => (None, None),
            };
            if let (Some(h), Some(m)) = (h, m) {
                if h <= 18 && m < 60 {
                    let secs = h * 3600 + m * 60;
                    return Ok(Zone::Fixed(if sign == '-' { -secs } else { secs }));
                }
            }
            return Err(format!("Invalid ID for ZoneOffset, invalid format: {t}"));
        }
        t.parse::<chrono_tz::Tz>()
            .map(Zone::Named)
            .map_err(|_| format!("Unknown time-zone ID: {t}"))
    }

    pub fn is_utc(self) -> bool {
        self == Zone::UTC
    }

    /// Offset from UTC in milliseconds at the instant `ms`.
    pub fn offset_ms_at(self, ms: i64) -> i64 {
        match self {
            Zone::Fixed(secs) => secs as i64 * 1000,
            Zone::Named(tz) => match Utc.timestamp_millis_opt(ms).single() {
                Some(utc) => {
                    tz.offset_from_utc_datetime(&utc.naive_utc())
                        .fix()
                        .local_minus_utc() as i64
                        * 1000
                }
                None => 0,
            },
        }
    }

    /// Wall-clock time in this zone at the instant `ms`.
    pub fn local_time(self, ms: i64) -> NaiveDateTime {
        let local = ms + self.offset_ms_at(ms);
        Utc.timestamp_millis_opt(local)
            .single()
            .unwrap_or_default()
            .naive_utc()
    }

    /// The instant of a wall-clock time (earliest for ambiguous times; times in a DST gap move
    /// forward past the gap).
    pub fn instant_of(self, local: NaiveDateTime) -> i64 {
        match self {
            Zone::Fixed(secs) => local.and_utc().timestamp_millis() - secs as i64 * 1000,
            Zone::Named(tz) => {
                let mut candidate = local;
                for _ in 0..4 {
                    if let Some(dt) = tz.from_local_datetime(&candidate).earliest() {
                        return dt.timestamp_millis();
                    }
                    candidate += Duration::minutes(30);
                }
                local.and_utc().timestamp_millis()
            }
        }
    }
}

/// A calendar unit of `calendar_interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CalendarUnit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl CalendarUnit {
    pub fn parse(text: &str) -> Option<CalendarUnit> {
        Some(match text {
            "1s" | "second" => CalendarUnit::Second,
            "1m" | "minute" => CalendarUnit::Minute,
            "1h" | "hour" => CalendarUnit::Hour,
            "1d" | "day" => CalendarUnit::Day,
            "1w" | "week" => CalendarUnit::Week,
            "1M" | "month" => CalendarUnit::Month,
            "1q" | "quarter" => CalendarUnit::Quarter,
            "1y" | "year" => CalendarUnit::Year,
            _ => return None,
        })
    }
}

/// A date histogram interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Interval {
    Fixed(i64),
    Calendar(CalendarUnit),
}

/// Parses a time value such as `30m` or `1500ms` into milliseconds.
pub fn parse_time_millis(text: &str) -> Option<i64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().ok()?;
    let unit_ms = match unit {
        "nanos" => 0.000_001,
        "micros" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    Some((number * unit_ms) as i64)
}

/// Rounds dates down to the start of their bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rounding {
    pub interval: Interval,
    pub zone: Zone,
    pub offset_ms: i64,
}

impl Rounding {
    pub fn round(&self, ms: i64) -> i64 {
        let shifted = ms - self.offset_ms;
        let rounded = match self.interval {
            Interval::Fixed(interval) => match self.zone {
                Zone::Fixed(_) => {
                    let off = self.zone.offset_ms_at(0);
                    (shifted + off).div_euclid(interval) * interval - off
                }
                Zone::Named(_) => {
                    let off = self.zone.offset_ms_at(shifted);
                    let local_floor = (shifted + off).div_euclid(interval) * interval;
                    let local = Utc
                        .timestamp_millis_opt(local_floor)
                        .single()
                        .unwrap_or_default()
                        .naive_utc();
                    let back = self.zone.instant_of(local);
                    if back > shifted {
                        local_floor - off
                    } else {
                        back
                    }
                }
            },
            Interval::Calendar(unit) => {
                let local = self.zone.local_time(shifted);
                self.zone.instant_of(truncate(local, unit))
            }
        };
        rounded + self.offset_ms
    }

    /// The start of the bucket after the one starting at `key`.
    pub fn next(&self, key: i64) -> i64 {
        let next = match self.interval {
            Interval::Fixed(interval) => self.round(key + interval),
            Interval::Calendar(unit) => {
                let local = self.zone.local_time(key - self.offset_ms);
                let stepped = match unit {
                    CalendarUnit::Second => return self.round(key + 1000),
                    CalendarUnit::Minute => return self.round(key + 60_000),
                    CalendarUnit::Hour => return self.round(key + 3_600_000),
                    CalendarUnit::Day => local + Duration::days(1),
                    CalendarUnit::Week => local + Duration::days(7),
                    CalendarUnit::Month => add_months(local, 1),
                    CalendarUnit::Quarter => add_months(local, 3),
                    CalendarUnit::Year => add_months(local, 12),
                };
                self.zone.instant_of(truncate(stepped, unit)) + self.offset_ms
            }
        };
        if next <= key {
            key + 1
        } else {
            next
        }
    }
}

fn add_months(local: NaiveDateTime, months: u32) -> NaiveDateTime {
    local
        .checked_add_months(Months::new(months))
        .unwrap_or(local)
}

fn truncate(local: NaiveDateTime, unit: CalendarUnit) -> NaiveDateTime {
    let date = local.date();
    let midnight = |d: NaiveDate| d.and_time(NaiveTime::MIN);
    match unit {
        CalendarUnit::Second => local.with_nanosecond(0).unwrap_or(local),
        CalendarUnit::Minute => date
            .and_hms_opt(local.hour(), local.minute(), 0)
            .unwrap_or(local),
        CalendarUnit::Hour => date.and_hms_opt(local.hour(), 0, 0).unwrap_or(local),
        CalendarUnit::Day => midnight(date),
        CalendarUnit::Week => {
            midnight(date - Duration::days(date.weekday().num_days_from_monday() as i64))
        }
        CalendarUnit::Month => midnight(date.with_day(1).unwrap_or(date)),
        CalendarUnit::Quarter => {
            let month = (date.month() - 1) / 3 * 3 + 1;
            midnight(NaiveDate::from_ymd_opt(date.year(), month, 1).unwrap_or(date))
        }
        CalendarUnit::Year => midnight(NaiveDate::from_ymd_opt(date.year(), 1, 1).unwrap_or(date)),
    }
}

/// Parses a date given in a request (a bound, a `missing` value, a `search_after` value):
/// epoch millis as a number, date math (`now-1d/d`, `2020-01-01||+1M`), or a date in `format`.
pub fn parse_date(value: &Value, format: &DateFormat, now_millis: i64) -> Result<i64, String> {
    match value {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| format!("failed to parse date field [{n}]")),
        Value::String(s) => crate::dsl::parse_date_math(s, Some(format), now_millis, false, None)
            .map_err(|e| e.to_string()),
        other => Err(format!("failed to parse date field [{other}]")),
    }
}

/// Prints a date with a field's (or an aggregation's) format, in a time zone.
pub fn format_date(ms: i64, format_spec: &str, zone: Zone) -> String {
    let format = match DateFormat::parse(format_spec) {
        Ok(f) => f,
        Err(_) => return ms.to_string(),
    };
    if zone.is_utc() {
        return format.format_millis(ms);
    }
    let first = format_spec.split("||").next().unwrap_or("").trim();
    let offset = zone.offset_ms_at(ms);
    if first.starts_with("epoch_") {
        return format.format_millis(ms);
    }
    if first.contains("date") || first.contains("year") || first.contains("time") {
        let local = Utc
            .timestamp_millis_opt(ms + offset)
            .single()
            .unwrap_or_default();
        let secs = offset / 1000;
        let sign = if secs < 0 { '-' } else { '+' };
        let secs = secs.abs();
        return format!(
            "{}{}{:02}:{:02}",
            local.format("%Y-%m-%dT%H:%M:%S%.3f"),
            sign,
            secs / 3600,
            secs % 3600 / 60
        );
    }
    format.format_millis(ms + offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn iso(ms: i64) -> String {
        shoal_mapping::date::format_iso(ms)
    }

    fn default_format() -> DateFormat {
        DateFormat::parse(shoal_mapping::date::DEFAULT_DATE_FORMAT).unwrap()
    }

    #[test]
    fn date_math_adds_and_rounds() {
        let now = parse_date(&json!("2020-03-15T10:20:30Z"), &default_format(), 0).unwrap();
        let f = default_format();
        assert_eq!(
            iso(parse_date(&json!("now-1d/d"), &f, now).unwrap()),
            "2020-03-14T00:00:00.000Z"
        );
        assert_eq!(
            iso(parse_date(&json!("now/M"), &f, now).unwrap()),
            "2020-03-01T00:00:00.000Z"
        );
        assert_eq!(
            iso(parse_date(&json!("2020-01-31||+1M"), &f, now).unwrap()),
            "2020-02-29T00:00:00.000Z"
        );
        assert_eq!(parse_date(&json!(1000), &f, now).unwrap(), 1000);
        assert!(parse_date(&json!("yesterday"), &f, now).is_err());
    }

    #[test]
    fn calendar_rounding_follows_the_time_zone() {
        let f = default_format();
        let ms = parse_date(&json!("2020-03-29T00:30:00Z"), &f, 0).unwrap();
        let month = Rounding {
            interval: Interval::Calendar(CalendarUnit::Month),
            zone: Zone::UTC,
            offset_ms: 0,
        };
        assert_eq!(iso(month.round(ms)), "2020-03-01T00:00:00.000Z");
        assert_eq!(iso(month.next(month.round(ms))), "2020-04-01T00:00:00.000Z");
        let paris = Zone::parse("Europe/Paris").unwrap();
        let day = Rounding {
            interval: Interval::Calendar(CalendarUnit::Day),
            zone: paris,
            offset_ms: 0,
        };
        // 00:30Z is 01:30 in Paris (UTC+1 before the switch at 02:00 local).
        assert_eq!(iso(day.round(ms)), "2020-03-28T23:00:00.000Z");
        // The next Paris day starts at 22:00Z: the day of the switch lasts 23 hours.
        assert_eq!(iso(day.next(day.round(ms))), "2020-03-29T22:00:00.000Z");
        let week = Rounding {
            interval: Interval::Calendar(CalendarUnit::Week),
            zone: Zone::UTC,
            offset_ms: 0,
        };
        assert_eq!(iso(week.round(ms)), "2020-03-23T00:00:00.000Z");
        let fixed = Rounding {
            interval: Interval::Fixed(3_600_000),
            zone: Zone::parse("+05:30").unwrap(),
            offset_ms: 0,
        };
        assert_eq!(iso(fixed.round(ms)), "2020-03-29T00:30:00.000Z");
        assert_eq!(
            format_date(fixed.round(ms), "strict_date_optional_time", fixed.zone),
            "2020-03-29T06:00:00.000+05:30"
        );
    }

    #[test]
    fn intervals_and_zones_parse() {
        assert_eq!(parse_time_millis("90s"), Some(90_000));
        assert_eq!(parse_time_millis("1M"), None);
        assert_eq!(CalendarUnit::parse("1M"), Some(CalendarUnit::Month));
        assert_eq!(CalendarUnit::parse("2d"), None);
        assert_eq!(Zone::parse("-05:00").unwrap(), Zone::Fixed(-5 * 3600));
        assert!(Zone::parse("Mars/Olympus").is_err());
    }
}
