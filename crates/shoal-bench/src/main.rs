//! `shoal-bench`: the load generator of the benchmark suite in `bench/`. Every subcommand
//! prints one JSON object on stdout.
//!
//! - `bulk`: bulk-index an NDJSON corpus over N HTTP connections.
//! - `search`: a query mix, closed loop at fixed concurrency or open loop at a target rate;
//!   `--check` for hit counts.
//! - `raw-tantivy`: the same documents indexed in process through Shoal's parser and schema.

mod bulk;
mod http;
mod raw;
mod search;
mod stats;

use clap::{Parser, Subcommand};

/// The same allocator as the `shoal` binary, so `raw-tantivy` measures the same code path.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "shoal-bench",
    version,
    about = "Load generator for Shoal and OpenSearch"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bulk-index a corpus (closed loop, N connections).
    Bulk(bulk::BulkArgs),
    /// Run a query mix.
    Search(search::SearchArgs),
    /// Index the corpus in process with tantivy through Shoal's document parser.
    RawTantivy(raw::RawArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::RawTantivy(args) => raw::run(args),
        command => {
            // Two worker threads: on a 2-core machine the client must stay small.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async move {
                match command {
                    Command::Bulk(args) => bulk::run(args).await,
                    Command::Search(args) => search::run(args).await,
                    Command::RawTantivy(_) => unreachable!(),
                }
            })
        }
    };
    match result {
        Ok(value) => {
            println!("{value}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shoal-bench: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
