//! Bounded executors and backpressure: OpenSearch's thread pools (`write`, `search`, `get`,
//! `management`, `generic`) and its indexing pressure.
//!
//! Where work runs (no thread is spawned per request):
//! - REST requests run on the pool of their kind (`shoal-rest` picks it): searches on `search`,
//!   gets on `get`, cluster and index administration and monitoring on `management`, the
//!   coordinating half of writes and everything else on `generic`.
//! - The shard-level half of a write takes a `write` slot on the primary's node for as long as
//!   it applies to the engine ([`Pressure::write_permit`]); a full `write` queue fails the
//!   shard's items with 429. The slot is not held while the write waits for its replicas or its
//!   fsync: a bounded pool whose threads wait on other nodes' bounded pools deadlocks.
//! - Requests from other nodes run on `transport_shard`, replica writes and recovery on
//!   `replication`, which never rejects: client work cannot starve a copy in sync.
//! - The REST half of a write runs at a lower CPU priority than refreshes, segment copies and
//!   searches ([`priority`]).

pub mod executor;
pub mod indexing;
pub mod priority;
pub mod settings;
pub mod shard_tasks;

use std::sync::Arc;

use serde_json::{json, Map, Value};

pub use executor::{Admission, Permit, PoolConfig, PoolKind, PoolStats, ThreadPool};
pub use indexing::{InFlight, IndexingPressure};

use crate::error::{ApiError, ApiResult};
use crate::settings::FlatSettings;

/// OpenSearch's `OpenSearchRejectedExecutionException`.
pub fn rejected_execution(reason: impl Into<String>) -> ApiError {
    ApiError::new(429, "rejected_execution_exception", reason)
}

/// The node's pools and indexing pressure.
pub struct Pressure {
    pools: Vec<ThreadPool>,
    pub indexing: Arc<IndexingPressure>,
}

impl Pressure {
    /// Runs `work` on the pool `name`, never refused (Admission::Force): background work that
    /// must happen (recoveries, resyncs, publications, uploads), bounded by the pool's threads.
    pub fn spawn_forced(&self, name: &str, work: impl FnOnce() + Send + 'static) {
        let queued = self.pool(name).spawn(Admission::Force, work);
        debug_assert!(queued.is_ok(), "forced work is never rejected");
    }

    /// From the node settings; a bad `thread_pool.*` or `indexing_pressure.*` value fails start.
    pub fn from_settings(node_name: &str, node_settings: &FlatSettings) -> ApiResult<Pressure> {
        let processors = settings::allocated_processors();
        let pools = settings::pool_configs(node_settings, processors)?
            .into_iter()
            .map(|config| ThreadPool::new(node_name, config))
            .collect();
        Ok(Pressure {
            pools,
            indexing: IndexingPressure::from_settings(node_settings)?,
        })
    }

    /// A pool by name (one of [`settings`]' names).
    pub fn pool(&self, name: &str) -> &ThreadPool {
        self.pools
            .iter()
            .find(|p| p.name() == name)
            .unwrap_or_else(|| panic!("no thread pool named [{name}]"))
    }

    /// Pools sorted by name, as `_cat/thread_pool` lists them.
    pub fn pools(&self) -> Vec<&ThreadPool> {
        let mut pools: Vec<&ThreadPool> = self.pools.iter().collect();
        pools.sort_by(|a, b| a.name().cmp(b.name()));
        pools
    }

    /// A `write` slot for the calling thread, or 429 naming `task` when the queue is full.
    pub fn write_permit(&self, task: &str) -> ApiResult<Permit> {
        admit(self.pool(settings::WRITE), Admission::Normal, task)
    }

    /// The `thread_pool` section of `_nodes` (`ThreadPool.Info`): each pool's shape.
    pub fn info(&self) -> Value {
        let sections: Map<String, Value> = self
            .pools()
            .into_iter()
            .map(|pool| {
                let c = pool.config();
                let mut info = json!({"type": c.kind.as_str()});
                match c.kind {
                    PoolKind::Scaling => {
                        info["core"] = json!(c.core);
                        info["max"] = json!(c.max);
                    }
                    PoolKind::Fixed => info["size"] = json!(c.max),
                }
                if let Some(keep_alive) = c.keep_alive {
                    info["keep_alive"] = json!(crate::settings::format_time(keep_alive));
                }
                info["queue_size"] = json!(c.queue_size.map_or(-1, |q| q as i64));
                (pool.name().to_string(), info)
            })
            .collect();
        Value::Object(sections)
    }

    /// The `thread_pool` section of `_nodes/stats`.
    pub fn stats(&self) -> Value {
        let sections: Map<String, Value> = self
            .pools()
            .into_iter()
            .map(|pool| {
                let s = pool.stats();
                (
                    pool.name().to_string(),
                    json!({"threads": s.threads, "queue": s.queue, "active": s.active,
                           "rejected": s.rejected, "largest": s.largest, "completed": s.completed}),
                )
            })
            .collect();
        Value::Object(sections)
    }
}

/// Waits for a slot of `pool` for the calling thread.
pub fn admit(pool: &ThreadPool, admission: Admission, task: &str) -> ApiResult<Permit> {
    pool.admit(admission)
        .map_err(|r| rejected_execution(format!("rejected execution of {task} on {}", r.executor)))
}

/// Runs `work` on `pool`'s threads and waits for it from async code; a full queue is 429 naming
/// `task`, a panic in `work` a 500.
pub async fn run_on<T: Send + 'static>(
    pool: &ThreadPool,
    admission: Admission,
    task: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> ApiResult<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    pool.spawn(admission, move || {
        let _ = tx.send(work());
    })
    .map_err(|r| rejected_execution(format!("rejected execution of {task} on {}", r.executor)))?;
    rx.await.map_err(|_| {
        tracing::error!(pool = pool.name(), task, "pool task panicked");
        ApiError::internal(format!(
            "internal error while handling [{task}] (this is a bug in Shoal): the task panicked"
        ))
    })
}

/// Node-to-node snapshot work (a primary's part of a snapshot) runs on the `snapshot` pool.
const SNAPSHOT_PREFIX: &str = "internal:cluster/snapshot/";

/// The pool a node-to-node action runs on, and whether it may be rejected.
pub fn pool_for_action(action: &str) -> (&'static str, Admission) {
    use crate::replication::action_names;
    let replication_work = action == action_names::REPLICA_OPS
        || action == action_names::LOCAL_CHECKPOINT
        || action.starts_with(action_names::RECOVERY_PREFIX)
        || action.starts_with(action_names::SEGREP_PREFIX);
    if replication_work {
        (settings::REPLICATION, Admission::Force)
    } else if action.starts_with(SNAPSHOT_PREFIX) {
        (settings::SNAPSHOT, Admission::Force)
    } else {
        (settings::TRANSPORT, Admission::Normal)
    }
}
