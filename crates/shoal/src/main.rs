//! `shoal`: one binary, OpenSearch-named settings from `config/shoal.yml` and `-E key=value`.

mod config;

/// glibc malloc/free took about a fifth of the CPU of bulk ingest in the profile
/// (bench/results/profile): many short-lived allocations per document.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use clap::Parser;
use shoal_node::{Node, NodeConfig};
use tracing::{error, info};

/// Shoal: an OpenSearch-compatible search engine.
#[derive(Parser, Debug)]
#[command(name = "shoal", version, about, long_about = None)]
struct Cli {
    /// Set a setting, OpenSearch style: -E node.name=n1 -E http.port=9201 -E path.data=/var/lib/shoal
    #[arg(short = 'E', value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Configuration file (default: config/shoal.yml when it exists).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let settings = match config::load(cli.config.as_deref(), &cli.settings) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("shoal: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Err(e) = config::init_logging(&settings) {
        eprintln!("shoal: cannot set up logging: {e}");
        return std::process::ExitCode::from(2);
    }
    match config::index_buffer_size(&settings) {
        Ok(bytes) => {
            tracing::info!(
                bytes,
                "indexing buffer shared by the shards (indices.memory.index_buffer_size)"
            );
            shoal_engine::set_node_indexing_budget(bytes)
        }
        Err(e) => {
            eprintln!("shoal: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(settings)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            error!(error = %e, "shoal stopped with an error");
            eprintln!("shoal: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

async fn run(settings: shoal_node::settings::FlatSettings) -> anyhow::Result<()> {
    let config = NodeConfig::from_settings(settings).map_err(|e| anyhow::anyhow!(e.reason))?;
    let addr = resolve_addr(&config.http_host, config.http_port)?;
    info!(node = %config.node_name, cluster = %config.cluster_name, data = %config.data_path.display(), "starting shoal");
    // Bound first: a node whose HTTP port is taken must fail before it joins the cluster.
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("cannot serve http on {addr}: {e} (is another node using this port? set -E http.port=...)")
    })?;
    let node = tokio::task::spawn_blocking(move || Node::start(config))
        .await?
        .map_err(|e| anyhow::anyhow!("cannot start the node: {}", e.reason))?;
    let shutdown_node = Arc::clone(&node);
    shoal_rest::serve(node, listener, shutdown_signal())
        .await
        .map_err(|e| anyhow::anyhow!("http server failed on {addr}: {e}"))?;
    info!("shutting down: flushing shards");
    tokio::task::spawn_blocking(move || shutdown_node.shutdown()).await?;
    Ok(())
}

fn resolve_addr(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let host = match host {
        "_local_" | "localhost" => "127.0.0.1",
        "_site_" | "0" | "0.0.0.0" => "0.0.0.0",
        other => other,
    };
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve http.host [{host}]"))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
