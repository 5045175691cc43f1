//! One copy round of a segment replica, timed by stage for `_cat/segment_replication?detailed`
//! (OpenSearch's stages: replicating, get checkpoint info, file diff, get files, finalize).
//! The replica times its round and sends it with its report that it searches the checkpoint;
//! the primary keeps the last one per replica.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::shard::segrep::CopyRound;
use crate::transfer::target::TransferStats;

/// A round being timed on the replica.
pub(crate) struct RoundClock {
    started_at: SystemTime,
    started: Instant,
    /// When the previous stage ended.
    lap: Instant,
    round: CopyRound,
}

impl RoundClock {
    pub(crate) fn start() -> RoundClock {
        let now = Instant::now();
        RoundClock {
            started_at: SystemTime::now(),
            started: now,
            lap: now,
            round: CopyRound::default(),
        }
    }

    /// The primary's (or repository's) checkpoint and file list arrived.
    pub(crate) fn checkpoint_info_done(&mut self) {
        self.round.get_checkpoint_info_ms = self.take_lap();
    }

    /// The files were compared and the missing ones fetched (`stats.diff` of it comparing).
    pub(crate) fn files_done(&mut self, stats: &TransferStats) {
        let transfer = self.take_lap();
        let diff = millis(stats.diff).min(transfer);
        self.round.file_diff_ms = diff;
        self.round.get_files_ms = transfer - diff;
        self.round.files_total = stats.files_copied + stats.files_reused;
        self.round.files_to_fetch = stats.files_copied;
        self.round.files_fetched = stats.files_copied;
        self.round.bytes_total = stats.bytes_copied + stats.bytes_reused;
        self.round.bytes_to_fetch = stats.bytes_copied;
        self.round.bytes_fetched = stats.bytes_copied;
    }

    /// The checkpoint is installed and searched: the round, complete.
    pub(crate) fn finish(mut self) -> CopyRound {
        self.round.finalize_ms = self.take_lap();
        self.round.time_ms = millis(self.started.elapsed());
        self.round.start_time_ms = epoch_millis(self.started_at);
        self.round.stop_time_ms = self.round.start_time_ms + self.round.time_ms;
        self.round
    }

    fn take_lap(&mut self) -> u64 {
        let now = Instant::now();
        let lap = millis(now - self.lap);
        self.lap = now;
        lap
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn epoch_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_add_up_to_no_more_than_the_round_and_counts_follow_the_transfer() {
        let mut clock = RoundClock::start();
        std::thread::sleep(Duration::from_millis(5));
        clock.checkpoint_info_done();
        let stats = TransferStats {
            files_copied: 2,
            bytes_copied: 300,
            files_reused: 3,
            bytes_reused: 700,
            diff: Duration::from_millis(1),
        };
        clock.files_done(&stats);
        let round = clock.finish();
        let stages = round.get_checkpoint_info_ms
            + round.file_diff_ms
            + round.get_files_ms
            + round.finalize_ms;
        assert!(round.get_checkpoint_info_ms >= 5, "{round:?}");
        assert!(stages <= round.time_ms + 1, "{round:?}");
        assert_eq!((round.files_total, round.files_to_fetch), (5, 2));
        assert_eq!((round.bytes_total, round.bytes_fetched), (1000, 300));
        assert_eq!(round.stop_time_ms, round.start_time_ms + round.time_ms);
    }
}
