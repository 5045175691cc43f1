//! Generation files `translog-<gen>.tlog`: header, record framing, the writer
//! of the current generation and a buffered positional reader used by
//! recovery and snapshots.
//!
//! Header (little endian):
//!
//! ```text
//! [8]  magic "SHOALTLG"
//! u32  format version
//! u32  uuid length, uuid bytes (utf-8)
//! i64  primary term at creation
//! u64  generation
//! u32  crc32c of all bytes above
//! ```
//!
//! Records: `[u32 payload_len][u32 crc32c(payload)][payload]`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::{fsync_dir, Checkpoint};
use crate::error::{IoResultExt, Result, TranslogError};
use crate::operation::{
    decode_seq_no_and_term, Operation, MIN_OPERATION_LEN, OPERATION_PREFIX_LEN,
};
use crate::{Location, NO_OPS_PERFORMED};

const HEADER_MAGIC: &[u8; 8] = b"SHOALTLG";
const HEADER_FORMAT_VERSION: u32 = 1;
/// A uuid longer than this is garbage, not a uuid.
const MAX_UUID_LEN: u32 = 256;
/// `[u32 payload_len][u32 crc32c]`.
pub(crate) const RECORD_HEADER_LEN: u64 = 8;
/// Read-ahead of the positional reader: big enough to amortize syscalls,
/// small enough to keep many snapshots cheap.
const READ_AHEAD: usize = 64 * 1024;

/// Path of the data file of `generation`.
pub(crate) fn generation_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("translog-{generation}.tlog"))
}

/// The kind of a file found in a translog directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TranslogFile {
    Data(u64),
    GenerationCheckpoint(u64),
}

/// Parses `translog-<gen>.tlog` / `translog-<gen>.ckp` file names.
pub(crate) fn parse_translog_file_name(name: &str) -> Option<TranslogFile> {
    let rest = name.strip_prefix("translog-")?;
    if let Some(generation) = rest.strip_suffix(".tlog") {
        return generation.parse().ok().map(TranslogFile::Data);
    }
    let generation = rest.strip_suffix(".ckp")?;
    generation
        .parse()
        .ok()
        .map(TranslogFile::GenerationCheckpoint)
}

/// The header written at the start of every generation file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GenerationHeader {
    pub uuid: String,
    pub primary_term: i64,
    pub generation: u64,
}

impl GenerationHeader {
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(36 + self.uuid.len());
        buf.extend_from_slice(HEADER_MAGIC);
        buf.extend_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&(self.uuid.len() as u32).to_le_bytes());
        buf.extend_from_slice(self.uuid.as_bytes());
        buf.extend_from_slice(&self.primary_term.to_le_bytes());
        buf.extend_from_slice(&self.generation.to_le_bytes());
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        buf
    }

    /// Reads and verifies the header; returns it with its length in bytes.
    pub fn read(file: &File, path: &Path) -> Result<(GenerationHeader, u64)> {
        let corrupted = |reason: &str| TranslogError::corrupted(path, 0, reason);
        let mut fixed = [0u8; 16];
        read_exact_or_corrupted(file, path, &mut fixed, 0, "truncated header")?;
        if &fixed[..8] != HEADER_MAGIC {
            return Err(corrupted("bad header magic"));
        }
        let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
        if version != HEADER_FORMAT_VERSION {
            return Err(corrupted(&format!(
                "unsupported header format version {version}"
            )));
        }
        let uuid_len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
        if uuid_len > MAX_UUID_LEN {
            return Err(corrupted(&format!("absurd uuid length {uuid_len}")));
        }
        let mut rest = vec![0u8; uuid_len as usize + 8 + 8 + 4];
        read_exact_or_corrupted(file, path, &mut rest, 16, "truncated header")?;
        let header_len = 16 + rest.len() as u64;
        let (body, crc_bytes) = rest.split_at(rest.len() - 4);
        let mut crc = crc32c::crc32c(&fixed);
        crc = crc32c::crc32c_append(crc, body);
        if crc != u32::from_le_bytes(crc_bytes.try_into().expect("4 bytes")) {
            return Err(corrupted("header checksum mismatch"));
        }
        let uuid_end = uuid_len as usize;
        let uuid = String::from_utf8(body[..uuid_end].to_vec())
            .map_err(|_| corrupted("uuid is not utf-8"))?;
        let primary_term = i64::from_le_bytes(body[uuid_end..uuid_end + 8].try_into().expect("8"));
        let generation =
            u64::from_le_bytes(body[uuid_end + 8..uuid_end + 16].try_into().expect("8"));
        let header = GenerationHeader {
            uuid,
            primary_term,
            generation,
        };
        Ok((header, header_len))
    }
}

fn read_exact_or_corrupted(
    file: &File,
    path: &Path,
    buf: &mut [u8],
    offset: u64,
    reason: &str,
) -> Result<()> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            Err(TranslogError::corrupted(path, offset, reason))
        }
        Err(err) => Err(err).with_path(path),
    }
}

/// Appends one framed record for `op` to `buf`; returns the record size.
pub(crate) fn frame_record(op: &Operation, buf: &mut Vec<u8>) -> Result<u32> {
    let payload_len = op.encoded_len();
    let record_len = payload_len as u64 + RECORD_HEADER_LEN;
    if record_len > u32::MAX as u64 {
        return Err(TranslogError::InvalidOperation(format!(
            "operation seq_no {} is too large ({payload_len} bytes)",
            op.seq_no
        )));
    }
    let start = buf.len();
    buf.extend_from_slice(&(payload_len as u32).to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    op.encode_into(buf);
    let payload_start = start + RECORD_HEADER_LEN as usize;
    let crc = crc32c::crc32c(&buf[payload_start..]);
    buf[start + 4..payload_start].copy_from_slice(&crc.to_le_bytes());
    Ok(record_len as u32)
}

/// Outcome of reading one record while scanning a file.
#[derive(Debug)]
pub(crate) enum RecordRead<T> {
    /// A valid record of `size` bytes.
    Record { value: T, size: u64 },
    /// Clean end of the scanned range.
    End,
    /// Torn or corrupt record; the reason says which.
    Invalid(String),
}

/// Buffered reader over a shared file handle using positional reads, so many
/// readers can share one `File` without seeking.
pub(crate) struct PositionalReader {
    file: Arc<File>,
    path: PathBuf,
    /// Readable range is `[0, end)`.
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
}

impl PositionalReader {
    pub fn new(file: Arc<File>, path: PathBuf, end: u64) -> PositionalReader {
        PositionalReader {
            file,
            path,
            end,
            buf: Vec::new(),
            buf_start: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns `len` bytes at `offset`; the caller checked the range is below `end`.
    fn read_at(&mut self, offset: u64, len: usize) -> Result<&[u8]> {
        debug_assert!(offset + len as u64 <= self.end);
        let buffered_end = self.buf_start + self.buf.len() as u64;
        if offset < self.buf_start || offset + len as u64 > buffered_end {
            let available = (self.end - offset) as usize;
            let fill_len = len.max(READ_AHEAD).min(available);
            self.buf.resize(fill_len, 0);
            self.buf_start = offset;
            if let Err(err) = self.file.read_exact_at(&mut self.buf, offset) {
                self.buf.clear();
                return Err(err).with_path(&self.path);
            }
        }
        let start = (offset - self.buf_start) as usize;
        Ok(&self.buf[start..start + len])
    }

    /// Reads the `[len][crc]` prefix at `offset`, checking it fits the range.
    fn read_record_header(&mut self, offset: u64) -> Result<RecordRead<(u32, u32)>> {
        if offset == self.end {
            return Ok(RecordRead::End);
        }
        let remaining = self.end - offset;
        if remaining < RECORD_HEADER_LEN {
            return Ok(RecordRead::Invalid(format!(
                "partial record header ({remaining} of {RECORD_HEADER_LEN} bytes)"
            )));
        }
        let header = self.read_at(offset, RECORD_HEADER_LEN as usize)?;
        let payload_len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if (payload_len as usize) < MIN_OPERATION_LEN {
            return Ok(RecordRead::Invalid(format!(
                "invalid payload length {payload_len}"
            )));
        }
        let available = remaining - RECORD_HEADER_LEN;
        if payload_len as u64 > available {
            return Ok(RecordRead::Invalid(format!(
                "partial payload ({available} of {payload_len} bytes)"
            )));
        }
        Ok(RecordRead::Record {
            value: (payload_len, crc),
            size: RECORD_HEADER_LEN + payload_len as u64,
        })
    }

    /// Reads, verifies and decodes the record starting at `offset`.
    pub fn read_operation(&mut self, offset: u64) -> Result<RecordRead<Operation>> {
        let (payload_len, crc, size) = match self.read_record_header(offset)? {
            RecordRead::Record { value, size } => (value.0, value.1, size),
            RecordRead::End => return Ok(RecordRead::End),
            RecordRead::Invalid(reason) => return Ok(RecordRead::Invalid(reason)),
        };
        let payload = self.read_at(offset + RECORD_HEADER_LEN, payload_len as usize)?;
        if crc32c::crc32c(payload) != crc {
            return Ok(RecordRead::Invalid("record checksum mismatch".to_string()));
        }
        Ok(match Operation::decode(payload) {
            Ok(value) => RecordRead::Record { value, size },
            Err(reason) => RecordRead::Invalid(reason),
        })
    }

    /// Reads `(seq_no, primary_term)` of the record at `offset` without reading
    /// or verifying the rest of the payload (verified when the op is read).
    pub fn read_seq_no_and_term(&mut self, offset: u64) -> Result<RecordRead<(i64, i64)>> {
        let size = match self.read_record_header(offset)? {
            RecordRead::Record { size, .. } => size,
            RecordRead::End => return Ok(RecordRead::End),
            RecordRead::Invalid(reason) => return Ok(RecordRead::Invalid(reason)),
        };
        let prefix = self.read_at(offset + RECORD_HEADER_LEN, OPERATION_PREFIX_LEN)?;
        Ok(match decode_seq_no_and_term(prefix) {
            Ok(value) => RecordRead::Record { value, size },
            Err(reason) => RecordRead::Invalid(reason),
        })
    }
}

/// Reads the single record at `location` from `file` with one positional read.
pub(crate) fn read_operation_at(
    file: &File,
    path: &Path,
    location: &Location,
) -> Result<Operation> {
    let corrupted = |reason: String| TranslogError::corrupted(path, location.offset, reason);
    let size = location.size as usize;
    if (size as u64) < RECORD_HEADER_LEN + MIN_OPERATION_LEN as u64 {
        return Err(TranslogError::InvalidLocation {
            location: *location,
            reason: "size is smaller than any record".to_string(),
        });
    }
    let mut buf = vec![0u8; size];
    file.read_exact_at(&mut buf, location.offset)
        .with_path(path)?;
    let (header, payload) = buf.split_at(RECORD_HEADER_LEN as usize);
    let payload_len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
    if payload_len as usize != payload.len() {
        return Err(TranslogError::InvalidLocation {
            location: *location,
            reason: format!("record at offset has payload length {payload_len}"),
        });
    }
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    if crc32c::crc32c(payload) != crc {
        return Err(corrupted("record checksum mismatch".to_string()));
    }
    Operation::decode(payload).map_err(corrupted)
}

/// A rolled, read-only generation that is still retained.
#[derive(Debug)]
pub(crate) struct ClosedGeneration {
    pub path: PathBuf,
    pub header_len: u64,
    pub file: Arc<File>,
    /// Final checkpoint, as stored in `translog-<gen>.ckp`.
    pub checkpoint: Checkpoint,
}

impl ClosedGeneration {
    pub fn generation(&self) -> u64 {
        self.checkpoint.generation
    }
}

/// The generation currently appended to.
#[derive(Debug)]
pub(crate) struct GenerationWriter {
    pub generation: u64,
    pub path: PathBuf,
    pub file: Arc<File>,
    pub header_len: u64,
    pub primary_term: i64,
    /// End of the data handed to the OS (page cache).
    pub written: u64,
    pub counts: OpCounts,
}

/// Number of operations and their seq_no range within one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpCounts {
    pub num_ops: u64,
    /// `NO_OPS_PERFORMED` while `num_ops == 0`.
    pub min_seq_no: i64,
    /// `NO_OPS_PERFORMED` while `num_ops == 0`.
    pub max_seq_no: i64,
}

impl Default for OpCounts {
    fn default() -> Self {
        OpCounts {
            num_ops: 0,
            min_seq_no: NO_OPS_PERFORMED,
            max_seq_no: NO_OPS_PERFORMED,
        }
    }
}

impl OpCounts {
    /// Accounts one operation.
    pub fn note(&mut self, seq_no: i64) {
        debug_assert!(seq_no >= 0, "seq_no must be assigned");
        if self.num_ops == 0 {
            self.min_seq_no = seq_no;
            self.max_seq_no = seq_no;
        } else {
            self.min_seq_no = self.min_seq_no.min(seq_no);
            self.max_seq_no = self.max_seq_no.max(seq_no);
        }
        self.num_ops += 1;
    }
}

impl GenerationWriter {
    /// Creates a new generation file with its header, durably.
    pub fn create(
        dir: &Path,
        generation: u64,
        uuid: &str,
        primary_term: i64,
    ) -> Result<GenerationWriter> {
        let path = generation_path(dir, generation);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .with_path(&path)?;
        let header = GenerationHeader {
            uuid: uuid.to_string(),
            primary_term,
            generation,
        }
        .encode();
        file.write_all_at(&header, 0).with_path(&path)?;
        file.sync_all().with_path(&path)?;
        fsync_dir(dir)?;
        Ok(GenerationWriter {
            generation,
            path,
            file: Arc::new(file),
            header_len: header.len() as u64,
            primary_term,
            written: header.len() as u64,
            counts: OpCounts::default(),
        })
    }

    /// Hands `records` to the OS at the end of the file (no fsync).
    pub fn append(&mut self, records: &[u8]) -> Result<()> {
        self.file
            .write_all_at(records, self.written)
            .with_path(&self.path)?;
        self.written += records.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translog_file_names_are_parsed() {
        assert_eq!(
            parse_translog_file_name("translog-12.tlog"),
            Some(TranslogFile::Data(12))
        );
        assert_eq!(
            parse_translog_file_name("translog-3.ckp"),
            Some(TranslogFile::GenerationCheckpoint(3))
        );
        assert_eq!(parse_translog_file_name("translog.ckp"), None);
        assert_eq!(parse_translog_file_name("translog-x.tlog"), None);
    }

    #[test]
    fn header_round_trips_and_detects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let writer = GenerationWriter::create(dir.path(), 7, "some-uuid", 3).unwrap();
        let (header, len) = GenerationHeader::read(&writer.file, &writer.path).unwrap();
        assert_eq!(header.generation, 7);
        assert_eq!(header.primary_term, 3);
        assert_eq!(header.uuid, "some-uuid");
        assert_eq!(len, writer.header_len);
        writer.file.write_all_at(b"X", 20).unwrap();
        let err = GenerationHeader::read(&writer.file, &writer.path).unwrap_err();
        assert!(matches!(err, TranslogError::Corrupted { .. }), "{err}");
    }
}
