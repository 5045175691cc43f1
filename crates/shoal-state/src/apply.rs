//! Applying a proposal to the state. Deterministic: no clocks, no randomness, no I/O.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::command::{Command, Proposal};
use crate::metadata::IndexMetadata;
use crate::routing::{
    IndexRoutingTable, RecoverySource, ShardRouting, ShardState, UnassignedInfo, UnassignedReason,
};
use crate::ClusterState;

/// A refused command, in OpenSearch's error vocabulary (rendered as the REST error body).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateError {
    pub status: u16,
    pub error_type: String,
    pub reason: String,
}

/// The error type of an index metadata update made on a stale copy of the metadata.
pub const STALE_INDEX_METADATA: &str = "stale_index_metadata_exception";

impl StateError {
    pub fn new(status: u16, error_type: &str, reason: impl Into<String>) -> StateError {
        StateError {
            status,
            error_type: error_type.to_string(),
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_type, self.reason)
    }
}

impl ClusterState {
    /// Applies one proposal. A refused command leaves the state untouched. `Reroute` commands
    /// are executed by the allocation crate, which the caller runs after every apply.
    pub fn apply(&mut self, proposal: &Proposal) -> Result<(), StateError> {
        let now = proposal.now_millis;
        match &proposal.command {
            Command::Bootstrap {
                cluster_uuid,
                cluster_name,
                node_settings,
            } => {
                if self.cluster_uuid.is_empty() {
                    self.cluster_uuid = cluster_uuid.clone();
                    self.cluster_name = cluster_name.clone();
                    self.metadata.node_settings = node_settings.clone();
                }
            }
            Command::NodeJoin(node) => self.node_joined(node.clone(), now),
            Command::NodeLeft {
                node_id,
                reason,
                promote,
            } => self.node_left(node_id, reason, promote, now),
            Command::ClusterManagerElected { node_id, term } => {
                self.cluster_manager = Some(node_id.clone());
                self.term = *term;
            }
            Command::PutIndex { meta, create } => {
                if *create {
                    self.create_index(meta.clone(), now)?
                } else {
                    self.update_index(meta.clone(), now)?
                }
            }
            Command::DeleteIndices { names } => {
                for name in names {
                    self.metadata.indices.remove(name);
                    self.routing.remove(name);
                }
            }
            Command::ShardStarted {
                index,
                shard,
                allocation_id,
            } => self.shard_started(index, *shard, allocation_id),
            Command::ShardFailed {
                index,
                shard,
                allocation_id,
                reason,
                primary_term,
            } if !self.is_stale_primary_term(index, *shard, *primary_term)
                && !(primary_term.is_some()
                    && self.is_primary_copy(index, *shard, allocation_id)) =>
            {
                self.fail_copy(
                    index,
                    *shard,
                    allocation_id,
                    UnassignedReason::AllocationFailed,
                    reason,
                    now,
                )
            }
            // A stale primary's report, or a primary reporting the primary (a relocation
            // handed over meanwhile): only the cluster's own fault detection fails a primary.
            Command::ShardFailed { .. } => {}
            Command::PutClusterSettings {
                persistent,
                transient,
            } => {
                self.metadata.persistent_settings = persistent.clone();
                self.metadata.transient_settings = transient.clone();
            }
            Command::SetVotingExclusions(exclusions) => {
                self.metadata.voting_config_exclusions = exclusions.clone();
            }
            Command::DiskUsage { node_id, usage } => {
                self.disk_usage.insert(node_id.clone(), *usage);
            }
            Command::Reroute { .. } | Command::Tick => {}
            Command::RestoreRemoteStore {
                indices,
                all_shards,
                stored_terms,
            } => self.restore_remote_store(indices, *all_shards, stored_terms, now)?,
            Command::RestoreClusterMetadata { metadata, source } => {
                self.restore_cluster_metadata(metadata.as_ref(), source.as_deref(), now)
            }
            Command::PutRepository { name, repository } => self.put_repository(name, repository),
            Command::DeleteRepositories { names } => self.delete_repositories(names)?,
            Command::SnapshotBegin(entry) => self.begin_snapshot(entry)?,
            Command::SnapshotEnd { repository, uuid } => self.end_snapshot(repository, uuid),
            Command::SnapshotAbort { repository, uuid } => self.abort_snapshot(repository, uuid),
            Command::RestoreSnapshot { indices, replacing } => {
                self.restore_snapshot(indices, replacing, now)?
            }
        }
        self.version += 1;
        Ok(())
    }

    fn node_joined(&mut self, node: crate::DiscoveryNode, now: i64) {
        let restarted = self
            .nodes
            .get(&node.id)
            .is_some_and(|known| known.ephemeral_id != node.ephemeral_id);
        if restarted {
            self.fail_copies_of_restarted_node(&node.id, now);
        }
        // A restarted node may come back on the address of an older incarnation.
        let stale: Vec<String> = self
            .nodes
            .values()
            .filter(|n| n.id != node.id && n.transport_address == node.transport_address)
            .map(|n| n.id.clone())
            .collect();
        // The older incarnation has left: its copies go with it (they are failed, promoted
        // elsewhere or left unassigned), never kept on a node the state no longer lists.
        for id in stale {
            self.node_left(&id, "a new node took its address", &[], now);
        }
        self.nodes.insert(node.id.clone(), node);
    }

    /// The same node restarted before it was removed: its copies of shards that have other
    /// copies may have missed (or kept) operations the others did not, so they are failed and
    /// recovered again (on this node, when the delayed allocation brings them back). A shard's
    /// only copy missed nothing and stays as it is.
    fn fail_copies_of_restarted_node(&mut self, node_id: &str, now: i64) {
        let replicated: Vec<(String, u32, String)> = self
            .copies_on_node(node_id)
            .filter(|c| {
                self.copies(&c.index, c.shard)
                    .iter()
                    .any(|other| other.is_assigned() && other.node.as_deref() != Some(node_id))
            })
            .filter_map(|c| Some((c.index.clone(), c.shard, c.allocation_id.clone()?)))
            .collect();
        let details = format!("node_left [{node_id}]: restarted");
        for (index, shard, allocation_id) in replicated {
            self.fail_copy(
                &index,
                shard,
                &allocation_id,
                UnassignedReason::NodeLeft,
                &details,
                now,
            );
        }
    }

    fn node_left(
        &mut self,
        node_id: &str,
        reason: &str,
        promote: &[crate::PromotionChoice],
        now: i64,
    ) {
        if self.nodes.remove(node_id).is_none() {
            return;
        }
        self.disk_usage.remove(node_id);
        self.drop_snapshots_of(node_id);
        let lost: Vec<(String, u32, String)> = self
            .copies_on_node(node_id)
            .chain(
                self.all_copies()
                    .filter(|c| c.relocating_node.as_deref() == Some(node_id)),
            )
            .filter_map(|c| Some((c.index.clone(), c.shard, c.allocation_id.clone()?)))
            .collect();
        let details = format!("node_left [{node_id}]: {reason}");
        for (index, shard, allocation_id) in lost {
            let preferred = promote
                .iter()
                .find(|p| p.index == index && p.shard == shard)
                .map(|p| p.allocation_id.as_str());
            self.fail_copy_preferring(
                &index,
                shard,
                &allocation_id,
                UnassignedReason::NodeLeft,
                &details,
                now,
                preferred,
            );
        }
        if self.cluster_manager.as_deref() == Some(node_id) {
            self.cluster_manager = None;
        }
    }

    fn create_index(&mut self, mut meta: IndexMetadata, now: i64) -> Result<(), StateError> {
        if let Some(existing) = self.metadata.indices.get(&meta.name) {
            return Err(StateError::new(
                400,
                "resource_already_exists_exception",
                format!("index [{}/{}] already exists", existing.name, existing.uuid),
            ));
        }
        meta.normalize();
        let info = UnassignedInfo::new(UnassignedReason::IndexCreated, now);
        let table = unassigned_table(&meta, &info, RecoverySource::EmptyStore);
        self.routing.insert(meta.name.clone(), table);
        self.metadata.indices.insert(meta.name.clone(), meta);
        Ok(())
    }

    fn update_index(&mut self, mut meta: IndexMetadata, now: i64) -> Result<(), StateError> {
        let Some(current) = self.metadata.indices.get(&meta.name) else {
            return Err(StateError::new(
                404,
                "index_not_found_exception",
                format!("no such index [{}]", meta.name),
            ));
        };
        if current.uuid != meta.uuid {
            return Err(StateError::new(
                409,
                "index_not_found_exception",
                format!("no such index [{}] with uuid [{}]", meta.name, meta.uuid),
            ));
        }
        // The caller edited its own copy of the metadata: if that copy was older than the
        // cluster's, its edit would silently undo the changes it had not seen (a mapping
        // update applied through another node). It retries on the current metadata.
        if meta.version <= current.version {
            return Err(StateError::new(
                409,
                STALE_INDEX_METADATA,
                format!(
                    "index [{}] metadata version [{}] is not newer than the cluster's [{}]; retry on the current metadata",
                    meta.name, meta.version, current.version
                ),
            ));
        }
        // Terms and in-sync sets belong to the cluster manager, never to a caller's copy.
        meta.primary_terms = current.primary_terms.clone();
        meta.in_sync_allocations = current.in_sync_allocations.clone();
        meta.normalize();
        let replicas = meta.number_of_replicas() as usize;
        let name = meta.name.clone();
        self.metadata.indices.insert(name.clone(), meta);
        self.resize_replicas(&name, replicas, now);
        Ok(())
    }

    /// Sets `index.number_of_replicas` of an index and resizes its copies to match
    /// (`index.auto_expand_replicas` following the number of data nodes).
    pub fn set_number_of_replicas(&mut self, index: &str, replicas: u32, now: i64) {
        let Some(meta) = self.metadata.indices.get_mut(index) else {
            return;
        };
        meta.settings.insert(
            "index.number_of_replicas".into(),
            serde_json::Value::String(replicas.to_string()),
        );
        meta.version += 1;
        meta.settings_version += 1;
        self.resize_replicas(index, replicas as usize, now);
    }

    /// Adds unassigned replicas or removes the least useful ones so every shard has
    /// `replicas` replica copies (relocation targets not counted).
    fn resize_replicas(&mut self, index: &str, replicas: usize, now: i64) {
        let Some(table) = self.routing.get_mut(index) else {
            return;
        };
        let mut removed_ids = Vec::new();
        for (shard, copies) in table.shards.iter_mut().enumerate() {
            let count = |copies: &Vec<ShardRouting>| {
                copies
                    .iter()
                    .filter(|c| !c.primary && c.relocation_target_of().is_none())
                    .count()
            };
            while count(copies) < replicas {
                let info = UnassignedInfo::new(UnassignedReason::ReplicaAdded, now);
                copies.push(ShardRouting::unassigned(index, shard as u32, false, info));
            }
            while count(copies) > replicas {
                let victim = [
                    ShardState::Unassigned,
                    ShardState::Initializing,
                    ShardState::Started,
                ]
                .iter()
                .find_map(|state| {
                    copies.iter().rposition(|c| {
                        !c.primary && c.state == *state && c.relocation_target_of().is_none()
                    })
                });
                let Some(position) = victim else { break };
                let copy = copies.remove(position);
                removed_ids.extend(copy.allocation_id.map(|id| (shard, id)));
            }
        }
        if let Some(meta) = self.metadata.indices.get_mut(index) {
            for (shard, id) in removed_ids {
                meta.in_sync_allocations[shard].remove(&id);
            }
        }
    }

    fn is_primary_copy(&self, index: &str, shard: u32, allocation_id: &str) -> bool {
        self.copies(index, shard)
            .iter()
            .any(|c| c.primary && c.allocation_id.as_deref() == Some(allocation_id))
    }

    /// Whether a replication failure comes from a primary older than the shard's term.
    fn is_stale_primary_term(&self, index: &str, shard: u32, term: Option<u64>) -> bool {
        let current = self.primary_term(index, shard);
        matches!((term, current), (Some(term), Some(current)) if term < current)
    }

    fn shard_started(&mut self, index: &str, shard: u32, allocation_id: &str) {
        let Some(copies) = self.copies_mut(index, shard) else {
            return;
        };
        let Some(position) = copies.iter().position(|c| {
            c.allocation_id.as_deref() == Some(allocation_id) && c.state == ShardState::Initializing
        }) else {
            return; // stale report: the copy was failed or moved meanwhile
        };
        let mut replaced = Vec::new();
        if let Some(source_node) = copies[position].relocating_node.clone() {
            // End of a relocation: the target replaces the source (and its in-sync entry).
            copies.retain(|c| {
                let source =
                    c.state == ShardState::Relocating && c.node.as_deref() == Some(&source_node);
                if source {
                    replaced.extend(c.allocation_id.clone());
                }
                !source
            });
        }
        let copy = copies
            .iter_mut()
            .find(|c| c.allocation_id.as_deref() == Some(allocation_id))
            .expect("the copy is still there");
        copy.state = ShardState::Started;
        copy.relocating_node = None;
        copy.recovery_source = None;
        copy.bootstrap_new_history_uuid = false;
        copy.unassigned = None;
        // Keep the primary first, as OpenSearch lists copies.
        copies.sort_by_key(|c| !c.primary);
        if let Some(meta) = self.metadata.indices.get_mut(index) {
            meta.normalize();
            meta.in_sync_allocations[shard as usize].insert(allocation_id.to_string());
            for id in replaced {
                meta.in_sync_allocations[shard as usize].remove(&id);
            }
        }
    }

    /// Fails one copy: promotes a replica when it was the primary, cancels relocations that
    /// depended on it, and leaves an unassigned copy behind for allocation to place again.
    /// Public for `shoal-allocation`'s `cancel` reroute command.
    pub fn fail_copy(
        &mut self,
        index: &str,
        shard: u32,
        allocation_id: &str,
        reason: UnassignedReason,
        details: &str,
        now: i64,
    ) {
        self.fail_copy_preferring(index, shard, allocation_id, reason, details, now, None);
    }

    /// [`ClusterState::fail_copy`]; a failed primary is replaced by `preferred` (an allocation
    /// id) when that copy is eligible, else by the first eligible one.
    #[allow(clippy::too_many_arguments)]
    fn fail_copy_preferring(
        &mut self,
        index: &str,
        shard: u32,
        allocation_id: &str,
        reason: UnassignedReason,
        details: &str,
        now: i64,
        preferred: Option<&str>,
    ) {
        let delay = self
            .metadata
            .indices
            .get(index)
            .map(|m| m.node_left_delay_millis())
            .unwrap_or(0);
        let in_sync: BTreeSet<String> = self
            .metadata
            .indices
            .get(index)
            .and_then(|m| m.in_sync_allocations.get(shard as usize).cloned())
            .unwrap_or_default();
        let Some(copies) = self.copies_mut(index, shard) else {
            return;
        };
        let Some(position) = copies
            .iter()
            .position(|c| c.allocation_id.as_deref() == Some(allocation_id) && c.is_assigned())
        else {
            // Gone from the routing table already: it must not stay in sync either.
            let routed = copies
                .iter()
                .any(|c| c.allocation_id.as_deref() == Some(allocation_id));
            if let (false, Some(meta)) = (routed, self.metadata.indices.get_mut(index)) {
                if let Some(ids) = meta.in_sync_allocations.get_mut(shard as usize) {
                    ids.remove(allocation_id);
                }
            }
            return;
        };
        let failed = copies.remove(position);
        let failed_node = failed.node.clone();

        // A failed relocation target: the source simply stays where it is.
        if let Some(source) = failed.relocation_target_of() {
            if let Some(src) = copies
                .iter_mut()
                .find(|c| c.state == ShardState::Relocating && c.node.as_deref() == Some(source))
            {
                src.state = ShardState::Started;
                src.relocating_node = None;
            }
            return;
        }
        // A failed relocation source takes its target with it.
        if failed.state == ShardState::Relocating {
            copies.retain(|c| c.relocation_target_of() != failed_node.as_deref());
        }

        let mut info = UnassignedInfo::new(reason, now);
        info.details = Some(details.to_string());
        info.last_node = failed_node;
        // Consecutive failures accumulate (the initializing copy kept its unassigned info) so
        // `index.allocation.max_retries` can stop a copy that keeps failing.
        let previous_failures = failed
            .unassigned
            .as_ref()
            .map_or(0, |u| u.failed_allocations);
        info.failed_allocations = if reason == UnassignedReason::AllocationFailed {
            previous_failures.saturating_add(1)
        } else {
            0
        };
        let mut term_bump = false;
        let mut remove_from_in_sync = Vec::new();

        if failed.primary {
            if let Some(position) = promotion_candidate(copies, &in_sync, preferred) {
                let replica = &mut copies[position];
                replica.primary = true;
                // A relocating replica stays where it is as the primary; its relocation target
                // (recovering from the failed primary) goes.
                if replica.state == ShardState::Relocating {
                    replica.state = ShardState::Started;
                    let source = replica.node.clone();
                    replica.relocating_node = None;
                    copies.retain(|c| {
                        source.is_none() || c.relocation_target_of() != source.as_deref()
                    });
                }
                term_bump = true;
                info.delayed = reason == UnassignedReason::NodeLeft && delay > 0;
                remove_from_in_sync.push(allocation_id.to_string());
                let mut left = ShardRouting::unassigned(index, shard, false, info);
                left.allocation_id = failed.allocation_id.clone();
                copies.push(left);
            } else {
                // No copy can take over: the primary waits for its data to come back (red),
                // and copies recovering from it must start over.
                let mut primary = ShardRouting::unassigned(index, shard, true, info.clone());
                primary.allocation_id = failed.allocation_id.clone();
                primary.recovery_source = Some(next_primary_source(&failed, &in_sync));
                if in_sync.is_empty() {
                    primary.unassigned.as_mut().expect("unassigned").last_node = None;
                }
                copies.push(primary);
                // Relocation targets go (their sources stay, no longer relocating); other
                // initializing replicas become unassigned.
                copies.retain(|c| c.relocation_target_of().is_none());
                for copy in copies
                    .iter_mut()
                    .filter(|c| !c.primary && c.is_assigned() && !c.is_active())
                {
                    remove_from_in_sync.extend(copy.allocation_id.clone());
                    let mut replica_info =
                        UnassignedInfo::new(UnassignedReason::PrimaryFailed, now);
                    replica_info.last_node = copy.node.clone();
                    *copy = ShardRouting::unassigned(index, shard, false, replica_info);
                }
                for copy in copies
                    .iter_mut()
                    .filter(|c| c.state == ShardState::Relocating)
                {
                    copy.state = ShardState::Started;
                    copy.relocating_node = None;
                }
            }
        } else {
            info.delayed = reason == UnassignedReason::NodeLeft && delay > 0 && failed.is_active();
            remove_from_in_sync.push(allocation_id.to_string());
            let mut left = ShardRouting::unassigned(index, shard, false, info);
            left.allocation_id = failed.allocation_id.clone();
            copies.push(left);
        }
        copies.sort_by_key(|c| !c.primary);
        if let Some(meta) = self.metadata.indices.get_mut(index) {
            meta.normalize();
            if term_bump {
                meta.primary_terms[shard as usize] += 1;
            }
            for id in remove_from_in_sync {
                meta.in_sync_allocations[shard as usize].remove(&id);
            }
        }
    }
}

/// Where a failed primary that no copy replaces recovers from next. A restore (from the remote
/// store or a snapshot) that did not finish restores again: its shard has no copy in sync, but
/// its data is in the repository, and an empty store would come up green without it (as in
/// OpenSearch, a copy that never started keeps its recovery source). Otherwise the store of a
/// copy in sync, or an empty one when none is.
fn next_primary_source(failed: &ShardRouting, in_sync: &BTreeSet<String>) -> RecoverySource {
    let restoring = failed.recovery_source.filter(|source| {
        matches!(
            source,
            RecoverySource::RemoteStore | RecoverySource::Snapshot
        )
    });
    match (
        restoring.filter(|_| !failed.is_active()),
        in_sync.is_empty(),
    ) {
        (Some(source), _) => source,
        (None, true) => RecoverySource::EmptyStore,
        (None, false) => RecoverySource::ExistingStore,
    }
}

/// The replica that takes over from a failed primary: an active in-sync copy, a started one
/// before one that is relocating away.
fn promotion_candidate(
    copies: &[ShardRouting],
    in_sync: &BTreeSet<String>,
    preferred: Option<&str>,
) -> Option<usize> {
    let eligible = |c: &ShardRouting| {
        c.is_active()
            && c.allocation_id
                .as_ref()
                .is_some_and(|id| in_sync.contains(id))
    };
    copies
        .iter()
        .position(|c| eligible(c) && preferred.is_some() && c.allocation_id.as_deref() == preferred)
        .or_else(|| {
            copies
                .iter()
                .position(|c| eligible(c) && c.state == ShardState::Started)
        })
        .or_else(|| copies.iter().position(eligible))
}

/// An index's routing before allocation: per shard, a primary to recover from `source` and
/// its replicas, all unassigned for `info`'s reason.
pub(crate) fn unassigned_table(
    meta: &IndexMetadata,
    info: &UnassignedInfo,
    source: RecoverySource,
) -> IndexRoutingTable {
    IndexRoutingTable {
        shards: (0..meta.number_of_shards())
            .map(|shard| unassigned_copies(meta, shard, info, source))
            .collect(),
    }
}

pub(crate) fn unassigned_copies(
    meta: &IndexMetadata,
    shard: u32,
    info: &UnassignedInfo,
    source: RecoverySource,
) -> Vec<ShardRouting> {
    let mut primary = ShardRouting::unassigned(&meta.name, shard, true, info.clone());
    primary.recovery_source = Some(source);
    let replicas = (0..meta.number_of_replicas())
        .map(|_| ShardRouting::unassigned(&meta.name, shard, false, info.clone()));
    std::iter::once(primary).chain(replicas).collect()
}
