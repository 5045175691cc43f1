//! End-to-end tests of the search module on real in-RAM tantivy indexes.

mod aggs;
mod hits;
mod terms_exact;
mod wire;

use std::collections::HashMap;

use serde_json::{json, Value};
use shoal_mapping::analysis::{analyze, register_analyzers};
use shoal_mapping::{DocumentParser, FieldType, Mapping, ShardSchema};
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{AllQuery, BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{BytesOptions, IndexRecordOption};
use tantivy::{DocAddress, Index, IndexReader, Searcher, TantivyDocument, Term};

use super::{merge_and_render, search_shard_with, SearchRequest, ShardResult};
use crate::{QueryContext, QueryError};

pub(super) const NOW: i64 = 1_600_000_000_000;

/// One shard: an in-RAM index plus the sources of its documents by `_id`.
pub(super) struct Shard {
    pub reader: IndexReader,
    pub sources: HashMap<String, Value>,
}

pub(super) struct Fixture {
    pub schema: ShardSchema,
    pub mapping: Mapping,
    pub shards: Vec<Shard>,
}

pub(super) fn products_mapping() -> Value {
    json!({"properties": {
        "title": {"type": "text"},
        "status": {"type": "keyword"},
        "price": {"type": "double"},
        "qty": {"type": "long"},
        "active": {"type": "boolean"},
        "ts": {"type": "date"},
        "tags": {"type": "keyword"}
    }})
}

pub(super) fn products() -> Vec<(&'static str, Value)> {
    vec![
        (
            "1",
            json!({"title": "The quick brown fox", "status": "active", "price": 10.0, "qty": 5, "active": true, "ts": "2020-01-01T10:00:00Z", "tags": ["a", "b"]}),
        ),
        (
            "2",
            json!({"title": "Lazy dog sleeps", "status": "sold", "price": 20.5, "qty": 3, "active": false, "ts": "2020-01-15T00:00:00Z", "tags": ["b"]}),
        ),
        (
            "3",
            json!({"title": "Quick quick rabbit", "status": "active", "price": 30.0, "qty": 8, "active": true, "ts": "2020-02-20T12:00:00Z"}),
        ),
        (
            "4",
            json!({"title": "Brown bear", "status": "pending", "price": 5.0, "active": true, "ts": "2020-04-01T00:00:00Z", "tags": ["a"]}),
        ),
        (
            "5",
            json!({"title": "Fox and dog", "status": "sold", "qty": 1, "active": false, "ts": "2020-04-30T23:59:59Z"}),
        ),
    ]
}

impl Fixture {
    /// Builds one shard per entry of `layout`; each shard is a list of segments, each
    /// segment a list of document ids from `docs`.
    pub fn new(mapping: Value, docs: &[(&str, Value)], layout: &[&[&[&str]]]) -> Fixture {
        let schema = ShardSchema::build(|b| b.add_bytes_field("_source", BytesOptions::default()));
        let mut mapping = Mapping::from_json(&mapping).unwrap();
        let by_id: HashMap<&str, &Value> = docs.iter().map(|(id, v)| (*id, v)).collect();
        let mut shards = Vec::new();
        let mut seq_no = 0;
        for segments in layout {
            let index = Index::create_in_ram(schema.schema.clone());
            register_analyzers(index.tokenizers());
            let mut writer = index
                .writer_with_num_threads::<TantivyDocument>(1, 15_000_000)
                .unwrap();
            writer.set_merge_policy(Box::new(NoMergePolicy));
            let mut sources = HashMap::new();
            for segment in segments.iter() {
                for id in segment.iter() {
                    let source = by_id[id];
                    let parsed = DocumentParser::new(&mapping, &schema)
                        .parse_value(id, source)
                        .unwrap();
                    if let Some(update) = &parsed.dynamic_update {
                        mapping.merge(update).unwrap();
                    }
                    let mut doc = parsed.doc;
                    doc.add_text(schema.id, id);
                    doc.add_i64(schema.seq_no, seq_no);
                    doc.add_i64(schema.primary_term, 1);
                    doc.add_i64(schema.version, 1);
                    seq_no += 1;
                    writer.add_document(doc).unwrap();
                    sources.insert(id.to_string(), source.clone());
                }
                writer.commit().unwrap();
            }
            let reader = index.reader().unwrap();
            shards.push(Shard { reader, sources });
        }
        Fixture {
            schema,
            mapping,
            shards,
        }
    }

    /// The products, all in one shard and one segment.
    pub fn products() -> Fixture {
        Fixture::new(
            products_mapping(),
            &products(),
            &[&[&["1", "2", "3", "4", "5"]]],
        )
    }

    /// The products over two shards, the first with two segments.
    pub fn products_two_shards() -> Fixture {
        Fixture::new(
            products_mapping(),
            &products(),
            &[&[&["1", "3"], &["5"]], &[&["2", "4"]]],
        )
    }

    pub fn ctx(&self) -> QueryContext<'_> {
        QueryContext {
            mapping: &self.mapping,
            schema: &self.schema,
            now_millis: NOW,
            index: "products",
            default_fields: crate::context::all_fields(),
        }
    }

    pub fn shard_results(&self, req: &SearchRequest) -> Result<Vec<ShardResult>, QueryError> {
        let ctx = self.ctx();
        let build = |q: &Value| test_query(q, &ctx);
        let query = match &req.query {
            Some(q) => test_query(q, &ctx)?,
            None => Box::new(AllQuery),
        };
        self.shards
            .iter()
            .enumerate()
            .map(|(i, shard)| {
                let searcher = shard.reader.searcher();
                search_shard_with(&searcher, query.as_ref(), req, &ctx, i, &build)
            })
            .collect()
    }

    /// Runs a request body through parse, every shard, and the merge.
    pub fn search(&self, body: Value) -> Result<Value, QueryError> {
        let req = SearchRequest::parse(&body, &HashMap::new())?;
        req.check_result_window(10_000)?;
        let results = self.shard_results(&req)?;
        self.merge(&req, results)
    }

    /// Like [`Fixture::search`], with every query translated by the real query DSL.
    pub fn search_dsl(&self, body: Value) -> Result<Value, QueryError> {
        let req = SearchRequest::parse(&body, &HashMap::new())?;
        let ctx = self.ctx();
        let query = match &req.query {
            Some(q) => crate::dsl::build_query(q, &ctx)?,
            None => Box::new(AllQuery),
        };
        let results = self
            .shards
            .iter()
            .enumerate()
            .map(|(i, shard)| {
                super::search_shard(&shard.reader.searcher(), query.as_ref(), &req, &ctx, i)
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.merge(&req, results)
    }

    fn merge(&self, req: &SearchRequest, results: Vec<ShardResult>) -> Result<Value, QueryError> {
        let searchers: Vec<Searcher> = self.shards.iter().map(|s| s.reader.searcher()).collect();
        let mut fetch = |shard: usize, address: DocAddress| -> Result<Option<Value>, QueryError> {
            let id = id_of(&searchers[shard], address);
            Ok(self.shards[shard].sources.get(&id).cloned())
        };
        self.merge_with(req, results, &mut fetch)
    }

    /// [`merge_and_render`] with a given fetch, `took` zeroed.
    pub fn merge_with(
        &self,
        req: &SearchRequest,
        results: Vec<ShardResult>,
        fetch: &mut dyn FnMut(usize, DocAddress) -> Result<Option<Value>, QueryError>,
    ) -> Result<Value, QueryError> {
        let mut response = merge_and_render(
            req,
            results,
            fetch,
            &|_| "products".to_string(),
            0,
            self.shards.len(),
        )?;
        response["took"] = json!(0);
        Ok(response)
    }

    /// A document's `_source`, as the node holding the shard would fetch it.
    pub fn source_of(&self, shard: usize, address: DocAddress) -> Option<Value> {
        let id = id_of(&self.shards[shard].reader.searcher(), address);
        self.shards[shard].sources.get(&id).cloned()
    }
}

fn id_of(searcher: &Searcher, address: DocAddress) -> String {
    let reader = searcher.segment_reader(address.segment_ord);
    let column = reader.fast_fields().str("_id").unwrap().unwrap();
    let ord = column.term_ords(address.doc_id).next().unwrap();
    let mut id = String::new();
    column.ord_to_str(ord, &mut id).unwrap();
    id
}

/// A tiny query translator for tests: match_all, term on keywords, match on text.
pub(super) fn test_query(query: &Value, ctx: &QueryContext) -> Result<Box<dyn Query>, QueryError> {
    let (kind, body) = query
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("one clause");
    match kind.as_str() {
        "match_all" => Ok(Box::new(AllQuery)),
        "term" => {
            let (field, value) = body.as_object().unwrap().iter().next().unwrap();
            let mut term = Term::from_field_json_path(ctx.schema.keyword, field, true);
            term.append_type_and_str(value.as_str().unwrap());
            Ok(Box::new(TermQuery::new(term, IndexRecordOption::Basic)))
        }
        "match" => {
            let (field, value) = body.as_object().unwrap().iter().next().unwrap();
            let mapping = ctx.mapping.field(field).unwrap();
            assert_eq!(mapping.field_type, FieldType::Text);
            let text_field = ctx.schema.text_field(mapping.index_analyzer());
            let clauses = analyze(mapping.query_analyzer(), value.as_str().unwrap())
                .into_iter()
                .map(|token| {
                    let mut term = Term::from_field_json_path(text_field, field, true);
                    term.append_type_and_str(&token);
                    (
                        Occur::Should,
                        Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
                            as Box<dyn Query>,
                    )
                })
                .collect();
            Ok(Box::new(BooleanQuery::new(clauses)))
        }
        other => Err(QueryError::Parsing(format!(
            "test query [{other}] not supported"
        ))),
    }
}

/// The `_id`s of a response's hits.
pub(super) fn ids(response: &Value) -> Vec<String> {
    response["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn shard_results_can_cross_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<ShardResult>();
}
