//! The write path's roles: the [`coordinator`] (route, split, forward, merge, reroute),
//! [`forward`] (the shard bulk that carries a batch to its primary's node), and the
//! [`primary`] role that applies one shard's batch where its primary is; the replica role is
//! `replication/replica.rs`.

pub mod by_query;
pub mod coordinator;
pub mod forward;
pub mod primary;
