//! Copying a set of immutable files from somewhere else into a local directory: checked,
//! throttled, cancellable, resumable per file.
//!
//! Peer recovery uses it today; segment replication, remote-store hydration and cross-cluster
//! bootstrap copy sets of immutable segment files the same way, so the pieces are apart:
//! - [`FileSource`]: where the bytes come from. The caller already knows the list (name,
//!   length, crc32c, as [`FileMeta`]); a source only opens one file at an offset as a stream
//!   of byte chunks. [`peer::PeerSource`] streams from another node over the transport (one
//!   stream per file); an object store's ranged GET fits the same shape.
//! - [`target::FileTransfer`]: the receiving side. It reuses files it already has (same name,
//!   length and crc32c), writes the others under a temporary name while computing their
//!   crc32c, renames each once complete and fsynced, and fails on a checksum mismatch without
//!   ever leaving the damaged bytes under the real name. It paces chunks with the node's
//!   shared [`RateLimiter`](crate::recovery::throttle::RateLimiter) and asks its
//!   [`target::TransferControl`] before every chunk whether to go on.
//! - [`peer::serve_file`]: the serving side of the peer stream, for any set of files a service
//!   has pinned (a recovery's commit today, a replication checkpoint later).
//!
//! One stream per file rather than one framed stream per transfer: a failure costs one file,
//! a file can be resumed at an offset without replaying the others, the target controls the
//! order (the commit point last) and how many files are in flight, and an object store serves
//! exactly this shape. The price is one round trip per file to open it, hidden by opening the
//! next files while the current one is copied (`indices.recovery.max_concurrent_file_chunks`).

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};

pub mod peer;
pub mod target;

#[cfg(test)]
mod tests;

/// A file to copy, as the source listed it. Files of one name are immutable, so name, length
/// and crc32c identify the bytes: a local file matching all three is not copied again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    pub name: String,
    pub length: u64,
    /// crc32c of the whole file, as `shoal_engine::store::checksum_file` computes it.
    pub crc32c: u32,
}

/// A file's bytes from some offset on, in chunks; an error item ends it.
pub type ByteStream = BoxStream<'static, ApiResult<Bytes>>;

/// Where the files of a transfer come from.
pub trait FileSource: Send + Sync {
    /// Opens `file` at `offset`; the stream yields its bytes from there to the end, in order.
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>>;

    /// Names the source in logs and errors (a node, a repository).
    fn describe(&self) -> String;
}

/// A shared source reads as the source it shares.
impl<T: FileSource + ?Sized> FileSource for std::sync::Arc<T> {
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        (**self).open(file, offset)
    }

    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// A transferred file whose bytes do not match the listed checksum, or a local file of a
/// listed name that differs where differing means damage.
pub fn corrupted(reason: String) -> ApiError {
    ApiError::new(500, "corrupt_index_exception", reason)
}
