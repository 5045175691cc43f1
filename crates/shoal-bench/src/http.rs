//! A minimal HTTP/1.1 keep-alive client: one TCP connection per `Conn`, so "N clients" means
//! exactly N connections, like opensearch-benchmark's `bulk_indexing_clients`.

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{anyhow, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// `http://host:port` (a trailing slash or path is ignored) → socket address and Host header.
pub fn parse_url(url: &str) -> anyhow::Result<(SocketAddr, String)> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| anyhow!("only http:// URLs are supported: {url}"))?;
    let host = rest.split('/').next().unwrap_or(rest).to_string();
    let host_port = if host.contains(':') {
        host.clone()
    } else {
        format!("{host}:80")
    };
    let addr = host_port
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host_port}"))?
        .next()
        .ok_or_else(|| anyhow!("cannot resolve {host_port}"))?;
    Ok((addr, host))
}

pub struct Conn {
    addr: SocketAddr,
    host: String,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Connections opened, including the first one.
    pub connects: u64,
}

impl Conn {
    pub fn new(addr: SocketAddr, host: String) -> Conn {
        Conn {
            addr,
            host,
            sender: None,
            connects: 0,
        }
    }

    async fn connect(&mut self) -> anyhow::Result<()> {
        let stream = TcpStream::connect(self.addr)
            .await
            .with_context(|| format!("connect {}", self.addr))?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.sender = Some(sender);
        self.connects += 1;
        Ok(())
    }

    /// Sends one request and reads the whole response. No retry: a failed request is an
    /// error for the caller to count; the next request opens a new connection.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> anyhow::Result<(u16, Bytes)> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            self.connect().await?;
        }
        let sender = self.sender.as_mut().expect("connected");
        let result = async {
            sender.ready().await?;
            let request = Request::builder()
                .method(method)
                .uri(path)
                .header(HOST, &self.host)
                .header(CONTENT_TYPE, content_type)
                .body(Full::new(body))?;
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        }
        .await;
        if result.is_err() {
            self.sender = None;
        }
        result
    }
}
