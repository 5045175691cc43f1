//! Counts of the messages a node's transport sent and received, and of their payload bytes
//! (request and reply bodies; the HTTP/2 and protobuf framing around them is not counted),
//! as `_nodes/stats` `transport` reports them.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct TransportStats {
    rx_count: AtomicU64,
    rx_bytes: AtomicU64,
    tx_count: AtomicU64,
    tx_bytes: AtomicU64,
}

/// A reading of [`TransportStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransportCounts {
    pub rx_count: u64,
    pub rx_bytes: u64,
    pub tx_count: u64,
    pub tx_bytes: u64,
}

impl TransportStats {
    pub(crate) fn received(&self, bytes: usize) {
        self.rx_count.fetch_add(1, Ordering::Relaxed);
        self.rx_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn sent(&self, bytes: usize) {
        self.tx_count.fetch_add(1, Ordering::Relaxed);
        self.tx_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn read(&self) -> TransportCounts {
        TransportCounts {
            rx_count: self.rx_count.load(Ordering::Relaxed),
            rx_bytes: self.rx_bytes.load(Ordering::Relaxed),
            tx_count: self.tx_count.load(Ordering::Relaxed),
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
        }
    }
}
