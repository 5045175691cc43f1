//! Fault injection for in-process cluster tests, in the spirit of TiKV's transport filters.
//!
//! Filters run on the sending side, before a message leaves the node. A test partitions node A
//! from node B by installing a [`PartitionFilter`] on both A's and B's transports.

use std::collections::HashSet;
use std::time::Duration;

/// What to do with an outgoing message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterDecision {
    Pass,
    /// Fail the call with [`crate::TransportError::Dropped`] without sending it.
    Drop,
    /// Send after this delay; the delay counts against the call's deadline.
    Delay(Duration),
}

pub trait Filter: Send + Sync {
    fn before_send(&self, to_addr: &str, action: &str) -> FilterDecision;
}

/// Any `Fn(to_addr, action) -> FilterDecision` closure is a filter.
impl<F> Filter for F
where
    F: Fn(&str, &str) -> FilterDecision + Send + Sync,
{
    fn before_send(&self, to_addr: &str, action: &str) -> FilterDecision {
        self(to_addr, action)
    }
}

/// Combines the decisions of all filters: any drop wins, delays add up.
pub(crate) fn decide(
    filters: &[std::sync::Arc<dyn Filter>],
    to_addr: &str,
    action: &str,
) -> FilterDecision {
    let mut total_delay = Duration::ZERO;
    for filter in filters {
        match filter.before_send(to_addr, action) {
            FilterDecision::Pass => {}
            FilterDecision::Drop => return FilterDecision::Drop,
            FilterDecision::Delay(delay) => total_delay += delay,
        }
    }
    if total_delay.is_zero() {
        FilterDecision::Pass
    } else {
        FilterDecision::Delay(total_delay)
    }
}

/// Drops every message to a set of addresses.
#[derive(Debug, Clone, Default)]
pub struct PartitionFilter {
    addrs: HashSet<String>,
}

impl PartitionFilter {
    pub fn new<I, S>(addrs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionFilter {
            addrs: addrs.into_iter().map(Into::into).collect(),
        }
    }
}

impl Filter for PartitionFilter {
    fn before_send(&self, to_addr: &str, _action: &str) -> FilterDecision {
        if self.addrs.contains(to_addr) {
            FilterDecision::Drop
        } else {
            FilterDecision::Pass
        }
    }
}

/// Drops every message whose action starts with a prefix (or the next few), to any address.
#[derive(Debug)]
pub struct DropActionFilter {
    action_prefix: String,
    /// How many more matching messages to drop (`None`: every one).
    left: Option<std::sync::atomic::AtomicUsize>,
}

impl DropActionFilter {
    pub fn new(action_prefix: impl Into<String>) -> Self {
        DropActionFilter {
            action_prefix: action_prefix.into(),
            left: None,
        }
    }

    /// Drops the next `count` matching messages, then lets them through.
    pub fn next(action_prefix: impl Into<String>, count: usize) -> Self {
        DropActionFilter {
            action_prefix: action_prefix.into(),
            left: Some(std::sync::atomic::AtomicUsize::new(count)),
        }
    }
}

impl Filter for DropActionFilter {
    fn before_send(&self, _to_addr: &str, action: &str) -> FilterDecision {
        use std::sync::atomic::Ordering::Relaxed;
        let counted = |left: &std::sync::atomic::AtomicUsize| {
            left.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
                .is_ok()
        };
        let drop =
            action.starts_with(&self.action_prefix) && self.left.as_ref().is_none_or(counted);
        if drop {
            FilterDecision::Drop
        } else {
            FilterDecision::Pass
        }
    }
}

/// Delays every message (or only those whose action starts with a prefix).
#[derive(Debug, Clone)]
pub struct DelayFilter {
    delay: Duration,
    action_prefix: Option<String>,
}

impl DelayFilter {
    pub fn new(delay: Duration) -> Self {
        DelayFilter {
            delay,
            action_prefix: None,
        }
    }

    pub fn for_action_prefix(delay: Duration, action_prefix: impl Into<String>) -> Self {
        DelayFilter {
            delay,
            action_prefix: Some(action_prefix.into()),
        }
    }
}

impl Filter for DelayFilter {
    fn before_send(&self, _to_addr: &str, action: &str) -> FilterDecision {
        match &self.action_prefix {
            Some(prefix) if !action.starts_with(prefix.as_str()) => FilterDecision::Pass,
            _ => FilterDecision::Delay(self.delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn drop_wins_and_delays_add_up() {
        let delay = Duration::from_millis(10);
        let filters: Vec<Arc<dyn Filter>> = vec![
            Arc::new(DelayFilter::new(delay)),
            Arc::new(DelayFilter::for_action_prefix(delay, "internal:")),
            Arc::new(PartitionFilter::new(["10.0.0.1:9300"])),
        ];
        assert_eq!(
            decide(&filters, "10.0.0.2:9300", "internal:ping"),
            FilterDecision::Delay(delay * 2)
        );
        assert_eq!(
            decide(&filters, "10.0.0.2:9300", "indices:data"),
            FilterDecision::Delay(delay)
        );
        assert_eq!(
            decide(&filters, "10.0.0.1:9300", "indices:data"),
            FilterDecision::Drop
        );
        assert_eq!(
            decide(&[], "10.0.0.1:9300", "indices:data"),
            FilterDecision::Pass
        );
    }

    #[test]
    fn a_counted_drop_loses_only_the_next_matching_messages() {
        let filter = DropActionFilter::next("indices:data/write/bulk[s][r]", 2);
        let decide = |action| filter.before_send("a:1", action);
        assert_eq!(decide("internal:ping"), FilterDecision::Pass);
        assert_eq!(
            decide("indices:data/write/bulk[s][r]"),
            FilterDecision::Drop
        );
        assert_eq!(
            decide("indices:data/write/bulk[s][r]"),
            FilterDecision::Drop
        );
        assert_eq!(
            decide("indices:data/write/bulk[s][r]"),
            FilterDecision::Pass
        );
    }

    #[test]
    fn drop_action_filter_matches_prefix() {
        let filter = DropActionFilter::new("internal:cluster/coordination/");
        assert_eq!(
            filter.before_send("a:1", "internal:cluster/coordination/join"),
            FilterDecision::Drop
        );
        assert_eq!(
            filter.before_send("a:1", "indices:data/write/bulk[s]"),
            FilterDecision::Pass
        );
    }
}
