//! Waits on this node's applied cluster state that hold no thread while they wait: a request
//! re-checks its condition after each wake-up of state waiters and gives its pool thread back
//! in between (`_cluster/health?wait_for_status=green` can wait for its whole timeout, and
//! five such clients would otherwise hold every `management` thread).

use std::time::Duration;

use shoal_node::Node;
use tokio::sync::watch;
use tokio::time::Instant;

/// The wake-ups of one request's wait, until its deadline.
pub(crate) struct StateWakeups {
    wakeups: watch::Receiver<u64>,
    deadline: Instant,
}

impl StateWakeups {
    /// Subscribes now: a state applied after the next [`Self::mark_seen`] is never missed.
    pub(crate) fn new(node: &Node, timeout: Duration) -> StateWakeups {
        StateWakeups {
            wakeups: node.core().state_wakeups(),
            deadline: Instant::now() + timeout,
        }
    }

    /// Called just before each check of the condition.
    pub(crate) fn mark_seen(&mut self) {
        self.wakeups.borrow_and_update();
    }

    /// Resolves at the next wake-up after [`Self::mark_seen`] (`true`) or at the deadline
    /// (`false`).
    pub(crate) async fn next(&mut self) -> bool {
        matches!(
            tokio::time::timeout_at(self.deadline, self.wakeups.changed()).await,
            Ok(Ok(()))
        )
    }
}
