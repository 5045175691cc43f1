//! Reading `_source` back: [`SourceReader`] (one per segment) and [`SourceReaderCache`].

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tantivy::directory::FileSlice;
use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::{DocId, HasLen, SegmentReader, TantivyError};

use crate::codec::SourceCodec;
use crate::compress::BlockDecoder;
use crate::format::{self, BlockMeta, DecodedBlock, FOOTER_TRAILER_LEN};
use crate::SOURCE_EXTENSION;

/// Number of decompressed blocks a [`SourceReader`] keeps by default.
pub const DEFAULT_CACHED_BLOCKS: usize = 2;

fn io_err(err: io::Error) -> TantivyError {
    TantivyError::from(err)
}

fn component() -> SegmentComponent {
    SegmentComponent::Custom(SOURCE_EXTENSION.to_string())
}

/// Random access to the `_source` of one segment.
///
/// Thread-safe (`Send + Sync`); share it behind an `Arc` (see [`SourceReaderCache`]). It keeps
/// the last few decompressed blocks, so reading documents of one block in a row decompresses
/// the block once.
pub struct SourceReader {
    blocks: FileSlice,
    index: Vec<BlockMeta>,
    descriptor_offset: u64,
    num_docs: u32,
    codec: SourceCodec,
    block_size: u32,
    dictionary_len: usize,
    file_len: u64,
    decoder: BlockDecoder,
    cache: Mutex<VecDeque<(usize, Arc<DecodedBlock>)>>,
    cache_capacity: usize,
    blocks_decompressed: AtomicU64,
    segment_number: Option<u64>,
}

impl SourceReader {
    /// The number the segment is named by (`None`: written before segments had one).
    pub fn segment_number(&self) -> Option<u64> {
        self.segment_number
    }

    /// Opens the `_source` file of a segment.
    pub fn open(segment_reader: &SegmentReader) -> tantivy::Result<SourceReader> {
        let file = segment_reader.open_read(component())?;
        SourceReader::open_file(file, DEFAULT_CACHED_BLOCKS)
    }

    /// Opens the `_source` file of a segment, caching up to `cached_blocks` decompressed
    /// blocks (0 disables the cache).
    pub fn open_with_cache(
        segment_reader: &SegmentReader,
        cached_blocks: usize,
    ) -> tantivy::Result<SourceReader> {
        let file = segment_reader.open_read(component())?;
        SourceReader::open_file(file, cached_blocks)
    }

    /// The segment number of a `_source` file, from its footer and the 8 bytes before its
    /// block index, without reading the index or the dictionary (naming every segment of a
    /// copy when a writer opens must not parse them all). `None` before format version 3.
    pub fn read_segment_number(file: &FileSlice) -> tantivy::Result<Option<u64>> {
        if file.len() < FOOTER_TRAILER_LEN {
            return Err(io_err(format::corrupt("file too short")));
        }
        let trailer = file.read_bytes_slice(file.len() - FOOTER_TRAILER_LEN..file.len())?;
        let version = format::parse_trailer(trailer.as_slice()).map_err(io_err)?;
        if version < format::FORMAT_VERSION {
            return Ok(None);
        }
        let footer_len = format::footer_len(version);
        if file.len() < footer_len {
            return Err(io_err(format::corrupt("file too short")));
        }
        let footer = file.read_bytes_slice(file.len() - footer_len..file.len())?;
        let (descriptor_offset, index_offset, ..) =
            format::parse_footer(footer.as_slice(), version).map_err(io_err)?;
        let end = index_offset as usize;
        if end < descriptor_offset as usize + 8 || end > file.len() - footer_len {
            return Err(io_err(format::corrupt("offsets out of range")));
        }
        let number = file.read_bytes_slice(end - 8..end)?;
        Ok(Some(u64::from_le_bytes(
            number.as_slice().try_into().expect("8 bytes"),
        )))
    }

    /// Opens a `_source` file from its bytes (as returned by the directory, tantivy's footer
    /// already stripped).
    pub fn open_file(file: FileSlice, cached_blocks: usize) -> tantivy::Result<SourceReader> {
        let file_len = file.len() as u64;
        if (file_len as usize) < FOOTER_TRAILER_LEN {
            return Err(io_err(format::corrupt("file too short")));
        }
        let trailer = file.read_bytes_slice(file.len() - FOOTER_TRAILER_LEN..file.len())?;
        let version = format::parse_trailer(trailer.as_slice()).map_err(io_err)?;
        let footer_len = format::footer_len(version);
        if file.len() < footer_len {
            return Err(io_err(format::corrupt("file too short")));
        }
        let footer_start = file.len() - footer_len;
        let footer = file.read_bytes_slice(footer_start..file.len())?;
        let (descriptor_offset, index_offset, num_docs, num_blocks, tail_crc) =
            format::parse_footer(footer.as_slice(), version).map_err(io_err)?;
        if descriptor_offset > index_offset || index_offset > footer_start as u64 {
            return Err(io_err(format::corrupt("offsets out of range")));
        }
        let tail = file.read_bytes_slice(descriptor_offset as usize..footer_start)?;
        if let Some(expected) = tail_crc {
            // The crc covers the descriptor, the index and the footer fields before it.
            let mut crc = crc32c::crc32c(tail.as_slice());
            crc = crc32c::crc32c_append(crc, &footer.as_slice()[..24]);
            if version >= format::FORMAT_VERSION {
                crc = crc32c::crc32c_append(crc, &version.to_le_bytes());
            }
            if crc != expected {
                return Err(io_err(format::corrupt(format!(
                    "checksum mismatch in the descriptor and block index: crc32c {crc:08x}, recorded {expected:08x}"
                ))));
            }
        }
        let meta = format::parse_tail(
            tail.as_slice(),
            descriptor_offset,
            index_offset,
            num_docs,
            num_blocks,
            version,
        )
        .map_err(io_err)?;
        let dictionary_len = meta.dictionary.as_ref().map_or(0, Vec::len);
        Ok(SourceReader {
            segment_number: meta.segment_number,
            blocks: file.slice(0..descriptor_offset as usize),
            index: meta.index,
            descriptor_offset: meta.descriptor_offset,
            num_docs: meta.num_docs,
            codec: meta.codec,
            block_size: meta.block_size,
            dictionary_len,
            file_len,
            decoder: BlockDecoder::new(meta.dictionary),
            cache: Mutex::new(VecDeque::with_capacity(cached_blocks)),
            cache_capacity: cached_blocks,
            blocks_decompressed: AtomicU64::new(0),
        })
    }

    /// The source of `doc_id`: `None` when the document was indexed without source,
    /// `Some(bytes)` (possibly empty) otherwise.
    pub fn get(&self, doc_id: DocId) -> tantivy::Result<Option<Vec<u8>>> {
        self.with_source(doc_id, |source| source.map(<[u8]>::to_vec))
    }

    /// Calls `f` with the source of `doc_id` without copying it out of the decompressed
    /// block. `f` runs while no lock is held.
    pub fn with_source<R>(
        &self,
        doc_id: DocId,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> tantivy::Result<R> {
        if doc_id >= self.num_docs {
            return Err(TantivyError::InvalidArgument(format!(
                "doc id {doc_id} out of range: the segment's _source has {} documents",
                self.num_docs
            )));
        }
        let block_ord = self.index.partition_point(|b| b.first_doc <= doc_id) - 1;
        let block = self.block(block_ord)?;
        let in_block = (doc_id - self.index[block_ord].first_doc) as usize;
        Ok(f(block.doc(in_block)))
    }

    fn block(&self, ord: usize) -> tantivy::Result<Arc<DecodedBlock>> {
        {
            let mut cache = self.cache.lock();
            if let Some(pos) = cache.iter().position(|(o, _)| *o == ord) {
                let entry = cache.remove(pos).expect("position is valid");
                let block = entry.1.clone();
                cache.push_front(entry);
                return Ok(block);
            }
        }
        // Decompress without holding the lock; two threads missing on the same block both
        // decompress it, which is harmless.
        let meta = self.index[ord];
        let end = self
            .index
            .get(ord + 1)
            .map_or(self.descriptor_offset, |next| next.offset);
        let record = self
            .blocks
            .read_bytes_slice(meta.offset as usize..end as usize)?;
        format::check_block(record.as_slice(), &meta, ord).map_err(io_err)?;
        let (codec, payload) = format::decode_block_record(record.as_slice()).map_err(io_err)?;
        let raw = self
            .decoder
            .decode(codec, payload, meta.raw_len as usize)
            .map_err(io_err)?;
        self.blocks_decompressed.fetch_add(1, Ordering::Relaxed);
        let block_docs = self
            .index
            .get(ord + 1)
            .map_or(self.num_docs, |next| next.first_doc)
            - meta.first_doc;
        let block = Arc::new(DecodedBlock::parse(raw, block_docs as usize).map_err(io_err)?);
        if self.cache_capacity > 0 {
            let mut cache = self.cache.lock();
            if !cache.iter().any(|(o, _)| *o == ord) {
                if cache.len() >= self.cache_capacity {
                    cache.pop_back();
                }
                cache.push_front((ord, block.clone()));
            }
        }
        Ok(block)
    }

    /// Number of documents (= the segment's `max_doc`, deleted documents included).
    pub fn num_docs(&self) -> u32 {
        self.num_docs
    }

    /// The codec the file was written with (for the segment's stats / `_segments` API).
    pub fn codec(&self) -> SourceCodec {
        self.codec
    }

    /// Whether the file carries a trained zstd dictionary.
    pub fn has_dictionary(&self) -> bool {
        self.dictionary_len > 0
    }

    /// Size of the zstd dictionary (uncompressed), 0 without one.
    pub fn dictionary_len(&self) -> usize {
        self.dictionary_len
    }

    /// Number of compressed blocks.
    pub fn num_blocks(&self) -> usize {
        self.index.len()
    }

    /// Raw block size the file was written with.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Total uncompressed bytes of all blocks (source bytes plus per-doc length headers).
    pub fn raw_bytes(&self) -> u64 {
        self.index.iter().map(|b| b.raw_len as u64).sum()
    }

    /// Size of the file on disk (without tantivy's footer).
    pub fn stored_bytes(&self) -> u64 {
        self.file_len
    }

    /// How many blocks this reader has decompressed so far (cache misses).
    pub fn blocks_decompressed(&self) -> u64 {
        self.blocks_decompressed.load(Ordering::Relaxed)
    }

    /// Approximate heap held by the reader (index, dictionary, cached blocks).
    pub fn heap_bytes(&self) -> usize {
        self.index.capacity() * std::mem::size_of::<BlockMeta>()
            + self.dictionary_len
            + self
                .cache
                .lock()
                .iter()
                .map(|(_, b)| b.heap_size())
                .sum::<usize>()
    }
}

/// One [`SourceReader`] per segment, kept across searches. Segment files are immutable and
/// the `_source` file does not depend on deletes, so the [`SegmentId`] is a sufficient key.
#[derive(Default)]
pub struct SourceReaderCache {
    readers: RwLock<HashMap<SegmentId, Arc<SourceReader>>>,
}

impl SourceReaderCache {
    /// An empty cache.
    pub fn new() -> SourceReaderCache {
        SourceReaderCache::default()
    }

    /// The reader of `segment_reader`'s segment, opened on first use.
    pub fn get_or_open(
        &self,
        segment_reader: &SegmentReader,
    ) -> tantivy::Result<Arc<SourceReader>> {
        let id = segment_reader.segment_id();
        if let Some(reader) = self.readers.read().get(&id) {
            return Ok(reader.clone());
        }
        let reader = Arc::new(SourceReader::open(segment_reader)?);
        Ok(self.readers.write().entry(id).or_insert(reader).clone())
    }

    /// The cached reader of a segment, if any.
    pub fn get(&self, segment_id: SegmentId) -> Option<Arc<SourceReader>> {
        self.readers.read().get(&segment_id).cloned()
    }

    /// Drops the readers of segments not in `live` (call after a searcher reload so merged-away
    /// segments are released).
    pub fn retain_segments(&self, live: impl IntoIterator<Item = SegmentId>) {
        let live: std::collections::HashSet<SegmentId> = live.into_iter().collect();
        self.readers.write().retain(|id, _| live.contains(id));
    }

    /// Drops one segment's reader.
    pub fn remove(&self, segment_id: SegmentId) {
        self.readers.write().remove(&segment_id);
    }

    /// Drops every reader.
    pub fn clear(&self) {
        self.readers.write().clear();
    }

    /// Number of cached readers.
    pub fn len(&self) -> usize {
        self.readers.read().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.readers.read().is_empty()
    }
}

/// On-disk size of a segment's `_source` file (0 if it has none). Cheap: opens the file
/// (tantivy checks its footer) but reads and decompresses no block.
pub fn segment_source_bytes(segment_reader: &SegmentReader) -> u64 {
    segment_reader
        .open_read(component())
        .map(|file| file.len() as u64)
        .unwrap_or(0)
}

/// Opening `_source` files eagerly when a searcher generation is created matters: tantivy
/// opens its own components under its meta lock, but a plugin file opened lazily may already
/// be garbage-collected after a merge. The cache keeps every segment of a live generation.
impl tantivy::Warmer for SourceReaderCache {
    fn warm(&self, searcher: &tantivy::Searcher) -> tantivy::Result<()> {
        for segment_reader in searcher.segment_readers() {
            self.get_or_open(segment_reader)?;
        }
        Ok(())
    }

    fn garbage_collect(&self, live_generations: &[&tantivy::SearcherGeneration]) {
        let live: std::collections::HashSet<SegmentId> = live_generations
            .iter()
            .flat_map(|generation| generation.segments().keys().copied())
            .collect();
        self.readers.write().retain(|id, _| live.contains(id));
    }
}
