//! Local copies that stop serving: an engine that failed at runtime (a full disk, an I/O
//! error, corruption) and a copy that could not be opened.
//!
//! As OpenSearch's `IndexShard.failShard` + `IndicesClusterStateService.failedShardsCache`: the
//! copy is closed and reported failed to the cluster manager with its reason, and its
//! allocation id is remembered so the applier never reopens it; the cluster manager promotes
//! another copy or assigns this one again under a new allocation id (counted against
//! `index.allocation.max_retries`). Two open failures are transient instead: a full disk and
//! a store whose previous writer has not let go of its lock yet. Such a copy stays
//! initializing (so nothing calls it started) and the open is retried every second, so a
//! lone copy comes back on its own once space returns, without burning its retries.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_state::{ClusterState, Command, ShardRouting};
use tracing::{info, warn};

use crate::config::CLUSTER_MANAGER_TIMEOUT;
use crate::copy_reports::CopyReports;
use crate::error::ApiError;
use crate::index_service::IndexService;

/// How long a failure report that did not reach the cluster manager waits before it is sent
/// again.
const REPORT_RETRY: Duration = Duration::from_secs(1);

/// A failed copy and where its report to the cluster manager stands.
struct FailedCopy {
    copy: ShardRouting,
    reason: String,
    /// `None` once the cluster manager took the report; else when to send it (again).
    resend_at: Option<Instant>,
}

/// What the node remembers of its failed copies.
#[derive(Default)]
pub struct FailedCopies {
    /// By allocation id: never reopened under that id, reported until the report lands.
    copies: Mutex<HashMap<String, FailedCopy>>,
    /// A copy waits for a transient open failure to pass: re-apply the state on a timer.
    retry_open: std::sync::atomic::AtomicBool,
}

impl FailedCopies {
    pub fn contains(&self, allocation_id: &str) -> bool {
        self.copies.lock().contains_key(allocation_id)
    }

    /// Remembers a failed copy; false when it was already known.
    fn insert(&self, allocation_id: &str, copy: &ShardRouting, reason: &str) -> bool {
        let mut copies = self.copies.lock();
        if copies.contains_key(allocation_id) {
            return false;
        }
        let failed = FailedCopy {
            copy: copy.clone(),
            reason: reason.to_string(),
            resend_at: None,
        };
        copies.insert(allocation_id.to_string(), failed);
        true
    }

    fn report_landed(&self, allocation_id: &str, landed: bool) {
        if let Some(failed) = self.copies.lock().get_mut(allocation_id) {
            failed.resend_at = (!landed).then(|| Instant::now() + REPORT_RETRY);
        }
    }

    /// The reports due to be sent again (and marks them in flight).
    fn due_reports(&self) -> Vec<(ShardRouting, String)> {
        let now = Instant::now();
        let mut copies = self.copies.lock();
        copies
            .values_mut()
            .filter(|f| f.resend_at.is_some_and(|at| at <= now))
            .map(|f| {
                f.resend_at = None;
                (f.copy.clone(), f.reason.clone())
            })
            .collect()
    }

    /// Forgets the ids the state no longer names (they can never come back).
    fn retain_known(&self, state: &ClusterState) {
        let known: std::collections::HashSet<&str> = state
            .all_copies()
            .filter_map(|c| c.allocation_id.as_deref())
            .collect();
        self.copies
            .lock()
            .retain(|id, _| known.contains(id.as_str()));
    }

    /// Whether some copy waits to retry its open; clears the flag (the next apply sets it
    /// again if the open still fails).
    pub fn take_retry_open(&self) -> bool {
        self.retry_open.swap(false, Ordering::AcqRel)
    }
}

/// An open that may succeed by itself a moment later.
pub fn is_transient_open_failure(reason: &str) -> bool {
    is_disk_full(reason) || reason.contains("LockBusy")
}

/// ENOSPC or EDQUOT, as `std::io::Error` renders them (Display or Debug) inside any wrapping
/// error: the engine's errors reach here as text.
pub fn is_disk_full(reason: &str) -> bool {
    [
        "(os error 28)",
        "(os error 122)",
        "StorageFull",
        "QuotaExceeded",
    ]
    .iter()
    .any(|mark| reason.contains(mark))
}

impl CopyReports {
    /// Closes and reports every local copy whose engine failed (scheduler tick).
    pub(crate) fn fail_failed_engines(self: &Arc<Self>) {
        for index in self.core.all_indices() {
            for (shard, engine) in index.local_shards() {
                if let Some(reason) = engine.has_failed().then(|| engine.failure()).flatten() {
                    self.fail_local_copy(
                        &index,
                        shard,
                        &format!("shard failure, reason [{reason}]"),
                    );
                }
            }
        }
    }

    /// Closes the local copy of `shard` without flushing and tells the cluster manager it
    /// failed, unless it already knows.
    pub(crate) fn fail_local_copy(
        self: &Arc<Self>,
        index: &IndexService,
        shard: usize,
        reason: &str,
    ) {
        let state = self.core.cluster_state();
        let copy = local_copy(&state, &self.core.node_id, &index.name(), shard).cloned();
        // Remembered before the copy goes, so the applier cannot reopen it in between.
        let known = copy.as_ref().and_then(|copy| {
            let allocation_id = copy.allocation_id.as_deref()?;
            Some(self.failed_copies.insert(allocation_id, copy, reason))
        });
        index.discard_shard(shard);
        let (Some(copy), Some(true)) = (copy, known) else {
            return;
        };
        warn!(index = %copy.index, shard, allocation_id = ?copy.allocation_id, reason, "failing shard copy");
        self.send_failure_report(copy, reason.to_string());
    }

    /// Proposes `ShardFailed`; a report that does not land is sent again by the scheduler
    /// (the copy stays closed meanwhile). A disk-full failure first reports the node's disk
    /// usage, so the disk threshold decider keeps copies off this node until space returns.
    fn send_failure_report(self: &Arc<Self>, copy: ShardRouting, reason: String) {
        let Some(allocation_id) = copy.allocation_id.clone() else {
            return;
        };
        let disk_full = is_disk_full(&reason) || self.data_disk_is_full();
        let reports = self.clone();
        self.core.runtime.spawn(async move {
            if disk_full {
                reports.core.clone().report_disk_usage().await;
            }
            let command = Command::ShardFailed {
                index: copy.index.clone(),
                shard: copy.shard,
                allocation_id: allocation_id.clone(),
                reason,
                primary_term: None,
            };
            let landed = reports
                .core
                .cluster
                .propose(command, CLUSTER_MANAGER_TIMEOUT)
                .await;
            if let Err(e) = &landed {
                warn!(error = %e, allocation_id, "could not report a failed shard copy, retrying");
            }
            reports
                .failed_copies
                .report_landed(&allocation_id, landed.is_ok());
        });
    }

    /// Sends again the failure reports that did not reach the cluster manager (scheduler).
    pub(crate) fn resend_failure_reports(self: &Arc<Self>) {
        for (copy, reason) in self.failed_copies.due_reports() {
            self.send_failure_report(copy, reason);
        }
    }

    /// Whether the filesystem of `path.data` has (almost) no space left: tantivy reports a
    /// failed indexing thread as "index writer was killed" without the cause.
    fn data_disk_is_full(&self) -> bool {
        const NEARLY_FULL: u64 = 1024 * 1024;
        crate::disk_usage::filesystem_space(&self.core.config.data_path)
            .is_some_and(|(_, available)| available < NEARLY_FULL)
    }

    /// Whether the applier must leave this copy alone (it was reported failed).
    pub(crate) fn is_failed_copy(&self, allocation_id: &str) -> bool {
        self.failed_copies.contains(allocation_id)
    }

    /// A copy that could not be opened: retried later when the cause is transient, failed
    /// otherwise (its reason then shows in `_cat/shards` and allocation explain).
    pub(crate) fn copy_failed_to_open(
        self: &Arc<Self>,
        index: &IndexService,
        copy: &ShardRouting,
        error: &ApiError,
    ) {
        let reason = format!("failed to open shard: {}", error.reason);
        // Unavailable: the copy could not be brought in line *yet* (operation permits busy
        // during a term bump, its slot not open yet); the next attempt may succeed.
        if error.kind == shoal_types::ErrorKind::Unavailable
            || is_transient_open_failure(&error.reason)
            || self.data_disk_is_full()
        {
            if !self.failed_copies.retry_open.swap(true, Ordering::AcqRel) {
                info!(index = %copy.index, shard = copy.shard, reason = %error.reason, "shard copy cannot open yet, retrying");
            }
            return;
        }
        self.fail_local_copy(index, copy.shard as usize, &reason);
    }

    /// Whether some copy waits to retry its open (see [`FailedCopies::take_retry_open`]).
    pub(crate) fn take_retry_open(&self) -> bool {
        self.failed_copies.take_retry_open()
    }

    /// Called after each applied state.
    pub(crate) fn forget_replaced_failed_copies(&self, state: &ClusterState) {
        self.failed_copies.retain_known(state);
    }
}

fn local_copy<'a>(
    state: &'a ClusterState,
    node_id: &'a str,
    index: &str,
    shard: usize,
) -> Option<&'a ShardRouting> {
    state
        .copies_on_node(node_id)
        .find(|c| c.index == index && c.shard as usize == shard)
}
