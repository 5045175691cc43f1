//! When a copy's periodic work is next due: refresh (`index.refresh_interval`), translog fsync
//! under async durability (`index.translog.sync_interval`), and the global checkpoint sync of an
//! idle primary (`index.global_checkpoint_sync.interval`). Each copy keeps its own clock, so a
//! copy opened a moment ago is not refreshed at once because its index's other copies were due.

use std::time::{Duration, Instant};

/// The intervals of the copy's index at this tick.
#[derive(Debug, Clone, Copy)]
pub struct Intervals {
    /// `None`: refresh disabled (`-1`).
    pub refresh: Option<Duration>,
    /// `None`: the translog is fsynced per request (no scheduled sync).
    pub sync: Option<Duration>,
    pub checkpoint_sync: Duration,
}

/// What is due now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Due {
    pub refresh: bool,
    pub sync: bool,
    pub checkpoint_sync: bool,
}

/// The last time each piece of periodic work ran.
#[derive(Debug)]
pub struct Schedule {
    last_refresh: Instant,
    last_sync: Instant,
    last_checkpoint_sync: Instant,
}

impl Schedule {
    pub fn new(now: Instant) -> Schedule {
        Schedule {
            last_refresh: now,
            last_sync: now,
            last_checkpoint_sync: now,
        }
    }

    /// What is due at `now`; the work reported due counts as done now.
    pub fn take_due(&mut self, now: Instant, intervals: &Intervals) -> Due {
        let elapsed = |since: Instant, every: Option<Duration>| {
            every.is_some_and(|every| now.duration_since(since) >= every)
        };
        let due = Due {
            refresh: elapsed(self.last_refresh, intervals.refresh),
            sync: elapsed(self.last_sync, intervals.sync),
            checkpoint_sync: elapsed(self.last_checkpoint_sync, Some(intervals.checkpoint_sync)),
        };
        if due.refresh {
            self.last_refresh = next_anchor(self.last_refresh, intervals.refresh, now);
        }
        if due.sync {
            self.last_sync = next_anchor(self.last_sync, intervals.sync, now);
        }
        if due.checkpoint_sync {
            self.last_checkpoint_sync = now;
        }
        due
    }
}

/// How late work may run and still count as done on time (the scheduler ticks every 100 ms
/// and a pass takes what its refreshes take).
const ON_TIME: Duration = Duration::from_millis(200);

/// When periodic work that was due at `now` counts as done: when it came due if it ran
/// about on time, so the scheduler's tick does not stretch every interval (a `1s` refresh
/// stays one per second); `now` when it ran late.
fn next_anchor(last: Instant, every: Option<Duration>, now: Instant) -> Instant {
    let Some(every) = every else { return now };
    let came_due = last + every;
    match now.duration_since(came_due) <= ON_TIME.min(every / 4) {
        true => came_due,
        false => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVALS: Intervals = Intervals {
        refresh: Some(Duration::from_secs(1)),
        sync: None,
        checkpoint_sync: Duration::from_secs(30),
    };

    #[test]
    fn work_is_due_once_per_interval_and_never_when_disabled() {
        let start = Instant::now();
        let mut schedule = Schedule::new(start);
        assert_eq!(schedule.take_due(start, &INTERVALS), Due::default());
        let later = start + Duration::from_millis(1500);
        let due = schedule.take_due(later, &INTERVALS);
        assert_eq!(
            due,
            Due {
                refresh: true,
                ..Due::default()
            }
        );
        // Counted as done at `later`: not due again half a second after.
        let soon = later + Duration::from_millis(500);
        assert_eq!(schedule.take_due(soon, &INTERVALS), Due::default());
        let much_later = start + Duration::from_secs(31);
        let due = schedule.take_due(much_later, &INTERVALS);
        assert!(due.refresh && due.checkpoint_sync && !due.sync, "{due:?}");
    }

    #[test]
    fn a_refresh_run_a_tick_late_keeps_the_next_one_on_the_interval() {
        let start = Instant::now();
        let mut schedule = Schedule::new(start);
        let ms = |n: u64| start + Duration::from_millis(n);
        assert!(schedule.take_due(ms(1080), &INTERVALS).refresh);
        // Due again at 2000, not 2080: the tick's lateness is not carried over.
        assert!(!schedule.take_due(ms(1990), &INTERVALS).refresh);
        assert!(schedule.take_due(ms(2010), &INTERVALS).refresh);
        // Fallen behind by more than an interval: counted from now, no catch-up burst.
        assert!(schedule.take_due(ms(5000), &INTERVALS).refresh);
        assert!(!schedule.take_due(ms(5500), &INTERVALS).refresh);
        let much_later = start + Duration::from_secs(31);
        let due = schedule.take_due(much_later, &INTERVALS);
        assert!(due.refresh && due.checkpoint_sync && !due.sync, "{due:?}");
    }
}
