//! The OpenSearch-compatible REST API (axum). Handlers are thin: they parse the request,
//! call the node's coordinator on a blocking thread, and render OpenSearch's JSON.

mod aliases;
mod cat;
mod cat_admin;
mod cluster;
mod cluster_admin;
mod cluster_stats;
mod doc_params;
mod documents;
mod health;
mod http_guard;
mod index_metrics;
mod indices;
mod node_stats;
mod recovery;
mod remote_store;
mod request;
mod response;
mod router;
mod search;
mod segment_replication;
mod segments;
mod server;
mod snapshot;
mod spec_params;
mod spec_params_table;
mod state_wait;
mod stored_fields;
mod tasks;
mod thread_pools;

pub use router::{router, serve};
