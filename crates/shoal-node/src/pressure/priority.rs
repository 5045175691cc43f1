//! Write work yields the CPU to the work that makes writes visible and answers reads.
//!
//! On a node out of CPU, a bulk load competes with the refresh that makes its documents
//! searchable, the segment copy that brings them to the replicas, and the searches. They are
//! short and someone waits for each; the bulk load is long and its clients are paced by its
//! own backpressure. So a thread runs the REST half of a write (parsing, and on the primary's
//! node the shard-level apply) at a lower scheduling priority (`nice` + [`WRITE_NICE`]), and
//! goes back to its own priority after. It is the idea of Lucene's merge thread priority, for
//! writes: the same work runs, and alone it gets every core; the latency-bound work goes first.
//!
//! A replica's operations and a forwarded shard bulk keep their thread's priority: tantivy's
//! indexing threads run at the priority of the thread that started them, so a lowered replica
//! could be starved by the primaries of its own node and hold every write to them back (the
//! one bench run with them lowered, on a noisy machine, had DOCUMENT with 1 replica at 0.73×
//! OpenSearch against 0.88× in the run before; not measured apart yet).
//!
//! Measured on 2 cores, 2 nodes, SEGMENT, a saturating bulk load (4 runs each, alternated):
//! the time replication adds to a document's visibility on the replica fell from p50 106 ms /
//! p99 140 ms to 53 / 95 ms, at the same docs/s.
//!
//! Going back to a higher priority is only allowed with `CAP_SYS_NICE` or a high enough
//! `RLIMIT_NICE`. Without either a pool thread could not undo the change, so writes then keep
//! the thread's priority: [`available`] probes it once, on a thread of its own.

use std::sync::OnceLock;

/// How much lower a write's work runs (nice 10 gets ~1/10 of a core shared with nice-0 work).
pub const WRITE_NICE: i32 = 10;

/// Runs `work` at the write priority on the calling thread, then restores the thread's own.
pub fn run_as_write<T>(work: impl FnOnce() -> T) -> T {
    let Some(own) = lower_current_thread() else {
        return work();
    };
    let _restore = Restore(own);
    work()
}

/// Puts the thread's priority back, also when the work panicked (the pool keeps the thread).
struct Restore(i32);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Err(e) = set_current_thread_nice(self.0) {
            tracing::warn!(error = %e, nice = self.0, "could not restore a thread's priority after a write");
        }
    }
}

/// Lowers the calling thread's priority; its previous nice value, or `None` when priorities
/// cannot be restored here (or the thread runs at the lowest priority already).
fn lower_current_thread() -> Option<i32> {
    if !available() {
        return None;
    }
    let own = current_thread_nice().ok()?;
    let lowered = (own + WRITE_NICE).min(19);
    if lowered == own {
        return None;
    }
    set_current_thread_nice(lowered).ok()?;
    Some(own)
}

/// Whether this process may raise a thread's priority back after lowering it.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // On a thread of its own: a failed restore must not leave a pool thread lowered.
        let probe = std::thread::Builder::new()
            .name("shoal-nice-probe".into())
            .spawn(|| {
                let own = current_thread_nice()?;
                set_current_thread_nice((own + 1).min(19))?;
                set_current_thread_nice(own)
            });
        let available = match probe.map(|t| t.join()) {
            Ok(Ok(Ok(()))) => true,
            _ => false,
        };
        tracing::info!(
            available,
            "write work at a lower cpu priority than refresh, replication and search{}",
            if available {
                ""
            } else {
                " is off: restoring a priority needs CAP_SYS_NICE or RLIMIT_NICE"
            }
        );
        available
    })
}

#[cfg(target_os = "linux")]
fn current_thread_nice() -> std::io::Result<i32> {
    // getpriority returns -1 for nice -1 too: errno tells an error apart.
    unsafe { *libc::__errno_location() = 0 };
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, thread_id()) };
    match nice == -1 && std::io::Error::last_os_error().raw_os_error() != Some(0) {
        true => Err(std::io::Error::last_os_error()),
        false => Ok(nice),
    }
}

/// On Linux, `PRIO_PROCESS` with a thread id sets that thread's nice value alone.
#[cfg(target_os = "linux")]
fn set_current_thread_nice(nice: i32) -> std::io::Result<()> {
    match unsafe { libc::setpriority(libc::PRIO_PROCESS, thread_id(), nice) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(target_os = "linux")]
fn thread_id() -> libc::id_t {
    unsafe { libc::gettid() as libc::id_t }
}

// Elsewhere a nice value is the whole process's: writes keep the thread's priority.
#[cfg(not(target_os = "linux"))]
fn current_thread_nice() -> std::io::Result<i32> {
    Err(std::io::Error::other("per-thread priorities need Linux"))
}

#[cfg(not(target_os = "linux"))]
fn set_current_thread_nice(_nice: i32) -> std::io::Result<()> {
    Err(std::io::Error::other("per-thread priorities need Linux"))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn write_work_runs_lowered_and_the_thread_gets_its_priority_back() {
        std::thread::spawn(|| {
            let own = current_thread_nice().unwrap();
            let during = run_as_write(|| current_thread_nice().unwrap());
            let after = current_thread_nice().unwrap();
            assert_eq!(after, own, "the thread's own priority is back");
            match available() {
                true => assert_eq!(during, (own + WRITE_NICE).min(19)),
                false => assert_eq!(during, own, "left alone when it could not be restored"),
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_panicking_write_gives_the_thread_its_priority_back() {
        std::thread::spawn(|| {
            let own = current_thread_nice().unwrap();
            let panicked = std::panic::catch_unwind(|| run_as_write(|| panic!("write failed")));
            assert!(panicked.is_err());
            assert_eq!(current_thread_nice().unwrap(), own);
        })
        .join()
        .unwrap();
    }
}
