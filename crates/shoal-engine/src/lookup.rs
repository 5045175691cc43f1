//! Reads of committed documents: find the live doc of an `_id`, its version fields and source.

use shoal_codec::SourceReaderCache;
use shoal_mapping::ShardSchema;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocAddress, DocSet, Searcher, Term, TERMINATED};

use crate::id_filter::{IdFilters, LiveDocs, Searched};
use crate::EngineError;

/// Version fields of a committed document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocVersion {
    pub address: DocAddress,
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
}

/// Finds the live document with this `_id` in a searcher. With delete-then-add updates
/// there is at most one; if a crash replay left two, the highest seq_no wins.
pub(crate) fn find_doc(
    searcher: &Searcher,
    schema: &ShardSchema,
    filters: &IdFilters,
    id: &str,
) -> Result<Option<DocVersion>, EngineError> {
    Ok(search_id(searcher, schema, filters, id)?.0)
}

/// [`find_doc`], and what it searched: the searcher's segments and every live document with
/// this `_id` in them, what the delete of an update removes without looking again.
pub(crate) fn find_live_docs(
    searcher: &Searcher,
    schema: &ShardSchema,
    filters: &IdFilters,
    id: &str,
) -> Result<(Option<DocVersion>, Searched), EngineError> {
    let (best, live) = search_id(searcher, schema, filters, id)?;
    let segments = filters.segments_of(searcher);
    Ok((best, Searched { segments, live }))
}

/// The live document with the highest seq_no, and every live one, by segment.
fn search_id(
    searcher: &Searcher,
    schema: &ShardSchema,
    filters: &IdFilters,
    id: &str,
) -> Result<(Option<DocVersion>, LiveDocs), EngineError> {
    let term = Term::from_field_text(schema.id, id);
    let mut best: Option<DocVersion> = None;
    let mut live = Vec::new();
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        if !filters.may_contain(segment, id)? {
            continue;
        }
        let inverted = segment.inverted_index(schema.id)?;
        let Some(mut postings) = inverted.read_postings(&term, IndexRecordOption::Basic)? else {
            continue;
        };
        let alive = segment.alive_bitset();
        let fast = segment.fast_fields();
        let seq_nos = fast.i64(crate::engine::SEQ_NO)?;
        let terms = fast.i64(crate::engine::PRIMARY_TERM)?;
        let versions = fast.i64(crate::engine::VERSION)?;
        let mut doc = postings.doc();
        while doc != TERMINATED {
            if alive.is_none_or(|bits| bits.is_alive(doc)) {
                live.push((segment.segment_id(), doc));
                let candidate = DocVersion {
                    address: DocAddress::new(segment_ord as u32, doc),
                    seq_no: seq_nos.first(doc).unwrap_or(-1),
                    primary_term: terms.first(doc).unwrap_or(0),
                    version: versions.first(doc).unwrap_or(1),
                };
                if best.as_ref().is_none_or(|b| candidate.seq_no > b.seq_no) {
                    best = Some(candidate);
                }
            }
            doc = postings.advance();
        }
    }
    Ok((best, live))
}

/// Reads the `_source` of a committed document.
pub fn read_source(
    searcher: &Searcher,
    cache: &SourceReaderCache,
    address: DocAddress,
) -> Result<Option<Vec<u8>>, EngineError> {
    let segment = searcher.segment_reader(address.segment_ord);
    Ok(cache.get_or_open(segment)?.get(address.doc_id)?)
}
