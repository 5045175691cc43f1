//! The `http` section of `_nodes/stats`: the REST server's client connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

/// Client connections the REST server accepted: open now, and ever.
#[derive(Debug, Default)]
pub struct HttpStats {
    current_open: AtomicU64,
    total_opened: AtomicU64,
}

/// Counts one open connection until it is dropped (when the connection ends).
#[must_use = "the connection counts as open only while this lives"]
pub struct OpenConnection(Arc<HttpStats>);

impl HttpStats {
    /// A client connection was accepted.
    pub fn opened(self: &Arc<Self>) -> OpenConnection {
        self.total_opened.fetch_add(1, Ordering::Relaxed);
        self.current_open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(self))
    }

    pub(super) fn section(&self) -> Value {
        json!({
            "current_open": self.current_open.load(Ordering::Relaxed),
            "total_opened": self.total_opened.load(Ordering::Relaxed),
        })
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.current_open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_counts_as_open_until_it_ends() {
        let stats = Arc::new(HttpStats::default());
        let first = stats.opened();
        let second = stats.opened();
        drop(first);
        assert_eq!(
            stats.section(),
            json!({"current_open": 1, "total_opened": 2})
        );
        drop(second);
        assert_eq!(
            stats.section(),
            json!({"current_open": 0, "total_opened": 2})
        );
    }
}
