//! Time values (`1s`, `500ms`, `-1`) and byte sizes (`512mb`) as OpenSearch writes them.

use std::time::Duration;

/// Parses a time value; `Ok(None)` for `-1` (disabled).
pub fn parse_time(text: &str) -> Result<Option<Duration>, String> {
    let text = text.trim();
    if text == "-1" {
        return Ok(None);
    }
    if text == "0" {
        return Ok(Some(Duration::ZERO));
    }
    let units: [(&str, f64); 7] = [
        ("nanos", 1e-9),
        ("micros", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
        ("d", 86400.0),
    ];
    for (suffix, seconds) in units {
        if let Some(number) = text.strip_suffix(suffix) {
            // "ms" also ends with "s": only accept when what is left is a number.
            if let Ok(n) = number.trim().parse::<f64>() {
                if n < 0.0 {
                    return Err(format!("negative durations are not supported: [{text}]"));
                }
                return Ok(Some(Duration::from_secs_f64(n * seconds)));
            }
        }
    }
    Err("unit is missing or unrecognized".to_string())
}

/// A time as OpenSearch prints a date (`strict_date_optional_time`, UTC, milliseconds).
pub fn format_date_millis(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A duration as OpenSearch prints a `TimeValue`: in the largest unit that divides it.
pub fn format_time(duration: Duration) -> String {
    let millis = duration.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if millis >= size && millis % size == 0 {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

/// The units OpenSearch's `ByteSizeValue` reads, each suffix before any shorter one it ends with.
const BYTE_UNITS: [(&str, u64); 11] = [
    ("kb", 1 << 10),
    ("k", 1 << 10),
    ("mb", 1 << 20),
    ("m", 1 << 20),
    ("gb", 1 << 30),
    ("g", 1 << 30),
    ("tb", 1 << 40),
    ("t", 1 << 40),
    ("pb", 1 << 50),
    ("p", 1 << 50),
    ("b", 1),
];

/// Splits a lowercase byte size into its number (trimmed) and its unit's multiplier; `None`
/// when it has no known unit.
pub(crate) fn split_byte_unit(lower: &str) -> Option<(&str, u64)> {
    BYTE_UNITS.iter().find_map(|&(suffix, multiplier)| {
        lower
            .strip_suffix(suffix)
            .map(|number| (number.trim(), multiplier))
    })
}

pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    if lower == "-1" {
        return Ok(u64::MAX);
    }
    let Some((number, multiplier)) = split_byte_unit(&lower) else {
        return Err("unit is missing or unrecognized".to_string());
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("failed to parse [{text}]"))?;
    Ok((n * multiplier as f64) as u64)
}

/// Human-readable bytes as `_cat` prints them (`4.5kb`, `12mb`).
pub fn format_bytes(bytes: u64) -> String {
    let units = [
        ("pb", 1u64 << 50),
        ("tb", 1 << 40),
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
    ];
    for (suffix, size) in units {
        if bytes >= size {
            let value = bytes as f64 / size as f64;
            let text = format!("{value:.1}");
            let text = text.strip_suffix(".0").unwrap_or(&text);
            return format!("{text}{suffix}");
        }
    }
    format!("{bytes}b")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_values_format_like_opensearch() {
        assert_eq!(format_time(Duration::from_secs(60)), "1m");
        assert_eq!(format_time(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_time(Duration::from_secs(2)), "2s");
    }

    #[test]
    fn time_values_parse_like_opensearch() {
        assert_eq!(parse_time("1s"), Ok(Some(Duration::from_secs(1))));
        assert_eq!(parse_time("500ms"), Ok(Some(Duration::from_millis(500))));
        assert_eq!(parse_time("-1"), Ok(None));
        assert_eq!(parse_time("2m"), Ok(Some(Duration::from_secs(120))));
        assert!(parse_time("abc").is_err());
    }

    #[test]
    fn byte_sizes_parse_and_print() {
        assert_eq!(parse_byte_size("512mb"), Ok(512 << 20));
        assert_eq!(parse_byte_size("100b"), Ok(100));
        assert_eq!(format_bytes(4608), "4.5kb");
        assert_eq!(format_bytes(208), "208b");
    }
}
