//! Store integrity: every file of a commit is checked against the checksum recorded when it
//! was written, and a store found damaged is marked so it is never opened as is again.
//!
//! What records the checksums:
//! - every segment file (tantivy's `.idx .pos .term .store .fast .fieldnorm .del` and Shoal's
//!   `.src`) goes through tantivy's `FooterProxy`, which appends a footer with the crc32 of the
//!   file's body;
//! - `.src` also has a crc32c per compressed block, checked on every read (shoal-codec);
//! - `meta.json` has no footer: the commit payload carries a crc32c of itself
//!   ([`crate::CommitPayload::to_json`]), the schema and index settings (fixed at creation) are
//!   compared with [`SCHEMA_CHECKSUM_FILE`], and each segment's `max_doc` / deletes count is
//!   compared with what its files hold.
//!
//! When they are checked:
//! - on open, per `index.shard.check_on_startup` ([`CheckOnStartup`]);
//! - before a segment is merged (once per segment and deletes generation per process);
//! - when a recovery source lists its files and when a target reuses a local file
//!   ([`checksum_file`]).
//!
//! A detected corruption writes a `corrupted_<uuid>` marker holding the reason into the index
//! directory (like Lucene's `corrupted_*` files); [`Engine::open`] refuses a marked store with
//! [`EngineError::Corrupted`], and a peer-recovery target discards it.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use tantivy::directory::Directory;
use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::indexer::{MergeCandidate, MergePolicy};
use tantivy::{Index, SegmentMeta, SegmentReader};
use tracing::{error, info};

use crate::commit::CommitPayload;
use crate::config::EngineConfig;
use crate::engine::{Engine, ParseDocument};
use crate::error::EngineError;

/// Prefix of the marker files of a corrupted store.
pub const MARKER_PREFIX: &str = "corrupted_";
/// Checksum of the schema and index settings of `meta.json`, written the first time a store
/// is opened (they never change afterwards).
pub const SCHEMA_CHECKSUM_FILE: &str = "shoal_schema.crc32c";

/// `index.shard.check_on_startup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckOnStartup {
    /// `false`: the footers (magic, format version, length) of every file and the logical
    /// checks of `meta.json`; no file body is read.
    False,
    /// `checksum`: also every byte of every file against its recorded checksum. Shoal's
    /// default (see docs/ARCHITECTURE.md "Store integrity").
    #[default]
    Checksum,
    /// `true`: `checksum`, then every `_source` block decoded.
    True,
}

impl CheckOnStartup {
    /// Parses the setting's value (`false`, `checksum`, `true`).
    pub fn parse(text: &str) -> Option<CheckOnStartup> {
        match text {
            "false" => Some(CheckOnStartup::False),
            "checksum" => Some(CheckOnStartup::Checksum),
            "true" => Some(CheckOnStartup::True),
            _ => None,
        }
    }

    fn reads_bodies(self) -> bool {
        self != CheckOnStartup::False
    }
}

/// Shared by an engine and its merge policy: the corruption found, and the segments whose
/// bytes were verified in this process.
#[derive(Debug, Clone)]
pub struct Integrity {
    index_dir: PathBuf,
    corruption: Arc<Mutex<Option<String>>>,
    verified: Arc<Mutex<HashSet<(SegmentId, Option<u64>)>>>,
}

impl Integrity {
    pub(crate) fn new(index_dir: PathBuf) -> Integrity {
        Integrity {
            index_dir,
            corruption: Arc::default(),
            verified: Arc::default(),
        }
    }

    /// The corruption found at runtime, if any.
    pub fn corruption(&self) -> Option<String> {
        self.corruption.lock().clone()
    }

    /// Records a corruption (the first one wins) and marks the store.
    pub(crate) fn record(&self, reason: &str) {
        let mut slot = self.corruption.lock();
        if slot.is_some() {
            return;
        }
        *slot = Some(reason.to_string());
        error!(dir = %self.index_dir.display(), reason, "store corrupted: the shard fails and will not reopen this store");
        if let Err(e) = write_marker(&self.index_dir, reason) {
            error!(error = %e, "could not write the corruption marker");
        }
    }

    fn is_verified(&self, meta: &SegmentMeta) -> bool {
        self.verified.lock().contains(&segment_key(meta))
    }

    fn set_verified(&self, meta: &SegmentMeta) {
        self.verified.lock().insert(segment_key(meta));
    }
}

fn segment_key(meta: &SegmentMeta) -> (SegmentId, Option<u64>) {
    (meta.id(), meta.delete_opstamp())
}

/// The reason recorded in the first corruption marker of `index_dir`, if any.
pub fn read_marker(index_dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(index_dir).ok()?;
    entries.flatten().find_map(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        name.starts_with(MARKER_PREFIX)
            .then(|| std::fs::read_to_string(entry.path()).unwrap_or_else(|_| name.clone()))
    })
}

/// Writes a `corrupted_<uuid>` marker holding `reason` (synced, so a crash keeps it).
pub fn write_marker(index_dir: &Path, reason: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(index_dir)?;
    let name = format!("{MARKER_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let path = index_dir.join(name);
    std::fs::write(&path, reason)?;
    std::fs::File::open(&path)?.sync_all()?;
    std::fs::File::open(index_dir)?.sync_all()
}

impl Engine {
    /// Opens (or creates) the shard at `config.path`, replaying the translog above the last
    /// commit, after checking the store per `config.check_on_startup`. A marked store, or one
    /// found damaged now (store or translog), fails with [`EngineError::Corrupted`] and is
    /// marked. `parse` rebuilds indexed fields from a source during replay.
    pub fn open(
        config: EngineConfig,
        primary_term: i64,
        parse: &ParseDocument<'_>,
    ) -> Result<Engine, EngineError> {
        let index_dir = config.index_dir();
        if let Some(reason) = read_marker(&index_dir) {
            return Err(EngineError::Corrupted(format!(
                "the store was marked corrupted: {reason}"
            )));
        }
        let integrity = Integrity::new(index_dir.clone());
        let opened = verify_on_open(&config, &integrity)
            .and_then(|()| Engine::open_store(config, primary_term, parse, integrity.clone()))
            .and_then(|engine| {
                // A new store records its schema checksum before anything can damage it.
                verify_schema(engine.index(), &index_dir)?;
                Ok(engine)
            });
        opened.map_err(|e| {
            let e = as_corruption(e);
            if let EngineError::Corrupted(reason) = &e {
                integrity.record(reason);
            }
            e
        })
    }

    /// Fails the engine for a corruption found while it runs: the store is marked, writes are
    /// refused, and the error returned is [`EngineError::Corrupted`].
    pub fn fail_corrupted(&self, reason: String) -> EngineError {
        self.integrity.record(&reason);
        self.fail_engine(reason.clone());
        EngineError::Corrupted(reason)
    }

    /// Turns a read error that says the store is damaged into a failed engine.
    pub(crate) fn check_read_error(&self, error: EngineError) -> EngineError {
        match as_corruption(error) {
            EngineError::Corrupted(reason) => self.fail_corrupted(reason),
            other => other,
        }
    }

    /// Verifies the segments a merge is about to read (each at most once per process and
    /// deletes generation); a damaged one fails the engine.
    pub(crate) fn verify_merge_inputs(&self, metas: &[SegmentMeta]) -> Result<(), EngineError> {
        verify_segments_once(self.index(), &self.integrity, metas)
            .map_err(|reason| self.fail_corrupted(reason))
    }

    /// A merge that failed: a panic or a corruption fails the engine as corrupted.
    pub(crate) fn merge_failed(&self, error: tantivy::TantivyError) -> EngineError {
        let text = error.to_string();
        if shoal_codec::is_corruption(&error) || text.contains("panicked") {
            return self.fail_corrupted(format!("merge failed: {text}"));
        }
        EngineError::Index(error)
    }

    /// Verifies every byte of the last commit's segments not yet verified in this process
    /// (before this copy's store is offered for an operation-based recovery, which keeps it).
    pub fn verify_store(&self) -> Result<(), EngineError> {
        let metas = self.index().searchable_segment_metas()?;
        self.verify_merge_inputs(&metas)
    }
}

/// Translog corruption and tantivy's data corruption are store corruption.
fn as_corruption(error: EngineError) -> EngineError {
    match error {
        EngineError::Translog(e @ shoal_translog::TranslogError::Corrupted { .. }) => {
            EngineError::Corrupted(format!("translog: {e}"))
        }
        EngineError::Index(e) if shoal_codec::is_corruption(&e) => {
            EngineError::Corrupted(match &e {
                // Without tantivy's "An IO error occurred" wrapping.
                tantivy::TantivyError::IoError(io) => io.to_string(),
                other => other.to_string(),
            })
        }
        other => other,
    }
}

/// The check of `index.shard.check_on_startup` on an existing store.
fn verify_on_open(config: &EngineConfig, integrity: &Integrity) -> Result<(), EngineError> {
    let dir = config.index_dir();
    if !dir.join("meta.json").exists() {
        return Ok(());
    }
    let started = Instant::now();
    // meta.json exists, so anything that keeps it from opening is damage to the commit.
    let index = Index::open_in_dir(&dir)
        .map_err(|e| EngineError::Corrupted(format!("cannot read the commit: {e}")))?;
    let metas = index.load_metas()?;
    if let Some(payload) = &metas.payload {
        if CommitPayload::from_json(payload).is_none() {
            return Err(EngineError::Corrupted(
                "meta.json: the commit payload does not match its checksum".into(),
            ));
        }
    }
    let extensions = &metas.persisted_custom_extensions;
    if !metas.segments.is_empty() && *extensions != [shoal_codec::SOURCE_EXTENSION] {
        return Err(EngineError::Corrupted(format!(
            "meta.json: the segments record the plugin extensions {extensions:?}, not [\"src\"]"
        )));
    }
    verify_schema(&index, &dir)?;
    let mode = config.check_on_startup;
    let mut bytes = 0;
    for meta in &metas.segments {
        bytes +=
            verify_segment(&index, meta, mode.reads_bodies()).map_err(EngineError::Corrupted)?;
        if mode.reads_bodies() {
            integrity.set_verified(meta);
        }
        check_segment_counts(&index, meta, mode == CheckOnStartup::True)
            .map_err(EngineError::Corrupted)?;
    }
    let took = started.elapsed();
    info!(dir = %dir.display(), mode = ?mode, segments = metas.segments.len(), bytes, took_ms = took.as_millis() as u64, "store checked on open");
    Ok(())
}

/// Compares the schema and index settings of `meta.json` with their checksum, written on
/// first open (they cannot change afterwards).
fn verify_schema(index: &Index, dir: &Path) -> Result<(), EngineError> {
    let text = serde_json::to_string(&(index.schema(), index.settings()))
        .map_err(|e| EngineError::Corrupted(format!("meta.json: {e}")))?;
    let crc = format!("{:08x}", crc32c::crc32c(text.as_bytes()));
    let path = dir.join(SCHEMA_CHECKSUM_FILE);
    match std::fs::read_to_string(&path) {
        Ok(recorded) if recorded.trim() == crc => Ok(()),
        Ok(recorded) => Err(EngineError::Corrupted(format!(
            "meta.json: the schema or index settings do not match their checksum (crc32c {crc}, recorded {})",
            recorded.trim()
        ))),
        Err(_) => {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, &crc)?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            Ok(())
        }
    }
}

/// The files a segment must have: every component, the deletes file only with deletes.
fn segment_files(index: &Index, meta: &SegmentMeta) -> Result<Vec<PathBuf>, String> {
    let mut metas = index
        .load_metas()
        .map_err(|e| format!("cannot read the commit: {e}"))?;
    metas.segments = vec![meta.clone()];
    let delete = meta.relative_path(SegmentComponent::Delete);
    let temp = meta.relative_path(SegmentComponent::TempStore);
    let mut files: Vec<PathBuf> = metas
        .list_segment_files()
        .into_iter()
        .filter(|path| (*path != delete || meta.has_deletes()) && *path != temp)
        .collect();
    files.sort();
    Ok(files)
}

/// Checks a segment's files: footers only, or (`full`) every byte against the footer's crc.
/// Returns the bytes checked.
fn verify_segment(index: &Index, meta: &SegmentMeta, full: bool) -> Result<u64, String> {
    let directory = index.directory();
    let mut bytes = 0;
    for path in segment_files(index, meta)? {
        let name = path.display();
        let file = directory
            .open_read(&path)
            .map_err(|e| format!("segment file [{name}] cannot be opened: {e}"))?;
        bytes += tantivy::HasLen::len(&file) as u64;
        if full
            && !directory
                .validate_checksum(&path)
                .map_err(|e| format!("segment file [{name}] cannot be read: {e}"))?
        {
            return Err(format!(
                "checksum failed for segment file [{name}]: its bytes do not match the crc recorded when it was written"
            ));
        }
    }
    Ok(bytes)
}

/// Compares the counts `meta.json` records for a segment with its files; `decode` also
/// reads every `_source` block (each block's checksum is checked on read).
fn check_segment_counts(index: &Index, meta: &SegmentMeta, decode: bool) -> Result<(), String> {
    let segment = index.segment(meta.clone());
    let reader =
        SegmentReader::open(&segment).map_err(|e| format!("segment [{}]: {e}", meta.id()))?;
    if reader.num_docs() != meta.num_docs() {
        return Err(format!(
            "segment [{}]: meta.json records {} live documents, its deletes file {}",
            meta.id().uuid_string(),
            meta.num_docs(),
            reader.num_docs()
        ));
    }
    let source = shoal_codec::SourceReader::open_with_cache(&reader, 0)
        .map_err(|e| format!("segment [{}] _source: {e}", meta.id().uuid_string()))?;
    if source.num_docs() != meta.max_doc() {
        return Err(format!(
            "segment [{}]: meta.json records {} documents, its _source file {}",
            meta.id().uuid_string(),
            meta.max_doc(),
            source.num_docs()
        ));
    }
    if decode {
        for doc in 0..source.num_docs() {
            source
                .with_source(doc, |_| ())
                .map_err(|e| format!("segment [{}]: {e}", meta.id().uuid_string()))?;
        }
    }
    Ok(())
}

/// Full verification of the segments not verified yet in this process.
fn verify_segments_once(
    index: &Index,
    integrity: &Integrity,
    metas: &[SegmentMeta],
) -> Result<(), String> {
    if let Some(reason) = integrity.corruption() {
        return Err(reason);
    }
    for meta in metas {
        if integrity.is_verified(meta) {
            continue;
        }
        verify_segment(index, meta, true)?;
        integrity.set_verified(meta);
    }
    Ok(())
}

/// Checks a merge's input segments before tantivy reads them (Lucene checks the integrity of
/// every merge input): tantivy's merge of a damaged `.term` or `.store` panics or writes the
/// damage into the merged segment. A damaged input cancels every merge and fails the engine.
pub(crate) struct VerifyingMergePolicy {
    inner: Box<dyn MergePolicy>,
    index: Index,
    integrity: Integrity,
}

impl VerifyingMergePolicy {
    pub(crate) fn new(
        inner: Box<dyn MergePolicy>,
        index: Index,
        integrity: Integrity,
    ) -> VerifyingMergePolicy {
        VerifyingMergePolicy {
            inner,
            index,
            integrity,
        }
    }
}

impl std::fmt::Debug for VerifyingMergePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingMergePolicy")
            .field("inner", &self.inner)
            .finish()
    }
}

impl MergePolicy for VerifyingMergePolicy {
    fn compute_merge_candidates(&self, segments: &[SegmentMeta]) -> Vec<MergeCandidate> {
        if self.integrity.corruption().is_some() {
            return Vec::new();
        }
        let candidates = self.inner.compute_merge_candidates(segments);
        for candidate in &candidates {
            let inputs: Vec<SegmentMeta> = segments
                .iter()
                .filter(|meta| candidate.0.contains(&meta.id()))
                .cloned()
                .collect();
            if let Err(reason) = verify_segments_once(&self.index, &self.integrity, &inputs) {
                self.integrity.record(&reason);
                return Vec::new();
            }
        }
        candidates
    }
}

/// Why [`checksum_file`] refused a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileCheckError {
    /// The file could not be read (missing, I/O error): says nothing about its bytes.
    Unreadable(String),
    /// Its bytes do not match the checksum recorded when it was written.
    Corrupted(String),
}

impl std::fmt::Display for FileCheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileCheckError::Unreadable(reason) | FileCheckError::Corrupted(reason) => {
                f.write_str(reason)
            }
        }
    }
}

/// A file's length and crc32c (for recovery's file lists), after checking the crc tantivy's
/// footer recorded for its body. `meta.json` has no footer: its payload checksum is checked.
pub fn checksum_file(path: &Path) -> Result<(u64, u32), FileCheckError> {
    let name = path.display();
    let read_error =
        |e: std::io::Error| FileCheckError::Unreadable(format!("cannot read [{name}]: {e}"));
    let corrupted = |e: String| FileCheckError::Corrupted(format!("[{name}]: {e}"));
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let length = file.metadata().map_err(read_error)?.len();
    let is_commit = path.file_name().is_some_and(|n| n == "meta.json");
    let footer = if is_commit {
        None
    } else {
        Some(read_footer(&mut file, length).map_err(corrupted)?)
    };
    file.seek(SeekFrom::Start(0)).map_err(read_error)?;
    let body_len = footer.map_or(length, |(body_len, _)| body_len);
    let (mut crc32c, mut body_crc) = (0u32, crc32fast::Hasher::new());
    let (mut offset, mut buffer) = (0u64, vec![0u8; 256 * 1024]);
    let mut text = Vec::new();
    loop {
        let n = file.read(&mut buffer).map_err(read_error)?;
        if n == 0 {
            break;
        }
        let chunk = &buffer[..n];
        crc32c = crc32c::crc32c_append(crc32c, chunk);
        let in_body = body_len.saturating_sub(offset).min(n as u64) as usize;
        body_crc.update(&chunk[..in_body]);
        if is_commit {
            text.extend_from_slice(chunk);
        }
        offset += n as u64;
    }
    if offset != length {
        return Err(FileCheckError::Unreadable(format!(
            "[{name}] changed while it was read"
        )));
    }
    if let Some((_, recorded)) = footer {
        let actual = body_crc.finalize();
        if actual != recorded {
            return Err(FileCheckError::Corrupted(format!(
                "checksum failed for [{name}]: crc32 {actual:08x}, recorded {recorded:08x}"
            )));
        }
    }
    if is_commit {
        check_commit_text(&text).map_err(corrupted)?;
    }
    Ok((length, crc32c))
}

/// (body length, recorded crc32) from tantivy's footer: `[json][json len u32][magic u32]`.
fn read_footer(file: &mut std::fs::File, length: u64) -> Result<(u64, u32), String> {
    const MAGIC: u32 = 1337;
    let mut trailer = [0u8; 8];
    if length < 8 {
        return Err("shorter than its footer".into());
    }
    file.seek(SeekFrom::Start(length - 8))
        .and_then(|_| file.read_exact(&mut trailer))
        .map_err(|e| e.to_string())?;
    let json_len = u32::from_le_bytes(trailer[..4].try_into().unwrap()) as u64;
    if u32::from_le_bytes(trailer[4..].try_into().unwrap()) != MAGIC || json_len + 8 > length {
        return Err("footer damaged".into());
    }
    let mut json = vec![0u8; json_len as usize];
    file.seek(SeekFrom::Start(length - 8 - json_len))
        .and_then(|_| file.read_exact(&mut json))
        .map_err(|e| e.to_string())?;
    let footer: serde_json::Value =
        serde_json::from_slice(&json).map_err(|_| "footer damaged".to_string())?;
    let crc = footer
        .get("crc")
        .and_then(serde_json::Value::as_u64)
        .and_then(|crc| u32::try_from(crc).ok())
        .ok_or_else(|| "footer damaged".to_string())?;
    Ok((length - 8 - json_len, crc))
}

/// A commit file parses and its payload matches its checksum.
fn check_commit_text(text: &[u8]) -> Result<(), String> {
    let meta: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| format!("unreadable commit: {e}"))?;
    match meta.get("payload").and_then(serde_json::Value::as_str) {
        Some(payload) if CommitPayload::from_json(payload).is_none() => {
            Err("the commit payload does not match its checksum".into())
        }
        _ => Ok(()),
    }
}
