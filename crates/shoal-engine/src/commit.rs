//! The user data stored with every tantivy commit (like Lucene's commit user data).

use serde::{Deserialize, Serialize};

use crate::NO_OPS_PERFORMED;

/// What a commit contains, so restart knows where translog replay starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitPayload {
    /// Every op with seq_no <= this is in the commit.
    pub local_checkpoint: i64,
    /// Highest seq_no in the commit (ops between the checkpoint and this may be in it).
    pub max_seq_no: i64,
    pub translog_uuid: String,
    /// Oldest translog generation needed to replay ops above `local_checkpoint`.
    pub translog_generation: u64,
    pub global_checkpoint: i64,
    /// Identifies the history of operations of this shard copy.
    pub history_uuid: String,
    /// The translog holds every operation this copy applied with a seq_no at or above this
    /// (what a copy below it holds may sit only in the commit). Operation-based recovery and
    /// the resync divergence check can only compare history from here on.
    #[serde(default = "history_unknown")]
    pub history_complete_from: i64,
}

/// Commits written before `history_complete_from` existed: nothing is known to be complete.
fn history_unknown() -> i64 {
    i64::MAX
}

impl CommitPayload {
    pub fn empty(translog_uuid: &str, history_uuid: &str) -> CommitPayload {
        CommitPayload {
            local_checkpoint: NO_OPS_PERFORMED,
            max_seq_no: NO_OPS_PERFORMED,
            translog_uuid: translog_uuid.to_string(),
            translog_generation: 1,
            global_checkpoint: NO_OPS_PERFORMED,
            history_uuid: history_uuid.to_string(),
            history_complete_from: 0,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("payload serializes")
    }

    pub fn from_json(text: &str) -> Option<CommitPayload> {
        serde_json::from_str(text).ok()
    }
}
