//! Stopping one node's thread at a named failpoint (see `shoal-node/src/failpoints.rs`) and
//! letting it go again, or making a `return` point fail on one node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::TestCluster;

#[derive(Default)]
struct Gate {
    /// (times reached, released)
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

/// A failpoint armed on one node: every thread reaching it waits there until
/// [`Pause::release`] (or drop).
/// Which visitors of an armed point wait for release.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    Every,
    First,
}

pub struct Pause {
    name: String,
    gate: Arc<Gate>,
}

impl TestCluster {
    /// Arms `point` on node `i` only: threads of that node reaching it wait for release.
    pub fn pause_at(&self, i: usize, point: &str) -> Pause {
        self.arm(i, point, Hold::Every)
    }

    /// Arms `point` on node `i` for its first visitor only: that thread waits for release,
    /// every later one passes (and is counted), so one task of many can be held.
    pub fn pause_first_at(&self, i: usize, point: &str) -> Pause {
        self.arm(i, point, Hold::First)
    }

    fn arm(&self, i: usize, point: &str, hold: Hold) -> Pause {
        let name = format!("{point}@{}", self.slot(i).name);
        let gate = Arc::new(Gate::default());
        let in_callback = gate.clone();
        fail::cfg_callback(name.clone(), move || {
            let mut state = in_callback.state.lock();
            state.0 += 1;
            in_callback.changed.notify_all();
            if hold == Hold::First && state.0 > 1 {
                return;
            }
            while !state.1 {
                in_callback.changed.wait(&mut state);
            }
        })
        .expect("configure failpoint");
        Pause { name, gate }
    }

    /// Arms the `return` point `point` on node `i`: every visit fails until the guard is
    /// released or dropped.
    pub fn fail_at(&self, i: usize, point: &str) -> Failing {
        let name = format!("{point}@{}", self.slot(i).name);
        fail::cfg(&name, "return").expect("configure failpoint");
        Failing { name }
    }

    /// Counts how often `point` is reached on node `i`, without stopping it.
    pub fn count_at(&self, i: usize, point: &str) -> Pause {
        let pause = self.pause_at(i, point);
        pause.gate.state.lock().1 = true;
        pause
    }
}

impl Pause {
    /// How many times a thread reached the point.
    pub fn hits(&self) -> usize {
        self.gate.state.lock().0
    }

    /// Waits until a thread reached the point (`hits() >= n`); false on timeout.
    pub fn wait_hits(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.gate.state.lock();
        while state.0 < n {
            if self
                .gate
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return state.0 >= n;
            }
        }
        true
    }

    /// Lets every waiting thread go and disarms the point.
    pub fn release(&self) {
        fail::remove(&self.name);
        let mut state = self.gate.state.lock();
        state.1 = true;
        self.gate.changed.notify_all();
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A `return` failpoint armed on one node ([`TestCluster::fail_at`]).
pub struct Failing {
    name: String,
}

impl Failing {
    /// Disarms the point: visits pass again.
    pub fn release(&self) {
        fail::remove(&self.name);
    }
}

impl Drop for Failing {
    fn drop(&mut self) {
        self.release();
    }
}

impl Drop for Pause {
    fn drop(&mut self) {
        self.release();
    }
}
