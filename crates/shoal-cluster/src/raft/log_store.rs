//! A small file-based Raft log: one append-only file of checksummed records, the vote and the
//! committed log id in their own atomically replaced files. The cluster-state log is small
//! (one entry per metadata change), so the whole log is also kept in memory.
//!
//! Record: `[u32 len][u32 crc32c][json LogRecord]`. Truncations and purges are records too, so
//! replaying the file rebuilds the log; a torn or corrupt tail (crash mid-append) is cut off.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::reserve::{is_disk_full, DiskReserve};
use super::types::{Entry, LogId, TypeConfig, Vote};

/// Rewrite the log file once this many records are dead (truncated or purged).
const COMPACT_AFTER_DEAD_RECORDS: usize = 2_000;

#[derive(Serialize, Deserialize)]
enum LogRecord {
    Append(Entry),
    TruncateAfter(Option<LogId>),
    Purge(LogId),
}

#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    dir: PathBuf,
    file: File,
    /// Where the last whole record ends: a failed append is cut back to here.
    len: u64,
    log: BTreeMap<u64, Entry>,
    last_purged: Option<LogId>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    dead_records: usize,
    reserve: Arc<DiskReserve>,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`, replaying what a previous run wrote.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("raft.log");
        let (log, last_purged, valid_len, dead_records) = replay(&path)?;
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        if file.metadata()?.len() > valid_len {
            tracing::warn!(path = %path.display(), valid_len, "cutting a torn tail off the raft log");
            file.set_len(valid_len)?;
            file.sync_all()?;
        }
        let inner = Inner {
            vote: read_json(&dir.join("raft-vote.json"))?,
            committed: read_json(&dir.join("raft-committed.json"))?,
            dir: dir.to_path_buf(),
            file,
            log,
            last_purged,
            dead_records,
            len: valid_len,
            reserve: Arc::new(DiskReserve::open(dir)),
        };
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// The disk reserve of this Raft directory (the state machine's snapshots use it too).
    pub fn reserve(&self) -> Arc<DiskReserve> {
        self.inner.lock().reserve.clone()
    }

    /// Runs a write, with the disk reserve, waiting while the disk is full: openraft stops a
    /// member whose storage fails, so a write without space waits (its proposal times out)
    /// instead, and goes through once space returns.
    async fn write_waiting_for_space<T>(
        &self,
        what: &str,
        mut write: impl FnMut(&mut Inner) -> io::Result<T>,
    ) -> io::Result<T> {
        let mut warned = false;
        loop {
            let result = {
                let mut inner = self.inner.lock();
                let reserve = inner.reserve.clone();
                reserve.write(|| write(&mut inner))
            };
            match result {
                Err(e) if is_disk_full(&e) => {
                    if !warned {
                        tracing::warn!(what, "disk full: the raft write waits for space");
                        warned = true;
                    }
                    tokio::time::sleep(DiskReserve::retry_delay()).await;
                }
                other => return other,
            }
        }
    }

    /// The last committed log index this node saved (what it replays at start).
    pub fn committed_index(&self) -> Option<u64> {
        self.inner.lock().committed.as_ref().map(|id| id.index())
    }

    /// Whether this node has ever been part of a Raft group (it must not bootstrap again).
    pub fn has_state(&self) -> bool {
        let inner = self.inner.lock();
        inner.vote.is_some() || !inner.log.is_empty() || inner.last_purged.is_some()
    }
}

type Replayed = (BTreeMap<u64, Entry>, Option<LogId>, u64, usize);

fn replay(path: &Path) -> io::Result<Replayed> {
    let mut log = BTreeMap::new();
    let mut last_purged = None;
    let mut dead = 0usize;
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut offset = 0usize;
    while let Some((record, len)) = decode_record(&bytes[offset..]) {
        offset += len;
        match record {
            LogRecord::Append(entry) => {
                if log.insert(entry.index(), entry).is_some() {
                    dead += 1;
                }
            }
            LogRecord::TruncateAfter(after) => {
                let start = after.map(|id| id.index() + 1).unwrap_or(0);
                dead += log.split_off(&start).len() + 1;
            }
            LogRecord::Purge(upto) => {
                let keep = log.split_off(&(upto.index() + 1));
                dead += log.len() + 1;
                log = keep;
                last_purged = Some(upto);
            }
        }
    }
    Ok((log, last_purged, offset as u64, dead))
}

fn decode_record(bytes: &[u8]) -> Option<(LogRecord, usize)> {
    if bytes.len() < 8 {
        return None;
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let payload = bytes.get(8..8 + len)?;
    if crc32c::crc32c(payload) != crc {
        return None;
    }
    Some((serde_json::from_slice(payload).ok()?, 8 + len))
}

fn encode_record(record: &LogRecord, out: &mut Vec<u8>) -> io::Result<()> {
    let payload = serde_json::to_vec(record).map_err(io::Error::other)?;
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(io::Error::other)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a small file so that a crash leaves the old or the new content.
pub(crate) fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(&serde_json::to_vec(value).map_err(io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

impl Inner {
    /// Appends records; a failed append is cut off again, so it can be retried without
    /// leaving a torn record that would hide every later one from replay.
    fn write_records(&mut self, records: &[LogRecord]) -> io::Result<()> {
        let mut buf = Vec::new();
        for record in records {
            encode_record(record, &mut buf)?;
        }
        let written = self
            .file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len += buf.len() as u64;
                Ok(())
            }
            // A torn record that cannot be cut off would hide every later record from
            // replay: that is not an error to wait out (it stops the member instead).
            Err(e) => match self.file.set_len(self.len) {
                Ok(()) => Err(e),
                Err(cut) => Err(io::Error::other(format!(
                    "raft log append failed ({e}) and its torn record could not be cut off ({cut})"
                ))),
            },
        }
    }

    /// Rewrites the file with only the live entries once enough records are dead.
    fn maybe_compact(&mut self) -> io::Result<()> {
        if self.dead_records < COMPACT_AFTER_DEAD_RECORDS {
            return Ok(());
        }
        let path = self.dir.join("raft.log");
        let tmp = self.dir.join("raft.log.tmp");
        let mut buf = Vec::new();
        if let Some(purged) = &self.last_purged {
            encode_record(&LogRecord::Purge(purged.clone()), &mut buf)?;
        }
        for entry in self.log.values() {
            encode_record(&LogRecord::Append(entry.clone()), &mut buf)?;
        }
        let mut file = File::create(&tmp)?;
        file.write_all(&buf)?;
        file.sync_all()?;
        // The handle follows the file through the rename: once the rename is done, appends
        // can only go to the new log, whatever fails after it.
        let appender = OpenOptions::new().append(true).open(&tmp)?;
        std::fs::rename(&tmp, &path)?;
        self.file = appender;
        self.len = buf.len() as u64;
        self.dead_records = 0;
        File::open(&self.dir)?.sync_all()
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let inner = self.inner.lock();
        Ok(inner.log.range(range).map(|(_, e)| e.clone()).collect())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        Ok(self.inner.lock().vote.clone())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let inner = self.inner.lock();
        let last = inner
            .log
            .values()
            .next_back()
            .map(|e| e.log_id())
            .or_else(|| inner.last_purged.clone());
        Ok(LogState {
            last_purged_log_id: inner.last_purged.clone(),
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.write_waiting_for_space("save vote", |inner| {
            write_json_atomically(&inner.dir.join("raft-vote.json"), vote)?;
            inner.vote = Some(vote.clone());
            Ok(())
        })
        .await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        self.write_waiting_for_space("save committed", |inner| {
            write_json_atomically(&inner.dir.join("raft-committed.json"), &committed)?;
            inner.committed = committed.clone();
            Ok(())
        })
        .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.inner.lock().committed.clone())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let records: Vec<LogRecord> = entries.iter().cloned().map(LogRecord::Append).collect();
        let written = self
            .write_waiting_for_space("append", |inner| inner.write_records(&records))
            .await;
        if written.is_ok() {
            let mut inner = self.inner.lock();
            for entry in entries {
                inner.log.insert(entry.index(), entry);
            }
        }
        let result = written
            .as_ref()
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), e.to_string()));
        callback.io_completed(result);
        written
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let record = [LogRecord::TruncateAfter(last_log_id.clone())];
        self.write_waiting_for_space("truncate", |inner| inner.write_records(&record))
            .await?;
        let mut inner = self.inner.lock();
        let start = last_log_id.map(|id| id.index() + 1).unwrap_or(0);
        let removed = inner.log.split_off(&start).len();
        inner.dead_records += removed + 1;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let record = [LogRecord::Purge(log_id.clone())];
        self.write_waiting_for_space("purge", |inner| inner.write_records(&record))
            .await?;
        let mut inner = self.inner.lock();
        let keep = inner.log.split_off(&(log_id.index() + 1));
        inner.dead_records += inner.log.len() + 1;
        inner.log = keep;
        inner.last_purged = Some(log_id);
        // The purge record is durable: a rewrite that fails (a full disk) only delays it to
        // the next purge, it must not stop the member.
        if let Err(e) = inner.maybe_compact() {
            let _ = std::fs::remove_file(inner.dir.join("raft.log.tmp"));
            tracing::warn!(error = %e, "raft log compaction failed; retried at the next purge");
        }
        Ok(())
    }
}
