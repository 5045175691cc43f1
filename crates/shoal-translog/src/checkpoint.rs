//! Checkpoint files: `translog.ckp` describes the current generation and is
//! rewritten on every sync; `translog-<gen>.ckp` is written once when a
//! generation is rolled and never changes afterwards.
//!
//! Layout (fixed 84 bytes, little endian):
//!
//! ```text
//! [4]  magic "SHCK"
//! u32  format version
//! u64  generation
//! u64  offset                     (synced end of the generation file)
//! u64  num_ops
//! i64  min_seq_no                 (-1 when num_ops == 0)
//! i64  max_seq_no                 (-1 when num_ops == 0)
//! i64  global_checkpoint
//! u64  min_translog_generation
//! i64  trimmed_above_seq_no       (UNASSIGNED_SEQ_NO when never trimmed)
//! i64  trimmed_below_primary_term
//! u32  crc32c of all bytes above
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{IoResultExt, Result, TranslogError};
use crate::{NO_OPS_PERFORMED, UNASSIGNED_SEQ_NO};

const CHECKPOINT_MAGIC: &[u8; 4] = b"SHCK";
const CHECKPOINT_FORMAT_VERSION: u32 = 1;
/// Encoded size of a checkpoint.
pub(crate) const CHECKPOINT_LEN: usize = 4 + 4 + 8 * 9 + 4;

/// Name of the checkpoint of the current generation.
pub(crate) const CURRENT_CHECKPOINT_FILE: &str = "translog.ckp";
const CHECKPOINT_TEMP_SUFFIX: &str = ".tmp";

/// Durable summary of one generation (and of translog-wide state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub generation: u64,
    pub offset: u64,
    pub num_ops: u64,
    pub min_seq_no: i64,
    pub max_seq_no: i64,
    pub global_checkpoint: i64,
    pub min_translog_generation: u64,
    pub trimmed_above_seq_no: i64,
    pub trimmed_below_primary_term: i64,
}

impl Checkpoint {
    /// Checkpoint of a generation that holds only its header.
    pub fn empty(
        generation: u64,
        header_len: u64,
        global_checkpoint: i64,
        min_translog_generation: u64,
    ) -> Checkpoint {
        Checkpoint {
            generation,
            offset: header_len,
            num_ops: 0,
            min_seq_no: NO_OPS_PERFORMED,
            max_seq_no: NO_OPS_PERFORMED,
            global_checkpoint,
            min_translog_generation,
            trimmed_above_seq_no: UNASSIGNED_SEQ_NO,
            trimmed_below_primary_term: 0,
        }
    }

    /// Encodes the checkpoint including its trailing CRC.
    pub fn encode(&self) -> [u8; CHECKPOINT_LEN] {
        let mut buf = [0u8; CHECKPOINT_LEN];
        let mut pos = 0;
        let mut put = |bytes: &[u8]| {
            buf[pos..pos + bytes.len()].copy_from_slice(bytes);
            pos += bytes.len();
        };
        put(CHECKPOINT_MAGIC);
        put(&CHECKPOINT_FORMAT_VERSION.to_le_bytes());
        put(&self.generation.to_le_bytes());
        put(&self.offset.to_le_bytes());
        put(&self.num_ops.to_le_bytes());
        put(&self.min_seq_no.to_le_bytes());
        put(&self.max_seq_no.to_le_bytes());
        put(&self.global_checkpoint.to_le_bytes());
        put(&self.min_translog_generation.to_le_bytes());
        put(&self.trimmed_above_seq_no.to_le_bytes());
        put(&self.trimmed_below_primary_term.to_le_bytes());
        let crc = crc32c::crc32c(&buf[..CHECKPOINT_LEN - 4]);
        buf[CHECKPOINT_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        buf
    }

    /// Decodes and verifies a checkpoint.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Checkpoint, String> {
        if bytes.len() != CHECKPOINT_LEN {
            return Err(format!(
                "checkpoint has {} bytes, expected {CHECKPOINT_LEN}",
                bytes.len()
            ));
        }
        let (body, crc_bytes) = bytes.split_at(CHECKPOINT_LEN - 4);
        let stored_crc = u32::from_le_bytes(crc_bytes.try_into().expect("4 bytes"));
        if crc32c::crc32c(body) != stored_crc {
            return Err("checkpoint checksum mismatch".to_string());
        }
        if &body[..4] != CHECKPOINT_MAGIC {
            return Err("bad checkpoint magic".to_string());
        }
        let word = |index: usize| -> [u8; 8] {
            let start = 8 + index * 8;
            body[start..start + 8].try_into().expect("8 bytes")
        };
        let version = u32::from_le_bytes(body[4..8].try_into().expect("4 bytes"));
        if version != CHECKPOINT_FORMAT_VERSION {
            return Err(format!("unsupported checkpoint format version {version}"));
        }
        Ok(Checkpoint {
            generation: u64::from_le_bytes(word(0)),
            offset: u64::from_le_bytes(word(1)),
            num_ops: u64::from_le_bytes(word(2)),
            min_seq_no: i64::from_le_bytes(word(3)),
            max_seq_no: i64::from_le_bytes(word(4)),
            global_checkpoint: i64::from_le_bytes(word(5)),
            min_translog_generation: u64::from_le_bytes(word(6)),
            trimmed_above_seq_no: i64::from_le_bytes(word(7)),
            trimmed_below_primary_term: i64::from_le_bytes(word(8)),
        })
    }
}

/// Path of the immutable checkpoint of a rolled generation.
pub(crate) fn generation_checkpoint_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("translog-{generation}.ckp"))
}

/// Path of the checkpoint of the current generation.
pub(crate) fn current_checkpoint_path(dir: &Path) -> PathBuf {
    dir.join(CURRENT_CHECKPOINT_FILE)
}

/// Reads and verifies the checkpoint stored at `path`.
pub(crate) fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    let bytes = fs::read(path).with_path(path)?;
    Checkpoint::decode(&bytes).map_err(|reason| TranslogError::corrupted(path, 0, reason))
}

/// Writes `checkpoint` to `path` atomically: a crash leaves either the old or
/// the new checkpoint, never a mix.
pub(crate) fn write_checkpoint_atomically(path: &Path, checkpoint: &Checkpoint) -> Result<()> {
    write_file_atomically(path, &checkpoint.encode()).map(drop)
}

/// Replaces `path` with `bytes`: write a temp file, fsync, rename, fsync the directory.
/// Returns the file, open for writing, now at `path`.
pub(crate) fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<File> {
    let temp_path = temp_path_for(path);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp_path)
        .with_path(&temp_path)?;
    file.write_all(bytes).with_path(&temp_path)?;
    file.sync_all().with_path(&temp_path)?;
    fs::rename(&temp_path, path).with_path(path)?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fsync_dir(dir)?;
    Ok(file)
}

/// Temp file used while a checkpoint is being replaced.
pub(crate) fn temp_path_for(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(CHECKPOINT_TEMP_SUFFIX);
    path.with_file_name(name)
}

/// Fsyncs a directory so that renames/creates/unlinks inside it are durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|dir_file| dir_file.sync_all())
        .with_path(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            generation: 4,
            offset: 1234,
            num_ops: 10,
            min_seq_no: 3,
            max_seq_no: 12,
            global_checkpoint: 9,
            min_translog_generation: 2,
            trimmed_above_seq_no: 7,
            trimmed_below_primary_term: 5,
        }
    }

    #[test]
    fn checkpoint_round_trips_through_atomic_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = current_checkpoint_path(dir.path());
        write_checkpoint_atomically(&path, &sample()).unwrap();
        write_checkpoint_atomically(
            &path,
            &Checkpoint {
                offset: 99,
                ..sample()
            },
        )
        .unwrap();
        assert_eq!(read_checkpoint(&path).unwrap().offset, 99);
        assert!(!temp_path_for(&path).exists());
    }

    #[test]
    fn flipped_checkpoint_byte_is_detected() {
        let mut bytes = sample().encode();
        assert_eq!(Checkpoint::decode(&bytes).unwrap(), sample());
        bytes[20] ^= 0x40;
        assert!(Checkpoint::decode(&bytes).unwrap_err().contains("checksum"));
        assert!(Checkpoint::decode(&bytes[..10]).is_err());
    }
}
