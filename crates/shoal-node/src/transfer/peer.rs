//! Files streamed from another node: the [`FileSource`] a target uses ([`PeerSource`]) and
//! the serving side ([`serve_file`]), over a server-streaming transport action per service
//! (declared with [`file_stream_action!`]): one request names the file and the offset, the
//! answer is the file's bytes in chunks.
//!
//! Flow control is the transport's: HTTP/2 windows stop the source once the target stops
//! reading (it paces itself with the rate limiter), so a slow target never piles chunks up
//! in the source's memory.

use std::marker::PhantomData;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use shoal_transport::{Transport, WireStreamAction};

use super::{ByteStream, FileMeta, FileSource};
use crate::error::{ApiError, ApiResult};
use crate::pressure::{run_on, Admission, ThreadPool};
use crate::recovery::throttle::MAX_CHUNK_BYTES;

/// Asks for one file of a set the serving node pinned (its `session`), from `offset` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStreamRequest {
    /// The serving service's handle for the pinned files (a recovery id).
    pub session: String,
    pub name: String,
    pub offset: u64,
    /// Bytes per streamed chunk, at most [`MAX_CHUNK_BYTES`].
    pub chunk_bytes: u64,
}

/// Declares a streaming action that carries file bytes: the request as JSON, every item the
/// raw bytes of one chunk.
macro_rules! file_stream_action {
    ($(#[$doc:meta])* $action:ident, $name:literal, min_version = $min:literal) => {
        $(#[$doc])*
        pub(crate) struct $action;
        impl shoal_transport::WireStreamAction for $action {
            const NAME: &'static str = $name;
            const MIN_VERSION: u32 = $min;
            type Request = $crate::transfer::peer::FileStreamRequest;
            type Item = bytes::Bytes;

            fn encode_request(request: &Self::Request) -> Result<bytes::Bytes, String> {
                serde_json::to_vec(request).map(bytes::Bytes::from).map_err(|e| e.to_string())
            }

            fn decode_request(body: bytes::Bytes) -> Result<Self::Request, String> {
                serde_json::from_slice(&body).map_err(|e| e.to_string())
            }

            fn encode_item(chunk: bytes::Bytes) -> Result<bytes::Bytes, String> {
                Ok(chunk)
            }

            fn decode_item(chunk: bytes::Bytes) -> Result<bytes::Bytes, String> {
                Ok(chunk)
            }
        }
    };
}
pub(crate) use file_stream_action;

/// The files of one session on another node, streamed with the action `A`.
pub struct PeerSource<A> {
    pub transport: Arc<Transport>,
    /// Id of the serving node (for messages).
    pub node: String,
    /// Its transport address.
    pub address: String,
    pub session: String,
    pub chunk_bytes: u64,
    /// The longest wait for the next chunk before the stream counts as broken.
    pub idle_timeout: Duration,
    pub action: PhantomData<fn() -> A>,
}

impl<A> FileSource for PeerSource<A>
where
    A: WireStreamAction<Request = FileStreamRequest, Item = Bytes>,
{
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        let request = FileStreamRequest {
            session: self.session.clone(),
            name: file.name.clone(),
            offset,
            chunk_bytes: self.chunk_bytes,
        };
        let (transport, address) = (self.transport.clone(), self.address.clone());
        let idle_timeout = self.idle_timeout;
        Box::pin(async move {
            let chunks = transport
                .send_stream::<A>(&address, &request, idle_timeout)
                .await?;
            Ok(chunks.map(|chunk| chunk.map_err(ApiError::from)).boxed())
        })
    }

    fn describe(&self) -> String {
        format!("node [{}]", self.node)
    }
}

/// A set of files a service pinned for a transfer.
pub trait ServedFiles: Send + Sync + 'static {
    /// Where the file `name` of the set is; `None` when the set has no such file.
    fn path(&self, name: &str) -> Option<PathBuf>;
    /// Called at every chunk served, so the owner sees the session is in use.
    fn touch(&self) {}
}

/// Answers a [`FileStreamRequest`] for a file of `files`: its bytes from the offset on, each
/// chunk read on `pool` (never on the transport's threads).
pub fn serve_file(
    files: Arc<dyn ServedFiles>,
    request: FileStreamRequest,
    pool: ThreadPool,
) -> ApiResult<ByteStream> {
    if request.chunk_bytes == 0 || request.chunk_bytes > MAX_CHUNK_BYTES {
        return Err(ApiError::bad_request(format!(
            "chunk size [{}b] must be between 1b and {MAX_CHUNK_BYTES}b",
            request.chunk_bytes
        )));
    }
    let path = files
        .path(&request.name)
        .ok_or_else(|| ApiError::bad_request(format!("no file [{}] in recovery", request.name)))?;
    let reader = ChunkReader {
        files,
        path,
        file: None,
        offset: request.offset,
        chunk_bytes: request.chunk_bytes,
    };
    let chunks = stream::unfold(Some(reader), move |reader| {
        let pool = pool.clone();
        async move {
            let reader = reader?;
            let read = run_on(&pool, Admission::Force, "[file stream]", move || {
                reader.read_next()
            });
            match read.await {
                Ok((reader, Some(Ok(chunk)))) => Some((Ok(chunk), Some(reader))),
                Ok((_, Some(Err(e)))) | Err(e) => Some((Err(e), None)),
                Ok((_, None)) => None,
            }
        }
    });
    Ok(chunks.boxed())
}

/// Reads one file chunk by chunk; moved to a pool thread for each read.
struct ChunkReader {
    files: Arc<dyn ServedFiles>,
    path: PathBuf,
    /// Opened at the first read, with its length.
    file: Option<(std::fs::File, u64)>,
    offset: u64,
    chunk_bytes: u64,
}

impl ChunkReader {
    /// The next chunk (`None` at the end), and the reader to go on with.
    fn read_next(mut self) -> (ChunkReader, Option<ApiResult<Bytes>>) {
        let read = self.read_chunk().transpose();
        (self, read)
    }

    fn read_chunk(&mut self) -> ApiResult<Option<Bytes>> {
        self.files.touch();
        if self.file.is_none() {
            let file = std::fs::File::open(&self.path)?;
            let length = file.metadata()?.len();
            if self.offset > length {
                return Err(ApiError::bad_request(format!(
                    "offset [{}] is past the end of [{}] ({length} bytes)",
                    self.offset,
                    self.path.display()
                )));
            }
            self.file = Some((file, length));
        }
        let (file, length) = self.file.as_ref().expect("opened above");
        let len = self.chunk_bytes.min(length - self.offset);
        if len == 0 {
            return Ok(None);
        }
        let mut buffer = vec![0u8; len as usize];
        file.read_exact_at(&mut buffer, self.offset)?;
        self.offset += len;
        Ok(Some(Bytes::from(buffer)))
    }
}
