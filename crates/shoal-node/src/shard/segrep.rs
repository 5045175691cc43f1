//! A copy's segment-replication state (see `crate::segrep`): as a primary, the checkpoints
//! pinned for copies in progress and how far behind each replica is; as a replica, what it
//! was told and what it installed. Plain state, so `IndexShard` holds it without depending on
//! the segment replication service.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use shoal_engine::SegmentCheckpoint;

/// The segment-replication state of one local copy: as a primary, the checkpoints pinned for
/// copies in progress; as a replica, what it was told and what it installed.
#[derive(Default)]
pub struct CopyState {
    /// The refresh listener that publishes checkpoints is on the engine.
    pub(crate) publisher_installed: AtomicBool,
    /// A publication is queued (later refreshes ride on it).
    pub(crate) publish_queued: AtomicBool,
    pub(crate) pinned: Mutex<HashMap<String, Arc<Pinned>>>,
    /// The newest (term, version) a primary published to this replica.
    pub(crate) published: Mutex<Option<(i64, u64)>>,
    /// The (term, version) this replica searches.
    pub(crate) installed: Mutex<Option<(i64, u64)>>,
    /// A copy task runs for this replica.
    pub(crate) copying: AtomicBool,
    /// As a primary: how far behind each replica is, by allocation id.
    pub(crate) replicas: Mutex<ReplicaLags>,
    /// As a primary: writes refused because too many replicas were stale.
    pub(crate) rejected: std::sync::atomic::AtomicU64,
    /// As a primary: when its replicas were last checked for failing as stale.
    stale_checked: Mutex<Option<std::time::Instant>>,
    /// As a primary refusing writes for stale replicas: when it last published its checkpoint
    /// to them again.
    republished: Mutex<Option<std::time::Instant>>,
    /// As a replica: merged-segment files received ahead of the checkpoint that names them,
    /// and when (see `crate::segrep::precopy`).
    pub(crate) precopied: Mutex<HashMap<String, Instant>>,
}

/// Starts a new period in `last` if `every` passed since the one it holds.
fn period_started(last: &Mutex<Option<std::time::Instant>>, every: std::time::Duration) -> bool {
    let now = std::time::Instant::now();
    let mut last = last.lock();
    if last.is_some_and(|at| now.duration_since(at) < every) {
        return false;
    }
    *last = Some(now);
    true
}

impl CopyState {
    /// Whether `every` passed since the last stale-replica check (and starts the next period).
    pub(crate) fn stale_check_due(&self, every: std::time::Duration) -> bool {
        period_started(&self.stale_checked, every)
    }

    /// Whether `every` passed since the checkpoint was last published again to stale
    /// replicas (and starts the next period).
    pub(crate) fn republish_due(&self, every: std::time::Duration) -> bool {
        period_started(&self.republished, every)
    }

    pub fn rejected_requests(&self) -> u64 {
        self.rejected.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Remembers that the primary published `(term, version)` to this replica.
    pub fn note_published(&self, position: (i64, u64)) {
        let mut newest = self.published.lock();
        if newest.is_none_or(|have| have < position) {
            *newest = Some(position);
        }
    }

    /// Whether the primary published a checkpoint this replica has not installed yet.
    pub fn is_behind(&self) -> bool {
        self.published
            .lock()
            .is_some_and(|wanted| !self.has_installed(wanted))
    }

    /// Whether the replica has installed `(term, version)` or a newer checkpoint.
    pub fn has_installed(&self, wanted: (i64, u64)) -> bool {
        self.installed.lock().is_some_and(|have| have >= wanted)
    }
}

/// A checkpoint's files, hard-linked into a directory of their own so merges on the primary
/// cannot delete them while a replica copies them.
pub struct Pinned {
    dir: PathBuf,
    checkpoint: SegmentCheckpoint,
    last_used: Mutex<Instant>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pinned {
    pub fn new(dir: PathBuf, checkpoint: SegmentCheckpoint) -> Pinned {
        Pinned {
            dir,
            checkpoint,
            last_used: Mutex::new(Instant::now()),
        }
    }

    pub fn checkpoint(&self) -> &SegmentCheckpoint {
        &self.checkpoint
    }

    /// How long nobody read from it.
    pub fn idle_for(&self) -> Duration {
        self.last_used.lock().elapsed()
    }

    /// Where the file `name` of the checkpoint is pinned; `None` when it has no such file.
    pub fn path(&self, name: &str) -> Option<PathBuf> {
        self.checkpoint
            .files
            .iter()
            .any(|f| f.name == name)
            .then(|| self.dir.join(name))
    }

    /// Marks it in use (every chunk served).
    pub fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }
}

/// One replica's progress, kept by its primary.
#[derive(Debug, Default)]
pub struct ReplicaLag {
    /// Published and not yet searched by the replica: (version, published at, bytes).
    pending: Vec<(u64, Instant, u64)>,
    /// (version, bytes) of what the replica searches.
    visible: Option<(u64, u64)>,
    last_completed: Option<Duration>,
    /// The replica's last copy round, as it reported it.
    pub last_round: Option<CopyRound>,
}

impl ReplicaLag {
    /// A checkpoint was published to the replica.
    pub fn published(&mut self, version: u64, length: u64, now: Instant) {
        let newer = self.pending.last().is_none_or(|(v, _, _)| *v < version)
            && self.visible.is_none_or(|(v, _)| v < version);
        if newer {
            self.pending.push((version, now, length));
        }
    }

    /// The replica searches `version` now: every checkpoint up to it is done; the lag of the
    /// newest of them is the last completed one.
    pub fn visible(&mut self, version: u64, length: u64, now: Instant) {
        let done = self.pending.partition_point(|(v, _, _)| *v <= version);
        if let Some((_, published, _)) = self.pending.get(done.wrapping_sub(1)) {
            self.last_completed = Some(now.duration_since(*published));
        }
        self.pending.drain(..done);
        self.visible = Some((version, length));
    }

    /// How long the last checkpoint the replica caught up with took.
    pub fn last_completed(&self) -> Option<Duration> {
        self.last_completed
    }

    pub fn checkpoints_behind(&self) -> usize {
        self.pending.len()
    }

    pub fn current_lag(&self, now: Instant) -> Duration {
        self.pending
            .first()
            .map_or(Duration::ZERO, |(_, at, _)| now.duration_since(*at))
    }

    pub fn bytes_behind(&self) -> u64 {
        let latest = self.pending.last().map_or(0, |(_, _, len)| *len);
        latest.saturating_sub(self.visible.map_or(0, |(_, len)| len))
    }
}

/// A replica's last completed copy round, by stage (ms) and size, as it reported it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct CopyRound {
    pub start_time_ms: u64,
    pub stop_time_ms: u64,
    pub time_ms: u64,
    pub get_checkpoint_info_ms: u64,
    pub file_diff_ms: u64,
    pub get_files_ms: u64,
    pub finalize_ms: u64,
    pub files_total: usize,
    pub files_to_fetch: usize,
    pub files_fetched: usize,
    pub bytes_total: u64,
    pub bytes_to_fetch: u64,
    pub bytes_fetched: u64,
}

/// The lag of every replica of a primary copy, by allocation id.
pub type ReplicaLags = BTreeMap<String, ReplicaLag>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_runs_from_publication_to_the_report_and_not_while_nothing_is_pending() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut lag = ReplicaLag::default();
        assert_eq!(
            (lag.checkpoints_behind(), lag.current_lag(at(500))),
            (0, Duration::ZERO)
        );
        lag.published(1, 100, at(0));
        lag.published(2, 300, at(200));
        lag.published(2, 300, at(250));
        assert_eq!(lag.checkpoints_behind(), 2);
        assert_eq!(lag.current_lag(at(400)), Duration::from_millis(400));
        assert_eq!(lag.bytes_behind(), 300);

        // The replica copied checkpoint 1 only.
        lag.visible(1, 100, at(450));
        assert_eq!(lag.last_completed, Some(Duration::from_millis(450)));
        assert_eq!((lag.checkpoints_behind(), lag.bytes_behind()), (1, 200));
        assert_eq!(lag.current_lag(at(500)), Duration::from_millis(300));

        // It went straight to a newer one than published (the primary's current one).
        lag.visible(3, 350, at(600));
        assert_eq!(lag.last_completed, Some(Duration::from_millis(400)));
        assert_eq!((lag.checkpoints_behind(), lag.bytes_behind()), (0, 0));
        assert_eq!(
            lag.current_lag(at(10_000)),
            Duration::ZERO,
            "an idle replica is not behind"
        );
        lag.published(3, 350, at(700));
        assert_eq!(
            lag.checkpoints_behind(),
            0,
            "what it searches is not pending"
        );
    }
}
