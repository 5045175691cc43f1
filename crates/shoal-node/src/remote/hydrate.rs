//! A new copy of a remote-backed shard (a replica recovering, a copy relocating) reads every
//! file its repository holds from there, and only the rest — what the primary refreshed since
//! its last upload — from the primary, so adding replicas does not load the primary's disk
//! and network with the whole shard.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::layout::ShardKeys;
use super::segments::RemoteSource;
use super::RemoteStoreService;
use crate::error::ApiResult;
use crate::transfer::{ByteStream, FileMeta, FileSource};

/// Reads a file from the repository when the shard's newest uploaded checkpoint names it with
/// the same length and checksum, else (or when the repository read fails) from `peer`.
pub(crate) struct HydratingSource {
    repository: Arc<RemoteSource>,
    peer: Arc<dyn FileSource>,
    /// name → (length, crc32c) of the newest uploaded checkpoint.
    stored: HashMap<String, (u64, u32)>,
    bytes_from_repository: Arc<AtomicU64>,
}

/// A recovery's file source, and the bytes it read from the repository so far.
pub(crate) type Hydrating = (Box<dyn FileSource>, Arc<AtomicU64>);

impl RemoteStoreService {
    /// `peer` itself for a shard that has no upload yet (or no readable repository here);
    /// otherwise a source reading from the repository what it holds.
    pub(crate) fn hydrating_source(
        &self,
        index_uuid: &str,
        shard: usize,
        peer: Box<dyn FileSource>,
    ) -> Hydrating {
        let peer: Arc<dyn FileSource> = Arc::from(peer);
        let counted = Arc::<AtomicU64>::default();
        let only_peer = |peer| -> Hydrating { (Box::new(peer), Arc::default()) };
        let Ok(remote) = self.segment_source(ShardKeys::new(index_uuid, shard)) else {
            return only_peer(peer);
        };
        let newest = match self.newest_metadata(&remote.repository, &remote.keys) {
            Ok(Some((_, metadata))) => metadata,
            Ok(None) => return only_peer(peer),
            Err(e) => {
                tracing::warn!(index_uuid, shard, error = %e, "remote store unreadable: recovering every file from the primary");
                return only_peer(peer);
            }
        };
        let stored = newest
            .checkpoint
            .files
            .into_iter()
            .map(|f| (f.name, (f.length, f.checksum)))
            .collect();
        let source = HydratingSource {
            repository: Arc::new(remote),
            peer,
            stored,
            bytes_from_repository: counted.clone(),
        };
        (Box::new(source), counted)
    }
}

impl HydratingSource {
    fn in_repository(&self, file: &FileMeta) -> bool {
        self.stored.get(&file.name) == Some(&(file.length, file.crc32c))
    }
}

impl FileSource for HydratingSource {
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        if !self.in_repository(file) {
            return self.peer.open(file, offset);
        }
        let from_repository = self.repository.open(file, offset);
        let (peer, file, counted) = (
            self.peer.clone(),
            file.clone(),
            self.bytes_from_repository.clone(),
        );
        async move {
            match from_repository.await {
                Ok(stream) => {
                    counted.fetch_add(file.length - offset, Ordering::Relaxed);
                    Ok(stream)
                }
                // Collected meanwhile (a merge made it garbage) or unreachable: the primary
                // has every file of the commit it pinned.
                Err(e) => {
                    tracing::debug!(file = %file.name, error = %e, "repository read failed: reading the file from the primary");
                    peer.open(&file, offset).await
                }
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!(
            "{} and {}",
            self.repository.describe(),
            self.peer.describe()
        )
    }
}
