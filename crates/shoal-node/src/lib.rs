//! The node and its services: index administration, the coordinators that REST handlers call
//! (writes routed to primaries, reads to chosen copies, broadcasts to every copy), and the
//! shard-level actions other nodes call on this one. `node.rs` wires the services to the
//! shared core (`core/`).

pub mod admin;
pub mod applier;
pub mod blocks;
pub mod broadcast;
pub mod bulk;
pub mod cluster_bridge;
pub mod config;
pub mod copy_reports;
pub mod core;
pub mod disk_usage;
pub mod documents;
pub mod error;
mod failpoints;
pub mod index_service;
pub mod metadata;
pub mod node;
pub mod node_stats;
pub mod pressure;
pub mod read;
pub mod recovery;
pub mod remote;
pub mod replication;
pub mod routing;
mod rpc;
mod scheduler;
pub mod segrep;
pub mod settings;
pub mod shard;
pub mod shard_failure;
pub mod snapshot;
pub mod stats;
pub mod tasks;
pub mod transfer;
mod wire;
pub mod write;

pub use error::{ApiError, ApiResult};
pub use node::{Node, NodeConfig, ResolveOptions};

/// The OpenSearch version Shoal answers as, for client compatibility.
pub const OPENSEARCH_VERSION: &str = "2.18.0";
