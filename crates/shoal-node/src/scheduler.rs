//! Periodic shard work, on the schedule each copy keeps (`shard::schedule`): refresh at `index.refresh_interval`, fsync the translog at
//! `index.translog.sync_interval` for async durability, flush past the size threshold, and
//! send lagging copies the global checkpoint at `index.global_checkpoint_sync.interval`, and
//! keep the primaries' retention leases (renewal, expiry) applied to their engines, and drop
//! the recoveries this node serves whose target gave up.

use std::sync::{Arc, Weak};
use std::time::Duration;

use shoal_engine::Engine;
use shoal_translog::Durability;
use tracing::warn;

use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::node::Node;
use crate::pressure::settings::{FLUSH, GENERIC, REFRESH};
use crate::pressure::shard_tasks::ShardTasks;
use crate::shard::schedule::{Due, Intervals};

const TICK: Duration = Duration::from_millis(100);

/// A copy's engine work, by index uuid and shard.
type CopyKey = (String, usize);

/// Where due engine work runs: at most one refresh, one scheduled fsync and one flush per
/// copy at a time, refreshes and flushes on OpenSearch's `refresh` and `flush` pools, fsyncs
/// on `generic` (never behind a refresh). A copy whose refresh is still running when the next
/// comes due gets one more, not a backlog; one kind of work never replaces another.
struct EngineWork {
    refreshes: ShardTasks<CopyKey>,
    syncs: ShardTasks<CopyKey>,
    flushes: ShardTasks<CopyKey>,
}

impl EngineWork {
    fn new(node: &Node) -> EngineWork {
        let tasks = |pool: &str| {
            let pool = node.core.pressure.pool(pool).clone();
            let limit = pool.config().max;
            ShardTasks::new(pool, limit, || {})
        };
        EngineWork {
            refreshes: tasks(REFRESH),
            syncs: tasks(GENERIC),
            flushes: tasks(FLUSH),
        }
    }
}

pub fn spawn(node: Weak<Node>) {
    std::thread::Builder::new()
        .name("shoal-scheduler".into())
        .spawn(move || {
            let Some(work) = node.upgrade().map(|node| EngineWork::new(&node)) else {
                return;
            };
            // Ticks keep their cadence whatever a pass takes, so work comes due on time: the
            // spacing of a copy's refreshes is what bounds how long a write waits to be seen.
            let mut next_tick = std::time::Instant::now() + TICK;
            loop {
                std::thread::sleep(next_tick.saturating_duration_since(std::time::Instant::now()));
                next_tick = (next_tick + TICK).max(std::time::Instant::now() + TICK / 10);
                let Some(node) = node.upgrade() else { return };
                node.reports.fail_failed_engines();
                node.reports.resend_failure_reports();
                node.reports.resend_started_reports();
                node.remote.maintain_cluster_state();
                run_due_work(&node, &work);
            }
        })
        .expect("spawning the scheduler thread");
}

fn run_due_work(node: &Arc<Node>, work: &EngineWork) {
    node.recoveries.drop_abandoned();
    for index in node.core.all_indices() {
        if !index.is_open() {
            continue;
        }
        let intervals = index.with_meta(|m| {
            let settings = m.settings();
            Intervals {
                refresh: settings.refresh_interval(),
                sync: (settings.durability() == Durability::Async)
                    .then(|| settings.sync_interval()),
                checkpoint_sync: settings.global_checkpoint_sync_interval(),
            }
        });
        for (shard, allocation_id, term) in node.segrep.stale_replicas_to_fail(&index) {
            fail_stale_segment_replica(node, &index, shard, allocation_id, term);
        }
        for (shard, copy) in index.local_copies() {
            let due = copy.take_due_work(&intervals);
            node.replication.maintain_retention_leases(&index, shard);
            if due.checkpoint_sync {
                node.replication.sync_global_checkpoint(&index, shard);
            }
            if due.sync && index.is_remote_store() && copy.primary_targets().is_some() {
                node.remote.queue_translog_upload(&index, shard);
            }
            queue_engine_work(work, &index, shard, copy.engine(), due);
        }
    }
}

/// Refresh, fsync and flush of one copy's engine, as due, on their pools.
fn queue_engine_work(
    work: &EngineWork,
    index: &IndexService,
    shard: usize,
    engine: &Arc<Engine>,
    due: Due,
) {
    let key = (index.uuid(), shard);
    let queue = |tasks: &ShardTasks<CopyKey>, what: &'static str, run: EngineJob| {
        let (engine, name) = (engine.clone(), index.name());
        tasks.submit(key.clone(), 0, move || {
            if let Err(e) = run(&engine) {
                warn!(index = %name, error = %e, "scheduled {what} failed");
            }
        });
    };
    if due.refresh {
        queue(&work.refreshes, "refresh", |e| e.refresh().map(drop));
    }
    if due.sync {
        queue(&work.syncs, "translog sync", Engine::sync_translog);
    }
    if engine.should_flush() && !work.flushes.busy(&key) {
        queue(&work.flushes, "flush", |e| {
            let periodic = shoal_engine::FlushRequest {
                force: false,
                wait_if_ongoing: true,
                periodic: true,
            };
            e.flush_requested(periodic).map(drop)
        });
    }
}

/// One kind of scheduled engine work.
type EngineJob = fn(&Engine) -> Result<(), shoal_engine::EngineError>;

/// Fails a segment replica behind for longer than `segrep.replication.time.limit`, on the
/// `replication` pool (it waits for the cluster manager).
fn fail_stale_segment_replica(
    node: &Arc<Node>,
    index: &IndexService,
    shard: usize,
    allocation_id: String,
    term: i64,
) {
    let (replication, index) = (node.replication.clone(), index.name());
    node.core.pressure.spawn_forced(crate::pressure::settings::REPLICATION, move || {
        let error = crate::error::ApiError::new(
            503,
            "replication_failed_exception",
            "replica too far behind primary, marking as stale",
        );
        if let Err(e) = replication.fail_copy(&index, shard, &allocation_id, term, &error) {
            warn!(index, shard, allocation_id, error = %e, "could not fail a stale segment replica");
        }
    });
}
