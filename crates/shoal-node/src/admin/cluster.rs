//! Cluster administration: allocation explain,
//! reroute (dry run or through Raft), voting configuration exclusions and node info for
//! `_nodes` (its node selectors are in [`crate::core::node_selectors`]). The disk usage reporter lives in `disk_usage.rs`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use shoal_allocation::ExplainRequest;
use shoal_state::{
    ClusterState, Command, DiscoveryNode, RerouteCommand, StateError, VotingExclusion,
};

use super::AdminService;
use crate::error::{ApiError, ApiResult};
use shoal_cluster::now_millis;

/// Transport action answering a node's own `_nodes` sections.
pub struct NodesInfoAction;
impl shoal_transport::Action for NodesInfoAction {
    const NAME: &'static str = "cluster:monitor/nodes/info[n]";
    type Request = ();
    type Response = Value;
}

pub const ACTION_NODES_INFO: &str = <NodesInfoAction as shoal_transport::Action>::NAME;

pub(crate) fn register_actions(actions: &mut crate::rpc::NodeActions, admin: &Arc<AdminService>) {
    actions.register_on::<NodesInfoAction, _>(Arc::downgrade(admin), |admin, ()| {
        Ok(admin.local_node_sections())
    });
}

/// OpenSearch's marker for the unknown half of a voting exclusion (`VotingConfigExclusion`).
pub const ABSENT: &str = "_absent_";

pub(crate) fn state_error(e: StateError) -> ApiError {
    ApiError::new(e.status, &e.error_type, e.reason)
}

/// `OpenSearchTimeoutException`: 504 `timeout_exception`.
fn timeout_error(reason: String) -> ApiError {
    ApiError::new(504, "timeout_exception", reason)
}

/// What a reroute did: the resulting state (not published for a dry run) and, with
/// `explain`, one explanation per command.
pub struct RerouteOutcome {
    pub state: super::ClusterView,
    pub explanations: Vec<Value>,
}

impl AdminService {
    /// `GET /_cluster/allocation/explain`, from this node's applied state.
    pub fn allocation_explain(
        &self,
        request: &ExplainRequest,
        include_yes_decisions: bool,
        include_disk_info: bool,
    ) -> ApiResult<Value> {
        let state = self.core.cluster_state();
        let mut body =
            shoal_allocation::explain(&state, request, include_yes_decisions, now_millis())
                .map_err(state_error)?;
        if include_disk_info {
            body["cluster_info"] = self.cluster_info_json(&state);
        }
        Ok(body)
    }

    /// `ClusterInfo` as explain prints it: disk usage per node and the sizes of this node's
    /// shards (other nodes' shard sizes are not reported to the cluster state).
    fn cluster_info_json(&self, state: &ClusterState) -> Value {
        let mut nodes = Map::new();
        for (id, node) in &state.nodes {
            let Some(usage) = self.core.disk_usage_of(state, id) else {
                continue;
            };
            let path = if *id == self.core.node_id {
                self.core.config.data_path.display().to_string()
            } else {
                String::new()
            };
            let disk = disk_usage_json(&path, &usage);
            nodes.insert(
                id.clone(),
                json!({"node_name": node.name, "least_available": disk, "most_available": disk}),
            );
        }
        let mut shard_sizes = Map::new();
        for copy in state.copies_on_node(&self.core.node_id) {
            let size = self
                .core
                .index(&copy.index)
                .and_then(|s| s.shard(copy.shard as usize).ok())
                .map(|engine| engine.stats().store_size_in_bytes);
            if let Some(size) = size {
                let kind = if copy.primary { "p" } else { "r" };
                shard_sizes.insert(
                    format!("[{}][{}][{kind}]_bytes", copy.index, copy.shard),
                    json!(size),
                );
            }
        }
        json!({"nodes": nodes, "shard_sizes": shard_sizes, "shard_paths": {}, "reserved_sizes": []})
    }

    /// `POST /_cluster/reroute`. Commands run on a copy of the applied state first: that gives
    /// the explanations, refuses bad commands before anything is proposed, and is the whole
    /// answer of a dry run (commands, then allocation, never published). With `explain`, a
    /// refused command becomes a NO explanation and the others still run, like OpenSearch.
    pub fn reroute(
        &self,
        commands: Vec<RerouteCommand>,
        retry_failed: bool,
        dry_run: bool,
        explain: bool,
    ) -> ApiResult<RerouteOutcome> {
        let now = now_millis();
        let mut work = (*self.core.cluster_state()).clone();
        let (accepted, explanations) = if explain {
            execute_explained(&mut work, commands, retry_failed, now)
        } else {
            let explanations = shoal_allocation::execute(&mut work, &commands, retry_failed, now)
                .map_err(state_error)?;
            (commands, explanations)
        };
        if dry_run {
            shoal_allocation::reroute(&mut work, now);
            return Ok(RerouteOutcome {
                state: super::ClusterView::new(Arc::new(work)),
                explanations,
            });
        }
        let state = self.core.propose(Command::Reroute {
            commands: accepted,
            retry_failed,
        })?;
        Ok(RerouteOutcome {
            state: super::ClusterView::new(state),
            explanations,
        })
    }

    /// `POST /_cluster/voting_config_exclusions`: adds the exclusions, then waits until the
    /// excluded nodes are out of the committed voting configuration (the cluster manager
    /// reconfigures Raft when it sees them; excluding itself makes it step down).
    pub fn add_voting_exclusions(
        &self,
        node_ids: &[String],
        node_names: &[String],
        timeout: Duration,
    ) -> ApiResult<()> {
        if node_ids.is_empty() == node_names.is_empty() {
            return Err(ApiError::bad_request(
                "Please set node identifiers correctly. One and only one of [node_name], [node_names] and [node_ids] has to be set",
            ));
        }
        let started = Instant::now();
        let state = self.core.cluster_state();
        let existing = &state.metadata.voting_config_exclusions;
        let added: Vec<VotingExclusion> = resolve_exclusions(&state, node_ids, node_names)
            .into_iter()
            .filter(|e| !existing.contains(e))
            .collect();
        let max = self
            .core
            .cluster_setting("cluster.max_voting_config_exclusions")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(10);
        if existing.len() + added.len() > max {
            // OpenSearch quotes the (deprecated, here always empty) node descriptions.
            return Err(ApiError::bad_request(format!(
                "add voting config exclusions request for [] would add [{}] exclusions to the existing [{}] which would exceed the maximum of [{max}] set by [cluster.max_voting_config_exclusions]",
                added.len(),
                existing.len()
            )));
        }
        let mut all = existing.clone();
        all.extend(added.iter().cloned());
        self.core.propose(Command::SetVotingExclusions(all))?;
        let excluded: BTreeSet<u64> = added
            .iter()
            .filter(|e| e.node_id != ABSENT)
            .map(|e| shoal_state::raft_id_of(&e.node_id))
            .collect();
        let remaining = timeout.saturating_sub(started.elapsed());
        let removed = self.core.runtime.block_on(
            self.core
                .cluster
                .wait_for_committed_voters(remaining, move |voters| voters.is_disjoint(&excluded)),
        );
        if !removed {
            return Err(timeout_error(format!(
                "timed out waiting for voting config exclusions {} to take effect",
                describe_exclusions(&added)
            )));
        }
        Ok(())
    }

    /// The voting configuration exclusions of the applied state.
    pub fn voting_exclusions(&self) -> Vec<VotingExclusion> {
        self.core
            .cluster_state()
            .metadata
            .voting_config_exclusions
            .clone()
    }

    /// Whether every node of `exclusions` has left the cluster (`DELETE
    /// /_cluster/voting_config_exclusions` waits for it unless `wait_for_removal=false`).
    pub fn excluded_nodes_gone(&self, exclusions: &[VotingExclusion]) -> bool {
        let state = self.core.cluster_state();
        exclusions
            .iter()
            .all(|e| !state.nodes.contains_key(&e.node_id))
    }

    /// OpenSearch's answer when the excluded nodes did not leave in time.
    pub fn removal_timed_out(exclusions: &[VotingExclusion]) -> ApiError {
        timeout_error(format!(
            "timed out waiting for removal of nodes; if nodes should not be removed, set waitForRemoval to false. {}",
            describe_exclusions(exclusions)
        ))
    }

    /// `DELETE /_cluster/voting_config_exclusions`, once any wait for removal is over.
    pub fn clear_voting_exclusions(&self) -> ApiResult<()> {
        if self.voting_exclusions().is_empty() {
            return Ok(());
        }
        self.core
            .propose(Command::SetVotingExclusions(Vec::new()))?;
        Ok(())
    }

    /// The node ids of the last committed and last accepted voting configurations (a voter
    /// that is not in the cluster state any more shows as its Raft id).
    pub(crate) fn voting_configs(&self, state: &ClusterState) -> (Vec<String>, Vec<String>) {
        let (committed, accepted) = self.core.cluster.voting_configs();
        let names = |ids: BTreeSet<u64>| -> Vec<String> {
            ids.into_iter()
                .map(|raft_id| {
                    state
                        .nodes
                        .values()
                        .find(|n| n.raft_id() == raft_id)
                        .map(|n| n.id.clone())
                        .unwrap_or_else(|| raft_id.to_string())
                })
                .collect()
        };
        (names(committed), names(accepted))
    }

    /// `_nodes` sections of the given nodes: this node answers for itself, the others over the
    /// transport. A node that does not answer is a failure (`_nodes.failures`).
    pub fn nodes_info(&self, ids: &[String], timeout: Duration) -> Vec<(String, ApiResult<Value>)> {
        self.core
            .ask_each_node::<NodesInfoAction>(ids, &(), timeout, || self.local_node_sections())
    }

    /// What only this node knows about itself for `_nodes`: its settings (flat), OS, process,
    /// transport and HTTP addresses. The rest comes from the cluster state.
    pub fn local_node_sections(&self) -> Value {
        let config = &self.core.config;
        let processors = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let local = self.core.cluster.local();
        let http = format!("{}:{}", config.http_host, config.http_port);
        json!({
            "total_indexing_buffer": 134217728,
            "settings": node_settings(config),
            "os": {"refresh_interval_in_millis": 1000, "name": os_name(), "pretty_name": os_name(),
                   "arch": std::env::consts::ARCH, "available_processors": processors,
                   "allocated_processors": processors},
            "process": {"refresh_interval_in_millis": 1000, "id": std::process::id(), "mlockall": false},
            "transport": {"bound_address": [local.transport_address], "publish_address": local.transport_address,
                          "profiles": {}},
            "http": {"bound_address": [http], "publish_address": http,
                     "max_content_length_in_bytes": 104857600},
            "thread_pool": self.core.pressure.info(),
            // Not a `_nodes` section (the REST layer lists those): read by `_cat/thread_pool`.
            "thread_pool_stats": self.core.pressure.stats(),
            "plugins": [], "modules": []
        })
    }
}

/// The node's settings as OpenSearch lists them: the given ones plus `client.type`, which
/// every OpenSearch node sets for itself.
fn node_settings(config: &crate::config::NodeConfig) -> Value {
    let mut settings = config.settings.clone();
    settings
        .entry("client.type".to_string())
        .or_insert_with(|| json!("node"));
    json!(settings)
}

fn os_name() -> &'static str {
    match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Mac OS X",
        other => other,
    }
}

pub(crate) fn disk_usage_json(path: &str, usage: &shoal_state::DiskUsage) -> Value {
    let used = usage.total_bytes.saturating_sub(usage.available_bytes);
    let percent = |part: u64| {
        if usage.total_bytes == 0 {
            0.0
        } else {
            100.0 * part as f64 / usage.total_bytes as f64
        }
    };
    json!({"path": path, "total_bytes": usage.total_bytes, "used_bytes": used,
           "free_bytes": usage.available_bytes, "free_disk_percent": percent(usage.available_bytes),
           "used_disk_percent": percent(used)})
}

/// Runs commands one at a time: a refused command is explained as NO (with the decider
/// name OpenSearch uses for it) and leaves the state as it was.
fn execute_explained(
    state: &mut ClusterState,
    commands: Vec<RerouteCommand>,
    retry_failed: bool,
    now: i64,
) -> (Vec<RerouteCommand>, Vec<Value>) {
    if retry_failed {
        let _ = shoal_allocation::execute(state, &[], true, now);
    }
    let mut accepted = Vec::new();
    let mut explanations = Vec::new();
    for command in commands {
        match shoal_allocation::execute(state, std::slice::from_ref(&command), false, now) {
            Ok(mut explained) => {
                explanations.append(&mut explained);
                accepted.push(command);
            }
            Err(e) => explanations.push(refused_explanation(&command, &e.reason)),
        }
    }
    (accepted, explanations)
}

/// `RerouteExplanation` of a command a decider or a check refused.
pub fn refused_explanation(command: &RerouteCommand, reason: &str) -> Value {
    let (name, parameters) = command_parameters(command);
    let decider = match command {
        RerouteCommand::Move { .. } => "move_allocation_command".to_string(),
        RerouteCommand::Cancel { .. } => "cancel_allocation_command".to_string(),
        _ => format!("{name} (allocation command)"),
    };
    // The thrown message starts with `[command_name] `; the explanation does not.
    let explanation = match reason.strip_prefix('[') {
        Some(rest) if reason.starts_with(&format!("[{name}")) => rest
            .split_once("] ")
            .map(|(_, text)| text.to_string())
            .unwrap_or_else(|| reason.to_string()),
        _ => reason.to_string(),
    };
    json!({"command": name, "parameters": parameters,
           "decisions": [{"decider": decider, "decision": "NO", "explanation": explanation}]})
}

/// A command's name and parameters as OpenSearch echoes them in explanations.
pub fn command_parameters(command: &RerouteCommand) -> (&'static str, Value) {
    match command {
        RerouteCommand::Move {
            index,
            shard,
            from_node,
            to_node,
        } => (
            "move",
            json!({"index": index, "shard": shard, "from_node": from_node, "to_node": to_node}),
        ),
        RerouteCommand::Cancel {
            index,
            shard,
            node,
            allow_primary,
        } => (
            "cancel",
            json!({"index": index, "shard": shard, "node": node, "allow_primary": allow_primary}),
        ),
        RerouteCommand::AllocateReplica { index, shard, node } => (
            "allocate_replica",
            json!({"index": index, "shard": shard, "node": node}),
        ),
        RerouteCommand::AllocateEmptyPrimary {
            index,
            shard,
            node,
            accept_data_loss,
        } => (
            "allocate_empty_primary",
            json!({"index": index, "shard": shard, "node": node, "accept_data_loss": accept_data_loss}),
        ),
        RerouteCommand::AllocateStalePrimary {
            index,
            shard,
            node,
            accept_data_loss,
        } => (
            "allocate_stale_primary",
            json!({"index": index, "shard": shard, "node": node, "accept_data_loss": accept_data_loss}),
        ),
    }
}

/// `AddVotingConfigExclusionsRequest.resolveVotingConfigExclusions`: known cluster-manager-
/// eligible nodes by id or name; an unknown one is kept with its other half `_absent_`; known
/// nodes that cannot vote are skipped.
pub fn resolve_exclusions(
    state: &ClusterState,
    node_ids: &[String],
    node_names: &[String],
) -> Vec<VotingExclusion> {
    let exclusion = |node: &DiscoveryNode| VotingExclusion {
        node_id: node.id.clone(),
        node_name: node.name.clone(),
    };
    let mut out: Vec<VotingExclusion> = Vec::new();
    let mut push = |e: VotingExclusion| {
        if !out.contains(&e) {
            out.push(e);
        }
    };
    for id in node_ids {
        match state.nodes.get(id) {
            Some(node) if node.is_cluster_manager_eligible() => push(exclusion(node)),
            Some(_) => {}
            None => push(VotingExclusion {
                node_id: id.clone(),
                node_name: ABSENT.to_string(),
            }),
        }
    }
    for name in node_names {
        match state.node_by_name(name) {
            Some(node) if node.is_cluster_manager_eligible() => push(exclusion(node)),
            Some(_) => {}
            None => push(VotingExclusion {
                node_id: ABSENT.to_string(),
                node_name: name.clone(),
            }),
        }
    }
    out
}

/// A Java `Set<VotingConfigExclusion>.toString()`: `[{id}{name}, ...]`.
fn describe_exclusions(exclusions: &[VotingExclusion]) -> String {
    let parts: Vec<String> = exclusions
        .iter()
        .map(|e| format!("{{{}}}{{{}}}", e.node_id, e.node_name))
        .collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::node_selectors::tests::state;

    #[test]
    fn exclusions_resolve_known_eligible_nodes_and_mark_unknown_ones_absent() {
        let state = state();
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let got = resolve_exclusions(&state, &ids(&["a", "b", "zz"]), &[]);
        assert_eq!(
            got,
            vec![
                VotingExclusion {
                    node_id: "a".into(),
                    node_name: "name-a".into()
                },
                VotingExclusion {
                    node_id: "zz".into(),
                    node_name: ABSENT.into()
                },
            ]
        );
        let got = resolve_exclusions(&state, &[], &ids(&["name-c", "ghost"]));
        assert_eq!(got[0].node_id, "c");
        assert_eq!(got[1].node_id, ABSENT);
        assert_eq!(
            describe_exclusions(&got),
            "[{c}{name-c}, {_absent_}{ghost}]"
        );
    }

    #[test]
    fn refused_commands_explain_without_the_command_prefix() {
        let cancel = RerouteCommand::Cancel {
            index: "i".into(),
            shard: 9,
            node: "n".into(),
            allow_primary: false,
        };
        let v = refused_explanation(
            &cancel,
            "[cancel_allocation] can't cancel 9, failed to find it on node {n}",
        );
        assert_eq!(v["decisions"][0]["decider"], "cancel_allocation_command");
        assert_eq!(v["decisions"][0]["decision"], "NO");
        assert_eq!(
            v["decisions"][0]["explanation"],
            "can't cancel 9, failed to find it on node {n}"
        );
        assert_eq!(v["parameters"]["allow_primary"], false);
        let replica = RerouteCommand::AllocateReplica {
            index: "i".into(),
            shard: 0,
            node: "n".into(),
        };
        let v = refused_explanation(
            &replica,
            "[allocate_replica] all copies of [i][0] are already assigned",
        );
        assert_eq!(
            v["decisions"][0]["decider"],
            "allocate_replica (allocation command)"
        );
        assert_eq!(
            v["decisions"][0]["explanation"],
            "all copies of [i][0] are already assigned"
        );
    }
}
