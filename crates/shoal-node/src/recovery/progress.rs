//! What `_cat/recovery` and `/{index}/_recovery` show: one record per shard copy this node
//! recovered (from a peer or from its own store), kept after it is done, updated while it runs.
//!
//! Where a record lives: with its copy (`IndexShard::recovery`) once the copy is open; with
//! the running peer recovery before that (`RecoveryService::targets`: the files are still being
//! copied); with the index once the copy closed (`IndexService`'s retired records: a closed
//! index, a copy failed or moved), until the index is deleted. A record shows while the
//! cluster state assigns its copy (its allocation id) to this node.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use shoal_cluster::now_millis;

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
    RemoteStore,
    Snapshot,
}

impl RecoveryType {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryType::EmptyStore => "empty_store",
            RecoveryType::ExistingStore => "existing_store",
            RecoveryType::Peer => "peer",
            RecoveryType::RemoteStore => "remote_store",
            RecoveryType::Snapshot => "snapshot",
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
    /// How long this copy waited for `indices.recovery.max_bytes_per_sec` (the source does
    /// not throttle: the target paces what it asks for).
    #[serde(default)]
    pub throttle_millis: u64,
    /// A snapshot restore's repository and snapshot (`_cat/recovery` columns).
    #[serde(default)]
    pub snapshot: Option<(String, String)>,
    /// File by file (`_recovery?detailed=true`), in the order the recovery listed them.
    #[serde(default)]
    pub files: Vec<FileDetail>,
}

/// One file of a recovery: reused (already here) or how many of its bytes were recovered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDetail {
    pub name: String,
    pub length: u64,
    pub reused: bool,
    pub recovered: u64,
}

impl FileDetail {
    /// A file still to recover.
    pub fn new(name: &str, length: u64) -> FileDetail {
        FileDetail {
            name: name.to_string(),
            length,
            reused: false,
            recovered: 0,
        }
    }

    /// A file already here.
    pub fn reused(name: &str, length: u64) -> FileDetail {
        FileDetail {
            reused: true,
            ..FileDetail::new(name, length)
        }
    }

    /// A file copied whole.
    pub fn copied(name: &str, length: u64) -> FileDetail {
        FileDetail {
            recovered: length,
            ..FileDetail::new(name, length)
        }
    }
}

/// (files, bytes) copied rather than reused.
pub fn copied_totals(files: &[FileDetail]) -> (usize, u64) {
    let copied = files.iter().filter(|f| !f.reused);
    (copied.clone().count(), copied.map(|f| f.recovered).sum())
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
            throttle_millis: 0,
            snapshot: None,
            files: Vec::new(),
        }
    }

    pub fn elapsed(&self) -> Duration {
        let end = self.stop_millis.unwrap_or_else(now_millis);
        Duration::from_millis((end - self.start_millis).max(0) as u64)
    }

    /// A recovery from the copy's own store: every file of its commit (name, length) reused.
    pub fn reuse_commit_files(&mut self, files: &[(String, u64)]) {
        let reused = files
            .iter()
            .map(|(name, len)| FileDetail::reused(name, *len));
        self.record_files(reused.collect());
    }

    /// The files of a finished transfer, each reused or copied; the totals follow from them.
    pub fn record_files(&mut self, files: Vec<FileDetail>) {
        self.expect_files(files);
        let reused = self.files.iter().filter(|f| f.reused);
        self.files_reused = reused.clone().count() as u64;
        self.bytes_reused = reused.map(|f| f.length).sum();
        let (copied, bytes) = copied_totals(&self.files);
        (self.files_recovered, self.bytes_recovered) = (copied as u64, bytes);
    }

    /// The files this recovery brings, none reused or recovered yet.
    pub fn expect_files(&mut self, files: impl IntoIterator<Item = FileDetail>) {
        self.files = files.into_iter().collect();
        self.files_total = self.files.len() as u64;
        self.bytes_total = self.files.iter().map(|f| f.length).sum();
        (self.files_reused, self.files_recovered) = (0, 0);
        (self.bytes_reused, self.bytes_recovered) = (0, 0);
    }

    /// Counts a transfer's event, in the totals and in its file's detail.
    pub fn note_transfer(&mut self, event: &crate::transfer::target::Progress<'_>) {
        use crate::transfer::target::Progress;
        let name = match event {
            Progress::Reused(file) | Progress::Copied(file) => &file.name,
            Progress::Received { file, .. } => &file.name,
        };
        let detail = self.files.iter_mut().find(|f| &f.name == name);
        match *event {
            Progress::Reused(file) => {
                self.files_reused += 1;
                self.bytes_reused += file.length;
                if let Some(detail) = detail {
                    detail.reused = true;
                }
            }
            Progress::Received {
                bytes, throttled, ..
            } => {
                self.bytes_recovered += bytes;
                self.throttle_millis += throttled.as_millis() as u64;
                if let Some(detail) = detail {
                    detail.recovered += bytes;
                }
            }
            Progress::Copied(_) => self.files_recovered += 1,
        }
    }

    /// What was to be recovered: (files, bytes) not already here.
    pub fn to_recover(&self) -> (u64, u64) {
        (
            self.files_total - self.files_reused,
            self.bytes_total - self.bytes_reused,
        )
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
