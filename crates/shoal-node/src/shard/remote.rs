//! A copy's remote-store state (see `crate::remote`): which segment files its repository
//! holds, how far its translog is uploaded, and the upload statistics. Plain state, so
//! `IndexShard` holds it without depending on the remote store service.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

#[derive(Default)]
pub struct RemoteCopyState {
    /// Segment files known to be in the repository: name → (length, crc32c).
    pub(crate) uploaded: Mutex<HashMap<String, (u64, u32)>>,
    /// The repository's files were listed from its newest metadata file (once per primary).
    pub(crate) uploaded_known: AtomicBool,
    /// One segment upload at a time per copy.
    pub(crate) segment_upload: Mutex<()>,
    /// `(term, version)` of the newest checkpoint uploaded.
    pub(crate) uploaded_checkpoint: Mutex<Option<(i64, u64)>>,
    pub(crate) translog: TranslogUpload,
    pub(crate) stats: UploadStats,
}

/// Group commit of translog uploads: a writer that needs its operations in the repository
/// waits for an upload that started after they were logged; one writer uploads for all.
#[derive(Default)]
pub struct TranslogUpload {
    pub(crate) state: Mutex<TranslogUploadState>,
    pub(crate) done: Condvar,
    /// The newest term whose start this copy uploaded (`crate::remote::terms`); only the
    /// uploading writer reads and sets it.
    pub(crate) started_term: AtomicI64,
}

#[derive(Default)]
pub struct TranslogUploadState {
    /// Every operation up to this seq_no is in the repository; `None` until the first upload
    /// of this primary decides where it starts.
    pub uploaded_to: Option<i64>,
    pub in_progress: bool,
    /// When the last upload started (uploads are at least the buffer interval apart).
    pub last_started: Option<Instant>,
    /// The last upload failed with this; waiters give up with it.
    pub failure: Option<String>,
    /// Bumped after each upload attempt, so a waiter sees one finish.
    pub attempts: u64,
}

/// What `GET _remotestore/stats` reports for a copy.
#[derive(Default)]
pub struct UploadStats {
    pub segment_uploads_started: AtomicU64,
    pub segment_uploads_succeeded: AtomicU64,
    pub segment_uploads_failed: AtomicU64,
    pub segment_bytes_uploaded: AtomicU64,
    pub segment_upload_millis: AtomicU64,
    pub consecutive_segment_failures: AtomicU64,
    pub segment_bytes_downloaded: AtomicU64,
    pub segment_downloads: AtomicU64,
    pub translog_uploads_started: AtomicU64,
    pub translog_uploads_succeeded: AtomicU64,
    pub translog_uploads_failed: AtomicU64,
    pub translog_bytes_uploaded: AtomicU64,
    pub translog_upload_millis: AtomicU64,
    /// Millis since the epoch of the last successful segment upload.
    pub last_segment_upload_at: AtomicU64,
    /// Millis since the epoch when the oldest upload not yet succeeded started (0: none).
    pub pending_since: AtomicU64,
    /// Writes refused by remote segment backpressure.
    pub rejections: AtomicU64,
    /// Bytes refreshed locally but not uploaded yet (the size of the pending checkpoint's new
    /// files when the last upload attempt started).
    pub bytes_lag: AtomicU64,
}

impl UploadStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
