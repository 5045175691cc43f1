use serde::{Deserialize, Serialize};

/// What a caller should do about a failed node-to-node request. Control flow branches on the
/// kind; the OpenSearch error type and reason are only for the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request itself is wrong: retrying it anywhere gives the same answer.
    Invalid,
    /// The index, shard or document named does not exist.
    NotFound,
    /// A version or sequence-number conflict.
    Conflict,
    /// Refused by backpressure (a full queue, indexing pressure): retry later.
    Rejected,
    /// The target cannot answer now (not started yet, connection lost, timed out): retry the
    /// same or another copy after a short wait.
    Unavailable,
    /// The target no longer holds the role asked for (not the primary, a stale term, the copy
    /// moved or was recreated): re-resolve routing from a newer cluster state, then retry.
    Moved,
    /// The copy that answered is broken (its engine failed, its files are corrupt): it must be
    /// failed and recovered elsewhere.
    CopyFailed,
    /// A bug in Shoal.
    Internal,
}

impl ErrorKind {
    /// Whether the same request may succeed if sent again (perhaps elsewhere).
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::Rejected | ErrorKind::Unavailable | ErrorKind::Moved
        )
    }

    /// Whether the failure belongs to the copy that answered rather than to the request, so
    /// a read may try another copy.
    pub fn is_copy_problem(self) -> bool {
        matches!(
            self,
            ErrorKind::Unavailable | ErrorKind::Moved | ErrorKind::CopyFailed | ErrorKind::Internal
        )
    }

    /// The kind of an error known only by its OpenSearch status and type (errors from
    /// nodes that predate kinds, and errors built before a kind was chosen). New code sets
    /// the kind where it creates the error instead.
    pub fn classify(status: u16, error_type: &str) -> ErrorKind {
        match error_type {
            "shard_not_found_exception"
            | "no_shard_available_action_exception"
            | "node_closed_exception"
            | "node_not_connected_exception"
            | "connect_transport_exception"
            | "receive_timeout_transport_exception"
            | "illegal_index_shard_state_exception"
            | "unavailable_shards_exception"
            | "index_closed_exception"
            | "illegal_state_exception"
            | "cluster_manager_not_discovered_exception"
            | "process_cluster_event_timeout_exception" => ErrorKind::Unavailable,
            // The node asked is no longer the primary, or no longer the cluster manager.
            "shard_not_in_primary_mode_exception"
            | "replication_stale_term_exception"
            | "not_cluster_manager" => ErrorKind::Moved,
            "engine_closed_exception" | "corrupt_index_exception" => ErrorKind::CopyFailed,
            "index_not_found_exception" | "resource_not_found_exception" => ErrorKind::NotFound,
            // Someone else created it first: a conflict with the current state, although
            // OpenSearch answers it with a 400.
            "version_conflict_engine_exception" | "resource_already_exists_exception" => {
                ErrorKind::Conflict
            }
            "rejected_execution_exception" | "es_rejected_execution_exception" => {
                ErrorKind::Rejected
            }
            _ => match status {
                409 => ErrorKind::Conflict,
                404 => ErrorKind::NotFound,
                429 => ErrorKind::Rejected,
                400..=499 => ErrorKind::Invalid,
                503 | 504 => ErrorKind::Unavailable,
                _ => ErrorKind::Internal,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_that_is_not_ready_is_retried_and_a_bad_request_is_not() {
        let not_ready = ErrorKind::classify(503, "shard_not_found_exception");
        assert_eq!(not_ready, ErrorKind::Unavailable);
        assert!(not_ready.is_retryable() && not_ready.is_copy_problem());
        let bad = ErrorKind::classify(400, "mapper_parsing_exception");
        assert_eq!(bad, ErrorKind::Invalid);
        assert!(!bad.is_retryable() && !bad.is_copy_problem());
    }

    #[test]
    fn backpressure_is_retryable_but_not_the_copys_fault() {
        let kind = ErrorKind::classify(429, "rejected_execution_exception");
        assert!(kind.is_retryable() && !kind.is_copy_problem());
    }

    #[test]
    fn a_node_that_lost_its_role_sends_the_caller_elsewhere() {
        assert_eq!(
            ErrorKind::classify(503, "not_cluster_manager"),
            ErrorKind::Moved
        );
        assert!(ErrorKind::Moved.is_retryable());
    }

    #[test]
    fn an_index_created_meanwhile_is_a_conflict_not_a_bad_request() {
        let kind = ErrorKind::classify(400, "resource_already_exists_exception");
        assert_eq!(kind, ErrorKind::Conflict);
    }

    #[test]
    fn an_unknown_type_falls_back_on_its_status() {
        assert_eq!(ErrorKind::classify(500, "whatever"), ErrorKind::Internal);
        assert_eq!(ErrorKind::classify(504, "whatever"), ErrorKind::Unavailable);
        assert_eq!(ErrorKind::classify(404, "whatever"), ErrorKind::NotFound);
    }
}
