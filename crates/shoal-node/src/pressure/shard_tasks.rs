//! Per-shard work on a bounded pool: the cluster-state applier hands each local copy's work
//! (open, close, delete, start a recovery) to a task here instead of doing it on its own thread.
//!
//! Per key (one shard copy) at most one task runs; a task submitted while another of the same
//! key waits replaces the waiting one (the newer cluster state wins: acting on the older one
//! first would only be undone). At most `limit` keys run at once, on the threads of an existing
//! pool, so one slow open holds one slot and never the others.
//!
//! Every task carries the cluster-state version it answers for; [`ShardTasks::settled`] tells a
//! caller whether the work of every state up to a version is done for the keys it cares about
//! (a replaced task hands its older version on to the one that replaced it).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use parking_lot::Mutex;

use super::executor::{Admission, ThreadPool};

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Waiting {
    /// The oldest state version whose work this task stands for.
    since: u64,
    job: Job,
}

struct State<K> {
    /// Keys whose task runs, with the oldest version it stands for.
    running: HashMap<K, u64>,
    waiting: HashMap<K, Waiting>,
    /// Keys with a waiting task and none running, in submission order.
    ready: VecDeque<K>,
}

struct Inner<K> {
    pool: ThreadPool,
    limit: usize,
    state: Mutex<State<K>>,
    /// Called after every task (the node wakes the threads waiting on applied work).
    on_done: Box<dyn Fn() + Send + Sync>,
}

/// A per-key serialized, newest-wins task queue on a bounded pool; cheap to clone.
pub struct ShardTasks<K>(Arc<Inner<K>>);

impl<K> Clone for ShardTasks<K> {
    fn clone(&self) -> Self {
        ShardTasks(self.0.clone())
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> ShardTasks<K> {
    /// Tasks run on `pool` (forced: never rejected), at most `limit` at once.
    pub fn new(
        pool: ThreadPool,
        limit: usize,
        on_done: impl Fn() + Send + Sync + 'static,
    ) -> ShardTasks<K> {
        ShardTasks(Arc::new(Inner {
            pool,
            limit: limit.max(1),
            state: Mutex::new(State {
                running: HashMap::new(),
                waiting: HashMap::new(),
                ready: VecDeque::new(),
            }),
            on_done: Box::new(on_done),
        }))
    }

    /// Queues `job` for `key`, answering for the state `version`; replaces a task of the key
    /// that has not started yet.
    pub fn submit(&self, key: K, version: u64, job: impl FnOnce() + Send + 'static) {
        let mut state = self.0.state.lock();
        let job: Job = Box::new(job);
        if let Some(waiting) = state.waiting.get_mut(&key) {
            waiting.job = job;
            waiting.since = waiting.since.min(version);
            return;
        }
        state.waiting.insert(
            key.clone(),
            Waiting {
                since: version,
                job,
            },
        );
        if !state.running.contains_key(&key) {
            state.ready.push_back(key);
        }
        self.start_ready(&mut state);
    }

    /// Whether a task of `key` runs or waits.
    pub fn busy(&self, key: &K) -> bool {
        let state = self.0.state.lock();
        state.running.contains_key(key) || state.waiting.contains_key(key)
    }

    /// Whether every task of the keys `wanted` selects that stands for a state up to
    /// `version` is done.
    pub fn settled(&self, version: u64, wanted: impl Fn(&K) -> bool) -> bool {
        let state = self.0.state.lock();
        let running = state.running.iter().map(|(k, since)| (k, *since));
        let waiting = state.waiting.iter().map(|(k, w)| (k, w.since));
        !running
            .chain(waiting)
            .any(|(key, since)| since <= version && wanted(key))
    }

    /// Tasks running and waiting.
    pub fn counts(&self) -> (usize, usize) {
        let state = self.0.state.lock();
        (state.running.len(), state.waiting.len())
    }

    fn start_ready(&self, state: &mut State<K>) {
        while state.running.len() < self.0.limit {
            let Some(key) = state.ready.pop_front() else {
                return;
            };
            let Some(waiting) = state.waiting.remove(&key) else {
                continue;
            };
            state.running.insert(key.clone(), waiting.since);
            let tasks = self.clone();
            let spawned = self.0.pool.spawn(Admission::Force, move || {
                tasks.run(key, waiting.job);
            });
            debug_assert!(spawned.is_ok(), "forced work is never rejected");
        }
    }

    fn run(&self, key: K, job: Job) {
        // A panicking task must not leave its key marked running for good.
        if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
            tracing::error!(pool = self.0.pool.name(), "a shard task panicked");
        }
        {
            let mut state = self.0.state.lock();
            state.running.remove(&key);
            if state.waiting.contains_key(&key) {
                state.ready.push_back(key);
            }
            self.start_ready(&mut state);
        }
        (self.0.on_done)();
    }
}

#[cfg(test)]
#[path = "shard_tasks_tests.rs"]
mod tests;
