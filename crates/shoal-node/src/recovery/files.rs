//! The file phase of a file-based recovery on the target: the local store becomes the
//! source's pinned commit, through the shared file transfer ([`crate::transfer`]), checked
//! against the copy's assignment before every chunk and reported in its recovery record.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future;
use futures::stream::{self, StreamExt};
use shoal_engine::recovery::bind_recovered_store;
use shoal_state::ShardRouting;
use shoal_transport::Transport;
use tracing::warn;

use super::progress::{FileDetail, RecoveryRecord, Stage};
use super::RecoveryService;
use super::{
    cancelled, ChunkRequest, FileChunkAction, FileStreamAction, StartReply, CALL_TIMEOUT,
    COMMIT_FILE,
};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::transfer::peer::PeerSource;
use crate::transfer::target::{Differing, FileTransfer, Progress, TransferControl};
use crate::transfer::{ByteStream, FileMeta, FileSource};

impl RecoveryService {
    /// Replaces the local store with the source's pinned commit, copying only the files it
    /// lacks; returns (files, bytes) copied. `source` is the source node's (id, address).
    pub(super) fn recover_files(
        &self,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
        source: (&str, &str),
        start: &StartReply,
        term: i64,
    ) -> ApiResult<(usize, u64)> {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        service.close_shard(shard);
        if !self.still_assigned_here(copy) {
            return Err(cancelled());
        }
        let config = service.shard_engine_config(shard);
        let index_dir = config.index_dir();
        std::fs::create_dir_all(&index_dir)?;
        prepare_store(&index_dir, copy, &start.files)?;
        self.update_recovery(&copy.index, shard, &allocation_id, |r| {
            r.stage = Stage::Index;
            r.expect_files(
                start
                    .files
                    .iter()
                    .map(|f| FileDetail::new(&f.name, f.length)),
            );
        });
        let peer = self.file_source(source, start);
        let (files, from_repository) = match service.is_remote_store() {
            true => self
                .segrep
                .remote()
                .hydrating_source(&service.uuid(), shard, peer),
            false => (peer, Default::default()),
        };
        let control = RecoveryControl {
            recoveries: self,
            copy,
            allocation_id: &allocation_id,
        };
        let transfer = FileTransfer {
            dir: &index_dir,
            source: files.as_ref(),
            runtime: &self.core.runtime,
            limiter: &self.limiter,
            control: &control,
            // The store is rebuilt from the commit: a file of the same name from an older
            // copy is only replaced.
            differing: Differing::Replace,
            files_in_flight: self.core.recovery_limits().concurrent_chunks,
        };
        let stats = transfer.run(&commit_last(&start.files))?;
        if service.is_remote_store() {
            let from_repository = from_repository.load(std::sync::atomic::Ordering::Relaxed);
            tracing::info!(index = %copy.index, shard, bytes_from_repository = from_repository, bytes_from_primary = stats.bytes_copied.saturating_sub(from_repository), "remote-backed copy hydrated");
        }
        bind_recovered_store(&config, term).map_err(ApiError::from)?;
        Ok((stats.files_copied, stats.bytes_copied))
    }

    /// How this recovery reads the source's files: streamed, or chunk by chunk from a source
    /// that predates the stream.
    fn file_source(
        &self,
        (node, address): (&str, &str),
        start: &StartReply,
    ) -> Box<dyn FileSource> {
        let limits = self.core.recovery_limits();
        if !start.streams_files {
            return Box::new(ChunkSource {
                transport: self.core.transport.clone(),
                node: node.to_string(),
                address: address.to_string(),
                recovery_id: start.recovery_id.clone(),
                chunk_bytes: limits.chunk_bytes,
                in_flight: limits.concurrent_chunks,
            });
        }
        Box::new(PeerSource::<FileStreamAction> {
            transport: self.core.transport.clone(),
            node: node.to_string(),
            address: address.to_string(),
            session: start.recovery_id.clone(),
            chunk_bytes: limits.chunk_bytes,
            idle_timeout: CALL_TIMEOUT,
            action: PhantomData,
        })
    }
}

/// Removes what the commit being recovered does not name (every file, if the store was
/// marked corrupted: nothing of a store found damaged is reused), and the commit point, so a
/// recovery cut short leaves nothing that opens as a store (or is offered for an
/// operation-based recovery).
fn prepare_store(
    index_dir: &std::path::Path,
    copy: &ShardRouting,
    files: &[FileMeta],
) -> ApiResult<()> {
    let wanted: HashMap<&str, u64> = files.iter().map(|f| (f.name.as_str(), f.length)).collect();
    if let Some(reason) = shoal_engine::store::read_marker(index_dir) {
        warn!(index = %copy.index, shard = copy.shard, reason, "discarding a store marked corrupted before recovering it");
        remove_unwanted_files(index_dir, &HashMap::new())?;
    }
    remove_unwanted_files(index_dir, &wanted)?;
    let _ = std::fs::remove_file(index_dir.join(COMMIT_FILE));
    Ok(())
}

/// The commit point last: until it is written the directory holds no store.
fn commit_last(files: &[FileMeta]) -> Vec<FileMeta> {
    let (commit, segments): (Vec<_>, Vec<_>) =
        files.iter().cloned().partition(|f| f.name == COMMIT_FILE);
    segments.into_iter().chain(commit).collect()
}

/// Deletes files of a previous copy that the commit being recovered does not list (partial
/// files of an interrupted transfer included).
fn remove_unwanted_files(dir: &std::path::Path, wanted: &HashMap<&str, u64>) -> ApiResult<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !wanted.contains_key(name.as_str()) && entry.path().is_file() {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// A recovery's side of its file transfer.
struct RecoveryControl<'a> {
    recoveries: &'a RecoveryService,
    copy: &'a ShardRouting,
    allocation_id: &'a str,
}

impl TransferControl for RecoveryControl<'_> {
    /// A copy failed, moved or deleted meanwhile stops copying now.
    fn check(&self) -> ApiResult<()> {
        match self.recoveries.still_assigned_here(self.copy) {
            true => Ok(()),
            false => Err(cancelled()),
        }
    }

    fn max_bytes_per_sec(&self) -> Option<u64> {
        self.recoveries.core.recovery_limits().bytes_per_sec
    }

    /// Bytes count as they are written, so `_cat/recovery` moves within a large file.
    fn progress(&self, event: Progress<'_>) {
        let update = |r: &mut RecoveryRecord| r.note_transfer(&event);
        let (index, shard) = (&self.copy.index, self.copy.shard as usize);
        self.recoveries
            .update_recovery(index, shard, self.allocation_id, update);
    }

    fn before_chunk(&self) {
        crate::failpoints::failpoint!(self.recoveries.core, "recovery_before_file_chunk");
    }

    fn after_chunk(&self) {
        crate::failpoints::failpoint!(self.recoveries.core, "recovery_after_file_chunk");
    }
}

/// The files of a recovery on a source that predates [`FileStreamAction`]: one unary
/// `file_chunk` request per chunk, `in_flight` of them at once.
struct ChunkSource {
    transport: Arc<Transport>,
    node: String,
    address: String,
    recovery_id: String,
    chunk_bytes: u64,
    in_flight: usize,
}

impl FileSource for ChunkSource {
    fn open(
        &self,
        file: &FileMeta,
        offset: u64,
    ) -> futures::future::BoxFuture<'static, ApiResult<ByteStream>> {
        let (length, chunk_bytes) = (file.length, self.chunk_bytes.max(1));
        let (recovery_id, name) = (self.recovery_id.clone(), file.name.clone());
        let (transport, address) = (self.transport.clone(), self.address.clone());
        let requests = (offset..length)
            .step_by(chunk_bytes as usize)
            .map(move |offset| ChunkRequest {
                recovery_id: recovery_id.clone(),
                name: name.clone(),
                offset,
                length: chunk_bytes.min(length - offset),
            });
        let chunks = stream::iter(requests)
            .map(move |request| {
                let (transport, address) = (transport.clone(), address.clone());
                async move {
                    let chunk = transport
                        .send::<FileChunkAction>(&address, &request, CALL_TIMEOUT)
                        .await?;
                    if chunk.len() as u64 != request.length {
                        return Err(ApiError::internal(format!(
                            "recovery of [{}] got {} bytes at offset {}, expected {}",
                            request.name,
                            chunk.len(),
                            request.offset,
                            request.length
                        )));
                    }
                    Ok(chunk)
                }
            })
            .buffered(self.in_flight.max(1));
        Box::pin(future::ready(Ok(chunks.boxed())))
    }

    fn describe(&self) -> String {
        format!("node [{}]", self.node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::throttle::RateLimiter;
    use shoal_transport::{ActionRegistry, RemoteError};

    /// Goes on to the end, counts chunks.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);

    impl TransferControl for Count {
        fn check(&self) -> ApiResult<()> {
            Ok(())
        }

        fn max_bytes_per_sec(&self) -> Option<u64> {
            None
        }

        fn progress(&self, _: Progress<'_>) {}

        fn after_chunk(&self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A source of the first protocol: only `file_chunk`, served from `dir`.
    fn chunk_only_registry(dir: std::path::PathBuf) -> ActionRegistry {
        let mut registry = ActionRegistry::new();
        registry.register::<FileChunkAction, _, _>(move |_, request: ChunkRequest| {
            let path = dir.join(&request.name);
            async move {
                let bytes =
                    std::fs::read(path).map_err(|e| RemoteError::internal(e.to_string()))?;
                let end = (request.offset + request.length) as usize;
                Ok(bytes::Bytes::copy_from_slice(
                    &bytes[request.offset as usize..end],
                ))
            }
        });
        registry
    }

    #[test]
    fn a_target_reads_a_source_without_the_stream_chunk_by_chunk() {
        let (served, local) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(served.path().join("seg.store"), &body).unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = Transport::new("old-source".to_string());
        let registry = chunk_only_registry(served.path().to_path_buf());
        let handle = runtime
            .block_on(server.serve("127.0.0.1:0".parse().unwrap(), Arc::new(registry)))
            .unwrap();
        let source = ChunkSource {
            transport: Transport::new("target".to_string()),
            node: "old-source".into(),
            address: handle.local_addr().to_string(),
            recovery_id: "r1".into(),
            chunk_bytes: 30_000,
            in_flight: 3,
        };
        let (limiter, control) = (RateLimiter::default(), Count::default());
        let file = FileMeta {
            name: "seg.store".into(),
            length: body.len() as u64,
            crc32c: crc32c::crc32c(&body),
        };
        let stats = FileTransfer {
            dir: local.path(),
            source: &source,
            runtime: runtime.handle(),
            limiter: &limiter,
            control: &control,
            differing: Differing::Replace,
            files_in_flight: 2,
        }
        .run(std::slice::from_ref(&file))
        .unwrap();

        assert_eq!(
            (stats.files_copied, stats.bytes_copied),
            (1, body.len() as u64)
        );
        assert_eq!(std::fs::read(local.path().join("seg.store")).unwrap(), body);
        assert_eq!(
            control.0.load(std::sync::atomic::Ordering::SeqCst),
            7,
            "200 kB in 30 kB chunks"
        );
    }

    #[test]
    fn an_answer_of_a_source_that_predates_the_stream_reads_as_chunk_by_chunk() {
        let old: StartReply = serde_json::from_str(
            r#"{"recovery_id":"r","files":[{"name":"a","length":1,"crc32c":7}]}"#,
        )
        .unwrap();
        assert!(!old.streams_files);
        assert_eq!(old.files[0].crc32c, 7);
    }
}
