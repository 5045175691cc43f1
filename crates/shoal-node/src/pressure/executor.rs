//! One thread pool with OpenSearch's semantics: at most `max` units of work at a time, a bounded
//! queue behind them (a full queue rejects), OS worker threads.
//!
//! Work enters in two ways, sharing the same slots, queue and counters:
//! - [`ThreadPool::spawn`]: a job run on one of the pool's own threads (REST handlers,
//!   node-to-node actions);
//! - [`ThreadPool::admit`]: the calling thread waits for a slot and runs the work itself while
//!   it holds the [`Permit`] (the shard-level half of a write, which borrows the coordinator's
//!   state and must not hold a slot while it waits for replicas).
//!
//! Forced work ([`Admission::Force`]) queues past the capacity: it is never rejected.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// OpenSearch's two pool types Shoal uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// `size` threads, a bounded queue (`queue_size`, -1 = unbounded).
    Fixed,
    /// `core` to `max` threads, idle ones above `core` leave after `keep_alive`; unbounded queue.
    Scaling,
}

impl PoolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::Fixed => "fixed",
            PoolKind::Scaling => "scaling",
        }
    }
}

/// The shape of one pool, from defaults and node settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    pub name: String,
    pub kind: PoolKind,
    /// Threads kept alive (fixed: `size`).
    pub core: usize,
    /// Work running at once (fixed: `size`).
    pub max: usize,
    /// Waiting work allowed; `None` is unbounded.
    pub queue_size: Option<usize>,
    pub keep_alive: Option<Duration>,
}

/// Whether work may be refused when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Normal,
    /// Replica writes, recovery: queued whatever the queue holds.
    Force,
}

/// A refusal: the pool's description at that moment, in OpenSearch's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub executor: String,
}

/// Counters as `_nodes/stats` and `_cat/thread_pool` show them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PoolStats {
    pub threads: usize,
    pub queue: usize,
    pub active: usize,
    pub rejected: u64,
    pub largest: usize,
    pub completed: u64,
}

enum Entry {
    Job(Job),
    Waiter(u64),
}

#[derive(Default)]
struct State {
    /// Work waiting for a slot, oldest first.
    queue: VecDeque<Entry>,
    /// Jobs holding a slot, waiting for a worker thread to pick them up.
    ready: VecDeque<Job>,
    /// Callers of `admit` whose turn came.
    granted: HashSet<u64>,
    active: usize,
    threads: usize,
    idle: usize,
    largest: usize,
    completed: u64,
    rejected: u64,
    next_ticket: u64,
}

struct Inner {
    config: PoolConfig,
    /// `<node name>/<pool>`, as OpenSearch names executors.
    label: String,
    id: u64,
    state: Mutex<State>,
    work: Condvar,
    turn: Condvar,
}

/// A bounded thread pool; cheap to clone.
#[derive(Clone)]
pub struct ThreadPool(Arc<Inner>);

/// A slot held by the calling thread; dropping it frees the slot.
pub struct Permit {
    pool: ThreadPool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.pool.release();
    }
}

static POOL_IDS: AtomicU64 = AtomicU64::new(1);

impl ThreadPool {
    pub fn new(node_name: &str, config: PoolConfig) -> ThreadPool {
        debug_assert!(config.max >= 1 && config.core <= config.max);
        ThreadPool(Arc::new(Inner {
            label: format!("{node_name}/{}", config.name),
            id: POOL_IDS.fetch_add(1, Ordering::Relaxed),
            config,
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            turn: Condvar::new(),
        }))
    }

    pub fn config(&self) -> &PoolConfig {
        &self.0.config
    }

    pub fn name(&self) -> &str {
        &self.0.config.name
    }

    /// Runs `job` on one of the pool's threads, now or once a slot frees.
    pub fn spawn(
        &self,
        admission: Admission,
        job: impl FnOnce() + Send + 'static,
    ) -> Result<(), Rejected> {
        let mut state = self.0.state.lock();
        self.check_capacity(&mut state, admission)?;
        state.queue.push_back(Entry::Job(Box::new(job)));
        self.dispatch(&mut state);
        Ok(())
    }

    /// Waits (in the queue) for a slot for the calling thread.
    pub fn admit(&self, admission: Admission) -> Result<Permit, Rejected> {
        let mut state = self.0.state.lock();
        self.check_capacity(&mut state, admission)?;
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back(Entry::Waiter(ticket));
        self.dispatch(&mut state);
        while !state.granted.remove(&ticket) {
            self.0.turn.wait(&mut state);
        }
        Ok(Permit { pool: self.clone() })
    }

    pub fn stats(&self) -> PoolStats {
        let state = self.0.state.lock();
        PoolStats {
            threads: state.threads.max(self.inline_threads(&state)),
            queue: state.queue.len(),
            active: state.active,
            rejected: state.rejected,
            largest: state.largest,
            completed: state.completed,
        }
    }

    /// A pool whose work runs on its callers' threads has as many threads as it ever ran at once.
    fn inline_threads(&self, state: &State) -> usize {
        if state.threads == 0 {
            state.largest
        } else {
            0
        }
    }

    fn check_capacity(&self, state: &mut State, admission: Admission) -> Result<(), Rejected> {
        let room = state.active < self.0.config.max
            || self
                .0
                .config
                .queue_size
                .is_none_or(|cap| state.queue.len() < cap);
        if room || admission == Admission::Force {
            return Ok(());
        }
        state.rejected += 1;
        Err(Rejected {
            executor: self.describe(state),
        })
    }

    /// `OpenSearchThreadPoolExecutor.toString()`.
    fn describe(&self, state: &State) -> String {
        let capacity = self
            .0
            .config
            .queue_size
            .map(|c| format!("queue capacity = {c}, "))
            .unwrap_or_default();
        format!(
            "OpenSearchThreadPoolExecutor[name = {}, {capacity}org.opensearch.common.util.concurrent.OpenSearchThreadPoolExecutor@{:x}[Running, pool size = {}, active threads = {}, queued tasks = {}, completed tasks = {}]]",
            self.0.label,
            self.0.id,
            state.threads.max(self.inline_threads(state)),
            state.active,
            state.queue.len(),
            state.completed
        )
    }

    /// Hands free slots to the oldest waiting work.
    fn dispatch(&self, state: &mut State) {
        while state.active < self.0.config.max {
            let Some(entry) = state.queue.pop_front() else {
                break;
            };
            state.active += 1;
            state.largest = state.largest.max(state.active);
            match entry {
                Entry::Job(job) => {
                    state.ready.push_back(job);
                    if state.idle >= state.ready.len() {
                        self.0.work.notify_one();
                    } else {
                        self.start_worker(state);
                    }
                }
                Entry::Waiter(ticket) => {
                    state.granted.insert(ticket);
                    self.0.turn.notify_all();
                }
            }
        }
    }

    fn release(&self) {
        let mut state = self.0.state.lock();
        debug_assert!(state.active > 0, "a slot is released once");
        state.active -= 1;
        state.completed += 1;
        self.dispatch(&mut state);
    }

    fn start_worker(&self, state: &mut State) {
        let pool = self.clone();
        let name = format!("shoal[{}][T#{}]", self.0.label, state.threads + 1);
        match std::thread::Builder::new()
            .name(name)
            .spawn(move || pool.work_loop())
        {
            Ok(_) => state.threads += 1,
            // Without a thread the job waits for a busy worker to finish; nothing is lost.
            Err(e) => {
                tracing::warn!(pool = %self.0.label, error = %e, "cannot start a pool thread")
            }
        }
    }

    fn work_loop(&self) {
        let mut next = self.next_job(self.0.state.lock());
        while let Some(job) = next {
            // A panicking job must not take the slot or the thread with it; its caller sees
            // the dropped reply channel.
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                tracing::error!(pool = %self.0.label, "a pool task panicked");
            }
            let mut state = self.0.state.lock();
            state.active -= 1;
            state.completed += 1;
            // This thread is about to look for work: count it idle so the slot it freed does
            // not start another thread.
            state.idle += 1;
            self.dispatch(&mut state);
            state.idle -= 1;
            next = self.next_job(state);
        }
    }

    /// The next job with a slot, or `None` when this idle thread should leave.
    fn next_job(&self, mut state: parking_lot::MutexGuard<'_, State>) -> Option<Job> {
        loop {
            if let Some(job) = state.ready.pop_front() {
                return Some(job);
            }
            state.idle += 1;
            let timed_out = match self.0.config.keep_alive {
                Some(keep_alive) if self.0.config.kind == PoolKind::Scaling => {
                    self.0.work.wait_for(&mut state, keep_alive).timed_out()
                }
                _ => {
                    self.0.work.wait(&mut state);
                    false
                }
            };
            state.idle -= 1;
            if timed_out && state.ready.is_empty() && state.threads > self.0.config.core {
                state.threads -= 1;
                return None;
            }
        }
    }
}

#[cfg(test)]
#[path = "executor_tests.rs"]
mod tests;
