//! `shoal`: one binary, OpenSearch-named settings from `config/shoal.yml` and `-E key=value`.

mod config;

/// glibc malloc/free took about a fifth of the CPU of bulk ingest in the profile
/// (bench/results/profile): many short-lived allocations per document.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's own setter (its C library is linked in with the allocator).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_purge_delay`: the same index in mimalloc's v2 and v3 option enums.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// How long freed memory stays with the process before mimalloc returns it to the OS (its
/// arenas keep theirs ten times as long).
const PURGE_DELAY_MS: std::ffi::c_long = 100_000;

/// Each refresh replaces tantivy's segment writers, and bulk bodies, replica batches and
/// segment copies come and go in buffers of megabytes. With mimalloc's 10 ms default their
/// memory went back to the OS and returned as fresh pages the kernel had to zero: 10 % of a
/// primary's CPU at 10,000 docs/s. At 1 s the primary still took 150-250 page faults per
/// 1,000 documents under bulk load, at 10 s 26-35, at 100 s 5 (as many as never returning
/// memory); against 1 s, 100 s indexed 4.6 % faster with no replica and 6.5 % faster with a
/// segment replica (medians of 6 alternated runs, Debian corpus x8, 2 nodes). The price is
/// memory: what a load spike used stays with the process for a minute or two after it. An
/// explicit `MIMALLOC_PURGE_DELAY` (read by mimalloc at start) wins.
fn keep_freed_memory_a_while() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets one option's value, which mimalloc reads at each purge.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}

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
    keep_freed_memory_a_while();
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

#[cfg(test)]
mod tests {
    extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    }

    const CHILD: &str = "SHOAL_TEST_PURGE_DELAY_CHILD";

    /// Run by the test below in a process started with `MIMALLOC_PURGE_DELAY=1234`: mimalloc
    /// read it at start into the option this binary sets.
    #[test]
    fn purge_delay_option_child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        // SAFETY: reads one option's value.
        let value = unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(
            value,
            1234,
            "option {} is not mimalloc's purge delay",
            super::MI_OPTION_PURGE_DELAY
        );
    }

    #[test]
    fn the_option_set_at_start_is_mimallocs_purge_delay() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tests::purge_delay_option_child", "--nocapture"])
            .env("MIMALLOC_PURGE_DELAY", "1234")
            .env(CHILD, "1")
            .status()
            .unwrap();
        assert!(status.success(), "the child test failed: {status}");
    }
}
