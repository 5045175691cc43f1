//! The cluster-state Raft group: a file log store, the state machine, and the network over
//! the transport.

pub mod log_store;
pub mod network;
pub mod reserve;
pub mod state_machine;
pub mod types;
