//! Lazily connected gRPC channels, one per `host:port`.
//!
//! A tonic channel reconnects by itself, but a channel whose connection failed can keep answering
//! errors for a while (and its internal buffer worker can die for good), so the pool evicts a
//! channel as soon as a call on it fails at the connection level; the next call builds a fresh
//! one. Each pooled channel has an id so a late failure on an old channel never evicts its
//! replacement.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tonic::transport::{Channel, Endpoint};
use tracing::debug;

use crate::error::TransportError;

/// A dead or firewalled peer must fail fast: callers (fault detection, replication) have their
/// own retry policies and short deadlines.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// HTTP/2 pings notice a peer that vanished without closing its sockets (power loss, partition)
/// within interval + timeout, even on an idle connection.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);
/// Larger windows than HTTP/2's 64 KiB default so that bulk requests and recovery chunks are not
/// throttled by flow control on fast links.
pub(crate) const STREAM_WINDOW: u32 = 4 * 1024 * 1024;
pub(crate) const CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;
/// The largest HTTP/2 frame a node accepts, both as client and as server. HTTP/2's 16 KiB
/// default cut a 500-document replica batch or a 512 KiB file chunk into ~32 frames, each
/// decoded, flow-controlled and woken for on its own: a segment replica spent ~13 % less CPU
/// with 1 MiB frames (bench notes, #15). The price is that a message queued behind a full
/// frame waits for it: ~1 ms at 10 Gb/s, ~8 ms at 1 Gb/s, far below any timeout here.
pub(crate) const MAX_FRAME: u32 = 1024 * 1024;

#[derive(Clone)]
pub(crate) struct PooledChannel {
    pub(crate) id: u64,
    pub(crate) channel: Channel,
}

#[derive(Default)]
pub(crate) struct ChannelPool {
    channels: Mutex<HashMap<String, PooledChannel>>,
    next_id: AtomicU64,
}

impl ChannelPool {
    /// The cached channel to `addr`, or a new lazily connecting one.
    pub(crate) fn get(&self, addr: &str) -> Result<PooledChannel, TransportError> {
        if let Some(pooled) = self.channels.lock().get(addr) {
            return Ok(pooled.clone());
        }
        // Built outside the lock: creating a channel spawns its worker task.
        let pooled = PooledChannel {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            channel: endpoint(addr)?.connect_lazy(),
        };
        let mut channels = self.channels.lock();
        // Another caller may have raced us; keep the first so concurrent calls share a connection.
        Ok(channels.entry(addr.to_string()).or_insert(pooled).clone())
    }

    /// Forgets the channel `id` to `addr` after a connection failure, unless already replaced.
    pub(crate) fn evict(&self, addr: &str, id: u64) {
        let mut channels = self.channels.lock();
        if channels.get(addr).is_some_and(|pooled| pooled.id == id) {
            debug!(addr, "evicting failed transport channel");
            channels.remove(addr);
        }
    }

    pub(crate) fn remove(&self, addr: &str) {
        self.channels.lock().remove(addr);
    }
}

fn endpoint(addr: &str) -> Result<Endpoint, TransportError> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).map_err(|error| {
        TransportError::Unreachable {
            addr: addr.to_string(),
            reason: format!("invalid transport address: {error}"),
        }
    })?;
    Ok(endpoint
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .tcp_keepalive(Some(TCP_KEEPALIVE))
        .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME))
}
