//! Waits on this node's applied cluster state that hold no thread while they wait: a request
//! re-checks its condition after each wake-up of state waiters and gives its pool thread back
//! in between (`_cluster/health?wait_for_status=green` can wait for its whole timeout, and
//! five such clients would otherwise hold every `management` thread).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shoal_node::core::NodeCore;
use shoal_node::Node;
use tokio::sync::watch;
use tokio::time::Instant;

/// Runs `check` now and after every wake-up of state waiters until it answers that its
/// condition holds, or once more when `timeout` has passed (a state applied just before the
/// deadline may not have announced itself yet). Returns the last answer and whether it held.
/// A node that is stopped ends the wait at its next wake-up.
pub(crate) async fn until<T, E, Fut>(
    node: &Node,
    timeout: Duration,
    mut check: impl FnMut() -> Fut,
) -> Result<(T, bool), E>
where
    Fut: Future<Output = Result<(T, bool), E>>,
{
    let mut wakeups = StateWakeups::new(node.core(), timeout);
    loop {
        wakeups.mark_seen();
        let (answer, holds) = check().await?;
        if holds {
            return Ok((answer, true));
        }
        if !wakeups.next().await {
            return check().await;
        }
    }
}

/// [`until`] for a condition that cannot fail: whether it held before `timeout`.
pub(crate) async fn until_true(
    node: &Node,
    timeout: Duration,
    mut holds: impl FnMut() -> bool,
) -> bool {
    let checked = until(node, timeout, || {
        std::future::ready(Ok::<_, std::convert::Infallible>(((), holds())))
    });
    match checked.await {
        Ok(((), held)) => held,
        Err(never) => match never {},
    }
}

/// The wake-ups of one request's wait, until its deadline.
struct StateWakeups {
    core: Arc<NodeCore>,
    wakeups: watch::Receiver<u64>,
    deadline: Instant,
}

impl StateWakeups {
    /// Subscribes now: a state applied after the next [`Self::mark_seen`] is never missed.
    fn new(core: &Arc<NodeCore>, timeout: Duration) -> StateWakeups {
        StateWakeups {
            core: core.clone(),
            wakeups: core.state_wakeups(),
            deadline: Instant::now() + timeout,
        }
    }

    /// Called just before each check of the condition.
    fn mark_seen(&mut self) {
        self.wakeups.borrow_and_update();
    }

    /// Resolves at the next wake-up after [`Self::mark_seen`] (`true`), or at the deadline or
    /// once the node is stopped (`false`).
    async fn next(&mut self) -> bool {
        let woken = matches!(
            tokio::time::timeout_at(self.deadline, self.wakeups.changed()).await,
            Ok(Ok(()))
        );
        woken && !self.core.is_killed()
    }
}
