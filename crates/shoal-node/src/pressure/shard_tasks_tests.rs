use super::*;
use crate::pressure::executor::{PoolConfig, PoolKind};
use std::sync::mpsc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

fn pool() -> ThreadPool {
    ThreadPool::new(
        "n1",
        PoolConfig {
            name: "generic".into(),
            kind: PoolKind::Scaling,
            core: 1,
            max: 16,
            queue_size: None,
            keep_alive: Some(Duration::from_secs(30)),
        },
    )
}

fn tasks(limit: usize) -> (ShardTasks<&'static str>, mpsc::Receiver<()>) {
    let (done_tx, done_rx) = mpsc::channel();
    let done_tx = parking_lot::Mutex::new(done_tx);
    let tasks = ShardTasks::new(pool(), limit, move || {
        let _ = done_tx.lock().send(());
    });
    (tasks, done_rx)
}

/// A job that reports it started and then waits for the returned gate.
fn gated(
    started: &mpsc::Sender<&'static str>,
    name: &'static str,
) -> (mpsc::Sender<()>, impl FnOnce() + Send + 'static) {
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let started = started.clone();
    let job = move || {
        started.send(name).unwrap();
        let _ = gate_rx.recv();
    };
    (gate_tx, job)
}

#[test]
fn a_blocked_task_never_holds_back_another_key() {
    let (tasks, done) = tasks(4);
    let (started_tx, started) = mpsc::channel();
    let (_blocked_gate, blocked) = gated(&started_tx, "blocked");
    tasks.submit("a", 1, blocked);
    assert_eq!(started.recv_timeout(WAIT).unwrap(), "blocked");
    let (other_tx, other) = mpsc::channel();
    tasks.submit("b", 1, move || other_tx.send(()).unwrap());
    other.recv_timeout(WAIT).expect("the other key ran");
    done.recv_timeout(WAIT).unwrap();
    assert!(tasks.busy(&"a") && !tasks.busy(&"b"));
}

#[test]
fn tasks_of_one_key_never_overlap_and_the_newest_waiting_one_wins() {
    let (tasks, done) = tasks(4);
    let (started_tx, started) = mpsc::channel();
    let (first_gate, first) = gated(&started_tx, "first");
    tasks.submit("a", 1, first);
    assert_eq!(started.recv_timeout(WAIT).unwrap(), "first");
    // Two more arrive while the first runs: only the newer of them runs, after it.
    let s = started_tx.clone();
    tasks.submit("a", 2, move || s.send("second").unwrap());
    let s = started_tx.clone();
    tasks.submit("a", 3, move || s.send("third").unwrap());
    assert!(started.recv_timeout(Duration::from_millis(200)).is_err());
    first_gate.send(()).unwrap();
    assert_eq!(started.recv_timeout(WAIT).unwrap(), "third");
    done.recv_timeout(WAIT).unwrap();
    done.recv_timeout(WAIT).unwrap();
    assert!(started.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(tasks.counts(), (0, 0));
}

#[test]
fn at_most_limit_keys_run_at_once() {
    let (tasks, _done) = tasks(2);
    let (started_tx, started) = mpsc::channel();
    let (gate_a, a) = gated(&started_tx, "a");
    let (_gate_b, b) = gated(&started_tx, "b");
    let (_gate_c, c) = gated(&started_tx, "c");
    tasks.submit("a", 1, a);
    tasks.submit("b", 1, b);
    tasks.submit("c", 1, c);
    let mut first_two = [
        started.recv_timeout(WAIT).unwrap(),
        started.recv_timeout(WAIT).unwrap(),
    ];
    first_two.sort();
    assert_eq!(first_two, ["a", "b"]);
    assert!(started.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(tasks.counts(), (2, 1));
    gate_a.send(()).unwrap();
    assert_eq!(started.recv_timeout(WAIT).unwrap(), "c");
}

#[test]
fn settled_counts_a_replaced_task_under_its_oldest_version() {
    let (tasks, done) = tasks(4);
    let (started_tx, started) = mpsc::channel();
    let (gate, running) = gated(&started_tx, "running");
    tasks.submit("a", 5, running);
    started.recv_timeout(WAIT).unwrap();
    tasks.submit("a", 7, || {});
    tasks.submit("a", 9, || {});
    assert!(tasks.settled(4, |_| true), "nothing at or below 4");
    assert!(!tasks.settled(5, |_| true));
    assert!(tasks.settled(9, |k| *k == "b"), "another key is settled");
    gate.send(()).unwrap();
    done.recv_timeout(WAIT).unwrap();
    // The waiting task stands for versions 7 and 9 (7 was replaced, not done).
    done.recv_timeout(WAIT).unwrap();
    assert!(tasks.settled(9, |_| true));
}

#[test]
fn a_panicking_task_frees_its_key() {
    let (tasks, done) = tasks(1);
    tasks.submit("a", 1, || panic!("boom"));
    done.recv_timeout(WAIT).unwrap();
    let (tx, rx) = mpsc::channel();
    tasks.submit("a", 2, move || tx.send(()).unwrap());
    rx.recv_timeout(WAIT).expect("the key runs again");
}
