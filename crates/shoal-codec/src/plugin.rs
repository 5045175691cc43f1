//! [`SourceStorePlugin`]: the tantivy segment plugin that writes and merges `_source`.

use std::any::Any;
use std::io::{self, Write};

use tantivy::directory::TerminatingWrite;
use tantivy::index::{SegmentComponent, SegmentId};
use tantivy::indexer::doc_id_mapping::{DocIdMapping, MappingType};
use tantivy::schema::document::{ErasedDocument, ErasedValue, ReferenceValueLeaf, Value};
use tantivy::schema::{Field, FieldType, Schema};
use tantivy::{
    DocId, PluginMergeContext, PluginWriter, PluginWriterContext, Segment, SegmentPlugin,
    TantivyDocument, TantivyError,
};

use crate::codec::SourceCodec;
use crate::compress::DictTrainer;
use crate::format::SourceFileWriter;
use crate::reader::SourceReader;
use crate::{SOURCE_EXTENSION, SOURCE_TYPE_NAME};

/// Keeps `_source` out of tantivy's doc store, in a segment file of its own (`<segment>.src`)
/// compressed with the index's [`SourceCodec`].
///
/// The codec only decides how *new* segments (flushes and merges) are written; every file
/// records its codec, so segments written with different codecs coexist in one index. The
/// plugin set is fixed per index by extension (`src`), not by codec: reopening an index with a
/// plugin carrying another codec is allowed.
///
/// Index sorting (`IndexSettings::sort_by_field`) is not supported: tantivy 0.27 hands plugins
/// the doc id remapping but keeps its accessors crate-private, so the plugin fails the flush /
/// merge rather than misalign sources with doc ids.
#[derive(Clone)]
pub struct SourceStorePlugin {
    codec: SourceCodec,
    block_size: usize,
    numbers: SegmentNumbers,
    flushed: FlushedSegments,
}

/// Hands out the numbers segments are named by (Lucene's `_<n>`, `n` in base 36), one per
/// flushed or merged segment, in the order their `_source` files are written. The engine
/// raises it above the numbers of the segments it opens ([`SegmentNumbers::observe`]), so a
/// copy never gives a number twice.
#[derive(Clone, Debug, Default)]
pub struct SegmentNumbers(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl SegmentNumbers {
    /// The number of the next segment written.
    pub fn next(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel)
    }

    /// Leaves `count` numbers unused: a promoted replica skips those its old primary may
    /// have given segments that never reached it (OpenSearch bumps its counter alike).
    pub fn skip(&self, count: u64) {
        self.0.fetch_add(count, std::sync::atomic::Ordering::AcqRel);
    }

    /// A segment numbered `number` exists: later segments are numbered above it.
    pub fn observe(&self, number: u64) {
        self.0.fetch_max(
            number.saturating_add(1),
            std::sync::atomic::Ordering::AcqRel,
        );
    }
}

/// The ids of the segments the indexing threads flushed (not merged), recorded when their
/// `_source` file is written, before tantivy applies pending deletes to them: the engine tells
/// from it a new segment that holds only writes it has versioned (see its `_id` deletes), and
/// forgets the ids it no longer needs ([`FlushedSegments::retain`]).
#[derive(Clone, Debug, Default)]
pub struct FlushedSegments(
    std::sync::Arc<parking_lot::Mutex<std::collections::HashSet<SegmentId>>>,
);

impl FlushedSegments {
    fn record(&self, segment: SegmentId) {
        self.0.lock().insert(segment);
    }

    /// Whether `segment` was written by a flush.
    pub fn contains(&self, segment: &SegmentId) -> bool {
        self.0.lock().contains(segment)
    }

    /// Keeps only the ids `keep` says to.
    pub fn retain(&self, keep: impl FnMut(&SegmentId) -> bool) {
        self.0.lock().retain(keep);
    }

    /// How many ids are kept.
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lucene's name for segment number `n`: `_` and `n` in base 36.
pub fn segment_name(number: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut digits = Vec::new();
    let mut n = number;
    loop {
        digits.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    format!("_{}", String::from_utf8(digits).expect("ascii digits"))
}

impl SourceStorePlugin {
    /// A plugin writing new segments with `codec`, at the codec's default block size.
    pub fn new(codec: SourceCodec) -> SourceStorePlugin {
        SourceStorePlugin {
            codec,
            block_size: codec.default_block_size(),
            numbers: SegmentNumbers::default(),
            flushed: FlushedSegments::default(),
        }
    }

    /// Records the segments flushed by the indexing threads in `flushed`.
    pub fn with_flushed(mut self, flushed: FlushedSegments) -> SourceStorePlugin {
        self.flushed = flushed;
        self
    }

    /// Numbers new segments from `numbers` (shared with the engine that names them).
    pub fn with_numbers(mut self, numbers: SegmentNumbers) -> SourceStorePlugin {
        self.numbers = numbers;
        self
    }

    /// Overrides the raw bytes per compressed block (min 1).
    pub fn with_block_size(mut self, block_size: usize) -> SourceStorePlugin {
        self.block_size = block_size.max(1);
        self
    }

    /// The codec new segments are written with.
    pub fn codec(&self) -> SourceCodec {
        self.codec
    }

    /// Raw bytes per compressed block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Whether new files need a sample of all their documents first (a zstd dictionary).
    fn trains_dictionary(&self) -> bool {
        matches!(self.codec, SourceCodec::Zstd { .. })
    }

    fn write_file(
        &self,
        segment: &Segment,
        num_docs: u64,
        total_bytes: u64,
        docs: &mut DocFeeder<'_>,
        sample: impl FnOnce(&mut DictTrainer, u64) -> tantivy::Result<()>,
    ) -> tantivy::Result<()> {
        let dictionary = if self.trains_dictionary() {
            let mut trainer = DictTrainer::default();
            sample(&mut trainer, DictTrainer::stride(num_docs, total_bytes))?;
            trainer.train()
        } else {
            None
        };
        let mut writer = SourceFileWriter::new(
            open_source_file(segment)?,
            self.codec,
            self.block_size,
            dictionary,
        )?;
        docs(&mut |doc| writer.add(doc))?;
        writer.finish(self.numbers.next())?.terminate()?;
        Ok(())
    }
}

/// Creates the segment's `_source` file.
fn open_source_file(segment: &Segment) -> tantivy::Result<tantivy::directory::WritePtr> {
    Ok(segment.open_write(SegmentComponent::Custom(SOURCE_EXTENSION.to_string()))?)
}

/// Receives each document's source in doc id order.
type DocSink<'a> = dyn FnMut(Option<&[u8]>) -> io::Result<()> + 'a;
/// Feeds every document of the new segment, in doc id order, to a [`DocSink`].
type DocFeeder<'a> = dyn FnMut(&mut DocSink<'_>) -> tantivy::Result<()> + 'a;

/// Finds the `_source` custom field of a schema (by custom type name).
pub(crate) fn find_source_field(schema: &Schema) -> Option<Field> {
    schema
        .fields()
        .find_map(|(field, entry)| match entry.field_type() {
            FieldType::Custom(options) if options.type_name() == SOURCE_TYPE_NAME => Some(field),
            _ => None,
        })
}

fn remapping_unsupported() -> TantivyError {
    TantivyError::InvalidArgument(
        "shoal-codec: the _source store does not support index sorting / doc id remapping \
         (tantivy 0.27 does not expose the mapping to plugins)"
            .to_string(),
    )
}

impl SegmentPlugin for SourceStorePlugin {
    fn extensions(&self) -> &[&str] {
        &[SOURCE_EXTENSION]
    }

    fn create_writer(&self, ctx: &PluginWriterContext) -> tantivy::Result<Box<dyn PluginWriter>> {
        let settings = ctx.segment.index().settings();
        if settings.sort_by_field.is_some() || settings.manual_doc_id_mapping {
            return Err(remapping_unsupported());
        }
        let field = find_source_field(&ctx.segment.schema());
        Ok(Box::new(SourcePluginWriter::new(self.clone(), field)?))
    }

    fn merge(&self, ctx: PluginMergeContext) -> tantivy::Result<()> {
        if ctx.doc_id_mapping.mapping_type() == MappingType::Shuffled {
            return Err(remapping_unsupported());
        }
        // Stacked / StackedWithDeletes: the new doc ids are the alive docs of each reader, in
        // reader order — exactly what tantivy's merger builds for a trivial mapping.
        let sources: Vec<SourceReader> = ctx
            .readers
            .iter()
            .map(|reader| SourceReader::open_with_cache(reader, 1))
            .collect::<tantivy::Result<_>>()?;
        let num_docs: u64 = ctx.readers.iter().map(|r| r.num_docs() as u64).sum();
        let total_bytes: u64 = ctx
            .readers
            .iter()
            .zip(&sources)
            .map(|(reader, source)| {
                let max_doc = reader.max_doc().max(1) as u64;
                source.raw_bytes() * reader.num_docs() as u64 / max_doc
            })
            .sum();
        let sample = |trainer: &mut DictTrainer, stride: u64| -> tantivy::Result<()> {
            let mut ord = 0u64;
            'readers: for (reader, source) in ctx.readers.iter().zip(&sources) {
                for doc in reader.doc_ids_alive() {
                    if DictTrainer::is_sampled(ord, stride) {
                        if trainer.is_full() {
                            break 'readers;
                        }
                        source.with_source(doc, |bytes| {
                            if let Some(bytes) = bytes {
                                trainer.add(bytes)
                            }
                        })?;
                    }
                    ord += 1;
                }
            }
            Ok(())
        };
        let mut docs = |add: &mut DocSink<'_>| {
            for (reader, source) in ctx.readers.iter().zip(&sources) {
                for doc in reader.doc_ids_alive() {
                    source.with_source(doc, &mut *add)??;
                }
            }
            Ok(())
        };
        self.write_file(ctx.target_segment, num_docs, total_bytes, &mut docs, sample)
    }
}

/// Collects the sources of a segment being indexed.
pub struct SourcePluginWriter {
    plugin: SourceStorePlugin,
    field: Option<Field>,
    collected: Collected,
}

enum Collected {
    /// Compressed block by block as documents come, so that a flush (what a refresh waits
    /// for) only writes them out.
    Compressing(SourceFileWriter<Vec<u8>>),
    /// Kept raw until the segment is flushed: a zstd dictionary is trained on a sample of
    /// all of them first.
    Raw {
        /// Concatenated source bytes.
        data: Vec<u8>,
        /// Per document: source length, `u32::MAX` = no source.
        lens: Vec<u32>,
    },
}

const NO_SOURCE: u32 = u32::MAX;

impl SourcePluginWriter {
    fn new(plugin: SourceStorePlugin, field: Option<Field>) -> tantivy::Result<SourcePluginWriter> {
        let collected = if plugin.trains_dictionary() {
            Collected::Raw {
                data: Vec::new(),
                lens: Vec::new(),
            }
        } else {
            let writer = SourceFileWriter::new(Vec::new(), plugin.codec, plugin.block_size, None)?;
            Collected::Compressing(writer)
        };
        Ok(SourcePluginWriter {
            plugin,
            field,
            collected,
        })
    }

    fn push(&mut self, source: Option<&[u8]>) -> tantivy::Result<()> {
        let (data, lens) = match &mut self.collected {
            Collected::Compressing(writer) => return Ok(writer.add(source)?),
            Collected::Raw { data, lens } => (data, lens),
        };
        match source {
            Some(bytes) => {
                let len = u32::try_from(bytes.len())
                    .ok()
                    .filter(|len| *len != NO_SOURCE)
                    .ok_or_else(|| {
                        TantivyError::InvalidArgument("_source larger than 4 GiB".to_string())
                    })?;
                data.extend_from_slice(bytes);
                lens.push(len);
            }
            None => lens.push(NO_SOURCE),
        }
        Ok(())
    }

    /// Number of documents collected so far.
    pub fn num_docs(&self) -> usize {
        match &self.collected {
            Collected::Compressing(writer) => writer.num_docs() as usize,
            Collected::Raw { lens, .. } => lens.len(),
        }
    }
}

/// Writes the raw sources collected, compressed with a dictionary trained on them.
fn write_raw(
    plugin: &SourceStorePlugin,
    segment: &Segment,
    data: &[u8],
    lens: &[u32],
) -> tantivy::Result<()> {
    let doc = |i: usize, start: usize| -> (Option<&[u8]>, usize) {
        match lens[i] {
            NO_SOURCE => (None, start),
            len => {
                let end = start + len as usize;
                (Some(&data[start..end]), end)
            }
        }
    };
    let sample = |trainer: &mut DictTrainer, stride: u64| -> tantivy::Result<()> {
        let mut start = 0;
        for i in 0..lens.len() {
            let (bytes, next) = doc(i, start);
            start = next;
            if DictTrainer::is_sampled(i as u64, stride) {
                if trainer.is_full() {
                    break;
                }
                if let Some(bytes) = bytes {
                    trainer.add(bytes);
                }
            }
        }
        Ok(())
    };
    let mut docs = |add: &mut DocSink<'_>| {
        let mut start = 0;
        for i in 0..lens.len() {
            let (bytes, next) = doc(i, start);
            start = next;
            add(bytes)?;
        }
        Ok(())
    };
    let num_docs = lens.len() as u64;
    plugin.write_file(segment, num_docs, data.len() as u64, &mut docs, sample)
}

/// The first custom value of `field` in a type-erased document.
fn erased_source(doc: &dyn ErasedDocument, field: Field) -> Option<&[u8]> {
    doc.erased_fields().find_map(|(f, value)| match value {
        ErasedValue::Leaf(ReferenceValueLeaf::Custom(bytes)) if f == field => Some(bytes),
        _ => None,
    })
}

impl PluginWriter for SourcePluginWriter {
    fn add_document(
        &mut self,
        doc_id: DocId,
        doc: &dyn ErasedDocument,
        _schema: &Schema,
    ) -> tantivy::Result<()> {
        debug_assert_eq!(doc_id as usize, self.num_docs());
        let source = match self.field {
            None => None,
            // If a document carries several values, the first one is the source.
            Some(field) => match doc.as_any().downcast_ref::<TantivyDocument>() {
                Some(doc) => doc.get_all(field).find_map(|value| value.as_custom()),
                None => erased_source(doc, field),
            },
        };
        self.push(source)
    }

    fn serialize(
        self: Box<Self>,
        segment: &Segment,
        doc_id_map: Option<&DocIdMapping>,
    ) -> tantivy::Result<()> {
        if doc_id_map.is_some() {
            return Err(remapping_unsupported());
        }
        let this = *self;
        match this.collected {
            Collected::Raw { data, lens } => write_raw(&this.plugin, segment, &data, &lens)?,
            Collected::Compressing(writer) => {
                let file = writer.finish(this.plugin.numbers.next())?;
                let mut write = open_source_file(segment)?;
                write.write_all(&file)?;
                write.terminate()?;
            }
        }
        this.plugin.flushed.record(segment.id());
        Ok(())
    }

    fn mem_usage(&self) -> usize {
        match &self.collected {
            Collected::Compressing(writer) => writer.heap_bytes(),
            Collected::Raw { data, lens } => {
                data.capacity() + lens.capacity() * std::mem::size_of::<u32>()
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
