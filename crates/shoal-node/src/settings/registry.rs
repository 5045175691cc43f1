//! The registry of OpenSearch 2.18 built-in settings (name, default, properties), used to
//! refuse unknown settings, to tell dynamic from static ones, and for `include_defaults`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One built-in setting.
#[derive(Debug, Clone)]
pub struct SettingDef {
    pub key: String,
    pub default: String,
    pub dynamic: bool,
    pub is_final: bool,
    pub private: bool,
    pub index_scope: bool,
    /// A group setting such as `index.routing.allocation.include.` (any suffix).
    pub prefix: bool,
}

pub struct Registry {
    exact: BTreeMap<String, SettingDef>,
    prefixes: Vec<SettingDef>,
}

/// Settings Shoal adds or treats differently from the OpenSearch list.
const SHOAL_EXTRA: &[&str] = &[
    "I index.codec.compression_level = 3  [IndexScope]",
    // Correctness first: every byte of a store is verified when it opens (OpenSearch: false).
    "I index.shard.check_on_startup = checksum  [IndexScope]",
    "I index.number_of_routing_shards = 1  [Final, IndexScope]",
    "I index.uuid =   [IndexScope, PrivateIndex]",
    "I index.creation_date = 0  [IndexScope, PrivateIndex]",
    "I index.provided_name =   [IndexScope, PrivateIndex]",
    "I index.version.created = 0  [IndexScope, PrivateIndex]",
    "I index.version.upgraded = 0  [IndexScope, PrivateIndex]",
    "C http.max_content_length = 100mb  [NodeScope]",
    // OpenSearch 3.4's merged-segment warmer (crates/shoal-node/src/segrep/precopy.rs), on by
    // default in Shoal and with a threshold sized for a lag budget, not OpenSearch's 500mb.
    "C indices.replication.merges.warmer.enabled = true  [Dynamic, NodeScope]",
    "C indices.replication.merges.warmer.max_bytes_per_sec = -1b  [Dynamic, NodeScope]",
    "C indices.replication.merges.warmer.min_segment_size_threshold = 2mb  [Dynamic, NodeScope]",
    "C indices.replication.merges.warmer.timeout = 15m  [Dynamic, NodeScope]",
];

pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut exact = BTreeMap::new();
        let mut prefixes = Vec::new();
        for line in include_str!("builtin.txt")
            .lines()
            .chain(SHOAL_EXTRA.iter().copied())
        {
            let Some(def) = parse_line(line) else {
                continue;
            };
            if def.prefix {
                prefixes.push(def);
            } else {
                exact.insert(def.key.clone(), def);
            }
        }
        Registry { exact, prefixes }
    })
}

fn parse_line(line: &str) -> Option<SettingDef> {
    let (scope, rest) = line.split_once(' ')?;
    let (key, rest) = rest.split_once(" = ")?;
    let (default, props) = rest.rsplit_once("  [")?;
    let props = props.trim_end_matches(']');
    let has = |p: &str| props.split(", ").any(|x| x == p);
    let key = key.trim().to_string();
    Some(SettingDef {
        prefix: key.ends_with('.') || key.contains(".*."),
        default: default.trim().to_string(),
        dynamic: has("Dynamic"),
        is_final: has("Final"),
        private: has("PrivateIndex") || has("InternalIndex"),
        index_scope: scope == "I",
        key,
    })
}

impl Registry {
    pub fn get(&self, key: &str) -> Option<&SettingDef> {
        if let Some(def) = self.exact.get(key) {
            return Some(def);
        }
        self.prefixes
            .iter()
            .find(|def| matches_prefix(&def.key, key))
    }

    /// Built-in index settings with their defaults (for `include_defaults`).
    pub fn index_defaults(&self) -> impl Iterator<Item = &SettingDef> {
        self.exact.values().filter(|d| d.index_scope && !d.private)
    }

    /// Built-in cluster settings with their defaults.
    pub fn cluster_defaults(&self) -> impl Iterator<Item = &SettingDef> {
        self.exact.values().filter(|d| !d.index_scope)
    }
}

fn matches_prefix(pattern: &str, key: &str) -> bool {
    match pattern.split_once(".*.") {
        Some((head, tail)) => key
            .strip_prefix(head)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(_, t)| t == tail),
        None => key.starts_with(pattern) && key.len() > pattern.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knows_dynamic_static_and_final_index_settings() {
        let r = registry();
        assert!(r.get("index.number_of_replicas").unwrap().dynamic);
        assert!(!r.get("index.codec").unwrap().dynamic);
        assert!(r.get("index.number_of_shards").unwrap().is_final);
        assert!(r.get("index.routing.allocation.include._name").is_some());
        assert!(r.get("index.bogus").is_none());
        assert!(r.get("breaker.fielddata.limit").is_some());
    }
}
