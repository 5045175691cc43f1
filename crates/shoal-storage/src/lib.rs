//! Repositories: where the remote store keeps segments, translog and cluster state, and where
//! snapshots go. A repository is a prefix in an object store (`fs`: a directory, `s3`: a
//! bucket or any S3-compatible server), opened from OpenSearch-named settings.
//!
//! This crate knows objects and keys only; what the keys mean (a shard's segment files, its
//! metadata files, translog batches) belongs to the node's remote store service.

mod error;
mod repository;
mod settings;

pub use error::{StorageError, StorageResult};
pub use repository::{Pacing, Repository, StoredObject};
pub use settings::{RepositoryKind, RepositorySettings, S3Settings};

#[cfg(test)]
mod tests;
