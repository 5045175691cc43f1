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
//!
//! Both rules prefer the newer term, so a primary must never write under a term the shard's
//! history already holds or has passed: a restored primary's term is raised above the highest
//! term its repository names ([`RemoteStoreService::stored_terms`], listed before the restore's
//! cluster command), and the node restoring it refuses when the repository is ahead anyway.

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt};
use shoal_engine::Operation;
use shoal_storage::{Repository, StorageError, StoredObject};

use super::layout::{metadata_term, translog_batch_range, ShardKeys};
use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};

/// Shards whose repository listings run at once while a restore looks for their terms.
const LISTINGS_IN_FLIGHT: usize = 16;

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

impl RemoteStoreService {
    /// Per shard of an index (by its uuid), the highest primary term its remote store holds
    /// history of (0 when it holds none); only the shards `listed` says are looked at.
    pub(crate) fn stored_terms(&self, index_uuid: &str, listed: &[bool]) -> ApiResult<Vec<u64>> {
        let repositories = self.repositories()?;
        let (translog, segment) = (&repositories.translog, &repositories.segment);
        let listings = listed.iter().enumerate().map(|(shard, &listed)| {
            let keys = ShardKeys::new(index_uuid, shard);
            async move {
                if !listed {
                    return Ok(None);
                }
                stored_term(translog, segment, &keys).await
            }
        });
        let terms: Vec<Option<i64>> = self.block_on(
            futures::stream::iter(listings)
                .buffered(LISTINGS_IN_FLIGHT)
                .try_collect(),
        )?;
        Ok(terms
            .into_iter()
            .map(|term| term.unwrap_or_default().max(0) as u64)
            .collect())
    }

    /// Refuses to restore a primary of `term` over history of that term or a newer one: the
    /// operations it would write could lose to that history in a later restore. (The restore's
    /// command raised the term past what its proposer listed; this catches what was uploaded
    /// since, or a proposer that could not list.)
    pub(crate) fn check_stored_term(
        &self,
        service: &crate::index_service::IndexService,
        shard: usize,
        term: i64,
    ) -> ApiResult<()> {
        let repositories = self.repositories()?;
        let keys = ShardKeys::new(&service.uuid(), shard);
        let stored = self.block_on(stored_term(
            &repositories.translog,
            &repositories.segment,
            &keys,
        ))?;
        match stored {
            Some(stored) if stored >= term => {
                tracing::warn!(index = %service.name(), shard, stored, term, "remote store holds a newer term than the restoring primary: restore refused");
                Err(repository_ahead(&service.name(), shard, stored, term))
            }
            _ => Ok(()),
        }
    }
}

/// The highest primary term a shard's objects name: its translog batches and term starts, and
/// its segment metadata files. Listed, nothing downloaded.
async fn stored_term(
    translog: &Repository,
    segment: &Repository,
    keys: &ShardKeys,
) -> Result<Option<i64>, StorageError> {
    let folders = [
        keys.translog_folder(),
        keys.terms_folder(),
        keys.metadata_folder(),
    ];
    let (batches, starts, metadata) = futures::try_join!(
        translog.list(&folders[0]),
        translog.list(&folders[1]),
        segment.list(&folders[2]),
    )?;
    Ok(highest_term(&batches, &starts, &metadata))
}

/// The highest term among translog batch keys, term start keys and metadata file keys.
fn highest_term(
    batches: &[StoredObject],
    starts: &[StoredObject],
    metadata: &[StoredObject],
) -> Option<i64> {
    let batch_terms = batches
        .iter()
        .filter_map(|o| translog_batch_range(&o.key).map(|(term, _, _)| term));
    let start_terms = starts
        .iter()
        .filter_map(|o| parse_term_start(&o.key).map(|start| start.term));
    let metadata_terms = metadata.iter().filter_map(|o| metadata_term(&o.key));
    batch_terms.chain(start_terms).chain(metadata_terms).max()
}

/// The copy fails (it is not retried in place under the same term): the primary allocated
/// again takes the next term.
fn repository_ahead(index: &str, shard: usize, stored: i64, term: i64) -> ApiError {
    ApiError::new(
        500,
        "illegal_state_exception",
        format!(
            "[{index}][{shard}] the remote store holds history of primary term [{stored}], not below this primary's term [{term}]: operations written under it could be dropped by a later restore, so the shard is not restored under it"
        ),
    )
    .with_kind(crate::error::ErrorKind::CopyFailed)
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

    #[test]
    fn the_stored_term_is_the_highest_any_batch_start_or_metadata_key_names() {
        let keys = ShardKeys::new("u", 1);
        let object = |key: String| StoredObject {
            key,
            size: 0,
            modified_millis: 0,
        };
        let checkpoint = |term| shoal_engine::SegmentCheckpoint {
            primary_term: term,
            version: 9,
            local_checkpoint: 0,
            max_seq_no: 0,
            files: vec![],
            meta: String::new(),
        };
        let batches = [
            object(keys.translog_batch(3, 0, 4)),
            object("u/1/translog/data/junk".into()),
        ];
        let starts = [object(keys.term_start(TermStart { term: 5, from: 5 }))];
        let metadata = [object(keys.metadata_file(&checkpoint(4), 1))];
        assert_eq!(highest_term(&batches, &starts, &metadata), Some(5));
        assert_eq!(highest_term(&batches, &[], &metadata), Some(4));
        let newer_segments = [object(keys.metadata_file(&checkpoint(8), 1))];
        assert_eq!(highest_term(&batches, &starts, &newer_segments), Some(8));
        assert_eq!(highest_term(&[], &[], &[]), None);
        let refused = repository_ahead("ledger", 1, 5, 4);
        assert_eq!(refused.status, 500);
        assert_eq!(refused.error_type, "illegal_state_exception");
        assert!(
            refused.reason.contains("primary term [5]"),
            "{}",
            refused.reason
        );
        assert_eq!(refused.kind, crate::error::ErrorKind::CopyFailed);
    }
}
