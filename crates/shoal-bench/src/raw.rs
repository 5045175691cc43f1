//! `shoal-bench raw-tantivy`: the physical limit of indexing on this machine. The same
//! documents go through Shoal's own `DocumentParser` into the same tantivy schema, `_source`
//! codec plugin, analyzers, writer threads and memory budget as a Shoal shard, in process:
//! no HTTP, no JSON bulk framing, no translog, no version map, no sequence-number bookkeeping.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use serde_json::{json, Value};
use shoal_codec::{add_source_field, SourceCodec, SourceStorePlugin};
use shoal_mapping::{analysis, DocumentParser, Mapping, ShardSchema};
use tantivy::indexer::LogMergePolicy;
use tantivy::{Index, IndexWriter, Term};

use crate::stats::round3;

#[derive(clap::Args, Debug)]
pub struct RawArgs {
    /// NDJSON corpus: one document per line.
    #[arg(long)]
    pub file: PathBuf,
    /// Index body (`{"settings":..., "mappings":...}`) or a bare mappings object. Without it
    /// every field is mapped dynamically, as Shoal would.
    #[arg(long)]
    pub mapping: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    #[arg(long)]
    pub max_docs: Option<usize>,
    /// `index.codec` of the `_source` store.
    #[arg(long, default_value = "default")]
    pub codec: String,
    #[arg(long)]
    pub level: Option<i64>,
    /// Threads parsing documents and feeding the writer (default: all cores).
    #[arg(long)]
    pub feeders: Option<usize>,
    /// tantivy indexing threads (a single-shard Shoal index uses 2).
    #[arg(long, default_value_t = 2)]
    pub writer_threads: usize,
    /// tantivy memory budget per indexing thread (Shoal: 64 MB).
    #[arg(long, default_value_t = 64)]
    pub heap_mb_per_thread: usize,
    /// `auto`: adds only, as Shoal indexes a document whose `_id` is new. `explicit`: a tantivy
    /// term delete of the `_id` before each add (what every write cost before Shoal deleted only
    /// on updates, through its `_id` filters: on sstable dictionaries, a block decoded per delete
    /// and segment at each commit).
    #[arg(long, default_value = "auto")]
    pub ids: String,
    /// Merge to one segment afterwards and report the store size.
    #[arg(long)]
    pub force_merge: bool,
    /// Where to build the index (default: a fresh temporary directory, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub fn run(args: RawArgs) -> anyhow::Result<Value> {
    let text = std::fs::read(&args.file).with_context(|| format!("read {:?}", args.file))?;
    let lines: Vec<&[u8]> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .collect();
    anyhow::ensure!(!lines.is_empty(), "empty corpus");
    let mut total = lines.len() * args.repeat.max(1);
    if let Some(max) = args.max_docs {
        total = total.min(max);
    }
    let mapping = match &args.mapping {
        Some(path) => {
            let body: Value = serde_json::from_slice(&std::fs::read(path)?)?;
            let mappings = body.get("mappings").cloned().unwrap_or(body);
            Mapping::from_json(&mappings).map_err(|e| anyhow::anyhow!("mapping: {e:?}"))?
        }
        None => Mapping::default(),
    };
    let codec = SourceCodec::from_settings(&args.codec, args.level)
        .map_err(|e| anyhow::anyhow!("codec: {e:?}"))?;
    let explicit = args.ids == "explicit";

    let tmp;
    let dir: &Path = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d
        }
        None => {
            tmp = TempDir::new()?;
            &tmp.0
        }
    };
    let schema = ShardSchema::build(add_source_field);
    let index = Index::builder()
        .schema(schema.schema.clone())
        .register_plugin(Arc::new(SourceStorePlugin::new(codec)))
        .create_in_dir(dir)?;
    analysis::register_analyzers(index.tokenizers());
    let schema = ShardSchema::from_schema(index.schema())?;

    // Parse-only pass on one thread: how much of the limit is JSON + mapping work.
    let sample = total.min(lines.len()).min(20_000);
    let t0 = Instant::now();
    let parser = DocumentParser::new(&mapping, &schema);
    for (i, line) in lines.iter().take(sample).enumerate() {
        let _ = parser.parse(&i.to_string(), line);
    }
    let parse_only = sample as f64 / t0.elapsed().as_secs_f64();

    let threads = args.writer_threads.max(1);
    let writer: IndexWriter =
        index.writer_with_num_threads(threads, args.heap_mb_per_thread * 1024 * 1024 * threads)?;
    let mut policy = LogMergePolicy::default();
    policy.set_del_docs_ratio_before_merge(0.3);
    writer.set_merge_policy(Box::new(policy));
    let feeders = args
        .feeders
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);

    let start = Instant::now();
    let failures = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..feeders)
            .map(|t| {
                let (writer, schema, mapping, lines) = (&writer, &schema, &mapping, &lines);
                scope.spawn(move || -> anyhow::Result<u64> {
                    let parser = DocumentParser::new(mapping, schema);
                    let mut failures = 0;
                    let mut n = t;
                    while n < total {
                        let id = n.to_string();
                        let source = lines[n % lines.len()];
                        match parser.parse(&id, source) {
                            Ok(parsed) => {
                                let mut doc = parsed.doc;
                                doc.add_text(schema.id, &id);
                                doc.add_i64(schema.seq_no, n as i64);
                                doc.add_i64(schema.primary_term, 1);
                                doc.add_i64(schema.version, 1);
                                doc.add_custom(schema.source, source);
                                if explicit {
                                    writer.delete_term(Term::from_field_text(schema.id, &id));
                                }
                                writer.add_document(doc)?;
                            }
                            Err(_) => failures += 1,
                        }
                        n += feeders;
                    }
                    Ok(failures)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("feeder thread"))
            .sum::<anyhow::Result<u64>>()
    })?;
    let mut writer = writer;
    // The last commit alone: the indexing threads write their segments (what a refresh waits for).
    let committing = Instant::now();
    writer.commit()?;
    let commit_seconds = committing.elapsed().as_secs_f64();
    let seconds = start.elapsed().as_secs_f64();
    let committed_size = dir_size(dir);
    let mut merged_size = None;
    let mut merge_seconds = None;
    if args.force_merge {
        let t = Instant::now();
        let ids = index.searchable_segment_ids()?;
        if ids.len() > 1 {
            writer.merge(&ids).wait()?;
        }
        writer.garbage_collect_files().wait()?;
        writer.wait_merging_threads()?;
        merge_seconds = Some(round3(t.elapsed().as_secs_f64()));
        merged_size = Some(dir_size(dir));
    } else {
        writer.wait_merging_threads()?;
    }
    Ok(json!({
        "docs": total as u64 - failures,
        "failed_docs": failures,
        "seconds": round3(seconds),
        "docs_per_s": round3((total as u64 - failures) as f64 / seconds),
        "commit_seconds": round3(commit_seconds),
        "feeders": feeders,
        "writer_threads": threads,
        "codec": args.codec,
        "level": args.level,
        "ids": args.ids,
        "parse_only_docs_per_s_1thread": round3(parse_only),
        "store_bytes_committed": committed_size,
        "store_bytes_merged": merged_size,
        "merge_seconds": merge_seconds,
    }))
}

fn dir_size(path: &Path) -> u64 {
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let base = std::env::temp_dir().join(format!(
            "shoal-bench-raw-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_nanos()
        ));
        std::fs::create_dir_all(&base)?;
        Ok(TempDir(base))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
