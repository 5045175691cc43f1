//! Periodic shard work: refresh at `index.refresh_interval`, fsync the translog at
//! `index.translog.sync_interval` for async durability, flush past the size threshold, and
//! send lagging copies the global checkpoint at `index.global_checkpoint_sync.interval`, and
//! keep the primaries' retention leases (renewal, expiry) applied to their engines, and drop
//! the recoveries this node serves whose target gave up.

use std::sync::Weak;
use std::time::{Duration, Instant};

use shoal_translog::Durability;
use tracing::warn;

use crate::metadata::IndexMetadataExt;
use crate::node::Node;

const TICK: Duration = Duration::from_millis(100);

pub fn spawn(node: Weak<Node>) {
    std::thread::Builder::new()
        .name("shoal-scheduler".into())
        .spawn(move || loop {
            std::thread::sleep(TICK);
            let Some(node) = node.upgrade() else { return };
            node.fail_failed_engines();
            node.resend_failure_reports();
            run_due_work(&node);
        })
        .expect("spawning the scheduler thread");
}

fn run_due_work(node: &Node) {
    node.drop_abandoned_recoveries();
    for index in node.all_indices() {
        if !index.is_open() {
            continue;
        }
        let (refresh_interval, durability, sync_interval, checkpoint_sync_interval) = index
            .with_meta(|m| {
                (
                    m.settings().refresh_interval(),
                    m.settings().durability(),
                    m.settings().sync_interval(),
                    m.settings().global_checkpoint_sync_interval(),
                )
            });
        let now = Instant::now();
        let (refresh_due, sync_due, checkpoint_sync_due) = {
            let mut schedule = index.schedule.lock();
            let refresh_due =
                refresh_interval.is_some_and(|i| now.duration_since(schedule.last_refresh) >= i);
            let sync_due = durability == Durability::Async
                && now.duration_since(schedule.last_sync) >= sync_interval;
            if refresh_due {
                schedule.last_refresh = now;
            }
            if sync_due {
                schedule.last_sync = now;
            }
            let checkpoint_sync_due = now.duration_since(schedule.last_global_checkpoint_sync)
                >= checkpoint_sync_interval;
            if checkpoint_sync_due {
                schedule.last_global_checkpoint_sync = now;
            }
            (refresh_due, sync_due, checkpoint_sync_due)
        };
        for (shard, _) in index.local_shards() {
            node.maintain_retention_leases(&index, shard);
            if checkpoint_sync_due {
                node.sync_global_checkpoint(&index, shard);
            }
        }
        for engine in index.shards() {
            if refresh_due {
                if let Err(e) = engine.refresh() {
                    warn!(index = %index.name(), error = %e, "scheduled refresh failed");
                }
            }
            if sync_due {
                if let Err(e) = engine.sync_translog() {
                    warn!(index = %index.name(), error = %e, "scheduled translog sync failed");
                }
            }
            if engine.should_flush() {
                if let Err(e) = engine.flush(false) {
                    warn!(index = %index.name(), error = %e, "scheduled flush failed");
                }
            }
        }
    }
}
