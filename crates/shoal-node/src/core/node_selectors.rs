//! Which nodes a node selector names (`_nodes/<selectors>`, `_cat/nodes`, a search's
//! `preference=_only_nodes:`): a pure function of the cluster state, so the read side and the
//! cluster API share it.

use std::collections::BTreeSet;

use shoal_state::ClusterState;

use crate::routing::wildcard_match;

/// `DiscoveryNodes.resolveNodes`: `_local`, `_all`, `_cluster_manager`/`_master`, ids, names,
/// host names or addresses (with `*` wildcards), `role:true|false` (`data`, `ingest`,
/// `cluster_manager`/`master`, `remote_cluster_client`, `coordinating_only`) and
/// `attribute:value` (wildcards on both sides). Selectors apply in order, so `data:false` can
/// remove what an earlier one added. No selector means every node. Ids come back in state order.
pub fn resolve_node_selectors(
    state: &ClusterState,
    local_id: &str,
    selectors: &[String],
) -> Vec<String> {
    if selectors.is_empty() {
        return state.nodes.keys().cloned().collect();
    }
    let mut chosen: BTreeSet<String> = BTreeSet::new();
    for selector in selectors.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        apply_selector(state, local_id, selector, &mut chosen);
    }
    // `_local` before the node joined the state still names this node.
    let mut out: Vec<String> = state
        .nodes
        .keys()
        .filter(|id| chosen.contains(*id))
        .cloned()
        .collect();
    if chosen.contains(local_id) && !state.nodes.contains_key(local_id) {
        out.push(local_id.to_string());
    }
    out
}

/// Adds to `chosen` (or, for `role:false`, removes from it) the nodes one selector names.
fn apply_selector(
    state: &ClusterState,
    local_id: &str,
    selector: &str,
    chosen: &mut BTreeSet<String>,
) {
    match selector {
        "_local" => {
            chosen.insert(local_id.to_string());
            return;
        }
        "_master" | "_cluster_manager" => {
            chosen.extend(state.cluster_manager.clone());
            return;
        }
        id if state.nodes.contains_key(id) => {
            chosen.insert(id.to_string());
            return;
        }
        _ => {}
    }
    for node in state.nodes.values() {
        if selector == "_all"
            || wildcard_match(selector, &node.name)
            || wildcard_match(selector, &node.ip)
            || wildcard_match(selector, &node.host)
        {
            chosen.insert(node.id.clone());
        }
    }
    let Some((name, value)) = selector.split_once(':') else {
        return;
    };
    match role_selector(name) {
        Some(role) => {
            // `Booleans.parseBoolean(value, true)`: anything but `false` adds.
            let add = value != "false";
            for node in state.nodes.values() {
                let has = match role {
                    Some(role) => node.roles.contains(&role),
                    None => node.roles.is_empty(),
                };
                if has && add {
                    chosen.insert(node.id.clone());
                } else if has {
                    chosen.remove(&node.id);
                }
            }
        }
        None => {
            for node in state.nodes.values() {
                if node
                    .attributes
                    .iter()
                    .any(|(k, v)| wildcard_match(name, k) && wildcard_match(value, v))
                {
                    chosen.insert(node.id.clone());
                }
            }
        }
    }
}

/// The role a `role:true|false` selector names: `Some(None)` for `coordinating_only` (no
/// role), `None` when `name` is not a role (an attribute).
fn role_selector(name: &str) -> Option<Option<shoal_state::Role>> {
    match name {
        "data" => Some(Some(shoal_state::Role::Data)),
        "ingest" => Some(Some(shoal_state::Role::Ingest)),
        "master" | "cluster_manager" => Some(Some(shoal_state::Role::ClusterManager)),
        "remote_cluster_client" => Some(Some(shoal_state::Role::RemoteClusterClient)),
        "coordinating_only" => Some(None),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use shoal_state::{DiscoveryNode, Role};

    fn node(id: &str, roles: &[Role], attrs: &[(&str, &str)]) -> DiscoveryNode {
        DiscoveryNode {
            id: id.into(),
            ephemeral_id: String::new(),
            name: format!("name-{id}"),
            transport_address: format!("127.0.0.1:93{id}"),
            http_address: format!("127.0.0.1:92{id}"),
            host: "127.0.0.1".into(),
            ip: "127.0.0.1".into(),
            roles: roles.iter().copied().collect(),
            attributes: attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            version: "2.18.0".into(),
        }
    }

    pub(crate) fn state() -> ClusterState {
        let mut state = ClusterState::new("test");
        for n in [
            node("a", &[Role::ClusterManager, Role::Data], &[("zone", "z1")]),
            node("b", &[Role::Data], &[("zone", "z2")]),
            node("c", &[Role::ClusterManager], &[]),
            node("d", &[], &[]),
        ] {
            state.nodes.insert(n.id.clone(), n);
        }
        state.cluster_manager = Some("c".into());
        state
    }

    fn resolve(selectors: &[&str]) -> Vec<String> {
        let selectors: Vec<String> = selectors.iter().map(|s| s.to_string()).collect();
        resolve_node_selectors(&state(), "b", &selectors)
    }

    #[test]
    fn node_selectors_resolve_like_discovery_nodes() {
        assert_eq!(resolve(&[]), ["a", "b", "c", "d"]);
        assert_eq!(resolve(&["_all"]), ["a", "b", "c", "d"]);
        assert_eq!(resolve(&["_local"]), ["b"]);
        assert_eq!(resolve(&["_master"]), ["c"]);
        assert_eq!(resolve(&["_cluster_manager", "a"]), ["a", "c"]);
        assert_eq!(resolve(&["name-d"]), ["d"]);
        assert_eq!(resolve(&["name-*"]), ["a", "b", "c", "d"]);
        assert_eq!(resolve(&["data:true"]), ["a", "b"]);
        assert_eq!(resolve(&["_all", "data:false"]), ["c", "d"]);
        assert_eq!(resolve(&["master:true"]), ["a", "c"]);
        assert_eq!(resolve(&["coordinating_only:true"]), ["d"]);
        assert_eq!(resolve(&["zone:z2"]), ["b"]);
        assert_eq!(resolve(&["zo*:z*"]), ["a", "b"]);
        assert!(resolve(&["nope"]).is_empty());
    }
}
