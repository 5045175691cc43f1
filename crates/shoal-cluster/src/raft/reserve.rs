//! Disk space held back for the cluster state, so a full data disk does not stop Raft.
//!
//! openraft treats a storage error as fatal: the member stops, and a cluster manager on a full
//! disk would stop being one for good (issue 13). Two defences: a reserve file allocated while
//! there is room is deleted the moment a Raft write meets a full disk, which lets the cluster
//! keep deciding (failing shards, lifting blocks) while the data disk is full; when even that
//! is used up, a write waits and retries instead of failing, so the member survives and its
//! proposals time out until space returns. The reserve is allocated again once it fits.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tracing::{info, warn};

/// Enough for thousands of cluster-state log records and a few snapshots.
const RESERVE_BYTES: u64 = 8 * 1024 * 1024;
/// Free space the reserve leaves to everything else when it is allocated (again): taking the
/// last megabytes of a disk that is just coming back would fail shards' writes. A tenth of
/// the disk, at most this.
const REPLENISH_MARGIN: u64 = 64 * 1024 * 1024;
/// How often a missing reserve is tried again.
const REPLENISH_EVERY: Duration = Duration::from_secs(10);
/// How long a write that found no space waits before trying again.
const RETRY_EVERY: Duration = Duration::from_millis(500);

pub struct DiskReserve {
    path: PathBuf,
    bytes: u64,
    last_replenish: Mutex<Option<Instant>>,
}

impl DiskReserve {
    /// The reserve of a Raft directory; allocates it when there is room.
    pub fn open(dir: &Path) -> DiskReserve {
        let reserve = DiskReserve {
            path: dir.join("raft-reserve"),
            bytes: RESERVE_BYTES,
            last_replenish: Mutex::new(None),
        };
        reserve.replenish();
        reserve
    }

    /// Allocates the reserve if it is missing (at most every few seconds). Best effort: a disk
    /// that has no room for it yet simply has no reserve.
    pub fn replenish(&self) {
        if self.is_full_size() {
            return;
        }
        {
            let mut last = self.last_replenish.lock();
            if last.is_some_and(|at| at.elapsed() < REPLENISH_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let (total, available) = filesystem_space(dir).unwrap_or((u64::MAX, u64::MAX));
        if available < self.bytes + REPLENISH_MARGIN.min(total / 10) {
            return;
        }
        match allocate(&self.path, self.bytes) {
            Ok(()) => {
                info!(path = %self.path.display(), bytes = self.bytes, "raft disk reserve allocated")
            }
            Err(e) => {
                let _ = std::fs::remove_file(&self.path);
                if !is_disk_full(&e) {
                    warn!(path = %self.path.display(), error = %e, "could not allocate the raft disk reserve");
                }
            }
        }
    }

    fn is_full_size(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= self.bytes)
    }

    /// Deletes the reserve; whether there was one to free.
    fn release(&self) -> bool {
        // Not allocated again at once: the disk is full, give it time to drain.
        *self.last_replenish.lock() = Some(Instant::now());
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                warn!(path = %self.path.display(), "disk full: released the raft disk reserve");
                true
            }
            Err(_) => false,
        }
    }

    /// Runs `write`; on a full disk frees the reserve and runs it once more. `write` must be
    /// safe to repeat (it undoes its own partial effects).
    pub fn write<T>(&self, mut write: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        match write() {
            Err(e) if is_disk_full(&e) && self.release() => write(),
            Ok(value) => {
                self.replenish();
                Ok(value)
            }
            other => other,
        }
    }

    /// How long to wait before a write that found no space tries again.
    pub fn retry_delay() -> Duration {
        RETRY_EVERY
    }
}

pub fn is_disk_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(28) | Some(122))
}

/// Total and available bytes of the filesystem holding `path` (`statvfs`).
#[cfg(unix)]
pub fn filesystem_space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs only writes into the zeroed struct we own; the path is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let block = if stat.f_frsize > 0 {
        stat.f_frsize
    } else {
        stat.f_bsize
    } as u64;
    Some((
        (stat.f_blocks as u64).saturating_mul(block),
        (stat.f_bavail as u64).saturating_mul(block),
    ))
}

#[cfg(not(unix))]
pub fn filesystem_space(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// Writes real blocks: not sparse, and not zeros, which a compressing filesystem (btrfs,
/// ZFS) would store in next to nothing.
fn allocate(path: &Path, bytes: u64) -> io::Result<()> {
    let mut file = File::create(path)?;
    let chunk = incompressible_chunk(1024 * 1024);
    let mut written = 0;
    while written < bytes {
        let n = chunk.len().min((bytes - written) as usize);
        file.write_all(&chunk[..n])?;
        written += n as u64;
    }
    file.sync_all()
}

/// Bytes from a xorshift generator: cheap, and no compressor finds anything to save.
fn incompressible_chunk(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_write_releases_the_reserve_and_is_retried_once() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = DiskReserve::open(dir.path());
        assert!(reserve.is_full_size());
        let mut attempts = 0;
        let out = reserve.write(|| {
            attempts += 1;
            if attempts == 1 {
                Err(io::Error::from_raw_os_error(28))
            } else {
                Ok(attempts)
            }
        });
        assert_eq!(out.unwrap(), 2);
        assert!(
            !reserve.path.exists(),
            "the reserve was released for the retry"
        );
    }

    #[test]
    fn without_a_reserve_a_full_disk_error_is_returned() {
        let dir = tempfile::tempdir().unwrap();
        let reserve = DiskReserve::open(dir.path());
        std::fs::remove_file(&reserve.path).unwrap();
        let out: io::Result<()> = reserve.write(|| Err(io::Error::from_raw_os_error(28)));
        assert!(out.is_err_and(|e| is_disk_full(&e)));
    }
}
