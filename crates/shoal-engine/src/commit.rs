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

    /// `crc32c:<8 hex digits>:<json>`: a checksum of the JSON in front of it, so a damaged
    /// `meta.json` (which has no footer of its own) is not read as a different commit.
    pub fn to_json(&self) -> String {
        let body = serde_json::to_string(self).expect("payload serializes");
        format!(
            "{CHECKSUM_PREFIX}{:08x}:{body}",
            crc32c::crc32c(body.as_bytes())
        )
    }

    /// Parses a payload; `None` if it is not one or does not match its checksum. Payloads
    /// written before the checksum existed are bare JSON and are taken as they are.
    /// The payload a tantivy `meta.json` carries (`None`: not a Shoal commit, or unreadable).
    pub fn from_meta_json(meta: &str) -> Option<CommitPayload> {
        let meta: serde_json::Value = serde_json::from_str(meta).ok()?;
        meta.get("payload")?
            .as_str()
            .and_then(CommitPayload::from_json)
    }

    pub fn from_json(text: &str) -> Option<CommitPayload> {
        let body = match text.strip_prefix(CHECKSUM_PREFIX) {
            Some(rest) => {
                let (crc, body) = rest.split_once(':')?;
                let crc = u32::from_str_radix(crc, 16)
                    .ok()
                    .filter(|_| crc.len() == 8)?;
                (crc32c::crc32c(body.as_bytes()) == crc).then_some(body)?
            }
            None => text,
        };
        serde_json::from_str(body).ok()
    }
}

const CHECKSUM_PREFIX: &str = "crc32c:";
