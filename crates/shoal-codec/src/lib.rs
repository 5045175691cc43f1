//! `shoal-codec`: the `_source` store of Shoal, with OpenSearch's `index.codec` choices.
//!
//! tantivy's doc store only knows lz4 and plain zstd and cannot be swapped out, so Shoal keeps
//! `_source` out of it: the verbatim source JSON of each document travels in a tantivy
//! *custom* field (never indexed nor stored by tantivy's built-ins) and the
//! [`SourceStorePlugin`] segment plugin writes it to a segment file of its own
//! (`<segment>.src`), compressed with the codec chosen by `index.codec`:
//!
//! | `index.codec`                       | blocks                                   |
//! |-------------------------------------|------------------------------------------|
//! | `default` (`lz4`, `best_speed`)     | LZ4, 16 KiB raw per block                |
//! | `best_compression` (`zlib`)         | DEFLATE level 6, 60 KiB                  |
//! | `zstd`                              | zstd level 1-6 + per-segment trained dictionary, 16 KiB |
//! | `zstd_no_dict`                      | zstd level 1-6, 16 KiB                   |
//!
//! # How the engine uses it
//!
//! ```no_run
//! use std::sync::Arc;
//! use tantivy::schema::Schema;
//! use tantivy::{Index, IndexWriter, TantivyDocument};
//! use shoal_codec::{add_source_field, SourceCodec, SourceReaderCache, SourceStorePlugin};
//!
//! # fn main() -> tantivy::Result<()> {
//! # let dir = std::path::Path::new("/tmp/x");
//! // Index creation: the schema gets the `_source` field, the plugin is registered.
//! let mut builder = Schema::builder();
//! let source = add_source_field(&mut builder);
//! let codec = SourceCodec::from_settings("zstd", Some(3)).expect("validated by the REST layer");
//! let index = Index::builder()
//!     .schema(builder.build())
//!     .register_plugin(Arc::new(SourceStorePlugin::new(codec)))
//!     .create_in_dir(dir)?;
//! drop(index);
//!
//! // Every later open: register the plugin again before creating a writer, with the codec the
//! // index has *now* (a changed `index.codec` applies to new segments and merges). Without it
//! // `IndexWriter` creation fails with `TantivyError::MissingPlugin("src")`; readers work
//! // either way.
//! let mut index = Index::open_in_dir(dir)?;
//! index.register_plugin(Arc::new(SourceStorePlugin::new(codec)));
//! let source = shoal_codec::source_field(&index.schema()).expect("index has _source");
//! let mut writer: IndexWriter = index.writer(50_000_000)?;
//!
//! let mut doc = TantivyDocument::new();
//! doc.add_custom(source, br#"{"title":"hello"}"#); // verbatim request bytes
//! writer.add_document(doc)?;
//! writer.commit()?;
//!
//! // Fetching: one decoded reader per segment, kept across searches.
//! let cache = SourceReaderCache::new();
//! let searcher = index.reader()?.searcher();
//! let segment = searcher.segment_reader(0);
//! let bytes: Option<Vec<u8>> = cache.get_or_open(segment)?.get(0)?;
//! # Ok(()) }
//! ```
//!
//! A plugin is part of the index structure: tantivy refuses to add it to an index created
//! without it (`UnexpectedPlugin`), so it must be registered at creation.

mod codec;
mod compress;
mod format;
mod plugin;
mod reader;

#[cfg(test)]
mod checksum_tests;
#[cfg(test)]
mod tests;

pub use codec::{
    CodecError, SourceCodec, DEFAULT_COMPRESSION_LEVEL, INDEX_CODEC_COMPRESSION_LEVEL_SETTING,
    INDEX_CODEC_SETTING, MAX_COMPRESSION_LEVEL, MIN_COMPRESSION_LEVEL,
};
pub use format::SourceCorruption;
pub use plugin::{
    segment_name, FlushedSegments, SegmentNumbers, SourcePluginWriter, SourceStorePlugin,
};
pub use reader::{segment_source_bytes, SourceReader, SourceReaderCache, DEFAULT_CACHED_BLOCKS};
use tantivy::schema::{Field, Schema, SchemaBuilder};

/// Name of the schema field carrying each document's verbatim `_source` bytes.
pub const SOURCE_FIELD: &str = "_source";
/// Custom field type name the [`SourceStorePlugin`] consumes.
pub const SOURCE_TYPE_NAME: &str = "shoal_source";
/// File extension of the `_source` segment file. Part of the on-disk format: tantivy records
/// the extensions of the registered plugins in `meta.json`.
pub const SOURCE_EXTENSION: &str = "src";

/// Adds the `_source` custom field (type [`SOURCE_TYPE_NAME`]) to a schema. Fill it with
/// `TantivyDocument::add_custom(field, bytes)`. tantivy's built-ins ignore custom fields (not
/// indexed, not stored, not fast), so the bytes only end up in the plugin's file.
pub fn add_source_field(builder: &mut SchemaBuilder) -> Field {
    builder.add_custom_field(SOURCE_FIELD, SOURCE_TYPE_NAME, serde_json::Value::Null)
}

/// Whether a tantivy error says stored bytes are damaged: a `_source` block or index whose
/// checksum does not match ([`SourceCorruption`]), or tantivy's own `DataCorruption`.
pub fn is_corruption(error: &tantivy::TantivyError) -> bool {
    match error {
        tantivy::TantivyError::DataCorruption(_) => true,
        tantivy::TantivyError::IoError(io) => io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<SourceCorruption>().is_some()),
        _ => false,
    }
}

/// The `_source` field of a schema built with [`add_source_field`].
pub fn source_field(schema: &Schema) -> Option<Field> {
    plugin::find_source_field(schema)
}
