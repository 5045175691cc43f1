//! The receiving side of a transfer: copies the listed files a directory lacks from a
//! [`FileSource`], each under a temporary name until its bytes match the listed crc32c.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use shoal_engine::store::{checksum_file, FileCheckError};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;
use tracing::debug;

use super::{corrupted, ByteStream, FileMeta, FileSource};
use crate::error::{ApiError, ApiResult};
use crate::recovery::throttle::RateLimiter;

/// What a file being written is called until it is complete (`<name>.recovering`). A
/// transfer cut short by a crash leaves it behind; the next transfer into the directory
/// removes what its list does not name.
pub const PARTIAL_EXTENSION: &str = "recovering";

/// A stream that breaks mid-file (a transient transport failure) is reopened at the offset
/// reached, this many times per file, before the transfer fails.
const RESUMES_PER_FILE: u32 = 3;

/// What a local file with a listed name but other bytes means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Differing {
    /// A leftover of an older copy (peer recovery rebuilds the whole store; deletion files of
    /// one segment differ between copies): copy the listed one over it.
    Replace,
    /// Damage: the files of a live store never change under one name (segment replication),
    /// so the transfer fails rather than serve either version.
    Fail,
}

/// What a transfer has done so far, reported as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// A local file already matched the listed one.
    Reused(&'a FileMeta),
    /// `bytes` more of `file` were written, after waiting `throttled` for the rate limit.
    Received {
        file: &'a FileMeta,
        bytes: u64,
        throttled: std::time::Duration,
    },
    /// `file` is complete under its name.
    Copied(&'a FileMeta),
}

/// The caller's side of a running transfer.
pub trait TransferControl {
    /// Asked before every chunk: an error stops the transfer with it (the copy was cancelled,
    /// moved, deleted).
    fn check(&self) -> ApiResult<()>;
    /// The shared rate as configured now (`None`: unthrottled); read at every chunk so a
    /// change applies at once.
    fn max_bytes_per_sec(&self) -> Option<u64>;
    fn progress(&self, event: Progress<'_>);
    /// Just before a chunk is taken from the source (failpoints).
    fn before_chunk(&self) {}
    /// Just after a chunk was written (failpoints).
    fn after_chunk(&self) {}
    /// The length and crc32c the target already verified for a file of this name, if it
    /// keeps them: such a file is not read again to compare it.
    fn known_checksum(&self, _name: &str) -> Option<(u64, u32)> {
        None
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TransferStats {
    pub files_copied: usize,
    pub bytes_copied: u64,
    pub files_reused: usize,
    pub bytes_reused: u64,
    /// Spent comparing the listed files with those already here.
    pub diff: std::time::Duration,
}

/// One transfer into `dir`. Runs on a blocking thread; `runtime` drives the source's streams.
pub struct FileTransfer<'a> {
    pub dir: &'a Path,
    pub source: &'a dyn FileSource,
    pub runtime: &'a Handle,
    pub limiter: &'a RateLimiter,
    pub control: &'a dyn TransferControl,
    pub differing: Differing,
    /// Files open at once: the one being written and the next ones, whose first chunks are
    /// already on their way (hides the round trip of opening each file). At least 1.
    pub files_in_flight: usize,
}

impl FileTransfer<'_> {
    /// Copies the files of `files` the directory lacks, in the listed order (a commit point
    /// listed last is written last), and fsyncs the directory.
    pub fn run(&self, files: &[FileMeta]) -> ApiResult<TransferStats> {
        let mut stats = TransferStats::default();
        let diff_started = std::time::Instant::now();
        let mut missing = Vec::new();
        for file in files {
            if self.already_here(file)? {
                self.control.progress(Progress::Reused(file));
                stats.files_reused += 1;
                stats.bytes_reused += file.length;
            } else {
                missing.push(file);
            }
        }
        stats.diff = diff_started.elapsed();
        let mut completing = Completing::new();
        let copied = self.copy_missing(&missing, &mut completing, &mut stats);
        // Also after a failure: no rename of this transfer may land after it returned.
        let completed = self.finish_completions(&mut completing, &mut stats);
        copied.and(completed)?;
        sync_dir(self.dir)?;
        Ok(stats)
    }

    /// Copies `missing` in order, `files_in_flight` opening at once; each verified file is
    /// completed in the background, and the last one (a commit point) is written only once
    /// every other is durable under its name.
    fn copy_missing<'f>(
        &self,
        missing: &[&'f FileMeta],
        completing: &mut Completing<'f>,
        stats: &mut TransferStats,
    ) -> ApiResult<()> {
        let last = missing.last().copied();
        let mut queue = missing.iter().copied();
        let mut opening: VecDeque<(&FileMeta, Opening)> = VecDeque::new();
        loop {
            while opening.len() < self.files_in_flight.max(1) {
                let Some(file) = queue.next() else { break };
                opening.push_back((file, self.open(file, 0)));
            }
            let Some((file, opened)) = opening.pop_front() else {
                return Ok(());
            };
            if Some(file) == last {
                self.finish_completions(completing, stats)?;
            }
            let partial = self.copy_file(file, opened)?;
            let path = self.dir.join(&file.name);
            let completion = self.runtime.spawn_blocking(move || partial.complete(&path));
            completing.push((file, completion));
        }
    }

    /// Waits for the files whose fsync and rename run in the background (the next file copies
    /// meanwhile: a round's fsyncs overlap instead of queueing one after the other).
    fn finish_completions<'f>(
        &self,
        completing: &mut Completing<'f>,
        stats: &mut TransferStats,
    ) -> ApiResult<()> {
        let mut outcome = Ok(());
        // Every one is waited for, also after one failed.
        for (file, completion) in completing.drain(..) {
            let completed = self.runtime.block_on(completion).unwrap_or_else(|e| {
                Err(ApiError::internal(format!("completing a file failed: {e}")))
            });
            match completed {
                Ok(()) => {
                    self.control.progress(Progress::Copied(file));
                    stats.files_copied += 1;
                    stats.bytes_copied += file.length;
                }
                Err(e) => outcome = outcome.and(Err(e)),
            }
        }
        outcome
    }

    /// Whether the directory holds `file` already: same name, length and crc32c, and its
    /// bytes pass the check recorded when it was written.
    fn already_here(&self, file: &FileMeta) -> ApiResult<bool> {
        let path = self.dir.join(&file.name);
        let Ok(metadata) = std::fs::metadata(&path) else {
            return Ok(false);
        };
        let listed = (file.length, file.crc32c);
        if metadata.len() == file.length && self.control.known_checksum(&file.name) == Some(listed)
        {
            return Ok(true);
        }
        let differs = if metadata.len() != file.length {
            format!("length {}", metadata.len())
        } else {
            match checksum_file(&path) {
                Ok((_, crc32c)) if crc32c == file.crc32c => return Ok(true),
                Ok((_, crc32c)) => format!("checksum {crc32c:08x}"),
                Err(FileCheckError::Corrupted(reason) | FileCheckError::Unreadable(reason)) => {
                    reason
                }
            }
        };
        match self.differing {
            Differing::Replace => {
                debug!(file = %file.name, differs, "replacing a local file that differs from the source's");
                Ok(false)
            }
            Differing::Fail => Err(corrupted(format!(
                "local file [{}] differs from the one of {} (length {}, checksum {:08x}): {differs}",
                file.name,
                self.source.describe(),
                file.length,
                file.crc32c
            ))),
        }
    }

    /// Starts opening `file` at `offset` on the runtime (it proceeds while earlier files copy).
    fn open(&self, file: &FileMeta, offset: u64) -> Opening {
        Opening(self.runtime.spawn(self.source.open(file, offset)))
    }

    fn wait_open(&self, opening: Opening) -> ApiResult<ByteStream> {
        self.runtime
            .block_on(opening.wait())
            .unwrap_or_else(|e| Err(ApiError::internal(format!("opening a file failed: {e}"))))
    }

    /// Writes `file` under its temporary name chunk by chunk, checking the running crc32c
    /// against the listed one; the caller completes it (fsync, then its name).
    fn copy_file(&self, file: &FileMeta, opened: Opening) -> ApiResult<PartialFile> {
        let mut partial = PartialFile::create(self.dir, &file.name)?;
        let mut stream = self.wait_open(opened)?;
        let (mut written, mut crc, mut resumes) = (0u64, 0u32, 0);
        while written < file.length {
            // Between every two chunks: a copy cancelled meanwhile stops now, not after the
            // whole store (its partial file is removed on the way out).
            self.control.check()?;
            self.control.before_chunk();
            let chunk = match self.runtime.block_on(stream.next()) {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) if e.kind.is_retryable() && resumes < RESUMES_PER_FILE => {
                    resumes += 1;
                    debug!(file = %file.name, offset = written, error = %e, "file stream broke, resuming it");
                    stream = self.wait_open(self.open(file, written))?;
                    continue;
                }
                Some(Err(e)) => return Err(e),
                None => return Err(self.length_mismatch(file, written)),
            };
            let bytes = chunk.len() as u64;
            if written + bytes > file.length {
                return Err(self.length_mismatch(file, written + bytes));
            }
            let throttled = self.limiter.pace(bytes, self.control.max_bytes_per_sec());
            partial.write(&chunk)?;
            crc = crc32c::crc32c_append(crc, &chunk);
            written += bytes;
            self.control.progress(Progress::Received {
                file,
                bytes,
                throttled,
            });
            self.control.after_chunk();
        }
        if crc != file.crc32c {
            return Err(corrupted(format!(
                "file [{}] received from {} is corrupted: checksum {crc:08x}, expected {:08x}",
                file.name,
                self.source.describe(),
                file.crc32c
            )));
        }
        Ok(partial)
    }

    fn length_mismatch(&self, file: &FileMeta, received: u64) -> ApiError {
        corrupted(format!(
            "file [{}] from {} has {} bytes, received {received}",
            file.name,
            self.source.describe(),
            file.length
        ))
    }
}

/// A file being opened on the runtime; aborted if the transfer stops before using it.
struct Opening(JoinHandle<ApiResult<ByteStream>>);

impl Opening {
    async fn wait(mut self) -> Result<ApiResult<ByteStream>, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Verified files being made durable and given their names, in the order they were copied.
type Completing<'f> = Vec<(&'f FileMeta, JoinHandle<ApiResult<()>>)>;

/// The temporary file a transferred file is written to; removed unless completed.
struct PartialFile {
    path: PathBuf,
    file: Option<File>,
}

impl PartialFile {
    fn create(dir: &Path, name: &str) -> ApiResult<PartialFile> {
        let path = dir.join(format!("{name}.{PARTIAL_EXTENSION}"));
        let file = File::create(&path)?;
        Ok(PartialFile {
            path,
            file: Some(file),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> ApiResult<()> {
        let file = self.file.as_mut().expect("an open partial file");
        file.write_all(bytes)?;
        Ok(())
    }

    /// Makes the bytes durable, then gives them their name (an existing file of that name,
    /// the older copy, is replaced in one step).
    fn complete(mut self, path: &Path) -> ApiResult<()> {
        let file = self.file.take().expect("an open partial file");
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.path, path)?;
        self.path = PathBuf::new();
        Ok(())
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        self.file.take();
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Makes the renames of a directory durable.
fn sync_dir(dir: &Path) -> ApiResult<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}
