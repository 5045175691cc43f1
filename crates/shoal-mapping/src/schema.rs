//! The fixed tantivy schema shared by every shard, and where each mapped field lives in it.

use tantivy::schema::{
    Field, IndexRecordOption, JsonObjectOptions, NumericOptions, Schema, TextFieldIndexing, FAST,
    STRING,
};

use crate::analysis::tokenizer_name;
use crate::{Analyzer, FieldMapping, FieldType};

pub const ID_FIELD: &str = "_id";
pub const SEQ_NO_FIELD: &str = "_seq_no";
pub const PRIMARY_TERM_FIELD: &str = "_primary_term";
pub const VERSION_FIELD: &str = "_version";
pub const ROUTING_FIELD: &str = "_routing";
pub const FIELD_NAMES_FIELD: &str = "_field_names";
pub const KEYWORD_FIELD: &str = "_kw";
pub const NUMERIC_FIELD: &str = "_num";

/// Name of the tantivy JSON field holding text analyzed with `analyzer`.
pub fn text_field_name(analyzer: Analyzer) -> &'static str {
    match analyzer {
        Analyzer::Standard => "_txt_standard",
        Analyzer::Simple => "_txt_simple",
        Analyzer::Whitespace => "_txt_whitespace",
        Analyzer::Keyword => "_txt_keyword",
        Analyzer::English => "_txt_english",
    }
}

/// Where a mapped field's values are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexedIn {
    /// Analyzed text with positions in the JSON field for its analyzer.
    Text(Field, Analyzer),
    /// Exact terms (keyword, ip) in `_kw`, also a fast column for sorting and aggregations.
    Keyword(Field),
    /// Numbers, booleans and dates in `_num`, also fast columns.
    Numeric(Field),
    /// `index: false` and no doc values: only in `_source`.
    NotIndexed,
}

/// The tantivy fields of a shard index. Built once; identical for every index.
#[derive(Debug, Clone)]
pub struct ShardSchema {
    pub schema: Schema,
    pub id: Field,
    pub seq_no: Field,
    pub primary_term: Field,
    pub version: Field,
    pub routing: Field,
    pub field_names: Field,
    pub source: Field,
    pub keyword: Field,
    pub numeric: Field,
    text: [Field; 5],
}

impl ShardSchema {
    /// Builds the schema. `add_source` adds the `_source` field (owned by the codec crate).
    pub fn build(
        add_source: impl FnOnce(&mut tantivy::schema::SchemaBuilder) -> Field,
    ) -> ShardSchema {
        let mut builder = Schema::builder();
        let id = builder.add_text_field(ID_FIELD, STRING | FAST);
        // A column only: sorts, aggregations and hits read it there, nothing looks a document
        // up by it, and as a term every document added one more entry to the term dictionary.
        let seq_no = builder.add_i64_field(SEQ_NO_FIELD, NumericOptions::default().set_fast());
        let primary_term =
            builder.add_i64_field(PRIMARY_TERM_FIELD, NumericOptions::default().set_fast());
        let version = builder.add_i64_field(VERSION_FIELD, NumericOptions::default().set_fast());
        let routing = builder.add_text_field(ROUTING_FIELD, STRING | FAST);
        let field_names = builder.add_text_field(FIELD_NAMES_FIELD, STRING);
        let keyword_indexing = TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_index_option(IndexRecordOption::WithFreqs)
            .set_fieldnorms(false);
        let keyword = builder.add_json_field(
            KEYWORD_FIELD,
            JsonObjectOptions::default()
                .set_indexing_options(keyword_indexing)
                .set_fast("raw")
                .set_expand_dots_enabled(),
        );
        let numeric = builder.add_json_field(
            NUMERIC_FIELD,
            JsonObjectOptions::default()
                .set_indexing_options(TextFieldIndexing::default().set_tokenizer("raw"))
                .set_fast("raw")
                .set_expand_dots_enabled(),
        );
        let text = Analyzer::ALL.map(|analyzer| {
            let indexing = TextFieldIndexing::default()
                .set_tokenizer(tokenizer_name(analyzer))
                .set_index_option(IndexRecordOption::WithFreqsAndPositions);
            builder.add_json_field(
                text_field_name(analyzer),
                JsonObjectOptions::default()
                    .set_indexing_options(indexing)
                    .set_expand_dots_enabled(),
            )
        });
        let source = add_source(&mut builder);
        ShardSchema {
            schema: builder.build(),
            id,
            seq_no,
            primary_term,
            version,
            routing,
            field_names,
            source,
            keyword,
            numeric,
            text,
        }
    }

    /// Looks the fields up in an existing schema (after reopening an index).
    pub fn from_schema(schema: Schema) -> tantivy::Result<ShardSchema> {
        let get = |name: &str| schema.get_field(name);
        Ok(ShardSchema {
            id: get(ID_FIELD)?,
            seq_no: get(SEQ_NO_FIELD)?,
            primary_term: get(PRIMARY_TERM_FIELD)?,
            version: get(VERSION_FIELD)?,
            routing: get(ROUTING_FIELD)?,
            field_names: get(FIELD_NAMES_FIELD)?,
            source: get("_source")?,
            keyword: get(KEYWORD_FIELD)?,
            numeric: get(NUMERIC_FIELD)?,
            text: Analyzer::ALL.map(|a| get(text_field_name(a)).expect("text fields exist")),
            schema,
        })
    }

    /// The JSON field holding text analyzed with `analyzer`.
    pub fn text_field(&self, analyzer: Analyzer) -> Field {
        let index = Analyzer::ALL
            .iter()
            .position(|a| *a == analyzer)
            .expect("all analyzers listed");
        self.text[index]
    }

    /// Where a mapped field is indexed.
    pub fn indexed_in(&self, field: &FieldMapping) -> IndexedIn {
        match field.field_type {
            FieldType::Text if field.index => IndexedIn::Text(
                self.text_field(field.index_analyzer()),
                field.index_analyzer(),
            ),
            FieldType::Text => IndexedIn::NotIndexed,
            FieldType::Keyword | FieldType::Ip => IndexedIn::Keyword(self.keyword),
            FieldType::Binary => IndexedIn::NotIndexed,
            _ => IndexedIn::Numeric(self.numeric),
        }
    }

    /// The fast-field column name of a mapped field (for sorting and aggregations),
    /// or `None` for text fields, which have no doc values.
    pub fn fast_column(&self, path: &str, field: &FieldMapping) -> Option<String> {
        match self.indexed_in(field) {
            IndexedIn::Keyword(_) => Some(format!("{KEYWORD_FIELD}.{path}")),
            IndexedIn::Numeric(_) => Some(format!("{NUMERIC_FIELD}.{path}")),
            IndexedIn::Text(..) | IndexedIn::NotIndexed => None,
        }
    }
}
