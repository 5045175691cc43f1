use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Why a permit or a block was not granted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PermitError {
    /// Operations stayed blocked (a term bump or engine swap ran long) for the whole wait.
    #[error("operations are blocked on this shard copy and did not resume within {0:?}")]
    BlockedTimeout(Duration),
    /// Operations in flight did not drain within the wait, so the block was not taken.
    #[error("{in_flight} operation(s) in flight did not finish within {timeout:?}")]
    DrainTimeout { in_flight: usize, timeout: Duration },
    /// The copy is closed: no operation will ever run on it again.
    #[error("the shard copy is closed")]
    Closed,
}

#[derive(Debug, Default)]
struct State {
    in_flight: usize,
    /// A block is held or being taken: no new permit is granted.
    blocked: bool,
    closed: bool,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// Permits to operate on one shard copy (OpenSearch's `IndexShardOperationPermits`).
#[derive(Debug, Clone, Default)]
pub struct OperationPermits {
    shared: Arc<Shared>,
}

/// Held while one operation (or batch) applies; released on drop.
#[derive(Debug)]
#[must_use = "the permit is released when dropped"]
pub struct OperationPermit {
    shared: Arc<Shared>,
}

impl OperationPermits {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits up to `timeout` for operations to be unblocked, then takes a permit.
    pub fn acquire(&self, timeout: Duration) -> Result<OperationPermit, PermitError> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state.lock();
        loop {
            if state.closed {
                return Err(PermitError::Closed);
            }
            if !state.blocked {
                state.in_flight += 1;
                return Ok(OperationPermit {
                    shared: self.shared.clone(),
                });
            }
            if self
                .shared
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
                && state.blocked
            {
                return Err(PermitError::BlockedTimeout(timeout));
            }
        }
    }

    /// Blocks new permits, waits up to `timeout` for the ones in flight to be released, runs
    /// `work` with no operation in flight, and unblocks. On a drain timeout nothing runs and
    /// operations go on. Blocks do not nest: a second one waits for the first.
    pub fn block_operations<R>(
        &self,
        timeout: Duration,
        work: impl FnOnce() -> R,
    ) -> Result<R, PermitError> {
        self.take_block(timeout)?;
        let _unblock = Unblock {
            shared: &self.shared,
        };
        Ok(work())
    }

    /// Permits held right now.
    pub fn in_flight(&self) -> usize {
        self.shared.state.lock().in_flight
    }

    /// Refuses every future permit (the copy closed); permits held stay valid until dropped.
    pub fn close(&self) {
        self.shared.state.lock().closed = true;
        self.shared.changed.notify_all();
    }

    fn take_block(&self, timeout: Duration) -> Result<(), PermitError> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state.lock();
        while state.blocked {
            if self
                .shared
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
                && state.blocked
            {
                return Err(PermitError::BlockedTimeout(timeout));
            }
        }
        if state.closed {
            return Err(PermitError::Closed);
        }
        state.blocked = true;
        while state.in_flight > 0 {
            if self
                .shared
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
                && state.in_flight > 0
            {
                let in_flight = state.in_flight;
                state.blocked = false;
                self.shared.changed.notify_all();
                return Err(PermitError::DrainTimeout { in_flight, timeout });
            }
        }
        Ok(())
    }
}

/// Lifts a block when the blocked work ends, even by a panic.
struct Unblock<'a> {
    shared: &'a Shared,
}

impl Drop for Unblock<'_> {
    fn drop(&mut self) {
        self.shared.state.lock().blocked = false;
        self.shared.changed.notify_all();
    }
}

impl Drop for OperationPermit {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        debug_assert!(state.in_flight > 0);
        state.in_flight -= 1;
        if state.in_flight == 0 {
            self.shared.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;

    const WAIT: Duration = Duration::from_secs(5);

    #[test]
    fn a_block_waits_for_the_permits_in_flight_and_runs_with_none() {
        let permits = OperationPermits::new();
        let permit = permits.acquire(WAIT).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let blocker = {
            let (permits, released) = (permits.clone(), released.clone());
            thread::spawn(move || {
                permits
                    .block_operations(WAIT, || {
                        assert!(released.load(Ordering::SeqCst), "ran with a permit held");
                        permits.in_flight()
                    })
                    .unwrap()
            })
        };
        thread::sleep(Duration::from_millis(50));
        released.store(true, Ordering::SeqCst);
        drop(permit);
        assert_eq!(blocker.join().unwrap(), 0);
    }

    #[test]
    fn no_permit_is_granted_while_a_block_runs_and_they_resume_after() {
        let permits = OperationPermits::new();
        let blocking = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
        let blocker = {
            let (permits, blocking) = (permits.clone(), blocking.clone());
            thread::spawn(move || {
                permits
                    .block_operations(WAIT, || {
                        blocking.store(true, Ordering::SeqCst);
                        entered_tx.send(()).unwrap();
                        finish_rx.recv().unwrap();
                        blocking.store(false, Ordering::SeqCst);
                    })
                    .unwrap()
            })
        };
        entered_rx.recv().unwrap();
        assert_eq!(
            permits.acquire(Duration::from_millis(50)).unwrap_err(),
            PermitError::BlockedTimeout(Duration::from_millis(50))
        );
        let waiter = {
            let (permits, blocking) = (permits.clone(), blocking.clone());
            thread::spawn(move || {
                let _permit = permits.acquire(WAIT).unwrap();
                assert!(!blocking.load(Ordering::SeqCst), "granted during the block");
            })
        };
        thread::sleep(Duration::from_millis(30));
        finish_tx.send(()).unwrap();
        blocker.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(permits.in_flight(), 0);
    }

    #[test]
    fn a_block_that_cannot_drain_gives_up_and_lets_operations_go_on() {
        let permits = OperationPermits::new();
        let _held = permits.acquire(WAIT).unwrap();
        let ran = AtomicBool::new(false);
        let error = permits
            .block_operations(Duration::from_millis(30), || {
                ran.store(true, Ordering::SeqCst)
            })
            .unwrap_err();
        assert!(matches!(
            error,
            PermitError::DrainTimeout { in_flight: 1, .. }
        ));
        assert!(!ran.load(Ordering::SeqCst));
        drop(permits.acquire(Duration::from_millis(30)).unwrap());
    }

    #[test]
    fn a_closed_copy_grants_no_permit_and_no_block() {
        let permits = OperationPermits::new();
        permits.close();
        assert_eq!(permits.acquire(WAIT).unwrap_err(), PermitError::Closed);
        assert_eq!(
            permits.block_operations(WAIT, || ()).unwrap_err(),
            PermitError::Closed
        );
    }

    #[test]
    fn a_panicking_block_still_unblocks() {
        let permits = OperationPermits::new();
        let cloned = permits.clone();
        let result = thread::spawn(move || cloned.block_operations(WAIT, || panic!("boom"))).join();
        assert!(result.is_err());
        drop(permits.acquire(Duration::from_millis(50)).unwrap());
    }

    #[test]
    fn many_writers_and_repeated_blocks_never_overlap() {
        let permits = OperationPermits::new();
        let in_block = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let (permits, in_block) = (permits.clone(), in_block.clone());
                thread::spawn(move || {
                    for _ in 0..500 {
                        let _permit = permits.acquire(WAIT).unwrap();
                        assert!(!in_block.load(Ordering::SeqCst));
                    }
                })
            })
            .collect();
        for _ in 0..50 {
            permits
                .block_operations(WAIT, || {
                    in_block.store(true, Ordering::SeqCst);
                    assert_eq!(permits.in_flight(), 0);
                    in_block.store(false, Ordering::SeqCst);
                })
                .unwrap();
        }
        for writer in writers {
            writer.join().unwrap();
        }
    }
}
