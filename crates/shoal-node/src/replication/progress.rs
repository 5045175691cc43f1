//! What `_cat/recovery` and `/{index}/_recovery` show: one record per shard copy this node
//! recovered (from a peer or from its own store), kept after it is done, updated while it runs.
//!
//! Where a record lives: with its copy (`IndexShard::recovery`) once the copy is open; with
//! the running peer recovery before that (`Recoveries::targets`: the files are still being
//! copied); with the index once the copy closed (`IndexService`'s retired records: a closed
//! index, a copy failed or moved), until the index is deleted. A record shows while the
//! cluster state assigns its copy (its allocation id) to this node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::ApiResult;
use crate::node::{now_millis, Node};

/// The recovery records a node holds for some indices (`_recovery`, `_cat/recovery`).
pub struct RecoveryListAction;
impl shoal_transport::Action for RecoveryListAction {
    const NAME: &'static str = "internal:index/shard/recovery/list";
    type Request = Vec<String>;
    type Response = Vec<RecoveryRecord>;
}

pub const ACTION_LIST: &str = <RecoveryListAction as shoal_transport::Action>::NAME;

/// OpenSearch's recovery types (`_cat/recovery` `type` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecoveryType {
    EmptyStore,
    ExistingStore,
    Peer,
}

impl RecoveryType {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryType::EmptyStore => "empty_store",
            RecoveryType::ExistingStore => "existing_store",
            RecoveryType::Peer => "peer",
        }
    }
}

/// OpenSearch's recovery stages, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    Init,
    Index,
    Translog,
    Finalize,
    Done,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Init => "init",
            Stage::Index => "index",
            Stage::Translog => "translog",
            Stage::Finalize => "finalize",
            Stage::Done => "done",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecoveryRecord {
    pub index: String,
    pub shard: usize,
    pub allocation_id: String,
    pub primary: bool,
    pub recovery_type: RecoveryType,
    pub stage: Stage,
    pub start_millis: i64,
    pub stop_millis: Option<i64>,
    /// Node id of the source (peer recoveries).
    pub source_node: Option<String>,
    pub target_node: String,
    pub files_total: u64,
    pub files_reused: u64,
    pub files_recovered: u64,
    pub bytes_total: u64,
    pub bytes_reused: u64,
    pub bytes_recovered: u64,
    pub ops_total: u64,
    pub ops_recovered: u64,
}

impl RecoveryRecord {
    pub fn new(
        index: &str,
        shard: usize,
        allocation_id: &str,
        primary: bool,
        recovery_type: RecoveryType,
        target_node: &str,
    ) -> RecoveryRecord {
        RecoveryRecord {
            index: index.to_string(),
            shard,
            allocation_id: allocation_id.to_string(),
            primary,
            recovery_type,
            stage: Stage::Init,
            start_millis: now_millis(),
            stop_millis: None,
            source_node: None,
            target_node: target_node.to_string(),
            files_total: 0,
            files_reused: 0,
            files_recovered: 0,
            bytes_total: 0,
            bytes_reused: 0,
            bytes_recovered: 0,
            ops_total: 0,
            ops_recovered: 0,
        }
    }

    pub fn elapsed(&self) -> Duration {
        let end = self.stop_millis.unwrap_or_else(now_millis);
        Duration::from_millis((end - self.start_millis).max(0) as u64)
    }

    pub fn finish(&mut self) {
        self.stage = Stage::Done;
        self.stop_millis = Some(now_millis());
    }
}

/// One copy's record, shared by the recovery that fills it and the copy that keeps it.
#[derive(Clone)]
pub struct RecoveryProgress(Arc<Mutex<RecoveryRecord>>);

impl RecoveryProgress {
    pub fn new(record: RecoveryRecord) -> RecoveryProgress {
        RecoveryProgress(Arc::new(Mutex::new(record)))
    }

    pub fn update(&self, f: impl FnOnce(&mut RecoveryRecord)) {
        f(&mut self.0.lock());
    }

    pub fn snapshot(&self) -> RecoveryRecord {
        self.0.lock().clone()
    }

    pub fn allocation_id(&self) -> String {
        self.0.lock().allocation_id.clone()
    }

    pub fn same(&self, other: &RecoveryProgress) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Percent as OpenSearch prints it (`100.0%` when there is nothing to do).
pub fn percent(done: u64, total: u64) -> f64 {
    if total == 0 {
        100.0
    } else {
        (done as f64 * 1000.0 / total as f64).round() / 10.0
    }
}

impl Node {
    /// Starts the record of a peer recovery into this node (replacing the one of an earlier
    /// attempt of the same copy); the copy adopts it once it opens.
    pub(crate) fn record_recovery(&self, record: RecoveryRecord) -> RecoveryProgress {
        let progress = RecoveryProgress::new(record);
        let allocation_id = progress.allocation_id();
        self.recoveries
            .targets
            .lock()
            .insert(allocation_id, progress.clone());
        progress
    }

    /// Updates the record of a running peer recovery of that copy.
    pub(crate) fn update_recovery(
        &self,
        index: &str,
        shard: usize,
        allocation_id: &str,
        f: impl FnOnce(&mut RecoveryRecord),
    ) {
        let progress = self.recoveries.targets.lock().get(allocation_id).cloned();
        if let Some(progress) = progress {
            progress.update(|r| {
                if r.index == index && r.shard == shard {
                    f(r)
                }
            });
        }
    }

    /// A peer recovery ended (done, failed or cancelled): its record stays with the copy if it
    /// opened with it, else with the index.
    pub(crate) fn end_recovery_record(
        &self,
        service: &crate::index_service::IndexService,
        shard: usize,
        allocation_id: &str,
    ) {
        let Some(progress) = self.recoveries.targets.lock().remove(allocation_id) else {
            return;
        };
        let adopted = service
            .copy(shard)
            .ok()
            .and_then(|copy| copy.recovery())
            .is_some_and(|held| held.same(&progress));
        if !adopted {
            service.keep_recovery(shard, progress);
        }
    }

    /// This node's records for these indices, the latest per shard copy held here.
    fn local_recoveries(&self, indices: &[String]) -> Vec<RecoveryRecord> {
        let state = self.cluster_state();
        // By (index, shard, allocation id); a running recovery's record replaces the copy's
        // (an earlier attempt), which replaces a retired one.
        let mut records: BTreeMap<(String, usize, String), RecoveryRecord> = BTreeMap::new();
        let mut keep = |record: RecoveryRecord| {
            let key = (
                record.index.clone(),
                record.shard,
                record.allocation_id.clone(),
            );
            records.insert(key, record);
        };
        for service in indices.iter().filter_map(|name| self.index(name)) {
            service.recovery_records().into_iter().for_each(&mut keep);
        }
        let running: Vec<RecoveryRecord> = self
            .recoveries
            .targets
            .lock()
            .values()
            .map(RecoveryProgress::snapshot)
            .collect();
        running
            .into_iter()
            .filter(|r| indices.contains(&r.index))
            .for_each(&mut keep);
        let mut latest: BTreeMap<(String, usize), RecoveryRecord> = BTreeMap::new();
        for record in records.into_values() {
            // Only copies still assigned here (a failed or moved copy's record is history).
            let assigned = state
                .copies(&record.index, record.shard as u32)
                .iter()
                .any(|c| {
                    c.allocation_id.as_deref() == Some(record.allocation_id.as_str())
                        && c.node.as_deref() == Some(self.node_id.as_str())
                });
            if assigned {
                latest.insert((record.index.clone(), record.shard), record);
            }
        }
        latest.into_values().collect()
    }

    /// The recovery records of these indices from every node.
    pub fn recoveries(&self, indices: &[String]) -> Vec<RecoveryRecord> {
        let state = self.cluster_state();
        let body = crate::rpc::json_bytes(&indices);
        let timeout = Duration::from_secs(10);
        let pending: Vec<_> = state
            .nodes
            .values()
            .filter(|n| n.id != self.node_id)
            .map(|n| {
                let address = n.transport_address.clone();
                let pending =
                    self.send_encoded::<RecoveryListAction>(&address, body.clone(), timeout);
                (address, pending)
            })
            .collect();
        let mut records = self.local_recoveries(indices);
        for (address, reply) in pending {
            match self.wait_unless_gone(&address, reply) {
                Ok(remote) => records.extend(remote),
                Err(e) => tracing::debug!(error = %e, "a node's recovery records are missing"),
            }
        }
        records
            .sort_by(|a, b| (&a.index, a.shard, !a.primary).cmp(&(&b.index, b.shard, !b.primary)));
        records
    }

    pub(crate) fn handle_recovery_list(
        &self,
        indices: Vec<String>,
    ) -> ApiResult<Vec<RecoveryRecord>> {
        Ok(self.local_recoveries(&indices))
    }
}
