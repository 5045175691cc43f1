//! Text renderings that OpenSearch puts inside explanations and errors: node and shard-copy
//! descriptions, byte sizes, durations and timestamps. Kept byte-compatible with the Java
//! `toString()`s because clients grep these messages.

use shoal_state::{DiscoveryNode, RecoverySource, ShardRouting, UnassignedInfo};

/// A Java `double` as `String.valueOf` prints it for the values we meet (`85.0`, `12.5`).
pub fn java_double(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// Keeps one decimal, truncated and dropped when zero, like `Strings.format1Decimals` and
/// `TimeValue.toString`: `1.56` → `1.5`, `2.0` → `2`.
fn one_decimal(value: f64) -> String {
    let text = java_double(value);
    match text.split_once('.') {
        Some((int, frac)) => match frac.chars().next() {
            Some(digit) if digit != '0' && digit.is_ascii_digit() => format!("{int}.{digit}"),
            _ => int.to_string(),
        },
        None => text,
    }
}

const KB: u64 = 1024;
const MB: u64 = KB * 1024;
const GB: u64 = MB * 1024;
const TB: u64 = GB * 1024;
const PB: u64 = TB * 1024;

/// `ByteSizeValue.toString()`: `0b`, `512kb`, `1.5gb`.
pub fn format_bytes(bytes: u64) -> String {
    let (unit, suffix) = match bytes {
        b if b >= PB => (PB, "pb"),
        b if b >= TB => (TB, "tb"),
        b if b >= GB => (GB, "gb"),
        b if b >= MB => (MB, "mb"),
        b if b >= KB => (KB, "kb"),
        _ => (1, "b"),
    };
    format!("{}{suffix}", one_decimal(bytes as f64 / unit as f64))
}

/// `ByteSizeValue.parseBytesSizeValue`: a number with a unit (`500mb`, `1.5gb`, `10b`), or `0`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    if text == "0" {
        return Some(0);
    }
    let units: [(&str, u64); 11] = [
        ("pb", PB),
        ("tb", TB),
        ("gb", GB),
        ("mb", MB),
        ("kb", KB),
        ("p", PB),
        ("t", TB),
        ("g", GB),
        ("m", MB),
        ("k", KB),
        ("b", 1),
    ];
    let (number, factor) = units
        .iter()
        .find_map(|(suffix, factor)| text.strip_suffix(suffix).map(|n| (n.trim(), *factor)))?;
    let value: f64 = number.parse().ok()?;
    // Rejects negatives and NaN.
    if value.is_nan() || value < 0.0 {
        return None;
    }
    Some((value * factor as f64) as u64)
}

/// `TimeValue.toString()`: `59.9s`, `1m`, `0s`.
pub fn time_value(millis: i64) -> String {
    if millis < 0 {
        return millis.to_string();
    }
    if millis == 0 {
        return "0s".to_string();
    }
    let ms = millis as f64;
    let (value, suffix) = match millis {
        m if m >= 86_400_000 => (ms / 86_400_000.0, "d"),
        m if m >= 3_600_000 => (ms / 3_600_000.0, "h"),
        m if m >= 60_000 => (ms / 60_000.0, "m"),
        m if m >= 1_000 => (ms / 1_000.0, "s"),
        _ => (ms, "ms"),
    };
    format!("{}{suffix}", one_decimal(value))
}

/// Milliseconds since the epoch as OpenSearch's `dateOptionalTime` in UTC:
/// `2024-05-01T12:00:00.000Z`.
pub fn iso_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1_000 % 60,
        in_day % 1_000
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `DiscoveryNode.toString()`: `{name}{id}{ephemeralId}{host}{address}{roles}{attributes}`.
/// A node without an ephemeral id (older state) shows its id there.
pub fn describe_node(node: &DiscoveryNode) -> String {
    let mut out = String::new();
    if !node.name.is_empty() {
        out.push_str(&format!("{{{}}}", node.name));
    }
    out.push_str(&format!(
        "{{{}}}{{{}}}{{{}}}{{{}}}",
        node.id,
        if node.ephemeral_id.is_empty() {
            &node.id
        } else {
            &node.ephemeral_id
        },
        node.host,
        node.transport_address
    ));
    if !node.roles.is_empty() {
        out.push_str(&format!("{{{}}}", node.role_letters()));
    }
    if !node.attributes.is_empty() {
        let attrs: Vec<String> = node
            .attributes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!("{{{}}}", attrs.join(", ")));
    }
    out
}

fn recovery_source_text(source: RecoverySource, bootstrap_new_history_uuid: bool) -> String {
    match source {
        RecoverySource::EmptyStore => "new shard recovery".to_string(),
        RecoverySource::ExistingStore => {
            format!("existing store recovery; bootstrap_history_uuid={bootstrap_new_history_uuid}")
        }
        RecoverySource::Peer => "peer recovery".to_string(),
        RecoverySource::RemoteStore => "remote store recovery".to_string(),
        RecoverySource::Snapshot => "snapshot recovery".to_string(),
    }
}

/// `UnassignedInfo.toString()`.
pub fn describe_unassigned(info: &UnassignedInfo) -> String {
    let mut out = format!(
        "[reason={}], at[{}]",
        info.reason.as_str(),
        iso_millis(info.at_millis)
    );
    if info.failed_allocations > 0 {
        out.push_str(&format!(", failed_attempts[{}]", info.failed_allocations));
    }
    out.push_str(&format!(", delayed={}", info.delayed));
    if let Some(details) = &info.details {
        out.push_str(&format!(", details[{details}]"));
    }
    out.push_str(&format!(
        ", allocation_status[{}]",
        info.last_allocation_status
    ));
    format!("unassigned_info[{out}]")
}

/// `ShardRouting.shortSummary()`:
/// `[index][0], node[id], [P], recovery_source[...], s[STARTED], a[id=...]`.
pub fn describe_copy(copy: &ShardRouting) -> String {
    let mut out = format!(
        "[{}][{}], node[{}], ",
        copy.index,
        copy.shard,
        copy.node.as_deref().unwrap_or("null")
    );
    if let Some(relocating) = &copy.relocating_node {
        out.push_str(&format!("relocating [{relocating}], "));
    }
    out.push_str(if copy.primary { "[P]" } else { "[R]" });
    if let Some(source) = copy.recovery_source {
        out.push_str(&format!(
            ", recovery_source[{}]",
            recovery_source_text(source, copy.bootstrap_new_history_uuid)
        ));
    }
    out.push_str(&format!(", s[{}]", copy.state.as_str()));
    if let Some(id) = &copy.allocation_id {
        out.push_str(&format!(", a[id={id}]"));
    }
    if let Some(info) = &copy.unassigned {
        out.push_str(&format!(", {}", describe_unassigned(info)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_render_like_byte_size_value() {
        assert_eq!(format_bytes(0), "0b");
        assert_eq!(format_bytes(500 * MB), "500mb");
        assert_eq!(format_bytes(GB + GB / 2), "1.5gb");
        assert_eq!(format_bytes(1023), "1023b");
        assert_eq!(parse_bytes("500mb"), Some(500 * MB));
        assert_eq!(parse_bytes("1.5g"), Some(GB + GB / 2));
        assert_eq!(parse_bytes("85%"), None);
        assert_eq!(parse_bytes("12"), None);
    }

    #[test]
    fn durations_render_like_time_value() {
        assert_eq!(time_value(59_900), "59.9s");
        assert_eq!(time_value(60_000), "1m");
        assert_eq!(time_value(90_000), "1.5m");
        assert_eq!(time_value(0), "0s");
        assert_eq!(time_value(250), "250ms");
    }

    #[test]
    fn timestamps_are_iso_utc() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_714_564_800_123), "2024-05-01T12:00:00.123Z");
    }

    #[test]
    fn doubles_print_like_java() {
        assert_eq!(java_double(85.0), "85.0");
        assert_eq!(java_double(12.5), "12.5");
    }
}
