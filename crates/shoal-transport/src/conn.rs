//! Accepted server connections that can be closed forcefully.
//!
//! tonic's graceful shutdown stops accepting and lets open connections finish their streams, and
//! its connection tasks outlive the server task. To simulate a crash in in-process cluster tests
//! (and to bound a graceful shutdown), every accepted socket is wrapped in a [`TrackedIo`] whose
//! reads and writes fail once the registry is killed; the connection task then ends and the
//! socket is closed.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Kill switch of one connection; the wakers are those of the connection task's last read and
/// write, so killing wakes the task up even when it is idle.
#[derive(Default)]
struct KillSwitch {
    killed: AtomicBool,
    read_waker: AtomicWaker,
    write_waker: AtomicWaker,
}

impl KillSwitch {
    fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.read_waker.wake();
        self.write_waker.wake();
    }

    fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }
}

/// The open connections of one server.
#[derive(Default)]
pub(crate) struct ConnRegistry {
    killed: AtomicBool,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<KillSwitch>>>,
}

impl ConnRegistry {
    pub(crate) fn track(self: &Arc<Self>, stream: TcpStream) -> TrackedIo {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let switch = Arc::new(KillSwitch::default());
        self.conns.lock().insert(id, switch.clone());
        // Checked after inserting: a connection accepted while `kill_all` runs is still killed.
        if self.killed.load(Ordering::Acquire) {
            switch.kill();
        }
        TrackedIo {
            stream,
            id,
            switch,
            registry: self.clone(),
        }
    }

    /// Closes every open connection, and every one accepted from now on.
    pub(crate) fn kill_all(&self) {
        self.killed.store(true, Ordering::Release);
        for switch in self.conns.lock().values() {
            switch.kill();
        }
    }

    #[cfg(test)]
    fn open_connections(&self) -> usize {
        self.conns.lock().len()
    }
}

/// An accepted TCP stream that fails with `ConnectionAborted` once killed.
pub(crate) struct TrackedIo {
    stream: TcpStream,
    id: u64,
    switch: Arc<KillSwitch>,
    registry: Arc<ConnRegistry>,
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        self.registry.conns.lock().remove(&self.id);
    }
}

fn killed_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionAborted,
        "transport server shut down",
    )
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.switch.read_waker.register(cx.waker());
        if this.switch.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.switch.write_waker.register(cx.waker());
        if this.switch.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.switch.write_waker.register(cx.waker());
        if this.switch.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut this.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.switch.is_killed() {
            return Poll::Ready(Err(killed_error()));
        }
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl Connected for TrackedIo {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    #[tokio::test]
    async fn killed_connection_fails_pending_read_and_is_untracked_on_drop() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let registry = Arc::new(ConnRegistry::default());
        let mut io = registry.track(accepted);
        assert_eq!(registry.open_connections(), 1);

        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            let result = io.read(&mut buf).await;
            drop(io);
            result
        });
        // Let the reader park on the socket before killing it.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        registry.kill_all();
        let error = reader.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::ConnectionAborted);
        assert_eq!(registry.open_connections(), 0);
        // The peer sees the socket closed.
        let mut buf = [0u8; 8];
        let _ = client.write_all(b"x").await;
        assert!(matches!(client.read(&mut buf).await, Ok(0) | Err(_)));
    }
}
