//! Which copy of a shard serves a read: the `preference` parameter of searches and gets,
//! applied to the active copies the routing table lists. The result is an ordered list, so a
//! read that fails on one copy moves on to the next (read failover).

use std::hash::{Hash, Hasher};

use std::collections::BTreeSet;

use shoal_state::{ClusterState, ShardRouting};

use crate::error::{ApiError, ApiResult};

/// A copy a read can go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRef {
    pub node_id: String,
    /// The node's transport address; `None` when the copy is on this node.
    pub address: Option<String>,
    pub primary: bool,
}

impl CopyRef {
    pub fn is_local(&self) -> bool {
        self.address.is_none()
    }
}

/// OpenSearch's `preference` values (without the `_shards:` prefix, see [`parse_preference`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Preference {
    /// Spread reads over the copies.
    #[default]
    Default,
    Primary,
    PrimaryFirst,
    Replica,
    ReplicaFirst,
    Local,
    OnlyLocal,
    OnlyNodes(Vec<String>),
    PreferNodes(Vec<String>),
    /// Any other string: the same copies for the same string (consistent paging).
    Custom(String),
}

/// Parses `preference`, returning the `_shards:` restriction separately
/// (`_shards:0,2|_local` = shards 0 and 2, local copies first).
pub fn parse_preference(text: Option<&str>) -> ApiResult<(Preference, Option<Vec<usize>>)> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Ok((Preference::Default, None));
    };
    let (shards, rest) = match text.strip_prefix("_shards:") {
        Some(spec) => {
            let (list, rest) = spec.split_once('|').unwrap_or((spec, ""));
            (Some(parse_shard_list(list)?), rest)
        }
        None => (None, text),
    };
    Ok((parse_copy_preference(rest)?, shards))
}

fn parse_shard_list(list: &str) -> ApiResult<Vec<usize>> {
    list.split(',')
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("No shard id [{s}] found")))
        })
        .collect()
}

fn parse_copy_preference(text: &str) -> ApiResult<Preference> {
    let nodes = |list: &str| list.split(',').map(|s| s.trim().to_string()).collect();
    Ok(match text {
        "" => Preference::Default,
        "_primary" => Preference::Primary,
        "_primary_first" => Preference::PrimaryFirst,
        "_replica" => Preference::Replica,
        "_replica_first" => Preference::ReplicaFirst,
        "_local" => Preference::Local,
        "_only_local" => Preference::OnlyLocal,
        other if other.starts_with("_only_nodes:") => {
            Preference::OnlyNodes(nodes(&other["_only_nodes:".len()..]))
        }
        other if other.starts_with("_prefer_nodes:") => {
            Preference::PreferNodes(nodes(&other["_prefer_nodes:".len()..]))
        }
        other if other.starts_with('_') => {
            return Err(ApiError::bad_request(format!(
                "no Preference for [{other}]"
            )))
        }
        other => Preference::Custom(other.to_string()),
    })
}

/// The active copies of a shard in the order a read should try them. `rotation` spreads
/// default-preference reads; `shard` keeps custom preferences apart per shard.
pub fn ordered_copies(
    state: &ClusterState,
    index: &str,
    shard: usize,
    preference: &Preference,
    local_node: &str,
    rotation: usize,
) -> ApiResult<Vec<CopyRef>> {
    let mut copies: Vec<&ShardRouting> = state
        .copies(index, shard as u32)
        .iter()
        .filter(|c| c.is_active() && c.node.is_some())
        .collect();
    // A stable base order, so rotations and hashes pick the same copy for the same input.
    copies.sort_by(|a, b| a.node.cmp(&b.node));
    let is_local = |c: &ShardRouting| c.node.as_deref() == Some(local_node);
    match preference {
        Preference::Default => rotate(&mut copies, rotation),
        Preference::Custom(key) => rotate(&mut copies, hash_of(key, shard)),
        Preference::Primary => copies.retain(|c| c.primary),
        Preference::Replica => copies.retain(|c| !c.primary),
        Preference::PrimaryFirst => copies.sort_by_key(|c| !c.primary),
        Preference::ReplicaFirst => copies.sort_by_key(|c| c.primary),
        Preference::Local => copies.sort_by_key(|c| !is_local(c)),
        Preference::OnlyLocal => copies.retain(|c| is_local(c)),
        Preference::OnlyNodes(specs) => {
            let chosen = selected_nodes(state, local_node, specs);
            if chosen.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "no data nodes with criteria [{}] found for shard: [{index}][{shard}]",
                    specs.join(",")
                )));
            }
            copies.retain(|c| c.node.as_ref().is_some_and(|n| chosen.contains(n)));
        }
        Preference::PreferNodes(specs) => {
            let chosen = selected_nodes(state, local_node, specs);
            copies.sort_by_key(|c| !c.node.as_ref().is_some_and(|n| chosen.contains(n)))
        }
    }
    Ok(copies
        .into_iter()
        .map(|c| {
            let node_id = c.node.clone().unwrap_or_default();
            let address = (!is_local(c)).then(|| {
                state
                    .nodes
                    .get(&node_id)
                    .map(|n| n.transport_address.clone())
                    .unwrap_or_default()
            });
            CopyRef {
                node_id,
                address,
                primary: c.primary,
            }
        })
        .collect())
}

fn rotate<T>(items: &mut [T], by: usize) {
    if !items.is_empty() {
        let by = by % items.len();
        items.rotate_left(by);
    }
}

fn hash_of(key: &str, shard: usize) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    shard.hash(&mut hasher);
    hasher.finish() as usize
}

/// The node ids `_only_nodes:` / `_prefer_nodes:` name (ids, names and `attr:value`, with
/// wildcards: the node selectors of `_nodes`).
fn selected_nodes(state: &ClusterState, local_node: &str, specs: &[String]) -> BTreeSet<String> {
    crate::core::node_selectors::resolve_node_selectors(state, local_node, specs)
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_prefix_splits_from_the_copy_preference() {
        let (pref, shards) = parse_preference(Some("_shards:0,2|_local")).unwrap();
        assert_eq!(pref, Preference::Local);
        assert_eq!(shards, Some(vec![0, 2]));
        let (pref, shards) = parse_preference(Some("_shards:1")).unwrap();
        assert_eq!(pref, Preference::Default);
        assert_eq!(shards, Some(vec![1]));
    }

    #[test]
    fn named_preferences_parse_and_unknown_underscore_values_are_rejected() {
        assert_eq!(
            parse_preference(Some("_only_nodes:n1,zone:a")).unwrap().0,
            Preference::OnlyNodes(vec!["n1".into(), "zone:a".into()])
        );
        assert_eq!(
            parse_preference(Some("user-42")).unwrap().0,
            Preference::Custom("user-42".into())
        );
        let error = parse_preference(Some("_bogus")).unwrap_err();
        assert_eq!(error.status, 400);
        assert!(parse_preference(Some("_shards:x")).is_err());
    }

    #[test]
    fn rotation_visits_every_copy() {
        let mut seen = std::collections::BTreeSet::new();
        for r in 0..3 {
            let mut items = vec![1, 2, 3];
            rotate(&mut items, r);
            seen.insert(items[0]);
        }
        assert_eq!(seen.len(), 3);
    }
}
