//! Opening a store: the last commit, the translog, and the replay of what the commit lacks.

use super::*;
use std::collections::BTreeMap;

impl Engine {
    /// [`Engine::open`] once the store is checked (see [`crate::store`]).
    pub(crate) fn open_store(
        config: EngineConfig,
        primary_term: i64,
        parse: &ParseDocument<'_>,
        integrity: Integrity,
    ) -> Result<Engine, EngineError> {
        std::fs::create_dir_all(config.index_dir())?;
        std::fs::create_dir_all(config.translog_dir())?;
        let merge_hook = MergeHook::new(config.index_dir());
        let segment_numbers = SegmentNumbers::default();
        let flushed = FlushedSegments::default();
        let (index, schema) = open_or_create_index(
            &config.index_dir(),
            config.codec,
            &merge_hook,
            &segment_numbers,
            &flushed,
        )?;
        let payload = commit_payload(&index)?;
        let translog_config = TranslogConfig {
            durability: config.durability,
            primary_term,
            ..TranslogConfig::default()
        };
        let translog = open_translog(&config.translog_dir(), translog_config, payload.as_ref())?;
        let history_uuid = payload
            .as_ref()
            .map(|p| p.history_uuid.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let local_checkpoint = payload
            .as_ref()
            .map_or(NO_OPS_PERFORMED, |p| p.local_checkpoint);
        let global_checkpoint = payload
            .as_ref()
            .map_or(NO_OPS_PERFORMED, |p| p.global_checkpoint);
        let history_complete_from = payload.as_ref().map_or(0, |p| p.history_complete_from);
        let writer = match config.segment_replica {
            true => None,
            false => Some(new_writer(
                &index,
                &config,
                &integrity,
                &merge_hook,
                &segment_numbers,
            )?),
        };
        let source_cache = Arc::new(SourceReaderCache::new());
        let warmer: Arc<dyn tantivy::Warmer> = source_cache.clone();
        let id_filters = Arc::new(IdFilters::new(schema.id, writer.is_some(), flushed));
        let id_warmer: Arc<dyn tantivy::Warmer> = id_filters.clone();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .warmers(vec![Arc::downgrade(&warmer), Arc::downgrade(&id_warmer)])
            .try_into()?;
        let engine = Engine {
            state: Mutex::new(WriteState {
                writer,
                tracker: tracker_for_commit(payload.as_ref()),
                version_map: VersionMap::default(),
                dirty: payload.is_none(),
                committing: None,
            }),
            commit_lock: Mutex::new(()),
            commit_ended: parking_lot::Condvar::new(),
            #[cfg(test)]
            commit_hook: Mutex::new(None),
            config,
            index,
            schema,
            reader,
            translog,
            primary_term: AtomicI64::new(primary_term),
            global_checkpoint: AtomicI64::new(global_checkpoint),
            history_uuid: Mutex::new(history_uuid),
            history_complete_from: AtomicI64::new(history_complete_from),
            retention_floor: AtomicI64::new(i64::MAX),
            // Unknown for what is already stored: every one of those ops may be an update.
            max_seq_no_of_updates: AtomicI64::new(i64::MAX),
            source_cache,
            _warmer: warmer,
            id_filters,
            counters: Counters::default(),
            refresh_listeners: Mutex::new(Vec::new()),
            failure: Mutex::new(None),
            integrity,
            merge_hook,
            segment_numbers,
        };
        // A replica's translog holds what it logged above the copied commit; only a writer
        // indexes it (on promotion).
        let replayed = match engine.is_writer_less() {
            true => engine.mark_logged_operations(local_checkpoint)?,
            false => engine.replay_translog(local_checkpoint, parse)?,
        };
        engine
            .max_seq_no_of_updates
            .store(engine.max_seq_no(), Ordering::Release);
        // Only when the open changed something: a store opened as it was left needs no
        // disk space, so a node on a full disk still opens its copies and serves reads.
        if replayed > 0 || payload.is_none() {
            engine.flush(true)?;
        }
        info!(
            path = %engine.config.path.display(),
            replayed,
            local_checkpoint = engine.local_checkpoint(),
            "shard engine opened"
        );
        Ok(engine)
    }

    pub(super) fn replay_translog(
        &self,
        local_checkpoint: i64,
        parse: &ParseDocument<'_>,
    ) -> Result<usize, EngineError> {
        let snapshot = self.translog.snapshot(local_checkpoint + 1, i64::MAX)?;
        let mut replayed = 0;
        for op in snapshot {
            let op = op?;
            let write = match op.kind {
                OpKind::Index => {
                    let doc = parse(&op.id, &op.source).unwrap_or_else(|e| {
                        // The op was acknowledged, so keep it: retrievable by id even if its
                        // fields cannot be indexed against the current mapping.
                        warn!(id = %op.id, error = %e, "translog replay could not parse a document; keeping its source only");
                        TantivyDocument::default()
                    });
                    WriteOp::Index {
                        id: op.id,
                        routing: op.routing,
                        source: op.source,
                        doc,
                        request: DocRequest::default(),
                        seq_no: op.seq_no,
                        primary_term: op.primary_term,
                        version: op.version,
                    }
                }
                OpKind::Delete => WriteOp::Delete {
                    id: op.id,
                    routing: op.routing,
                    request: DocRequest::default(),
                    seq_no: op.seq_no,
                    primary_term: op.primary_term,
                    version: op.version,
                },
                OpKind::NoOp => WriteOp::NoOp {
                    seq_no: op.seq_no,
                    primary_term: op.primary_term,
                    reason: op.reason,
                },
            };
            for result in self.apply(vec![write], Origin::LocalRecovery) {
                result?;
            }
            replayed += 1;
        }
        Ok(replayed)
    }
}

fn open_translog(
    dir: &Path,
    config: TranslogConfig,
    payload: Option<&CommitPayload>,
) -> Result<Translog, EngineError> {
    let exists = dir.join("translog.ckp").exists();
    match (payload, exists) {
        (Some(payload), true) => {
            let (translog, info) = Translog::open(dir, config, Some(&payload.translog_uuid))?;
            if info.truncated_bytes > 0 {
                warn!(
                    truncated_bytes = info.truncated_bytes,
                    reason = info.truncation_reason.as_deref().unwrap_or(""),
                    "translog tail was torn; cut it off"
                );
            }
            Ok(translog)
        }
        (Some(payload), false) if payload.max_seq_no != NO_OPS_PERFORMED => {
            Err(EngineError::Corrupted(format!(
                "the index commit references translog [{}] but {} has none",
                payload.translog_uuid,
                dir.display()
            )))
        }
        // Created but crashed before the first commit: the translog is ours.
        (None, true) => Ok(Translog::open(dir, config, None)?.0),
        _ => Ok(Translog::create(dir, config)?),
    }
}

pub(super) fn new_writer(
    index: &Index,
    config: &EngineConfig,
    integrity: &Integrity,
    hook: &MergeHook,
    numbers: &SegmentNumbers,
) -> Result<IndexWriter, EngineError> {
    // New segments are numbered above every one this copy holds, its own or copied.
    for meta in index.searchable_segment_metas()? {
        if let Some(number) = stored_segment_number(index, &meta) {
            numbers.observe(number);
        }
    }
    let threads = config.indexing_threads.max(1);
    let writer: IndexWriter =
        index.writer_with_num_threads(threads, config.indexing_buffer_per_thread * threads)?;
    let policy = TieredMergePolicy::new(config.merge.clone(), config.index_dir());
    writer.set_merge_policy(hook.pausable(Box::new(VerifyingMergePolicy::new(
        Box::new(policy),
        index.clone(),
        integrity.clone(),
    ))));
    Ok(writer)
}

/// The number in a segment's `_source` file (`None`: written before segments had numbers, or
/// unreadable, which the store's verification reports).
pub(super) fn stored_segment_number(
    index: &Index,
    meta: &tantivy::index::SegmentMeta,
) -> Option<u64> {
    let segment = index.segment(meta.clone());
    let file = segment
        .open_read(tantivy::index::SegmentComponent::Custom(
            shoal_codec::SOURCE_EXTENSION.to_string(),
        ))
        .ok()?;
    shoal_codec::SourceReader::read_segment_number(&file)
        .ok()
        .flatten()
}

/// The bytes of the store under `path` (subdirectories included), and of its segment files by
/// extension: one walk for `store.size_in_bytes` and `segments.file_sizes`.
pub(super) fn store_usage(path: &Path) -> (u64, BTreeMap<String, u64>) {
    let mut by_extension = BTreeMap::new();
    let total = walk_store(path, &mut by_extension);
    (total, by_extension)
}

fn walk_store(path: &Path, by_extension: &mut BTreeMap<String, u64>) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            // Pinned commits and the like: store bytes, not this commit's segment files.
            total += dir_bytes(&entry.path());
            continue;
        }
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        total += len;
        if let Some(extension) = segment_file_extension(&entry.file_name().to_string_lossy()) {
            *by_extension.entry(extension.to_string()).or_insert(0) += len;
        }
    }
    total
}

fn dir_bytes(path: &Path) -> u64 {
    walk_store(path, &mut BTreeMap::new())
}

/// tantivy names a segment's files `<32 hex digits of its id>.<component>` (its deletes
/// `<id>.<opstamp>.del`); `meta.json`, locks and the like are not segment files.
fn segment_file_extension(name: &str) -> Option<&str> {
    let (id, rest) = name.split_once('.')?;
    let is_segment = id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    is_segment.then(|| rest.rsplit('.').next()).flatten()
}

#[cfg(test)]
mod store_usage_tests {
    use super::segment_file_extension;

    #[test]
    fn segment_files_are_told_by_their_id_and_grouped_by_their_last_extension() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            segment_file_extension(&format!("{id}.store")),
            Some("store")
        );
        assert_eq!(segment_file_extension(&format!("{id}.42.del")), Some("del"));
        assert_eq!(segment_file_extension("meta.json"), None);
        assert_eq!(segment_file_extension(".tantivy-writer.lock"), None);
        assert_eq!(segment_file_extension("0123.store"), None);
    }
}

/// The Shoal payload of the index's last commit (`None`: a new index).
pub(super) fn commit_payload(index: &Index) -> tantivy::Result<Option<CommitPayload>> {
    Ok(index
        .load_metas()?
        .payload
        .as_deref()
        .and_then(CommitPayload::from_json))
}

/// The checkpoint tracker of a copy opening `payload`'s commit: processed up to its local
/// checkpoint, and numbering new operations above its max_seq_no. A commit copied from a
/// primary (file-based recovery, segment replication, a restore) may hold operations above
/// its local checkpoint that no translog here replays; a seq_no given twice would make a
/// later replay take one write for an older version of the other.
pub(super) fn tracker_for_commit(payload: Option<&CommitPayload>) -> LocalCheckpointTracker {
    let Some(payload) = payload else {
        return LocalCheckpointTracker::default();
    };
    let local_checkpoint = payload.local_checkpoint;
    LocalCheckpointTracker::new(payload.max_seq_no.max(local_checkpoint), local_checkpoint)
}
