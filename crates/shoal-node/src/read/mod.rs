//! The read service: searches, counts, scrolls and gets, coordinated here and answered by the
//! shard copies this node holds.
//!
//! - [`search`]: the search API (`_search`, `_count`, `_msearch` checks) and its scope;
//! - [`scroll`]: scrolls, whose contexts stay open between pages;
//! - [`coordinator`]: which shards a read touches and the query phase on their copies, with
//!   read failover; [`fetch`]: the fetch phase and freeing contexts; [`get`]: gets by id;
//! - [`copies`]: which copy of a shard serves a read (`preference`);
//! - [`shard`]: the shard-level handlers (query, fetch, free context, get) and their search
//!   contexts; [`actions`]: the node-to-node read actions and their messages.
//!
//! The service holds the node's [`NodeCore`] and nothing of the [`Node`](crate::node::Node):
//! writes that read first (`_delete_by_query`, `_update_by_query`) live on the write side and
//! call this service.

pub mod actions;
pub mod coordinator;
pub mod copies;
pub mod fetch;
pub mod get;
pub mod scroll;
pub mod search;
pub mod shard;

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::core::NodeCore;

pub(crate) use shard::register_actions;

pub struct ReadService {
    core: Arc<NodeCore>,
    /// Open scrolls of searches this node coordinates.
    pub scrolls: scroll::ScrollRegistry,
    /// Pinned searchers of this node's copies, between phases and scroll pages.
    pub search_contexts: shard::SearchContexts,
    /// Spreads default-preference reads over the copies of each shard.
    read_rotation: AtomicUsize,
}

impl ReadService {
    pub fn new(core: Arc<NodeCore>) -> ReadService {
        ReadService {
            core,
            scrolls: Default::default(),
            search_contexts: Default::default(),
            read_rotation: AtomicUsize::new(0),
        }
    }

    /// Drops the scrolls and search contexts whose keep-alive elapsed.
    pub fn expire_contexts(&self) {
        self.scrolls.expire();
        self.search_contexts.expire();
    }
}
