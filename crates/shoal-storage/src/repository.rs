//! A repository: objects under one prefix of an object store, addressed by relative keys
//! (`<index uuid>/<shard>/segments/data/<file>`). Uploads of local files go in parts, so a
//! large segment never sits whole in memory; reads stream from an offset, so a download cut
//! short resumes where it stopped.

use std::io::SeekFrom;
use std::ops::Range;
use std::path::Path as LocalPath;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, GetResultPayload, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::error::{StorageError, StorageResult};
use crate::settings::{RepositoryKind, RepositorySettings, S3Settings};

/// Files up to this size are uploaded in one request; larger ones in parts of this size
/// (S3 needs parts of at least 5 MiB).
const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one file in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// How an upload keeps to a rate and learns that it should stop.
pub struct Pacing<'a> {
    /// Asked before each part (its length): how long to wait before sending it.
    pub delay: &'a (dyn Fn(u64) -> Duration + Send + Sync),
    /// Asked before each part and while waiting: `true` stops the upload.
    pub cancelled: &'a (dyn Fn() -> bool + Send + Sync),
}

impl Pacing<'static> {
    /// No rate and no stop: as fast as the store takes it.
    pub const UNPACED: Pacing<'static> = Pacing {
        delay: &|_| Duration::ZERO,
        cancelled: &|| false,
    };
}

/// An object as a listing names it, its key relative to the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub key: String,
    pub size: u64,
    /// When the store last wrote it, in milliseconds since the epoch.
    pub modified_millis: i64,
}

/// A named repository, cheap to clone.
#[derive(Debug, Clone)]
pub struct Repository {
    settings: Arc<RepositorySettings>,
    store: Arc<dyn ObjectStore>,
}

impl Repository {
    /// Opens the repository its settings describe (an `fs` location is created if missing).
    pub fn open(settings: RepositorySettings) -> StorageResult<Repository> {
        let store: Arc<dyn ObjectStore> = match &settings.kind {
            RepositoryKind::Fs { location } => open_fs(&settings.name, location)?,
            RepositoryKind::S3(s3) => open_s3(&settings.name, s3)?,
        };
        Ok(Repository {
            settings: Arc::new(settings),
            store,
        })
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn settings(&self) -> &RepositorySettings {
        &self.settings
    }

    /// Names the repository in logs and errors.
    pub fn describe(&self) -> String {
        format!(
            "repository [{}] ({})",
            self.settings.name,
            self.settings.type_name()
        )
    }

    fn path(&self, key: &str) -> Path {
        match self.settings.base_path.is_empty() {
            true => Path::from(key),
            false => Path::from(format!("{}/{key}", self.settings.base_path)),
        }
    }

    fn relative(&self, path: &Path) -> String {
        let full = path.as_ref();
        match self.settings.base_path.is_empty() {
            true => full.to_string(),
            false => full
                .strip_prefix(&self.settings.base_path)
                .map(|rest| rest.trim_start_matches('/').to_string())
                .unwrap_or_else(|| full.to_string()),
        }
    }

    fn failed(&self, key: &str) -> impl Fn(object_store::Error) -> StorageError + '_ {
        let key = key.to_string();
        move |e| StorageError::from_store(&self.settings.name, &key, e)
    }

    /// Stores `bytes` under `key`, replacing what was there.
    pub async fn put(&self, key: &str, bytes: Bytes) -> StorageResult<()> {
        self.store
            .put(&self.path(key), PutPayload::from(bytes))
            .await
            .map_err(self.failed(key))?;
        Ok(())
    }

    /// Uploads the local file `file` under `key`; returns its length.
    pub async fn put_file(&self, key: &str, file: &LocalPath) -> StorageResult<u64> {
        self.put_file_paced(key, file, &Pacing::UNPACED).await
    }

    /// [`Repository::put_file`] at the pace `pacing` gives, stopped (nothing stored, a
    /// multipart upload aborted) as soon as it says so: [`StorageError::Cancelled`].
    pub async fn put_file_paced(
        &self,
        key: &str,
        file: &LocalPath,
        pacing: &Pacing<'_>,
    ) -> StorageResult<u64> {
        let length = tokio::fs::metadata(file)
            .await
            .map_err(|e| self.unreadable(file, e))?
            .len();
        self.put_file_range_paced(key, file, 0..length, pacing)
            .await
    }

    /// The bytes `range` of the local file `file` under `key` (one part of a file a snapshot
    /// repository stores in `chunk_size` parts), paced and stopped as
    /// [`Repository::put_file_paced`]; returns the bytes stored.
    pub async fn put_file_range_paced(
        &self,
        key: &str,
        file: &LocalPath,
        range: Range<u64>,
        pacing: &Pacing<'_>,
    ) -> StorageResult<u64> {
        let unavailable = |e: std::io::Error| self.unreadable(file, e);
        let mut opened = tokio::fs::File::open(file).await.map_err(unavailable)?;
        opened
            .seek(SeekFrom::Start(range.start))
            .await
            .map_err(unavailable)?;
        let length = range.end.saturating_sub(range.start);
        let mut local = opened.take(length);
        if length as usize <= PART_BYTES {
            let mut bytes = Vec::with_capacity(length as usize);
            local.read_to_end(&mut bytes).await.map_err(unavailable)?;
            self.check_read_whole(file, bytes.len() as u64, length)?;
            self.wait_for_turn(key, length, pacing).await?;
            self.put(key, Bytes::from(bytes)).await?;
            return Ok(length);
        }
        let upload = self
            .store
            .put_multipart(&self.path(key))
            .await
            .map_err(self.failed(key))?;
        let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buffer = vec![0u8; PART_BYTES];
        let mut written = 0;
        loop {
            let read = match local.read(&mut buffer).await {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) => {
                    let _ = parts.abort().await;
                    return Err(unavailable(e));
                }
            };
            parts
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(self.failed(key))?;
            if let Err(cancelled) = self.wait_for_turn(key, read as u64, pacing).await {
                let _ = parts.abort().await;
                return Err(cancelled);
            }
            parts.write(&buffer[..read]);
            written += read as u64;
        }
        if let Err(short) = self.check_read_whole(file, written, length) {
            let _ = parts.abort().await;
            return Err(short);
        }
        parts.finish().await.map_err(self.failed(key))?;
        Ok(length)
    }

    fn unreadable(&self, file: &LocalPath, e: std::io::Error) -> StorageError {
        StorageError::Unavailable {
            repository: self.settings.name.clone(),
            reason: format!("cannot read [{}]: {e}", file.display()),
        }
    }

    /// A local file that ended before the range to upload did (it shrank meanwhile): storing
    /// what was read would store a different file under the key.
    fn check_read_whole(&self, file: &LocalPath, read: u64, wanted: u64) -> StorageResult<()> {
        match read == wanted {
            true => Ok(()),
            false => Err(StorageError::Unavailable {
                repository: self.settings.name.clone(),
                reason: format!(
                    "[{}] ended after {read} of the {wanted} bytes to upload",
                    file.display()
                ),
            }),
        }
    }

    /// Waits the delay `pacing` gives for `bytes`, in short steps, asking between them
    /// whether the upload should stop.
    async fn wait_for_turn(&self, key: &str, bytes: u64, pacing: &Pacing<'_>) -> StorageResult<()> {
        let until = tokio::time::Instant::now() + (pacing.delay)(bytes);
        loop {
            if (pacing.cancelled)() {
                return Err(StorageError::Cancelled {
                    repository: self.settings.name.clone(),
                    key: key.to_string(),
                });
            }
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(CANCEL_CHECK)).await;
        }
    }

    /// The whole object under `key`.
    pub async fn get(&self, key: &str) -> StorageResult<Bytes> {
        let object = self
            .store
            .get(&self.path(key))
            .await
            .map_err(self.failed(key))?;
        object.bytes().await.map_err(self.failed(key))
    }

    /// The size of the object under `key`, or `None` when there is none.
    pub async fn size_of(&self, key: &str) -> StorageResult<Option<u64>> {
        match self.store.head(&self.path(key)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(StorageError::from_store(&self.settings.name, key, e)),
        }
    }

    /// The object under `key` from `offset` to its end, in chunks as they arrive.
    pub async fn get_stream(
        &self,
        key: &str,
        offset: u64,
    ) -> StorageResult<BoxStream<'static, StorageResult<Bytes>>> {
        let options = GetOptions {
            range: (offset > 0).then_some(GetRange::Offset(offset)),
            ..GetOptions::default()
        };
        let object = self
            .store
            .get_opts(&self.path(key), options)
            .await
            .map_err(self.failed(key))?;
        let (repository, key) = (self.settings.name.clone(), key.to_string());
        let range = object.range.clone();
        match object.payload {
            // object_store streams a local file in 8 KiB chunks: a restore read 240 MB/s
            // that way on a disk that copies 500 MB/s.
            GetResultPayload::File(file, _) => Ok(file_chunks(file, range, repository, key)),
            GetResultPayload::Stream(stream) => Ok(stream
                .map_err(move |e| StorageError::from_store(&repository, &key, e))
                .boxed()),
        }
    }

    /// Every object whose key starts with `prefix` (a folder: `a/b/`), in no set order.
    pub async fn list(&self, prefix: &str) -> StorageResult<Vec<StoredObject>> {
        let folder = self.path(prefix.trim_end_matches('/'));
        let objects: Vec<_> = self
            .store
            .list(Some(&folder))
            .try_collect()
            .await
            .map_err(self.failed(prefix))?;
        Ok(objects
            .into_iter()
            .map(|meta| StoredObject {
                key: self.relative(&meta.location),
                size: meta.size,
                modified_millis: meta.last_modified.timestamp_millis(),
            })
            .collect())
    }

    /// Removes the object under `key`; one that is not there is already removed.
    pub async fn delete(&self, key: &str) -> StorageResult<()> {
        match self.store.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(StorageError::from_store(&self.settings.name, key, e)),
        }
    }

    /// Removes every object whose key starts with `prefix`.
    pub async fn delete_folder(&self, prefix: &str) -> StorageResult<usize> {
        let objects = self.list(prefix).await?;
        for object in &objects {
            self.delete(&object.key).await?;
        }
        Ok(objects.len())
    }
}

/// Bytes of a local file read from a repository: one chunk per read.
const FILE_CHUNK: usize = 1 << 20;

/// The bytes `range` of `file`, in [`FILE_CHUNK`] chunks.
fn file_chunks(
    file: std::fs::File,
    range: std::ops::Range<u64>,
    repository: String,
    key: String,
) -> BoxStream<'static, StorageResult<Bytes>> {
    let failed = move |e: std::io::Error| StorageError::Unavailable {
        repository: repository.clone(),
        reason: format!("reading [{key}]: {e}"),
    };
    let start = async move {
        use tokio::io::AsyncSeekExt;
        let mut file = tokio::fs::File::from_std(file);
        file.seek(std::io::SeekFrom::Start(range.start)).await?;
        Ok::<_, std::io::Error>(file.take(range.end - range.start))
    };
    futures::stream::once(start)
        .map_ok(|reader| {
            futures::stream::try_unfold(reader, |mut reader| async move {
                let mut chunk = bytes::BytesMut::with_capacity(FILE_CHUNK);
                while chunk.len() < FILE_CHUNK {
                    if reader.read_buf(&mut chunk).await? == 0 {
                        break;
                    }
                }
                Ok::<_, std::io::Error>((!chunk.is_empty()).then(|| (chunk.freeze(), reader)))
            })
        })
        .try_flatten()
        .map_err(failed)
        .boxed()
}

fn open_fs(name: &str, location: &LocalPath) -> StorageResult<Arc<dyn ObjectStore>> {
    std::fs::create_dir_all(location).map_err(|e| {
        StorageError::Settings(format!(
            "[{name}] cannot create the repository location [{}]: {e}",
            location.display()
        ))
    })?;
    let store = LocalFileSystem::new_with_prefix(location)
        .map_err(|e| StorageError::Settings(format!("[{name}] {e}")))?
        // An acknowledged write is in the repository: it must survive the machine's crash.
        .with_fsync(true)
        .with_automatic_cleanup(true);
    Ok(Arc::new(store))
}

fn open_s3(name: &str, s3: &S3Settings) -> StorageResult<Arc<dyn ObjectStore>> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(&s3.bucket);
    if let Some(region) = &s3.region {
        builder = builder.with_region(region);
    }
    if let Some(endpoint) = &s3.endpoint {
        // With an endpoint, `path_style_access: false` means the endpoint names the bucket.
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(!s3.path_style_access);
    }
    if let (Some(key), Some(secret)) = (&s3.access_key, &s3.secret_key) {
        builder = builder
            .with_access_key_id(key)
            .with_secret_access_key(secret);
    }
    if let Some(token) = &s3.session_token {
        builder = builder.with_token(token);
    }
    // A failed request is retried here a few times only: the callers retry with their own
    // backoff and report the failure meanwhile (a write must not hang for minutes).
    let retry = object_store::RetryConfig {
        backoff: object_store::BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: std::time::Duration::from_secs(15),
    };
    let store = builder
        .with_retry(retry)
        .build()
        .map_err(|e| StorageError::Settings(format!("[{name}] {e}")))?;
    Ok(Arc::new(store))
}

/// How often a paced upload that waits for its turn asks whether to stop.
const CANCEL_CHECK: Duration = Duration::from_millis(50);
