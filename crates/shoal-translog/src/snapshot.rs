//! Snapshots: deduplicated iteration over a seq_no range of the history.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Result, TranslogError};
use crate::generation::{PositionalReader, RecordRead};
use crate::operation::Operation;
use crate::UNASSIGNED_SEQ_NO;

/// Hides ops of deposed primaries, see [`crate::Translog::trim_operations_above`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TrimRule {
    /// `UNASSIGNED_SEQ_NO` when no trim happened.
    pub above_seq_no: i64,
    pub below_primary_term: i64,
}

impl TrimRule {
    pub fn none() -> TrimRule {
        TrimRule {
            above_seq_no: UNASSIGNED_SEQ_NO,
            below_primary_term: 0,
        }
    }

    fn hides(&self, seq_no: i64, primary_term: i64) -> bool {
        self.above_seq_no != UNASSIGNED_SEQ_NO
            && seq_no > self.above_seq_no
            && primary_term < self.below_primary_term
    }
}

/// The byte range of one generation a snapshot reads. Holding the file
/// handle keeps the data readable even if the generation is trimmed.
pub(crate) struct SnapshotSource {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub start: u64,
    pub end: u64,
}

/// The record chosen for a seq_no so far.
struct Winner {
    primary_term: i64,
    source: usize,
    offset: u64,
}

/// Iterator over the operations of a seq_no range, in file order, one per
/// seq_no (highest primary term wins, later position on equal terms).
///
/// Built in two passes: the first reads only record headers and the fixed
/// `(seq_no, primary_term)` prefix to pick winners; iteration then reads,
/// verifies and decodes the winners sequentially.
pub struct Snapshot {
    sources: Vec<SnapshotSource>,
    /// `(source index, offset)` of the records to yield, sorted.
    entries: Vec<(usize, u64)>,
    next: usize,
    reader: Option<(usize, PositionalReader)>,
}

impl Snapshot {
    pub(crate) fn new(
        sources: Vec<SnapshotSource>,
        from_seq_no: i64,
        to_seq_no: i64,
        trim: TrimRule,
    ) -> Result<Snapshot> {
        let mut winners: HashMap<i64, Winner> = HashMap::new();
        for (source_index, source) in sources.iter().enumerate() {
            let mut reader =
                PositionalReader::new(source.file.clone(), source.path.clone(), source.end);
            let mut offset = source.start;
            loop {
                let (seq_no, primary_term, size) = match reader.read_seq_no_and_term(offset)? {
                    RecordRead::Record { value, size } => (value.0, value.1, size),
                    RecordRead::End => break,
                    RecordRead::Invalid(reason) => {
                        return Err(TranslogError::corrupted(&source.path, offset, reason));
                    }
                };
                let in_range = seq_no >= from_seq_no && seq_no <= to_seq_no;
                if in_range && !trim.hides(seq_no, primary_term) {
                    let candidate = Winner {
                        primary_term,
                        source: source_index,
                        offset,
                    };
                    // Sources and offsets are visited in file order, so on
                    // equal terms the later record replaces the earlier one.
                    match winners.entry(seq_no) {
                        Entry::Vacant(entry) => {
                            entry.insert(candidate);
                        }
                        Entry::Occupied(mut entry) => {
                            if primary_term >= entry.get().primary_term {
                                entry.insert(candidate);
                            }
                        }
                    }
                }
                offset += size;
            }
        }
        let mut entries: Vec<(usize, u64)> = winners
            .into_values()
            .map(|winner| (winner.source, winner.offset))
            .collect();
        entries.sort_unstable();
        Ok(Snapshot {
            sources,
            entries,
            next: 0,
            reader: None,
        })
    }

    /// Number of operations this snapshot yields in total.
    pub fn total_ops(&self) -> usize {
        self.entries.len()
    }

    fn reader_for(&mut self, source_index: usize) -> &mut PositionalReader {
        let reusable = matches!(&self.reader, Some((index, _)) if *index == source_index);
        if !reusable {
            let source = &self.sources[source_index];
            let reader =
                PositionalReader::new(source.file.clone(), source.path.clone(), source.end);
            self.reader = Some((source_index, reader));
        }
        &mut self.reader.as_mut().expect("reader was just set").1
    }

    fn read_entry(&mut self, source_index: usize, offset: u64) -> Result<Operation> {
        let reader = self.reader_for(source_index);
        match reader.read_operation(offset)? {
            RecordRead::Record { value, .. } => Ok(value),
            RecordRead::End => Err(TranslogError::corrupted(
                reader.path(),
                offset,
                "record vanished",
            )),
            RecordRead::Invalid(reason) => {
                Err(TranslogError::corrupted(reader.path(), offset, reason))
            }
        }
    }
}

impl Iterator for Snapshot {
    type Item = Result<Operation>;

    fn next(&mut self) -> Option<Result<Operation>> {
        let (source_index, offset) = *self.entries.get(self.next)?;
        self.next += 1;
        let result = self.read_entry(source_index, offset);
        if result.is_err() {
            // Stop after the first error rather than yield a history with holes.
            self.next = self.entries.len();
        }
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = self.entries.len() - self.next;
        (remaining, Some(remaining))
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("total_ops", &self.entries.len())
            .field("next", &self.next)
            .finish()
    }
}
