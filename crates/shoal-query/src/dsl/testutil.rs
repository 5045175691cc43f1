//! A real in-RAM shard index for the DSL tests: documents parsed by the mapping crate
//! exactly as the engine indexes them.

use std::sync::OnceLock;

use serde_json::{json, Value};
use shoal_mapping::{DocumentParser, Mapping, ShardSchema};
use tantivy::collector::TopDocs;
use tantivy::schema::BytesOptions;
use tantivy::{Index, IndexReader, IndexWriter};

use super::build_query;
use crate::{QueryContext, QueryError};

/// 2020-03-15T10:30:45.123Z, the `now` of every test request.
pub(crate) const NOW: i64 = 1_584_268_245_123;

pub(crate) struct Fixture {
    pub mapping: Mapping,
    pub schema: ShardSchema,
    reader: IndexReader,
    ids: Vec<String>,
}

impl Fixture {
    pub(crate) fn new(mapping: Value, docs: &[(&str, Value)]) -> Fixture {
        let mapping = Mapping::from_json(&mapping).expect("test mapping is valid");
        let schema = ShardSchema::build(|b| b.add_bytes_field("_source", BytesOptions::default()));
        let index = Index::create_in_ram(schema.schema.clone());
        shoal_mapping::analysis::register_analyzers(index.tokenizers());
        let mut writer: IndexWriter = index
            .writer_with_num_threads(1, 15_000_000)
            .expect("writer");
        let parser = DocumentParser::new(&mapping, &schema);
        for (id, source) in docs {
            let mut parsed = parser
                .parse_value(id, source)
                .expect("test document parses");
            parsed.doc.add_text(schema.id, id);
            writer.add_document(parsed.doc).expect("add document");
        }
        writer.commit().expect("commit");
        let reader = index.reader().expect("reader");
        assert!(
            reader.searcher().segment_readers().len() <= 1,
            "tests map doc ids to one segment"
        );
        let ids = docs.iter().map(|(id, _)| id.to_string()).collect();
        Fixture {
            mapping,
            schema,
            reader,
            ids,
        }
    }

    /// The shared corpus most tests query.
    pub(crate) fn standard() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| Fixture::new(standard_mapping(), &standard_docs()))
    }

    pub(crate) fn ctx(&self) -> QueryContext<'_> {
        QueryContext {
            mapping: &self.mapping,
            schema: &self.schema,
            now_millis: NOW,
            index: "test",
            default_fields: crate::context::all_fields(),
        }
    }

    pub(crate) fn try_scored(&self, query: Value) -> Result<Vec<(String, f32)>, QueryError> {
        let built = build_query(&query, &self.ctx())?;
        let searcher = self.reader.searcher();
        let hits = searcher
            .search(&built, &TopDocs::with_limit(1000).order_by_score())
            .map_err(QueryError::from)?;
        Ok(hits
            .into_iter()
            .map(|(score, addr)| (self.ids[addr.doc_id as usize].clone(), score))
            .collect())
    }

    /// Matching ids with scores, best first.
    pub(crate) fn scored(&self, query: Value) -> Vec<(String, f32)> {
        let text = query.to_string();
        self.try_scored(query)
            .unwrap_or_else(|e| panic!("query {text} failed: {e}"))
    }

    /// Matching ids, best score first (ties in index order).
    pub(crate) fn ids(&self, query: Value) -> Vec<String> {
        let mut hits = self.scored(query);
        hits.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.pos(&a.0).cmp(&self.pos(&b.0)))
        });
        hits.into_iter().map(|(id, _)| id).collect()
    }

    /// Matching ids in index order (for set assertions).
    pub(crate) fn matching(&self, query: Value) -> Vec<String> {
        let mut ids = self.ids(query);
        ids.sort_by_key(|id| self.pos(id));
        ids
    }

    /// Number of matches, counted with scoring disabled.
    pub(crate) fn count(&self, query: Value) -> usize {
        let built = build_query(&query, &self.ctx()).expect("query builds");
        built.count(&self.reader.searcher()).expect("count")
    }

    pub(crate) fn score_of(&self, query: Value, id: &str) -> f32 {
        self.scored(query)
            .into_iter()
            .find(|(i, _)| i == id)
            .map(|(_, s)| s)
            .unwrap_or(f32::NAN)
    }

    pub(crate) fn error(&self, query: Value) -> QueryError {
        match build_query(&query, &self.ctx()) {
            Err(e) => e,
            Ok(q) => panic!("expected an error for {query}, got {q:?}"),
        }
    }

    fn pos(&self, id: &str) -> usize {
        self.ids.iter().position(|i| i == id).unwrap_or(usize::MAX)
    }
}

/// `["1", "2"]` as owned strings.
pub(crate) fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn standard_mapping() -> Value {
    json!({"properties": {
        "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
        "body": {"type": "text", "analyzer": "english"},
        "tag": {"type": "keyword"},
        "count": {"type": "long"},
        "price": {"type": "double"},
        "rating": {"type": "float"},
        "active": {"type": "boolean"},
        "date": {"type": "date"},
        "day": {"type": "date", "format": "dd/MM/yyyy"},
        "ip": {"type": "ip"},
        "code": {"type": "text", "analyzer": "whitespace"},
        "author": {"properties": {"name": {"type": "text"}, "id": {"type": "keyword"}}},
        "hidden": {"type": "text", "index": false}
    }})
}

fn standard_docs() -> Vec<(&'static str, Value)> {
    vec![
        (
            "1",
            json!({
                "title": "The Quick Brown Fox", "body": "The fox jumps over the lazy dogs",
                "tag": ["animal", "fast"], "count": 5, "price": 10.5, "rating": 4.5, "active": true,
                "date": "2020-01-01T10:00:00Z", "day": "01/02/2020", "ip": "192.168.1.10",
                "code": "Foo-Bar baz", "author": {"name": "Alice Smith", "id": "a1"}
            }),
        ),
        (
            "2",
            json!({
                "title": "Quick brown dogs", "body": "Dogs are running quickly",
                "tag": ["animal"], "count": 10, "price": 20.0, "rating": 3.0, "active": false,
                "date": "2020-01-15", "day": "15/01/2020", "ip": "10.0.0.2",
                "code": "foo-bar", "author": {"name": "Bob Jones", "id": "b2"}
            }),
        ),
        (
            "3",
            json!({
                "title": "Lazy cat sleeping", "body": "A cat sleeps all day",
                "tag": ["pet", "slow"], "count": 15, "price": 5.25, "rating": 0.1, "active": true,
                "date": "2020-02-01T00:00:00.500Z", "ip": "10.0.0.10",
                "author": {"name": "Alice Jones", "id": "a3"}
            }),
        ),
        (
            "4",
            json!({
                "title": "Brown bear", "body": "The bear eats honey",
                "tag": "wild", "count": 20, "price": 100, "date": "2019-12-31T23:59:59.999Z"
            }),
        ),
        (
            "5",
            json!({"title": "Something else entirely", "hidden": "secret"}),
        ),
    ]
}
