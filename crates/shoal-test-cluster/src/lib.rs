//! An in-process data-path test cluster, in the spirit of TiKV's `test_raftstore`
//! `Cluster<Simulator>`: N real [`shoal_node::Node`]s in one test process, each with its own
//! data directory, transport port and HTTP server on 127.0.0.1, talking over real sockets.
//!
//! - [`TestCluster`] starts them, waits for an agreed green state, kills a node like a crash
//!   and restarts it on the same data directory, and injects transport faults (partitions,
//!   dropped or delayed actions) through each node's send-side filters.
//! - [`Client`] talks to a node over HTTP exactly as a REST client does.
//! - [`History`] records acknowledged writes and checks every started copy's engine against
//!   them, and the copies of each shard against each other.
//! - [`Load`] runs writers that bulk-index under faults and record into a [`History`].
//! - With the `failpoints` feature, [`TestCluster::pause_at`] stops one node's thread at a
//!   named failpoint inside recovery, resync, replica apply or a term bump.
//!
//! Clusters of one test process run one at a time (a process-wide lock): the machine has few
//! cores, and thread and file-handle checks look at the whole process.
//! Set `SHOAL_TEST_LOG=info` (or `debug`, `warn`) to print the nodes' tracing events.

mod cluster;
#[cfg(feature = "failpoints")]
mod failpoints;
mod history;
mod http;
mod load;

pub use cluster::{NodeSlot, Options, TestCluster};
#[cfg(feature = "failpoints")]
pub use failpoints::Pause;
pub use history::{CopyContents, DocState, Failure, History, Summary};
pub use http::{Client, Response};
pub use load::Load;
