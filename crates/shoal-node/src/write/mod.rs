//! The write path's roles. The coordinator (route, split, forward, merge) is still
//! `Node::execute_writes` in `documents.rs`; [`primary`] applies one shard's batch where its
//! primary is; the replica role is `replication/replica.rs`.

pub mod primary;
