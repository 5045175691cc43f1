//! The node: index lifecycle, metadata persistence, and the coordinator that REST handlers
//! call. Today every shard is local; the coordinator is the seam where routing to the node
//! holding a primary (cluster issue) plugs in.

pub mod bulk;
pub mod cluster_api;
pub mod cluster_bridge;
pub mod disk_usage;
pub mod documents;
pub mod error;
pub mod index_service;
pub mod metadata;
pub mod node;
pub mod routing;
mod scheduler;
pub mod search;
pub mod settings;
pub mod stats;
pub mod update;

pub use error::{ApiError, ApiResult};
pub use node::{Node, NodeConfig, ResolveOptions};

/// The OpenSearch version Shoal answers as, for client compatibility.
pub const OPENSEARCH_VERSION: &str = "2.18.0";
