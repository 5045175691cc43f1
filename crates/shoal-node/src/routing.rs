//! Which shard a document lives on (OpenSearch's murmur3 routing), index name rules,
//! and resolution of index expressions (`a,b`, `logs-*`, aliases, `_all`).

use crate::error::{ApiError, ApiResult};

/// OpenSearch's `Murmur3HashFunction.hash(String)`: murmur3 x86 32-bit, seed 0, over the
/// UTF-16 code units of the string, each written as two little-endian bytes.
pub fn murmur3_hash(routing: &str) -> i32 {
    let mut bytes = Vec::with_capacity(routing.len() * 2);
    for unit in routing.encode_utf16() {
        bytes.push(unit as u8);
        bytes.push((unit >> 8) as u8);
    }
    murmur3::murmur3_32(&mut std::io::Cursor::new(bytes), 0)
        .expect("hashing from memory cannot fail") as i32
}

/// `OperationRouting.calculateScaledShardId` without routing partitions.
pub fn shard_id(routing: &str, number_of_shards: usize, routing_num_shards: usize) -> usize {
    let routing_factor = (routing_num_shards / number_of_shards).max(1);
    let hash = murmur3_hash(routing) as i64;
    (hash.rem_euclid(routing_num_shards as i64) as usize) / routing_factor
}

/// OpenSearch's `MetadataCreateIndexService.validateIndexName`.
pub fn validate_index_name(name: &str) -> ApiResult<()> {
    const INVALID: [char; 10] = ['\\', '/', '*', '?', '"', '<', '>', '|', ' ', ','];
    if name.contains(INVALID) {
        return Err(ApiError::invalid_index_name(
            name,
            r#"must not contain the following characters [ , ", *, \, <, |, ,, >, /, ?]"#,
        ));
    }
    if name.is_empty() {
        return Err(ApiError::invalid_index_name(name, "must not be empty"));
    }
    if name.contains('#') {
        return Err(ApiError::invalid_index_name(name, "must not contain '#'"));
    }
    if name.contains(':') {
        return Err(ApiError::invalid_index_name(name, "must not contain ':'"));
    }
    if name.starts_with(['_', '-', '+']) {
        return Err(ApiError::invalid_index_name(
            name,
            "must not start with '_', '-', or '+'",
        ));
    }
    if name.len() > 255 {
        return Err(ApiError::invalid_index_name(
            name,
            &format!("index name is too long, ({} > 255)", name.len()),
        ));
    }
    if name == "." || name == ".." {
        return Err(ApiError::invalid_index_name(
            name,
            "must not be '.' or '..'",
        ));
    }
    if name.to_lowercase() != name {
        return Err(ApiError::invalid_index_name(name, "must be lowercase"));
    }
    Ok(())
}

/// Simple `*` wildcard matching as OpenSearch's `Regex.simpleMatch`.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let Some(star) = pattern.find('*') else {
        return pattern == text;
    };
    let (head, rest) = (&pattern[..star], &pattern[star + 1..]);
    if !text.starts_with(head) {
        return false;
    }
    let text = &text[head.len()..];
    if rest.is_empty() {
        return true;
    }
    (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .any(|i| wildcard_match(rest, &text[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_opensearch_values() {
        // Values from OpenSearch's Murmur3HashFunctionTests.
        assert_eq!(murmur3_hash("hell"), 0x5a0cb7c3);
        assert_eq!(murmur3_hash("hello"), 0xd7c31989_u32 as i32);
        assert_eq!(murmur3_hash("hello w"), 0x22ab2984);
        assert_eq!(murmur3_hash("hello wo"), 0xdf0ca123_u32 as i32);
        assert_eq!(murmur3_hash("hello wor"), 0xe7744d61_u32 as i32);
        assert_eq!(
            murmur3_hash("The quick brown fox jumps over the lazy dog"),
            0xe07db09c_u32 as i32
        );
        assert_eq!(
            murmur3_hash("The quick brown fox jumps over the lazy cog"),
            0x4e63d2ad
        );
    }

    #[test]
    fn one_shard_routes_everything_to_zero() {
        assert_eq!(shard_id("anything", 1, 1024), 0);
    }

    #[test]
    fn index_names_are_validated_like_opensearch() {
        assert!(validate_index_name("logs-2024").is_ok());
        assert_eq!(
            validate_index_name("Logs").unwrap_err().reason,
            "Invalid index name [Logs], must be lowercase"
        );
        assert_eq!(
            validate_index_name("_x").unwrap_err().reason,
            "Invalid index name [_x], must not start with '_', '-', or '+'"
        );
        assert!(validate_index_name("a*b").is_err());
        assert!(validate_index_name(&"a".repeat(256)).is_err());
        assert!(validate_index_name("a#b").is_err());
    }

    #[test]
    fn wildcards_match() {
        assert!(wildcard_match("logs-*", "logs-1"));
        assert!(wildcard_match("*", "x"));
        assert!(wildcard_match("a*c*e", "abcde"));
        assert!(!wildcard_match("a*c", "abd"));
    }
}
