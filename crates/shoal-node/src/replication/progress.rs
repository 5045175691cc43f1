//! What `_cat/recovery` and `/{index}/_recovery` show: one record per shard copy this node
//! recovered (from a peer or from its own store), kept after it is done, updated while it runs.

use std::collections::BTreeMap;
use std::time::Duration;

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

/// Percent as OpenSearch prints it (`100.0%` when there is nothing to do).
pub fn percent(done: u64, total: u64) -> f64 {
    if total == 0 {
        100.0
    } else {
        (done as f64 * 1000.0 / total as f64).round() / 10.0
    }
}

impl Node {
    /// Creates or replaces the record of a local copy's recovery.
    pub(crate) fn record_recovery(&self, record: RecoveryRecord) {
        self.recoveries.records.lock().insert(
            (
                record.index.clone(),
                record.shard,
                record.allocation_id.clone(),
            ),
            record,
        );
    }

    /// Updates the record of a running recovery.
    pub(crate) fn update_recovery(
        &self,
        index: &str,
        shard: usize,
        allocation_id: &str,
        f: impl FnOnce(&mut RecoveryRecord),
    ) {
        let key = (index.to_string(), shard, allocation_id.to_string());
        if let Some(record) = self.recoveries.records.lock().get_mut(&key) {
            f(record);
        }
    }

    /// This node's records for these indices, the latest per shard copy held here.
    fn local_recoveries(&self, indices: &[String]) -> Vec<RecoveryRecord> {
        let state = self.cluster_state();
        let mut latest: BTreeMap<(String, usize), RecoveryRecord> = BTreeMap::new();
        for record in self.recoveries.records.lock().values() {
            if !indices.contains(&record.index) {
                continue;
            }
            // Only copies still assigned here (a failed or moved copy's record is history).
            let assigned = state
                .copies(&record.index, record.shard as u32)
                .iter()
                .any(|c| {
                    c.allocation_id.as_deref() == Some(record.allocation_id.as_str())
                        && c.node.as_deref() == Some(self.node_id.as_str())
                });
            if assigned {
                latest.insert((record.index.clone(), record.shard), record.clone());
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
                self.send_encoded::<RecoveryListAction>(&n.transport_address, body.clone(), timeout)
            })
            .collect();
        let mut records = self.local_recoveries(indices);
        for reply in pending {
            match self.wait(reply) {
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
