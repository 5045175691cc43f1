use super::*;
use std::sync::mpsc;

fn fixed(size: usize, queue: usize) -> ThreadPool {
    ThreadPool::new(
        "n1",
        PoolConfig {
            name: "write".into(),
            kind: PoolKind::Fixed,
            core: size,
            max: size,
            queue_size: Some(queue),
            keep_alive: None,
        },
    )
}

/// Occupies every slot with a job that waits for the returned sender.
fn block_all(pool: &ThreadPool, n: usize) -> Vec<mpsc::Sender<()>> {
    let mut gates = Vec::new();
    let (started_tx, started_rx) = mpsc::channel();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel::<()>();
        let started = started_tx.clone();
        pool.spawn(Admission::Normal, move || {
            started.send(()).unwrap();
            let _ = rx.recv();
        })
        .unwrap();
        gates.push(tx);
    }
    for _ in 0..n {
        started_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    gates
}

fn wait_until(pool: &ThreadPool, done: impl Fn(&PoolStats) -> bool) -> PoolStats {
    for _ in 0..500 {
        let stats = pool.stats();
        if done(&stats) {
            return stats;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("pool never reached the expected state: {:?}", pool.stats());
}

#[test]
fn a_full_queue_rejects_and_counts_the_rejection() {
    let pool = fixed(2, 3);
    let gates = block_all(&pool, 2);
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..3 {
        let done = done_tx.clone();
        pool.spawn(Admission::Normal, move || done.send(()).unwrap())
            .unwrap();
    }
    let stats = pool.stats();
    assert_eq!((stats.active, stats.queue, stats.threads), (2, 3, 2));
    let rejected = pool.spawn(Admission::Normal, || {}).unwrap_err();
    assert_eq!(
        rejected.executor,
        format!(
            "OpenSearchThreadPoolExecutor[name = n1/write, queue capacity = 3, org.opensearch.common.util.concurrent.OpenSearchThreadPoolExecutor@{:x}[Running, pool size = 2, active threads = 2, queued tasks = 3, completed tasks = 0]]",
            pool.0.id
        )
    );
    assert!(pool.admit(Admission::Normal).is_err());
    assert_eq!(pool.stats().rejected, 2);
    drop(gates);
    for _ in 0..3 {
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }
    let stats = wait_until(&pool, |s| s.completed == 5);
    assert_eq!((stats.active, stats.queue, stats.largest), (0, 0, 2));
    assert_eq!(stats.threads, 2, "fixed pools keep their threads");
}

#[test]
fn forced_work_queues_past_the_capacity_and_runs() {
    let pool = fixed(1, 1);
    let gates = block_all(&pool, 1);
    pool.spawn(Admission::Normal, || {}).unwrap();
    assert!(pool.spawn(Admission::Normal, || {}).is_err());
    let (done_tx, done_rx) = mpsc::channel();
    for i in 0..5 {
        let done = done_tx.clone();
        pool.spawn(Admission::Force, move || done.send(i).unwrap())
            .unwrap();
    }
    assert_eq!(pool.stats().queue, 6);
    drop(gates);
    let order: Vec<i32> = (0..5)
        .map(|_| done_rx.recv_timeout(Duration::from_secs(5)).unwrap())
        .collect();
    assert_eq!(
        order,
        vec![0, 1, 2, 3, 4],
        "one thread runs the queue in order"
    );
    let stats = wait_until(&pool, |s| s.completed == 7);
    assert_eq!(stats.rejected, 1);
}

#[test]
fn permits_share_slots_with_jobs_and_wait_their_turn() {
    let pool = fixed(1, 2);
    let permit = pool.admit(Admission::Normal).unwrap();
    let (ran_tx, ran_rx) = mpsc::channel();
    pool.spawn(Admission::Normal, move || ran_tx.send(()).unwrap())
        .unwrap();
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || {
            let _permit = pool.admit(Admission::Normal).unwrap();
            pool.stats().active
        })
    };
    wait_until(&pool, |s| s.queue == 2);
    assert!(pool.admit(Admission::Normal).is_err(), "queue of 2 is full");
    assert!(ran_rx.try_recv().is_err(), "the job waits for the permit");
    drop(permit);
    ran_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(waiter.join().unwrap(), 1);
    let stats = wait_until(&pool, |s| s.completed == 3);
    assert_eq!((stats.active, stats.rejected), (0, 1));
}

#[test]
fn a_panicking_job_frees_its_slot() {
    let pool = fixed(1, 0);
    pool.spawn(Admission::Normal, || panic!("boom")).unwrap();
    wait_until(&pool, |s| s.completed == 1 && s.active == 0);
    let (tx, rx) = mpsc::channel();
    pool.spawn(Admission::Normal, move || tx.send(()).unwrap())
        .unwrap();
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
}

#[test]
fn scaling_pools_grow_to_max_queue_without_bound_and_shrink_to_core() {
    let pool = ThreadPool::new(
        "n1",
        PoolConfig {
            name: "generic".into(),
            kind: PoolKind::Scaling,
            core: 1,
            max: 3,
            queue_size: None,
            keep_alive: Some(Duration::from_millis(50)),
        },
    );
    let gates = block_all(&pool, 3);
    for _ in 0..100 {
        pool.spawn(Admission::Normal, || {}).unwrap();
    }
    let stats = pool.stats();
    assert_eq!((stats.threads, stats.active, stats.queue), (3, 3, 100));
    drop(gates);
    let stats = wait_until(&pool, |s| s.completed == 103 && s.threads == 1);
    assert_eq!((stats.largest, stats.rejected), (3, 0));
}
