//! The store side of file-based peer recovery.
//!
//! Source: [`snapshot_commit`] flushes and hard-links the files of the last commit into a
//! directory of their own, so merges on the primary cannot delete them while a target copies
//! them. Target: the copied files become a shard with [`bind_recovered_store`], which gives the
//! commit a fresh, empty translog of this copy's own (the source's translog stays with the
//! source; operations above the commit arrive by replay).

use std::path::{Path, PathBuf};

use shoal_translog::{Translog, TranslogConfig};

use crate::commit::CommitPayload;
use crate::config::EngineConfig;
use crate::engine::{open_or_create_index, Engine, MergeHook};
use crate::error::EngineError;

/// A commit pinned for a recovery: its files (name, length) and what it contains.
#[derive(Debug, Clone)]
pub struct CommitSnapshot {
    pub dir: PathBuf,
    pub files: Vec<(String, u64)>,
    pub payload: CommitPayload,
}

impl CommitSnapshot {
    /// Removes the pinned links (the source's own files are untouched).
    pub fn release(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Flushes `engine` and pins its commit's files under `dir` (hard links: no copy, and the
/// engine may merge and delete its own names meanwhile).
pub fn snapshot_commit(engine: &Engine, dir: &Path) -> Result<CommitSnapshot, EngineError> {
    let mut last_error = None;
    // A merge can commit between listing and linking; listing again sees the new commit.
    for _ in 0..5 {
        engine.flush(true)?;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let files = engine.commit_files()?;
        let index_dir = engine.config().index_dir();
        let linked = files.iter().try_for_each(|(name, _)| {
            let target = dir.join(name);
            if name == "meta.json" {
                // meta.json is rewritten in place by every commit: copy, don't link.
                std::fs::copy(index_dir.join(name), &target).map(|_| ())
            } else {
                std::fs::hard_link(index_dir.join(name), &target)
            }
        });
        match linked {
            Ok(()) => {
                let payload = read_payload(dir)?;
                let files = files
                    .into_iter()
                    .map(|(name, len)| {
                        let len = std::fs::metadata(dir.join(&name)).map_or(len, |m| m.len());
                        (name, len)
                    })
                    .collect();
                return Ok(CommitSnapshot {
                    dir: dir.to_path_buf(),
                    files,
                    payload,
                });
            }
            Err(e) => last_error = Some(e),
        }
    }
    Err(EngineError::Io(last_error.expect("an attempt failed")))
}

/// The commit payload recorded in a `meta.json` in `dir`.
pub fn read_payload(dir: &Path) -> Result<CommitPayload, EngineError> {
    let text = std::fs::read_to_string(dir.join("meta.json"))?;
    CommitPayload::from_meta_json(&text)
        .ok_or_else(|| EngineError::Corrupted("the commit has no Shoal payload".into()))
}

/// Turns copied commit files in `config.index_dir()` into a shard this copy can open: a new
/// empty translog, and a commit that names it. Returns the commit's payload.
pub fn bind_recovered_store(
    config: &EngineConfig,
    primary_term: i64,
) -> Result<CommitPayload, EngineError> {
    let translog_dir = config.translog_dir();
    let _ = std::fs::remove_dir_all(&translog_dir);
    let translog = Translog::create(
        &translog_dir,
        TranslogConfig {
            durability: config.durability,
            primary_term,
            ..TranslogConfig::default()
        },
    )?;
    let mut payload = read_payload(&config.index_dir())?;
    payload.translog_uuid = translog.uuid().to_string();
    payload.translog_generation = translog.current_generation();
    // The new translog is empty: the commit's operations are in the commit only.
    payload.history_complete_from = payload.max_seq_no + 1;
    drop(translog);
    let hook = MergeHook::new(config.index_dir());
    // The commit below adds no segment: nothing is numbered.
    let numbers = shoal_codec::SegmentNumbers::default();
    let (index, _) = open_or_create_index(
        &config.index_dir(),
        config.codec,
        &hook,
        &numbers,
        &Default::default(),
    )?;
    let mut writer: tantivy::IndexWriter = index.writer_with_num_threads(1, 15_000_000)?;
    let mut commit = writer.prepare_commit()?;
    commit.set_payload(&payload.to_json());
    commit.commit()?;
    writer.wait_merging_threads()?;
    Ok(payload)
}
