//! Local checkpoint: the highest seq_no below which every operation has been processed.

use std::collections::BTreeSet;

use crate::NO_OPS_PERFORMED;

/// Tracks processed sequence numbers, which can arrive out of order on replicas.
#[derive(Debug, Clone)]
pub struct LocalCheckpointTracker {
    next_seq_no: i64,
    checkpoint: i64,
    max_seq_no: i64,
    /// Processed seq_nos above the checkpoint (gaps below them are still missing).
    pending: BTreeSet<i64>,
}

impl LocalCheckpointTracker {
    pub fn new(max_seq_no: i64, local_checkpoint: i64) -> LocalCheckpointTracker {
        debug_assert!(local_checkpoint <= max_seq_no);
        LocalCheckpointTracker {
            next_seq_no: max_seq_no + 1,
            checkpoint: local_checkpoint,
            max_seq_no,
            pending: BTreeSet::new(),
        }
    }

    /// Issues the next seq_no (primary only).
    pub fn generate_seq_no(&mut self) -> i64 {
        let seq_no = self.next_seq_no;
        self.next_seq_no += 1;
        seq_no
    }

    /// Records that an operation was processed and advances the checkpoint over any
    /// contiguous run.
    pub fn mark_processed(&mut self, seq_no: i64) {
        self.max_seq_no = self.max_seq_no.max(seq_no);
        self.next_seq_no = self.next_seq_no.max(seq_no + 1);
        if seq_no <= self.checkpoint {
            return;
        }
        self.pending.insert(seq_no);
        while self.pending.remove(&(self.checkpoint + 1)) {
            self.checkpoint += 1;
        }
    }

    pub fn checkpoint(&self) -> i64 {
        self.checkpoint
    }

    pub fn max_seq_no(&self) -> i64 {
        self.max_seq_no
    }

    /// Whether the seq_no was already processed (replays must not apply it twice).
    pub fn has_processed(&self, seq_no: i64) -> bool {
        seq_no <= self.checkpoint || self.pending.contains(&seq_no)
    }

    /// The seq_nos missing between the checkpoint and max_seq_no (filled with no-ops on promotion).
    pub fn gaps(&self) -> Vec<i64> {
        (self.checkpoint + 1..=self.max_seq_no)
            .filter(|s| !self.pending.contains(s))
            .collect()
    }
}

impl Default for LocalCheckpointTracker {
    fn default() -> Self {
        LocalCheckpointTracker::new(NO_OPS_PERFORMED, NO_OPS_PERFORMED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_advances_over_contiguous_runs_only() {
        let mut t = LocalCheckpointTracker::default();
        t.mark_processed(0);
        t.mark_processed(2);
        assert_eq!(t.checkpoint(), 0);
        assert_eq!(t.gaps(), vec![1]);
        t.mark_processed(1);
        assert_eq!(t.checkpoint(), 2);
        assert_eq!(t.max_seq_no(), 2);
        assert!(t.gaps().is_empty());
    }

    #[test]
    fn generated_seq_nos_continue_after_recovery() {
        let mut t = LocalCheckpointTracker::new(9, 9);
        assert_eq!(t.generate_seq_no(), 10);
        t.mark_processed(10);
        assert_eq!(t.checkpoint(), 10);
    }

    #[test]
    fn replayed_seq_nos_are_recognised() {
        let mut t = LocalCheckpointTracker::new(5, 3);
        assert!(t.has_processed(3));
        assert!(!t.has_processed(4));
        t.mark_processed(5);
        assert!(t.has_processed(5));
    }
}
