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

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use shoal_state::{ClusterState, ShardRouting};
use tracing::{info, warn};

use crate::error::ApiError;
use crate::index_service::IndexService;
use crate::node::Node;

/// What the node remembers of its failed copies.
#[derive(Default)]
pub struct FailedCopies {
    /// Allocation ids reported failed: never reopened under that id.
    allocation_ids: Mutex<HashSet<String>>,
    /// A copy waits for a transient open failure to pass: re-apply the state on a timer.
    retry_open: std::sync::atomic::AtomicBool,
}

impl FailedCopies {
    pub fn contains(&self, allocation_id: &str) -> bool {
        self.allocation_ids.lock().contains(allocation_id)
    }

    fn insert(&self, allocation_id: &str) -> bool {
        self.allocation_ids.lock().insert(allocation_id.to_string())
    }

    /// A report that did not reach the cluster manager: the copy may be reported again.
    pub fn forget(&self, allocation_id: &str) {
        self.allocation_ids.lock().remove(allocation_id);
    }

    /// Forgets the ids the state no longer names (they can never come back).
    fn retain_known(&self, state: &ClusterState) {
        let known: HashSet<&str> = state
            .all_copies()
            .filter_map(|c| c.allocation_id.as_deref())
            .collect();
        self.allocation_ids
            .lock()
            .retain(|id| known.contains(id.as_str()));
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

impl Node {
    /// Closes and reports every local copy whose engine failed (scheduler tick).
    pub(crate) fn fail_failed_engines(self: &Arc<Self>) {
        for index in self.all_indices() {
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
        let state = self.cluster_state();
        let copy = local_copy(&state, &self.node_id, &index.name(), shard);
        index.discard_shard(shard);
        let Some(copy) = copy else { return };
        let Some(allocation_id) = copy.allocation_id.as_deref() else {
            return;
        };
        if !self.failed_copies.insert(allocation_id) {
            return;
        }
        warn!(index = %copy.index, shard, allocation_id, reason, "failing shard copy");
        if !is_disk_full(reason) {
            self.report_failed(copy, reason);
            return;
        }
        // The cluster manager learns the disk is full before it places the copy again, so
        // the disk threshold decider keeps copies off this node until space returns.
        let node = self.clone();
        let (copy, reason) = (copy.clone(), reason.to_string());
        self.runtime.spawn(async move {
            node.clone().report_disk_usage().await;
            node.report_failed(&copy, &reason);
        });
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
        if is_transient_open_failure(&error.reason) {
            if !self.failed_copies.retry_open.swap(true, Ordering::AcqRel) {
                info!(index = %copy.index, shard = copy.shard, reason = %error.reason, "shard copy cannot open yet, retrying");
            }
            return;
        }
        self.fail_local_copy(index, copy.shard as usize, &reason);
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
