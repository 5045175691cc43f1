//! Translog directories whose translog failed a write or an fsync in this process.
//!
//! After a failed fsync Linux may mark the pages it could not write clean and report the
//! error only once: a translog reopened in the same process would read that tail back from
//! the page cache, fsync it "successfully" and record it as durable, though it may never
//! reach the disk. So the next open of such a directory cuts the current generation back to
//! its synced offset. Nothing is lost by it: an operation whose sync failed was never
//! acknowledged (with `async` durability, losing it is within that setting's contract).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

static FAILED: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// Remembers that the translog in `dir` failed.
pub(crate) fn mark(dir: &Path) {
    FAILED.lock().insert(dir.to_path_buf());
}

/// Whether the translog in `dir` failed since it was last opened (and forgets it).
pub(crate) fn take(dir: &Path) -> bool {
    FAILED.lock().remove(dir)
}
