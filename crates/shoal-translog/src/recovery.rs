//! Opening an existing translog: cleanup of interrupted rolls/trims,
//! verification of every record and truncation of a torn tail.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::path::Path;
use std::sync::Arc;

use tracing::{info, warn};

use crate::checkpoint::{
    current_checkpoint_path, fsync_dir, generation_checkpoint_path, read_checkpoint, temp_path_for,
    Checkpoint,
};
use crate::current::CurrentCheckpointFile;
use crate::error::{IoResultExt, Result, TranslogError};
use crate::generation::{
    generation_path, parse_translog_file_name, ClosedGeneration, GenerationHeader,
    GenerationWriter, OpCounts, PositionalReader, RecordRead, TranslogFile,
};
use crate::snapshot::TrimRule;
use crate::translog::{Inner, Translog};
use crate::{RecoveryInfo, TranslogConfig};

/// Opens the translog in `dir`; see [`Translog::open`].
pub(crate) fn open(
    dir: &Path,
    config: TranslogConfig,
    expected_uuid: Option<&str>,
) -> Result<(Translog, RecoveryInfo)> {
    let checkpoint_path = current_checkpoint_path(dir);
    if !checkpoint_path.exists() {
        return Err(TranslogError::MissingCheckpoint(checkpoint_path));
    }
    let (mut checkpoint_file, checkpoint) = CurrentCheckpointFile::open(dir)?;
    remove_leftover_files(dir, &checkpoint)?;

    let mut uuid_check = UuidCheck::new(expected_uuid);
    let mut closed = BTreeMap::new();
    for generation in checkpoint.min_translog_generation..checkpoint.generation {
        let closed_generation = open_closed_generation(dir, generation, &mut uuid_check)?;
        closed.insert(generation, closed_generation);
    }
    // A translog that failed in this process keeps only what it synced: see `failed_dirs`.
    let keep_unsynced_tail = !crate::failed_dirs::take(dir);
    let recovered =
        recover_current_generation(dir, &checkpoint, &mut uuid_check, keep_unsynced_tail)?;
    let uuid = uuid_check
        .found
        .expect("the current generation header was read");

    let inner = Inner {
        current: recovered.writer,
        closed,
        global_checkpoint: checkpoint.global_checkpoint,
        trim: TrimRule {
            above_seq_no: checkpoint.trimmed_above_seq_no,
            below_primary_term: checkpoint.trimmed_below_primary_term,
        },
        min_uncommitted_generation: checkpoint.min_translog_generation,
    };
    let recovered_checkpoint = inner.current_checkpoint();
    if recovered_checkpoint != checkpoint {
        // Intact records past the synced offset were found (or the tail was
        // cut): make the file durable and record the new end.
        inner
            .current
            .file
            .sync_all()
            .with_path(&inner.current.path)?;
        checkpoint_file.write(&recovered_checkpoint)?;
    }
    let translog = Translog::from_parts(
        dir,
        uuid,
        config,
        inner,
        checkpoint_file,
        recovered_checkpoint,
    );
    let info = RecoveryInfo {
        unsynced_operations_recovered: recovered.unsynced_ops,
        truncated_bytes: recovered.truncated_bytes,
        truncation_reason: recovered.truncation_reason,
        ..translog.recovery_info_stub()
    };
    info!(
        dir = %dir.display(),
        translog_uuid = %info.translog_uuid,
        min_generation = info.min_generation,
        generation = info.current_generation,
        operations = info.operations,
        unsynced_operations_recovered = info.unsynced_operations_recovered,
        truncated_bytes = info.truncated_bytes,
        "opened translog"
    );
    Ok((translog, info))
}

/// Checks that every header carries the same (and the expected) uuid.
struct UuidCheck<'a> {
    expected: Option<&'a str>,
    found: Option<String>,
}

impl<'a> UuidCheck<'a> {
    fn new(expected: Option<&'a str>) -> UuidCheck<'a> {
        UuidCheck {
            expected,
            found: None,
        }
    }

    fn check(&mut self, uuid: &str) -> Result<()> {
        let reference = self.expected.or(self.found.as_deref());
        if let Some(reference) = reference {
            if reference != uuid {
                return Err(TranslogError::UuidMismatch {
                    expected: reference.to_string(),
                    found: uuid.to_string(),
                });
            }
        }
        self.found = Some(uuid.to_string());
        Ok(())
    }
}

/// Deletes files an interrupted roll, trim or checkpoint write left behind:
/// generations below the min generation, data files above the current one
/// and final checkpoints of the current (not yet rolled) generation.
fn remove_leftover_files(dir: &Path, checkpoint: &Checkpoint) -> Result<()> {
    let mut removed = 0;
    let temp_checkpoint = temp_path_for(&current_checkpoint_path(dir));
    for entry in fs::read_dir(dir).with_path(dir)? {
        let path = entry.with_path(dir)?.path();
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        let is_leftover = match parse_translog_file_name(name) {
            Some(TranslogFile::Data(generation)) => {
                generation < checkpoint.min_translog_generation
                    || generation > checkpoint.generation
            }
            Some(TranslogFile::GenerationCheckpoint(generation)) => {
                generation < checkpoint.min_translog_generation
                    || generation >= checkpoint.generation
            }
            None => path == temp_checkpoint || name.ends_with(".ckp.tmp"),
        };
        if is_leftover {
            warn!(path = %path.display(), "deleting leftover translog file");
            fs::remove_file(&path).with_path(&path)?;
            removed += 1;
        }
    }
    if removed > 0 {
        fsync_dir(dir)?;
    }
    Ok(())
}

/// Opens a data file and verifies its header against its generation and uuid.
fn open_generation_file(
    path: &Path,
    generation: u64,
    writable: bool,
    uuid_check: &mut UuidCheck<'_>,
) -> Result<(File, GenerationHeader, u64)> {
    let file = match OpenOptions::new().read(true).write(writable).open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(TranslogError::corrupted(path, 0, "missing generation file"));
        }
        Err(err) => return Err(err).with_path(path),
    };
    let (header, header_len) = GenerationHeader::read(&file, path)?;
    if header.generation != generation {
        return Err(TranslogError::corrupted(
            path,
            0,
            format!("header says generation {}", header.generation),
        ));
    }
    uuid_check.check(&header.uuid)?;
    Ok((file, header, header_len))
}

/// Opens a rolled generation; any invalid record is a hard error.
fn open_closed_generation(
    dir: &Path,
    generation: u64,
    uuid_check: &mut UuidCheck<'_>,
) -> Result<ClosedGeneration> {
    let checkpoint_path = generation_checkpoint_path(dir, generation);
    if !checkpoint_path.exists() {
        return Err(TranslogError::corrupted(
            &checkpoint_path,
            0,
            "missing generation checkpoint",
        ));
    }
    let checkpoint = read_checkpoint(&checkpoint_path)?;
    let path = generation_path(dir, generation);
    let (file, _header, header_len) = open_generation_file(&path, generation, false, uuid_check)?;
    if checkpoint.generation != generation {
        return Err(TranslogError::corrupted(
            &checkpoint_path,
            0,
            "checkpoint of another generation",
        ));
    }
    let file = Arc::new(file);
    let file_len = file.metadata().with_path(&path)?.len();
    if file_len > checkpoint.offset {
        warn!(path = %path.display(), file_len, checkpoint_offset = checkpoint.offset, "ignoring bytes past the final checkpoint of a rolled generation");
    }
    let mut reader =
        PositionalReader::new(file.clone(), path.clone(), checkpoint.offset.min(file_len));
    let scan = scan_records(&mut reader, header_len, |_| ())?;
    if let Some((offset, reason)) = scan.invalid {
        return Err(TranslogError::corrupted(&path, offset, reason));
    }
    if scan.end != checkpoint.offset {
        return Err(TranslogError::corrupted(
            &path,
            scan.end,
            format!(
                "file ends before its checkpoint offset {}",
                checkpoint.offset
            ),
        ));
    }
    verify_counts_match(&path, &scan.counts, &checkpoint)?;
    Ok(ClosedGeneration {
        path,
        header_len,
        file,
        checkpoint,
    })
}

fn verify_counts_match(path: &Path, counts: &OpCounts, checkpoint: &Checkpoint) -> Result<()> {
    let expected = (
        checkpoint.num_ops,
        checkpoint.min_seq_no,
        checkpoint.max_seq_no,
    );
    let found = (counts.num_ops, counts.min_seq_no, counts.max_seq_no);
    if expected != found {
        return Err(TranslogError::corrupted(
            path,
            0,
            format!(
                "checkpoint says (ops, min_seq_no, max_seq_no) = {expected:?}, file has {found:?}"
            ),
        ));
    }
    Ok(())
}

struct RecoveredGeneration {
    writer: GenerationWriter,
    unsynced_ops: u64,
    truncated_bytes: u64,
    truncation_reason: Option<String>,
}

/// Opens the current generation for appending. Data up to the synced offset
/// must be intact; past it, the first invalid record and everything after
/// it is a torn write and is cut off.
fn recover_current_generation(
    dir: &Path,
    checkpoint: &Checkpoint,
    uuid_check: &mut UuidCheck<'_>,
    keep_unsynced_tail: bool,
) -> Result<RecoveredGeneration> {
    let generation = checkpoint.generation;
    let path = generation_path(dir, generation);
    let (file, header, header_len) = open_generation_file(&path, generation, true, uuid_check)?;
    let file = Arc::new(file);
    let file_len = file.metadata().with_path(&path)?.len();
    if file_len < checkpoint.offset {
        return Err(TranslogError::corrupted(
            &path,
            file_len,
            format!(
                "file is shorter than its synced offset {}",
                checkpoint.offset
            ),
        ));
    }
    let mut reader = PositionalReader::new(file.clone(), path.clone(), file_len);
    let mut synced_counts = OpCounts::default();
    let mut crossing_record = None;
    let scan = scan_records(&mut reader, header_len, |record| {
        if record.end <= checkpoint.offset {
            synced_counts.note(record.seq_no);
        } else if record.offset < checkpoint.offset {
            crossing_record.get_or_insert(record.offset);
        }
    })?;
    if let Some(offset) = crossing_record {
        return Err(TranslogError::corrupted(
            &path,
            offset,
            "record crosses the synced offset",
        ));
    }
    if let Some((offset, reason)) = &scan.invalid {
        if *offset < checkpoint.offset {
            return Err(TranslogError::corrupted(&path, *offset, reason.clone()));
        }
    }
    verify_counts_match(&path, &synced_counts, checkpoint)?;

    let (end, counts, truncation_reason) = if keep_unsynced_tail {
        (
            scan.end,
            scan.counts,
            scan.invalid.map(|(_, reason)| reason),
        )
    } else {
        let reason = "the translog failed in this process: only its synced part is trusted";
        (checkpoint.offset, synced_counts, Some(reason.to_string()))
    };
    let unsynced_ops = counts.num_ops - checkpoint.num_ops;
    let truncated_bytes = file_len - end;
    if truncated_bytes > 0 {
        warn!(
            path = %path.display(),
            synced_offset = checkpoint.offset,
            truncate_at = end,
            truncated_bytes,
            unsynced_ops_kept = unsynced_ops,
            reason = truncation_reason.as_deref().unwrap_or(""),
            "truncating torn translog tail"
        );
        file.set_len(end).with_path(&path)?;
        file.sync_all().with_path(&path)?;
    }
    let writer = GenerationWriter {
        generation,
        path,
        file,
        header_len,
        primary_term: header.primary_term,
        written: end,
        counts,
    };
    Ok(RecoveredGeneration {
        writer,
        unsynced_ops,
        truncated_bytes,
        truncation_reason,
    })
}

/// A verified record seen by [`scan_records`].
struct ScannedRecord {
    offset: u64,
    end: u64,
    seq_no: i64,
}

struct ScanSummary {
    /// End of the last valid record.
    end: u64,
    counts: OpCounts,
    /// First invalid record: offset and reason.
    invalid: Option<(u64, String)>,
}

/// Reads and verifies records from `start` until the end of the reader or
/// the first invalid record.
fn scan_records(
    reader: &mut PositionalReader,
    start: u64,
    mut on_record: impl FnMut(&ScannedRecord),
) -> Result<ScanSummary> {
    let mut offset = start;
    let mut counts = OpCounts::default();
    loop {
        match reader.read_operation(offset)? {
            RecordRead::Record { value, size } => {
                if value.seq_no < 0 {
                    let reason = format!("invalid seq_no {}", value.seq_no);
                    return Ok(ScanSummary {
                        end: offset,
                        counts,
                        invalid: Some((offset, reason)),
                    });
                }
                counts.note(value.seq_no);
                on_record(&ScannedRecord {
                    offset,
                    end: offset + size,
                    seq_no: value.seq_no,
                });
                offset += size;
            }
            RecordRead::End => {
                return Ok(ScanSummary {
                    end: offset,
                    counts,
                    invalid: None,
                })
            }
            RecordRead::Invalid(reason) => {
                return Ok(ScanSummary {
                    end: offset,
                    counts,
                    invalid: Some((offset, reason)),
                })
            }
        }
    }
}
