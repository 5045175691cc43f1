//! Writers that bulk-index into one index while a test injects faults, recording every
//! outcome into a [`History`] (the Rust twin of `Writer`/`Load` in
//! `tests/test_replication_faults.py`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::{Client, Failure, History, TestCluster};

/// Ids each writer owns (writer k of W owns k, k+W, k+2W, …).
const IDS_PER_WRITER: usize = 200;
const DOCS_PER_BULK: usize = 20;

/// Writers running until [`Load::stop`] (or drop). Values continue across loads that share
/// `next_values`, so one [`History`] checks a whole test.
pub struct Load {
    stop: Arc<AtomicBool>,
    writers: Vec<std::thread::JoinHandle<i64>>,
    /// When the bulks whose every item succeeded were sent.
    successes: Arc<Mutex<Vec<Instant>>>,
    values: Vec<i64>,
}

impl Load {
    /// Starts `writers` writers on `index`, sending each bulk to a random running node.
    pub fn start(
        cluster: &TestCluster,
        index: &str,
        history: &Arc<History>,
        writers: usize,
    ) -> Load {
        Load::resume(cluster, index, history, &vec![0; writers], 1)
    }

    /// Starts `writers` writers on `index` that send their bulks only through the nodes
    /// `coordinators` (a node cut off from a primary waits for it up to the request timeout,
    /// as OpenSearch's coordinators do, so a test that measures progress avoids it).
    pub fn start_through(
        cluster: &TestCluster,
        index: &str,
        history: &Arc<History>,
        writers: usize,
        coordinators: &[usize],
    ) -> Load {
        Load::spawn(
            cluster,
            index,
            history,
            &vec![0; writers],
            1,
            Some(coordinators.to_vec()),
        )
    }

    /// Starts writers continuing from `values` (one per writer, from [`Load::stop`]).
    pub fn resume(
        cluster: &TestCluster,
        index: &str,
        history: &Arc<History>,
        values: &[i64],
        seed: u64,
    ) -> Load {
        Load::spawn(cluster, index, history, values, seed, None)
    }

    fn spawn(
        cluster: &TestCluster,
        index: &str,
        history: &Arc<History>,
        values: &[i64],
        seed: u64,
        coordinators: Option<Vec<usize>>,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let successes = Arc::new(Mutex::new(Vec::new()));
        let count = values.len();
        let writers = values
            .iter()
            .enumerate()
            .map(|(k, &start)| {
                let writer = Writer {
                    k,
                    count,
                    index: index.to_string(),
                    clients: cluster.clients.clone(),
                    coordinators: coordinators.clone(),
                    history: history.clone(),
                    stop: stop.clone(),
                    successes: successes.clone(),
                    rng: rand::rngs::StdRng::seed_from_u64(seed * 1000 + k as u64),
                    value: start,
                };
                std::thread::Builder::new()
                    .name(format!("test-writer-{k}"))
                    .spawn(move || writer.run())
                    .expect("spawn writer")
            })
            .collect();
        Load {
            stop,
            writers,
            successes,
            values: values.to_vec(),
        }
    }

    /// Stops the writers and returns the value each reached (to resume from).
    pub fn stop(mut self) -> Vec<i64> {
        self.stop_writers();
        self.values.clone()
    }

    /// Fully successful bulks sent after `t`.
    pub fn successes_after(&self, t: Instant) -> usize {
        self.successes.lock().iter().filter(|s| **s > t).count()
    }

    /// Waits until a bulk sent after `t` succeeded on every item (every shard writable);
    /// returns how long after `t` that bulk was sent.
    pub fn wait_success_after(&self, t: Instant, timeout: Duration) -> Option<Duration> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(first) = self.successes.lock().iter().find(|s| **s > t) {
                return Some(*first - t);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    fn stop_writers(&mut self) {
        self.stop.store(true, Ordering::Release);
        for (k, writer) in self.writers.drain(..).enumerate() {
            self.values[k] = writer.join().expect("a writer panicked");
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop_writers();
    }
}

struct Writer {
    k: usize,
    count: usize,
    index: String,
    clients: Arc<RwLock<Vec<Option<Client>>>>,
    /// The nodes bulks may go through (`None`: any running node).
    coordinators: Option<Vec<usize>>,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    successes: Arc<Mutex<Vec<Instant>>>,
    rng: rand::rngs::StdRng,
    value: i64,
}

impl Writer {
    fn run(mut self) -> i64 {
        while !self.stop.load(Ordering::Acquire) {
            let sent: Vec<(String, i64)> = (0..DOCS_PER_BULK)
                .map(|_| {
                    self.value += 1;
                    let id = self.k + self.count * self.rng.random_range(0..IDS_PER_WRITER);
                    (id.to_string(), self.value)
                })
                .collect();
            let live: Vec<Client> = self
                .clients
                .read()
                .iter()
                .enumerate()
                .filter(|(i, _)| self.coordinators.as_ref().is_none_or(|c| c.contains(i)))
                .filter_map(|(_, client)| client.clone())
                .collect();
            if live.is_empty() {
                let never_sent = Failure::Answered("no running node to send it to".into());
                self.history.record_failure(&sent, never_sent);
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            let client = &live[self.rng.random_range(0..live.len())];
            let sent_at = Instant::now();
            let docs: Vec<_> = sent
                .iter()
                .map(|(id, value)| (id.clone(), json!({"value": value, "writer": self.k})))
                .collect();
            match client.bulk(&self.index, &docs) {
                Ok(r) if r.status == 200 => {
                    self.history.record_bulk(&sent, &r.body);
                    let items = r.body["items"].as_array().cloned().unwrap_or_default();
                    if items
                        .iter()
                        .all(|i| matches!(i["index"]["status"].as_u64(), Some(200 | 201)))
                    {
                        self.successes.lock().push(sent_at);
                    }
                }
                failed => {
                    let failure = match failed {
                        Ok(r) => Failure::Answered(format!(
                            "HTTP {} from {}: {}",
                            r.status,
                            client.addr(),
                            r.body["error"]["type"]
                        )),
                        Err(e) => Failure::NoAnswer(format!(
                            "{e} ({:?} after it was sent)",
                            sent_at.elapsed()
                        )),
                    };
                    self.history.record_failure(&sent, failure);
                    // A shard without a primary answers at once: do not spin on it.
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        self.value
    }
}
