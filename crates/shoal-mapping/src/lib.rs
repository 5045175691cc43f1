//! Index mappings: the OpenSearch mapping model, the fixed tantivy schema every shard
//! uses, the analyzers, date formats, and the parser that turns a `_source` document into
//! a tantivy document plus any dynamic mapping update it implies.
//!
//! tantivy schemas are fixed when an index is created, while OpenSearch mappings grow.
//! Shoal bridges the two with a fixed set of tantivy JSON fields, one per *kind* of
//! indexing (keyword, numeric, one per text analyzer): a user field `a.b` of type
//! `keyword` lives at JSON path `a.b` inside `_kw`, a `long` inside `_num`, a `text`
//! field analyzed with `english` inside `_txt_english`. The mapping says which one.

pub mod analysis;
pub mod date;
mod error;
mod field;
mod limits;
mod mapping;
mod parser;
pub mod schema;
mod standard_tokenizer;

pub use error::MapperError;
pub use field::{Analyzer, Dynamic, FieldMapping, FieldType, NumericKind};
pub use limits::MappingLimits;
pub use mapping::{Mapping, ObjectMapping, Property};
pub use parser::{DocumentParser, ParsedDocument};
pub use schema::{IndexedIn, ShardSchema};
