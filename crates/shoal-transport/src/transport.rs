//! The [`Transport`] of one node: identity, channel pool and fault-injection filters.
//!
//! Sending lives in `client.rs`, serving in `server.rs`.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::filter::{self, Filter, FilterDecision};
use crate::pool::ChannelPool;
use crate::version::{ProtocolVersion, PROTOCOL_VERSION};

/// OpenSearch's default transport port.
pub const DEFAULT_TRANSPORT_PORT: u16 = 9300;

/// Largest message accepted or sent, in both directions. Bulk shard requests and search
/// results can be large; streaming is meant for anything bigger (file chunks).
pub const MAX_MESSAGE_SIZE: usize = 64 * 1024 * 1024;

/// Node-to-node transport of one node, shared behind an `Arc` by everything that sends.
pub struct Transport {
    local_node_id: String,
    /// Sent with every request; what the cluster manager checks a joining node against.
    protocol: ProtocolVersion,
    /// Empty until the node joins or bootstraps a cluster.
    cluster_uuid: RwLock<String>,
    pub(crate) pool: Arc<ChannelPool>,
    filters: RwLock<Vec<Arc<dyn Filter>>>,
    pub(crate) stats: Arc<crate::stats::TransportStats>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("local_node_id", &self.local_node_id)
            .field("cluster_uuid", &*self.cluster_uuid.read())
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub fn new(local_node_id: String) -> Arc<Transport> {
        Transport::with_protocol(local_node_id, PROTOCOL_VERSION)
    }

    /// A transport that claims another protocol range than this build's (tests of version
    /// skew).
    pub fn with_protocol(local_node_id: String, protocol: ProtocolVersion) -> Arc<Transport> {
        Arc::new(Transport {
            local_node_id,
            protocol,
            cluster_uuid: RwLock::new(String::new()),
            pool: Arc::new(ChannelPool::default()),
            filters: RwLock::new(Vec::new()),
            stats: Default::default(),
        })
    }

    pub fn local_node_id(&self) -> &str {
        &self.local_node_id
    }

    pub fn protocol(&self) -> ProtocolVersion {
        self.protocol
    }

    pub fn cluster_uuid(&self) -> String {
        self.cluster_uuid.read().clone()
    }

    /// Sets the uuid sent with, and checked against, every message; "" means unknown.
    pub fn set_cluster_uuid(&self, uuid: &str) {
        *self.cluster_uuid.write() = uuid.to_string();
    }

    /// Drops the cached channel to `addr` (e.g. after the node at `addr` left the cluster).
    /// In-flight calls on it finish; the next call opens a new connection.
    pub fn disconnect(&self, addr: &str) {
        self.pool.remove(addr);
    }

    /// Messages and payload bytes sent and received so far.
    pub fn stats(&self) -> crate::stats::TransportCounts {
        self.stats.read()
    }

    pub fn add_filter(&self, filter: Arc<dyn Filter>) {
        self.filters.write().push(filter);
    }

    pub fn clear_filters(&self) {
        self.filters.write().clear();
    }

    pub(crate) fn filter_decision(&self, to_addr: &str, action: &str) -> FilterDecision {
        let filters = self.filters.read();
        if filters.is_empty() {
            return FilterDecision::Pass;
        }
        filter::decide(&filters, to_addr, action)
    }
}
