//! Scenario tests: whole clusters driven through index creation, node changes, settings and
//! reroute commands, checked against OpenSearch's behaviour.

mod awareness;
mod commands;
mod delayed;
mod explain;
mod lifecycle;
mod movement;

use std::collections::BTreeMap;

use shoal_state::{ClusterState, Command, ShardState};

use crate::test_support::apply;

pub fn node_left(state: &mut ClusterState, now: i64, node: &str) {
    apply(
        state,
        now,
        Command::NodeLeft {
            node_id: node.to_string(),
            reason: "disconnected".to_string(),
            promote: Vec::new(),
        },
    );
}

/// Copies per node (assigned copies, relocation targets included).
pub fn copies_per_node(state: &ClusterState) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for copy in state.all_copies() {
        if let Some(node) = &copy.node {
            *out.entry(node.clone()).or_default() += 1;
        }
    }
    out
}

pub fn primaries_per_node(state: &ClusterState) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for copy in state
        .all_copies()
        .filter(|c| c.primary && c.state == ShardState::Started)
    {
        if let Some(node) = &copy.node {
            *out.entry(node.clone()).or_default() += 1;
        }
    }
    out
}

pub fn statuses_of_unassigned(state: &ClusterState) -> Vec<String> {
    state
        .all_copies()
        .filter(|c| c.state == ShardState::Unassigned)
        .filter_map(|c| {
            c.unassigned
                .as_ref()
                .map(|u| u.last_allocation_status.clone())
        })
        .collect()
}
