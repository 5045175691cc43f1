//! Where each primary term's history begins in a shard's remote translog, so that a restore
//! drops what a deposed primary uploaded after it was replaced.
//!
//! A primary that was cut off keeps uploading the batches of writes it can no longer
//! acknowledge (its replicas refuse its term). Their seq_nos may lie above everything the new
//! primary ever writes, where "the highest term wins per seq_no" keeps them: a restore would
//! then replay, after the new primary's acknowledged writes, a write nobody acknowledged (an
//! older version of a document, a delete). OpenSearch trims such operations on a primary's
//! resync (`trimAboveSeqNo`); the remote translog needs the same line. Before the first batch
//! of a term, its primary uploads a marker `translog/terms/<term>__<from>`: no operation of an
//! older term from seq_no `from` on is in its history (`from` is one above the highest seq_no
//! of an older term it holds, and above its commit's checkpoint).
//!
//! ```text
//! <index uuid>/<shard>/translog/terms/<term>__<from>
//! ```

use std::collections::BTreeMap;

use shoal_engine::Operation;

use super::layout::ShardKeys;

/// A term's start: operations of older terms from seq_no `from` on are not its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TermStart {
    pub term: i64,
    pub from: i64,
}

impl ShardKeys {
    pub(crate) fn terms_folder(&self) -> String {
        format!("{}terms/", self.translog_root())
    }

    pub(crate) fn term_start(&self, start: TermStart) -> String {
        format!(
            "{}{:019}__{:019}",
            self.terms_folder(),
            start.term.max(0),
            start.from.max(0)
        )
    }
}

/// The term start a key names, if it is one.
pub(crate) fn parse_term_start(key: &str) -> Option<TermStart> {
    let name = key.rsplit('/').next()?;
    let (term, from) = name.split_once("__")?;
    Some(TermStart {
        term: term.parse().ok()?,
        from: from.parse().ok()?,
    })
}

/// Where the history of a primary of `term` begins, from the batch it is about to upload
/// first in that term: the highest seq_no of an older term it holds (its batch starts right
/// above what it uploaded before, or above its commit).
pub(crate) fn term_start(term: i64, uploaded_to: i64, batch: &[Operation]) -> TermStart {
    let older = batch
        .iter()
        .filter(|op| op.primary_term < term)
        .map(|op| op.seq_no)
        .max();
    TermStart {
        term,
        from: older.unwrap_or(uploaded_to).max(uploaded_to) + 1,
    }
}

/// Drops from `ops` (one per seq_no) every operation a later term's start says is not
/// history.
pub(crate) fn drop_superseded(
    ops: BTreeMap<i64, Operation>,
    starts: &[TermStart],
) -> BTreeMap<i64, Operation> {
    ops.into_iter()
        .filter(|(seq_no, op)| {
            !starts
                .iter()
                .any(|start| start.term > op.primary_term && *seq_no >= start.from)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(seq_no: i64, term: i64) -> Operation {
        Operation::no_op(seq_no, term, "test")
    }

    fn history(ops: &[(i64, i64)]) -> BTreeMap<i64, Operation> {
        ops.iter().map(|&(s, t)| (s, op(s, t))).collect()
    }

    #[test]
    fn a_deposed_primarys_batches_above_its_successors_start_are_dropped() {
        // Term 1 wrote 1..=10 (its last three after it was replaced and never acknowledged);
        // term 2 began above 7 and wrote 8 and 9 of its own.
        let mut ops = history(&(1..=10).map(|s| (s, 1)).collect::<Vec<_>>());
        for s in [8, 9] {
            ops.insert(s, op(s, 2));
        }
        let kept = drop_superseded(ops, &[TermStart { term: 2, from: 8 }]);
        let seen: Vec<(i64, i64)> = kept.values().map(|o| (o.seq_no, o.primary_term)).collect();
        assert_eq!(
            seen,
            [
                (1, 1),
                (2, 1),
                (3, 1),
                (4, 1),
                (5, 1),
                (6, 1),
                (7, 1),
                (8, 2),
                (9, 2)
            ]
        );
    }

    #[test]
    fn a_terms_start_is_the_highest_older_seq_no_it_uploads_first_and_never_below_its_commit() {
        let batch = [op(5, 1), op(6, 1), op(7, 2)];
        assert_eq!(term_start(2, 4, &batch), TermStart { term: 2, from: 7 });
        assert_eq!(
            term_start(2, 9, &[op(10, 2)]),
            TermStart { term: 2, from: 10 }
        );
        // A primary with no history at all: an older term's seq_no 0 is not its either.
        assert_eq!(
            term_start(2, -1, &[op(0, 2)]),
            TermStart { term: 2, from: 0 }
        );
        let key = ShardKeys::new("u", 0).term_start(TermStart { term: 3, from: 42 });
        assert_eq!(
            parse_term_start(&key),
            Some(TermStart { term: 3, from: 42 })
        );
        assert!(key.starts_with("u/0/translog/terms/"), "{key}");
    }
}
