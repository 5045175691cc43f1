//! `translog.ckp`, the checkpoint of the current generation, rewritten on every sync.
//!
//! Replacing the file on every sync (write a temp file, fsync, rename, fsync the directory)
//! cost two fsyncs and a new inode per acknowledged request; ext4's inode allocator then
//! scans the inodes it just freed. The file is written in place instead, in one of two
//! slots, each in its own 512-byte sector, taken in turn. A write that a crash tears leaves
//! the other slot, which holds the previous checkpoint; the newest slot whose checksum holds
//! is the checkpoint. That previous checkpoint is what the last acknowledged sync persisted,
//! since a sync returns only after its slot is fsynced.
//!
//! Slot layout (little endian): `u64` write counter, the 84-byte checkpoint (with its own
//! crc), `u32` crc32c of both.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::checkpoint::{
    current_checkpoint_path, write_file_atomically, Checkpoint, CHECKPOINT_LEN,
};
use crate::error::{IoResultExt, Result, TranslogError};

/// Bytes between the two slots: a sector, so a torn write of one never reaches the other.
const SLOT_SPACING: u64 = 512;
const SLOT_LEN: usize = 8 + CHECKPOINT_LEN + 4;
const FILE_LEN: u64 = 2 * SLOT_SPACING;

/// The open `translog.ckp`; held under the translog's sync lock, which orders its writes.
#[derive(Debug)]
pub(crate) struct CurrentCheckpointFile {
    path: PathBuf,
    file: File,
    /// Counter of the newest slot written.
    counter: u64,
}

impl CurrentCheckpointFile {
    /// Creates `translog.ckp` holding `checkpoint`, replacing any file there atomically.
    pub fn create(dir: &Path, checkpoint: &Checkpoint) -> Result<CurrentCheckpointFile> {
        let path = current_checkpoint_path(dir);
        let mut bytes = vec![0u8; FILE_LEN as usize];
        bytes[..SLOT_LEN].copy_from_slice(&encode_slot(1, checkpoint));
        let file = write_file_atomically(&path, &bytes)?;
        Ok(CurrentCheckpointFile {
            path,
            file,
            counter: 1,
        })
    }

    /// Opens `translog.ckp` and reads its newest intact checkpoint. A file of the earlier
    /// single-checkpoint format is read and rewritten in this one.
    pub fn open(dir: &Path) -> Result<(CurrentCheckpointFile, Checkpoint)> {
        let path = current_checkpoint_path(dir);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .with_path(&path)?;
        let mut bytes = Vec::with_capacity(FILE_LEN as usize);
        file.read_to_end(&mut bytes).with_path(&path)?;
        if bytes.len() == CHECKPOINT_LEN {
            let checkpoint = Checkpoint::decode(&bytes)
                .map_err(|reason| TranslogError::corrupted(&path, 0, reason))?;
            return Ok((CurrentCheckpointFile::create(dir, &checkpoint)?, checkpoint));
        }
        let (counter, checkpoint) =
            newest_slot(&bytes).map_err(|reason| TranslogError::corrupted(&path, 0, reason))?;
        Ok((
            CurrentCheckpointFile {
                path,
                file,
                counter,
            },
            checkpoint,
        ))
    }

    /// Makes `checkpoint` the durable current checkpoint: written over the older slot, then
    /// fsynced (the file's length never changes, so its data is all there is to sync).
    pub fn write(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let counter = self.counter + 1;
        let offset = (counter % 2) * SLOT_SPACING;
        let slot = encode_slot(counter, checkpoint);
        self.file
            .write_all_at(&slot, offset)
            .with_path(&self.path)?;
        self.file.sync_data().with_path(&self.path)?;
        self.counter = counter;
        Ok(())
    }
}

fn encode_slot(counter: u64, checkpoint: &Checkpoint) -> [u8; SLOT_LEN] {
    let mut slot = [0u8; SLOT_LEN];
    slot[..8].copy_from_slice(&counter.to_le_bytes());
    slot[8..8 + CHECKPOINT_LEN].copy_from_slice(&checkpoint.encode());
    let crc = crc32c::crc32c(&slot[..SLOT_LEN - 4]);
    slot[SLOT_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    slot
}

/// The slot's counter and checkpoint, or why it is not intact (never written, torn).
fn decode_slot(slot: &[u8]) -> std::result::Result<(u64, Checkpoint), String> {
    let (body, crc) = slot.split_at(SLOT_LEN - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("slot checksum mismatch".into());
    }
    let counter = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
    Ok((counter, Checkpoint::decode(&body[8..])?))
}

fn newest_slot(bytes: &[u8]) -> std::result::Result<(u64, Checkpoint), String> {
    if bytes.len() != FILE_LEN as usize {
        return Err(format!(
            "checkpoint file has {} bytes, expected {FILE_LEN}",
            bytes.len()
        ));
    }
    let slots = [0, SLOT_SPACING as usize].map(|at| decode_slot(&bytes[at..at + SLOT_LEN]));
    match slots {
        [Ok(a), Ok(b)] => Ok(if a.0 > b.0 { a } else { b }),
        [Ok(only), Err(_)] | [Err(_), Ok(only)] => Ok(only),
        [Err(a), Err(b)] => Err(format!("no intact checkpoint slot ({a}; {b})")),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::checkpoint::{temp_path_for, write_checkpoint_atomically};

    /// Writes a checkpoint in the earlier single-checkpoint format (the upgrade's input).
    fn write_legacy(dir: &Path, checkpoint: &Checkpoint) -> Result<()> {
        write_checkpoint_atomically(&current_checkpoint_path(dir), checkpoint)
    }

    fn at_offset(offset: u64) -> Checkpoint {
        Checkpoint {
            offset,
            ..Checkpoint::empty(3, 40, 7, 2)
        }
    }

    #[test]
    fn every_write_lands_in_place_and_the_newest_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = CurrentCheckpointFile::create(dir.path(), &at_offset(40)).unwrap();
        let inode = fs::metadata(current_checkpoint_path(dir.path()))
            .unwrap()
            .ino();
        for offset in [50, 60, 70] {
            file.write(&at_offset(offset)).unwrap();
            let (_, read) = CurrentCheckpointFile::open(dir.path()).unwrap();
            assert_eq!(read, at_offset(offset));
        }
        let after = fs::metadata(current_checkpoint_path(dir.path())).unwrap();
        assert_eq!(after.ino(), inode, "a sync must not replace the file");
        assert_eq!(after.len(), FILE_LEN);
        assert!(!temp_path_for(&current_checkpoint_path(dir.path())).exists());
    }

    #[test]
    fn a_torn_write_leaves_the_checkpoint_of_the_sync_before() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = CurrentCheckpointFile::create(dir.path(), &at_offset(40)).unwrap();
        file.write(&at_offset(50)).unwrap();
        file.write(&at_offset(60)).unwrap();
        // The write of offset 60 went to slot (3 % 2); tear its second half.
        let path = current_checkpoint_path(dir.path());
        let mut bytes = fs::read(&path).unwrap();
        let torn = SLOT_SPACING as usize + SLOT_LEN / 2;
        bytes[torn..SLOT_SPACING as usize + SLOT_LEN].fill(0);
        fs::write(&path, &bytes).unwrap();

        let (mut reopened, read) = CurrentCheckpointFile::open(dir.path()).unwrap();
        assert_eq!(read, at_offset(50));
        // Writing goes on over the torn slot, and the newest wins again.
        reopened.write(&at_offset(70)).unwrap();
        assert_eq!(
            CurrentCheckpointFile::open(dir.path()).unwrap().1,
            at_offset(70)
        );
    }

    #[test]
    fn a_file_with_no_intact_slot_is_corrupted() {
        let dir = tempfile::tempdir().unwrap();
        CurrentCheckpointFile::create(dir.path(), &at_offset(40)).unwrap();
        let path = current_checkpoint_path(dir.path());
        let mut bytes = fs::read(&path).unwrap();
        bytes[3] ^= 0x10;
        fs::write(&path, &bytes).unwrap();
        let err = CurrentCheckpointFile::open(dir.path()).unwrap_err();
        assert!(matches!(err, TranslogError::Corrupted { .. }), "{err:?}");
    }

    #[test]
    fn a_checkpoint_of_the_single_slot_format_is_read_and_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        write_legacy(dir.path(), &at_offset(90)).unwrap();
        let (mut file, read) = CurrentCheckpointFile::open(dir.path()).unwrap();
        assert_eq!(read, at_offset(90));
        file.write(&at_offset(95)).unwrap();
        let path = current_checkpoint_path(dir.path());
        assert_eq!(fs::metadata(&path).unwrap().len(), FILE_LEN);
        assert_eq!(
            CurrentCheckpointFile::open(dir.path()).unwrap().1,
            at_offset(95)
        );
    }
}
