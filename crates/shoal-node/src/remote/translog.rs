//! The translog in the remote store. With `index.translog.durability: request` a primary
//! acknowledges a write only once its operations are in the translog repository: each sync
//! uploads every operation logged since the last one as one object, and writers that arrive
//! while an upload runs share the next one (uploads start at least
//! `index.remote_store.translog.buffer_interval` apart, as in OpenSearch).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use shoal_engine::{Engine, Operation};
use shoal_storage::Repository;

use super::layout::{translog_batch_range, ShardKeys};
use super::terms;
use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::shard::remote::UploadStats;
use crate::shard::IndexShard;

/// How long a writer waits for the uploads that carry its operations.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

impl RemoteStoreService {
    /// Returns once every operation of the local primary up to `seq_no` is in the translog
    /// repository. The caller has fsynced them locally.
    pub(crate) fn sync_translog(
        &self,
        service: &IndexService,
        shard: usize,
        copy: &IndexShard,
        seq_no: i64,
    ) -> ApiResult<()> {
        let upload = &copy.remote.translog;
        let deadline = Instant::now() + SYNC_TIMEOUT;
        let mut state = upload.state.lock();
        if state.uploaded_to.is_none() {
            state.uploaded_to = Some(committed_checkpoint(copy.engine()));
        }
        loop {
            if state.uploaded_to.is_some_and(|to| to >= seq_no) {
                return Ok(());
            }
            if !state.in_progress {
                break;
            }
            let attempts = state.attempts;
            if upload.done.wait_until(&mut state, deadline).timed_out() {
                return Err(upload_timed_out(service, shard));
            }
            // The upload this writer waited on failed; its operations are not uploaded.
            if state.attempts != attempts && state.uploaded_to.is_none_or(|to| to < seq_no) {
                if let Some(reason) = state.failure.clone() {
                    return Err(upload_failed(service, shard, &reason));
                }
            }
        }
        // This writer uploads for everyone waiting.
        state.in_progress = true;
        let wait = state
            .last_started
            .map(|at| self.buffer_interval(service).saturating_sub(at.elapsed()))
            .unwrap_or_default();
        let from = state.uploaded_to.unwrap_or(-1) + 1;
        drop(state);
        std::thread::sleep(wait);
        let started = Instant::now();
        let outcome = self.upload_operations(service, shard, copy, from);
        let mut state = upload.state.lock();
        state.in_progress = false;
        state.last_started = Some(started);
        state.attempts += 1;
        let result = match outcome {
            Ok(uploaded_to) => {
                state.failure = None;
                state.uploaded_to = state.uploaded_to.max(Some(uploaded_to));
                match uploaded_to >= seq_no {
                    true => Ok(()),
                    false => Err(ApiError::internal(format!(
                        "translog upload of [{}][{shard}] ended at seq_no {uploaded_to}, below {seq_no}",
                        service.name()
                    ))),
                }
            }
            Err(e) => {
                state.failure = Some(e.reason.clone());
                Err(upload_failed(service, shard, &e.reason))
            }
        };
        upload.done.notify_all();
        result
    }

    /// `index.remote_store.translog.buffer_interval`, or the cluster's
    /// `cluster.remote_store.translog.buffer_interval` when the index names none.
    fn buffer_interval(&self, service: &IndexService) -> Duration {
        const KEY: &str = "index.remote_store.translog.buffer_interval";
        let text = service.with_meta(|m| m.setting(KEY)).or_else(|| {
            self.core
                .cluster_setting("cluster.remote_store.translog.buffer_interval")
        });
        text.and_then(|t| crate::settings::parse_time(&t).ok().flatten())
            .unwrap_or(Duration::from_millis(650))
    }

    /// `durability: async`: the operations logged so far go up in the background (on the
    /// `replication` pool), at the translog sync interval.
    /// One at a time per copy: while an upload runs (a slow or failing store), the next sync
    /// interval adds nothing to the pool.
    pub(crate) fn queue_translog_upload(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
    ) {
        let Ok(copy) = service.copy(shard) else {
            return;
        };
        if copy.remote.translog.state.lock().in_progress {
            return;
        }
        let (me, service) = (self.clone(), service.clone());
        self.core.pressure.spawn_forced(crate::pressure::settings::REPLICATION, move || {
            let Ok(copy) = service.copy(shard) else {
                return;
            };
            let upload_to = copy.engine().max_seq_no();
            if let Err(e) = me.sync_translog(&service, shard, &copy, upload_to) {
                tracing::warn!(index = %service.name(), shard, error = %e, "background translog upload failed");
            }
        });
    }

    /// Uploads the operations logged from `from` on as one batch; returns the highest seq_no
    /// it holds (`from - 1` when there was nothing to upload).
    fn upload_operations(
        &self,
        service: &IndexService,
        shard: usize,
        copy: &IndexShard,
        from: i64,
    ) -> ApiResult<i64> {
        let repository = &self.repositories()?.translog;
        let stats = &copy.remote.stats;
        let engine = copy.engine();
        let ops: Vec<Operation> = engine
            .history(from, i64::MAX)?
            .collect::<Result<_, _>>()
            .map_err(|e| ApiError::internal(format!("reading the translog failed: {e}")))?;
        let Some(last) = ops.iter().map(|op| op.seq_no).max() else {
            return Ok(from - 1);
        };
        UploadStats::add(&stats.translog_uploads_started, 1);
        let started = Instant::now();
        self.upload_term_start(repository, service, shard, copy, (from - 1, &ops))?;
        let bytes = shoal_translog::encode_batch(&ops);
        let length = bytes.len() as u64;
        let key = ShardKeys::new(&service.uuid(), shard).translog_batch(
            engine.primary_term(),
            from,
            last,
        );
        let put = self.block_on(repository.put(&key, Bytes::from(bytes)));
        UploadStats::add(
            &stats.translog_upload_millis,
            started.elapsed().as_millis() as u64,
        );
        match put {
            Ok(()) => {
                UploadStats::add(&stats.translog_uploads_succeeded, 1);
                UploadStats::add(&stats.translog_bytes_uploaded, length);
                Ok(last)
            }
            Err(e) => {
                UploadStats::add(&stats.translog_uploads_failed, 1);
                Err(e)
            }
        }
    }

    /// Before a term's first batch: where the term's history begins (`terms.rs`).
    fn upload_term_start(
        &self,
        repository: &Repository,
        service: &IndexService,
        shard: usize,
        copy: &IndexShard,
        (uploaded_to, batch): (i64, &[Operation]),
    ) -> ApiResult<()> {
        let term = copy.engine().primary_term();
        let started = &copy.remote.translog.started_term;
        if started.load(Ordering::Acquire) >= term {
            return Ok(());
        }
        let start = terms::term_start(term, uploaded_to, batch);
        let key = ShardKeys::new(&service.uuid(), shard).term_start(start);
        self.block_on(repository.put(&key, Bytes::new()))?;
        started.fetch_max(term, Ordering::AcqRel);
        tracing::debug!(index = %service.name(), shard, term, from = start.from, "translog term start uploaded");
        Ok(())
    }

    /// Every operation of the shard's translog batches above `above`, one per seq_no (the
    /// highest term wins, as in a local translog), without what a later term's start says a
    /// deposed primary uploaded, in seq_no order.
    pub(crate) fn remote_operations(
        &self,
        keys: &ShardKeys,
        above: i64,
    ) -> ApiResult<Vec<Operation>> {
        let repository = &self.repositories()?.translog;
        let mut newest: BTreeMap<i64, Operation> = BTreeMap::new();
        for object in self.block_on(repository.list(&keys.translog_folder()))? {
            let Some((_, _, last)) = translog_batch_range(&object.key) else {
                continue;
            };
            if last <= above {
                continue;
            }
            let bytes = self.block_on(repository.get(&object.key))?;
            let ops = shoal_translog::decode_batch(&bytes).map_err(|reason| {
                ApiError::new(
                    500,
                    "translog_corrupted_exception",
                    format!("[{}] {reason}", object.key),
                )
            })?;
            for op in ops.into_iter().filter(|op| op.seq_no > above) {
                match newest.get(&op.seq_no) {
                    Some(have) if have.primary_term > op.primary_term => {}
                    _ => {
                        newest.insert(op.seq_no, op);
                    }
                }
            }
        }
        let starts: Vec<terms::TermStart> = self
            .block_on(repository.list(&keys.terms_folder()))?
            .iter()
            .filter_map(|object| terms::parse_term_start(&object.key))
            .collect();
        Ok(terms::drop_superseded(newest, &starts)
            .into_values()
            .collect())
    }

    /// Deletes the translog batches whose operations are all at or below `checkpoint` (they
    /// are in the segments of every retained metadata file).
    pub(super) fn delete_translog_below(
        &self,
        repository: &Repository,
        keys: &ShardKeys,
        checkpoint: i64,
    ) -> ApiResult<usize> {
        let mut deleted = 0;
        for object in self.block_on(repository.list(&keys.translog_folder()))? {
            if translog_batch_range(&object.key).is_some_and(|(_, _, last)| last <= checkpoint) {
                self.block_on(repository.delete(&object.key))?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}

/// The local checkpoint of the copy's last commit: a new primary's uploads start above it
/// (what is below is in the segments it will upload; uploading some operations twice is
/// harmless, missing one is not).
fn committed_checkpoint(engine: &Engine) -> i64 {
    shoal_engine::recovery::read_payload(&engine.config().index_dir())
        .map(|p| p.local_checkpoint)
        .unwrap_or(-1)
}

fn upload_failed(service: &IndexService, shard: usize, reason: &str) -> ApiError {
    ApiError::new(
        503,
        "translog_upload_failed_exception",
        format!(
            "[{}][{shard}] the write is logged locally but its translog upload to the remote store failed, so it is not acknowledged: {reason}",
            service.name()
        ),
    )
}

fn upload_timed_out(service: &IndexService, shard: usize) -> ApiError {
    ApiError::new(
        503,
        "translog_upload_failed_exception",
        format!(
            "[{}][{shard}] the translog upload to the remote store did not finish within {}s",
            service.name(),
            SYNC_TIMEOUT.as_secs()
        ),
    )
}
