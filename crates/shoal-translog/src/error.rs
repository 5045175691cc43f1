//! The single error type of the translog.

use std::io;
use std::path::{Path, PathBuf};

use crate::Location;

/// Result alias used throughout the crate.
pub type Result<T> = std::result::Result<T, TranslogError>;

/// Everything that can go wrong in the translog.
#[derive(Debug, thiserror::Error)]
pub enum TranslogError {
    /// An I/O call failed on the given file.
    #[error("translog i/o error on `{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Acknowledged (synced) data or an older generation failed verification.
    /// We never skip such data silently.
    #[error("translog corrupted in `{path}` at offset {offset}: {reason}")]
    Corrupted {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    /// The translog on disk belongs to another shard / another history.
    #[error("translog uuid mismatch: expected `{expected}`, found `{found}`")]
    UuidMismatch { expected: String, found: String },
    /// `open` found no checkpoint file in the directory.
    #[error("no translog checkpoint found at `{0}`")]
    MissingCheckpoint(PathBuf),
    /// `create` found an existing translog in the directory.
    #[error("a translog already exists at `{0}`")]
    AlreadyExists(PathBuf),
    /// A location that does not point at a record of a retained generation.
    #[error("invalid translog location {location:?}: {reason}")]
    InvalidLocation { location: Location, reason: String },
    /// The caller passed an operation the translog refuses to store.
    #[error("invalid translog operation: {0}")]
    InvalidOperation(String),
    /// A previous write or fsync failed: the on-disk state is unknown, so the
    /// translog refuses any further work (the shard must be failed/recovered).
    #[error("translog failed and is closed: {reason}")]
    Failed { reason: String },
}

impl TranslogError {
    /// Builds a [`TranslogError::Corrupted`].
    pub(crate) fn corrupted(path: &Path, offset: u64, reason: impl Into<String>) -> Self {
        TranslogError::Corrupted {
            path: path.to_path_buf(),
            offset,
            reason: reason.into(),
        }
    }
}

/// Attaches the file path to an `io::Result`.
pub(crate) trait IoResultExt<T> {
    fn with_path(self, path: &Path) -> Result<T>;
}

impl<T> IoResultExt<T> for io::Result<T> {
    fn with_path(self, path: &Path) -> Result<T> {
        self.map_err(|source| TranslogError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}
