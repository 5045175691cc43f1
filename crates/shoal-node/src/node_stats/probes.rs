//! The `os`, `process` and `jvm` sections of `_nodes/stats`, read from `/proc`.
//!
//! CPU percentages are what OpenSearch's probes report: the share of all the machine's CPUs
//! used since the previous reading (the process's for `process.cpu.percent`, everyone's for
//! `os.cpu.percent`), 0–100. The first reading covers the time since the process (or the
//! machine) started. Every reader starts a new window (`_cluster/stats` reads them too), as
//! the JVM's load probes behind OpenSearch's do.

use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};

const PAGE: u64 = 4096;
const TICKS_PER_SECOND: u64 = 100;

/// The previous readings the CPU percentages are computed from.
pub(super) struct Probes {
    process: Mutex<Option<CpuTime>>,
    machine: Mutex<Option<CpuTime>>,
    peak_threads: Mutex<u64>,
}

/// CPU time counted since a fixed start: spent busy, and available in all (both only grow).
/// The machine's from `/proc/stat` in jiffies; the process's in milliseconds, its capacity
/// the node's uptime times the CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CpuTime {
    busy: u64,
    total: u64,
}

impl Probes {
    pub(super) fn new() -> Probes {
        Probes {
            process: Mutex::new(None),
            machine: Mutex::new(None),
            peak_threads: Mutex::new(0),
        }
    }

    pub(super) fn process_section(&self, now: i64, uptime: Duration) -> Value {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let mut pages = statm
            .split_whitespace()
            .map(|f| f.parse::<u64>().unwrap_or(0));
        let virt = pages.next().unwrap_or(0) * PAGE;
        let rss = pages.next().unwrap_or(0) * PAGE;
        let cpu_ms = process_cpu_ticks() * 1000 / TICKS_PER_SECOND;
        let capacity_ms = uptime.as_millis() as u64 * processors();
        let percent = percent_since(
            &self.process,
            CpuTime {
                busy: cpu_ms,
                total: capacity_ms,
            },
        );
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .map(|d| d.count())
            .unwrap_or(0);
        json!({"timestamp": now, "open_file_descriptors": open_fds,
            "max_file_descriptors": max_file_descriptors(),
            "cpu": {"percent": percent, "total_in_millis": cpu_ms},
            "mem": {"total_virtual_in_bytes": virt, "resident_in_bytes": rss}})
    }

    pub(super) fn os_section(&self, now: i64) -> Value {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let read = |key: &str| -> u64 {
            meminfo
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
                * 1024
        };
        let (total, free) = (read("MemTotal:"), read("MemAvailable:"));
        let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .filter_map(|v| v.parse().ok())
            .collect();
        let percent = |part: u64| (part * 100).checked_div(total).unwrap_or(0);
        // `available_processors` is not in OpenSearch's section: `_cluster/stats` sums it.
        json!({"timestamp": now, "available_processors": processors(),
            "cpu": {"percent": machine_ticks().map_or(0, |now| percent_since(&self.machine, now)),
                    "load_average": {"1m": load.first(), "5m": load.get(1), "15m": load.get(2)}},
            "mem": {"total_in_bytes": total, "free_in_bytes": free, "used_in_bytes": total.saturating_sub(free),
                    "free_percent": percent(free), "used_percent": percent(total.saturating_sub(free))}})
    }

    /// There is no JVM; the section is there because tools (opensearch-benchmark) read it.
    /// What a process without one can say is said: uptime and threads; the heap and collector
    /// figures are zero (Shoal's memory is `process.mem`).
    pub(super) fn jvm_section(&self, now: i64, uptime: Duration) -> Value {
        let threads = thread_count();
        let peak = {
            let mut peak = self.peak_threads.lock();
            *peak = (*peak).max(threads);
            *peak
        };
        json!({"timestamp": now, "uptime_in_millis": uptime.as_millis() as u64,
            "mem": {"heap_used_in_bytes": 0, "heap_used_percent": 0, "heap_committed_in_bytes": 0,
                    "heap_max_in_bytes": 0, "non_heap_used_in_bytes": 0, "non_heap_committed_in_bytes": 0,
                    "pools": {}},
            "threads": {"count": threads, "peak_count": peak},
            "gc": {"collectors": {"young": {"collection_count": 0, "collection_time_in_millis": 0},
                                  "old": {"collection_count": 0, "collection_time_in_millis": 0}}}})
    }
}

/// The busy share of the CPU time between the reading `last` holds and `current`, which
/// replaces it (the first reading: since the counters started).
fn percent_since(last: &Mutex<Option<CpuTime>>, current: CpuTime) -> u64 {
    let previous = last.lock().replace(current);
    busy_percent(previous, current)
}

fn busy_percent(previous: Option<CpuTime>, current: CpuTime) -> u64 {
    let (busy, total) = match previous {
        Some(p) => (
            current.busy.saturating_sub(p.busy),
            current.total.saturating_sub(p.total),
        ),
        None => (current.busy, current.total),
    };
    (busy * 100).checked_div(total).unwrap_or(0).min(100)
}

fn processors() -> u64 {
    crate::pressure::settings::allocated_processors() as u64
}

/// utime + stime of this process, in clock ticks.
fn process_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<u64> = after_comm
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
}

fn machine_ticks() -> Option<CpuTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_machine_ticks(stat.lines().next()?)
}

/// `cpu  user nice system idle iowait irq softirq steal …`: idle and iowait are not busy.
fn parse_machine_ticks(line: &str) -> Option<CpuTime> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let values: Vec<u64> = fields.take(8).filter_map(|v| v.parse().ok()).collect();
    if values.len() < 5 {
        return None;
    }
    let total: u64 = values.iter().sum();
    let idle = values[3] + values[4];
    Some(CpuTime {
        busy: total - idle,
        total,
    })
}

fn thread_count() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The soft limit on open files (`ulimit -n`), which is what the process may use.
fn max_file_descriptors() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into the struct it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (read == 0).then_some(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn machine_ticks_count_idle_and_iowait_as_not_busy() {
        let ticks = parse_machine_ticks("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        assert_eq!(
            ticks,
            CpuTime {
                busy: 150,
                total: 1000
            }
        );
        assert_eq!(parse_machine_ticks("cpu0 1 2 3 4 5"), None);
    }

    #[test]
    fn the_machine_percent_covers_the_time_since_the_previous_reading() {
        let before = CpuTime {
            busy: 150,
            total: 1000,
        };
        let after = CpuTime {
            busy: 225,
            total: 1100,
        };
        assert_eq!(busy_percent(None, before), 15);
        assert_eq!(busy_percent(Some(before), after), 75);
        assert_eq!(busy_percent(Some(after), after), 0);
    }

    #[test]
    fn a_busy_process_reads_a_nonzero_cpu_percent() {
        let probes = Probes::new();
        let first = probes.process_section(0, Duration::from_secs(1));
        assert!(first["cpu"]["total_in_millis"].as_u64().is_some());
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut spin = 0u64;
        while Instant::now() < deadline {
            spin = spin.wrapping_add(std::hint::black_box(1));
        }
        let second = probes.process_section(0, Duration::from_secs(2));
        let percent = second["cpu"]["percent"].as_u64().unwrap();
        assert!(
            percent > 0 && percent <= 100,
            "{percent} after {spin} spins"
        );
        assert!(second["max_file_descriptors"].as_u64().unwrap() > 0);
        assert!(
            probes.jvm_section(0, Duration::ZERO)["threads"]["count"]
                .as_u64()
                .unwrap()
                >= 1
        );
    }
}
