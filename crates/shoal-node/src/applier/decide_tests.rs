use super::*;
use shoal_state::{IndexRoutingTable, RecoverySource};

const HERE: &str = "n1";

fn meta(name: &str, shards: u32, replicas: u32, state: IndexState) -> IndexMetadata {
    let settings = [
        ("index.number_of_shards", shards.to_string()),
        ("index.number_of_replicas", replicas.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
    .collect();
    IndexMetadata {
        name: name.into(),
        uuid: format!("{name}-uuid"),
        state,
        settings,
        mappings: serde_json::json!({}),
        aliases: Default::default(),
        primary_terms: vec![1; shards as usize],
        in_sync_allocations: vec![Default::default(); shards as usize],
        version: 1,
        mapping_version: 1,
        settings_version: 1,
        aliases_version: 1,
        restored_from: None,
    }
}

fn copy(shard: u32, primary: bool, state: ShardState, node: &str, id: &str) -> ShardRouting {
    ShardRouting {
        index: "logs".into(),
        shard,
        primary,
        state,
        node: Some(node.into()),
        relocating_node: None,
        allocation_id: Some(id.into()),
        recovery_source: primary.then_some(RecoverySource::ExistingStore),
        bootstrap_new_history_uuid: false,
        unassigned: None,
    }
}

fn state_with(meta: IndexMetadata, shards: Vec<Vec<ShardRouting>>) -> ClusterState {
    let mut state = ClusterState::new("test");
    state
        .routing
        .insert(meta.name.clone(), IndexRoutingTable { shards });
    state.metadata.indices.insert(meta.name.clone(), meta);
    state
}

fn actions(state: &ClusterState, current: bool, failed: &[&str]) -> Vec<(usize, CopyAction)> {
    let is_failed = |id: &str| failed.contains(&id);
    let local = LocalNode {
        node_id: HERE,
        current_incarnation: current,
        is_failed: &is_failed,
    };
    copy_actions(state, &state.metadata.indices["logs"], &local)
}

#[test]
fn a_started_or_store_initializing_copy_here_is_followed() {
    let primary = copy(0, true, ShardState::Initializing, HERE, "p0");
    let started = copy(1, true, ShardState::Started, HERE, "p1");
    let state = state_with(
        meta("logs", 2, 0, IndexState::Open),
        vec![vec![primary.clone()], vec![started.clone()]],
    );
    assert_eq!(
        actions(&state, true, &[]),
        vec![
            (
                0,
                CopyAction::Follow {
                    copy: primary,
                    current: true
                }
            ),
            (
                1,
                CopyAction::Follow {
                    copy: started,
                    current: true
                }
            ),
        ]
    );
}

#[test]
fn an_initializing_replica_or_relocation_target_here_recovers_from_a_peer() {
    let replica = copy(0, false, ShardState::Initializing, HERE, "r0");
    let mut target = copy(1, true, ShardState::Initializing, HERE, "t1");
    target.relocating_node = Some("n2".into());
    let state = state_with(
        meta("logs", 2, 1, IndexState::Open),
        vec![
            vec![
                copy(0, true, ShardState::Started, "n2", "p0"),
                replica.clone(),
            ],
            vec![
                copy(1, true, ShardState::Relocating, "n2", "p1"),
                target.clone(),
            ],
        ],
    );
    assert_eq!(
        actions(&state, true, &[]),
        vec![
            (0, CopyAction::Recover(replica)),
            (1, CopyAction::Recover(target))
        ]
    );
}

#[test]
fn a_state_from_before_this_process_opens_copies_for_reads_and_recovers_nothing() {
    let replica = copy(0, false, ShardState::Initializing, HERE, "r0");
    let started = copy(1, false, ShardState::Started, HERE, "r1");
    let state = state_with(
        meta("logs", 2, 1, IndexState::Open),
        vec![
            vec![copy(0, true, ShardState::Started, "n2", "p0"), replica],
            vec![
                copy(1, true, ShardState::Started, "n2", "p1"),
                started.clone(),
            ],
        ],
    );
    assert_eq!(
        actions(&state, false, &[]),
        vec![(
            1,
            CopyAction::Follow {
                copy: started,
                current: false
            }
        )]
    );
}

#[test]
fn a_copy_reported_failed_is_left_alone() {
    let state = state_with(
        meta("logs", 1, 0, IndexState::Open),
        vec![vec![copy(0, true, ShardState::Started, HERE, "p0")]],
    );
    assert_eq!(actions(&state, true, &["p0"]), vec![]);
}

#[test]
fn a_shard_with_no_copy_here_is_closed_and_its_data_deleted_once_fully_started_elsewhere() {
    let state = state_with(
        meta("logs", 3, 1, IndexState::Open),
        vec![
            // Every copy started elsewhere: the local files are redundant.
            vec![
                copy(0, true, ShardState::Started, "n2", "p0"),
                copy(0, false, ShardState::Started, "n3", "r0"),
            ],
            // A copy still recovering elsewhere: the local files may still be wanted.
            vec![
                copy(1, true, ShardState::Started, "n2", "p1"),
                copy(1, false, ShardState::Initializing, "n3", "r1"),
            ],
            // A replica missing: likewise.
            vec![copy(2, true, ShardState::Started, "n2", "p2")],
        ],
    );
    assert_eq!(
        actions(&state, true, &[]),
        vec![
            (0, CopyAction::DeleteData),
            (1, CopyAction::Close),
            (2, CopyAction::Close)
        ]
    );
}

#[test]
fn every_shard_of_a_closed_index_is_closed_even_where_assigned() {
    let state = state_with(
        meta("logs", 2, 0, IndexState::Close),
        vec![
            vec![copy(0, true, ShardState::Started, HERE, "p0")],
            vec![copy(1, true, ShardState::Started, "n2", "p1")],
        ],
    );
    assert_eq!(
        actions(&state, true, &[]),
        vec![(0, CopyAction::Close), (1, CopyAction::Close)]
    );
}

#[test]
fn indices_deleted_or_replaced_under_the_same_name_are_gone() {
    let state = state_with(meta("logs", 1, 0, IndexState::Open), vec![vec![]]);
    let local = [("logs", "logs-uuid"), ("old", "old-uuid"), ("logs2", "x")];
    assert_eq!(
        gone_indices(&state, local.iter().copied()),
        vec![("old", "old-uuid"), ("logs2", "x")]
    );
    let recreated = [("logs", "an-older-uuid")];
    assert_eq!(
        gone_indices(&state, recreated.iter().copied()),
        vec![("logs", "an-older-uuid")]
    );
}
