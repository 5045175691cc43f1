use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tantivy::indexer::NoMergePolicy;
use tantivy::schema::{Field, OwnedValue, Schema, Value, FAST, STORED, STRING};
use tantivy::{
    DocAddress, Index, IndexSettings, IndexSortByField, IndexWriter, Order, TantivyDocument,
    TantivyError, Term,
};

use crate::*;

const BUDGET: usize = 30_000_000;

struct Fields {
    id: Field,
    source: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let id = builder.add_text_field("id", STRING | STORED);
    let source = add_source_field(&mut builder);
    (builder.build(), Fields { id, source })
}

fn fields_of(index: &Index) -> Fields {
    let schema = index.schema();
    Fields {
        id: schema.get_field("id").unwrap(),
        source: source_field(&schema).unwrap(),
    }
}

fn plugin(codec: SourceCodec) -> Arc<SourceStorePlugin> {
    Arc::new(SourceStorePlugin::new(codec))
}

fn create_in_ram(codec: SourceCodec) -> Index {
    let (schema, _) = schema();
    Index::builder()
        .schema(schema)
        .register_plugin(plugin(codec))
        .create_in_ram()
        .unwrap()
}

fn writer(index: &Index) -> IndexWriter {
    let writer: IndexWriter = index.writer_with_num_threads(1, BUDGET).unwrap();
    writer.set_merge_policy(Box::new(NoMergePolicy));
    writer
}

/// Documents are keyed by their `id`; a `None` source = document indexed without `_source`.
type Docs = Vec<(String, Option<Vec<u8>>)>;

fn add_docs(writer: &mut IndexWriter, fields: &Fields, docs: &[(String, Option<Vec<u8>>)]) {
    for (id, source) in docs {
        let mut doc = TantivyDocument::new();
        doc.add_text(fields.id, id);
        if let Some(source) = source {
            doc.add_custom(fields.source, source);
        }
        writer.add_document(doc).unwrap();
    }
}

/// Reads every alive document back: id -> source.
fn read_all(index: &Index) -> HashMap<String, Option<Vec<u8>>> {
    let fields = fields_of(index);
    let searcher = index.reader().unwrap().searcher();
    let mut out = HashMap::new();
    for (ord, segment) in searcher.segment_readers().iter().enumerate() {
        let source = SourceReader::open(segment).unwrap();
        assert_eq!(source.num_docs(), segment.max_doc());
        for doc in segment.doc_ids_alive() {
            let stored: TantivyDocument = searcher.doc(DocAddress::new(ord as u32, doc)).unwrap();
            let id = stored
                .get_first(fields.id)
                .and_then(|v| v.as_str())
                .unwrap()
                .to_string();
            assert!(out.insert(id, source.get(doc).unwrap()).is_none());
        }
    }
    out
}

fn assert_same(index: &Index, expected: &Docs) {
    let actual = read_all(index);
    assert_eq!(actual.len(), expected.len());
    for (id, source) in expected {
        assert_eq!(actual.get(id), Some(source), "source of doc {id}");
    }
}

/// Varied JSON sources: absent, empty, unicode, nested, and one > 64 KiB.
fn varied_docs(prefix: &str, n: usize) -> Docs {
    (0..n)
        .map(|i| {
            let id = format!("{prefix}-{i}");
            let source = match i % 50 {
                7 => None,
                8 => Some(Vec::new()),
                9 => Some(b"{}".to_vec()),
                13 if i < 50 => {
                    let body: String = (0..12_000)
                        .map(|j| format!("{:012x}", (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16))
                        .collect();
                    assert!(body.len() > 64 * 1024);
                    Some(format!(r#"{{"id":"{id}","blob":"{body}"}}"#).into_bytes())
                }
                k if k % 3 == 0 => Some(
                    format!(
                        r#"{{"id":"{id}","title":"héllo wörld {i} — 日本語テキスト 🚀","tags":["ünïcödé","ελληνικά","{k}"]}}"#
                    )
                    .into_bytes(),
                ),
                k => Some(
                    format!(
                        r#"{{"id":"{id}","n":{i},"price":{}.{:02},"nested":{{"a":[1,2,{k}],"b":{{"c":"value {k}"}}}},"flag":{}}}"#,
                        i * 7,
                        i % 100,
                        i % 2 == 0
                    )
                    .into_bytes(),
                ),
            };
            (id, source)
        })
        .collect()
}

fn codec(name: &str, level: Option<i64>) -> SourceCodec {
    SourceCodec::from_settings(name, level).unwrap()
}

#[test]
fn round_trip_is_byte_identical_for_every_codec_and_level() {
    let mut configs = vec![codec("default", None), codec("best_compression", None)];
    for level in [1, 3, 6] {
        configs.push(codec("zstd", Some(level)));
        configs.push(codec("zstd_no_dict", Some(level)));
    }
    for config in configs {
        let index = create_in_ram(config);
        let fields = fields_of(&index);
        let mut writer = writer(&index);
        let first = varied_docs("a", 400);
        let second = varied_docs("b", 20);
        add_docs(&mut writer, &fields, &first);
        writer.commit().unwrap();
        add_docs(&mut writer, &fields, &second);
        writer.commit().unwrap();

        let expected: Docs = first.into_iter().chain(second).collect();
        assert_same(&index, &expected);

        let searcher = index.reader().unwrap().searcher();
        assert_eq!(searcher.segment_readers().len(), 2);
        let big = SourceReader::open(searcher.segment_reader(0)).unwrap();
        let small = SourceReader::open(searcher.segment_reader(1)).unwrap();
        for reader in [&big, &small] {
            assert_eq!(reader.codec(), config, "{config}");
        }
        assert!(big.num_blocks() > 1);
        // Enough data in the first segment to train a dictionary; the 20-doc one is too small.
        let (big_dict, small_dict) = match config {
            SourceCodec::Zstd { .. } => (true, false),
            _ => (false, false),
        };
        assert_eq!(big.has_dictionary(), big_dict, "{config}");
        assert_eq!(small.has_dictionary(), small_dict, "{config}");
    }
}

#[test]
fn tiny_blocks_and_absent_sources_round_trip() {
    let index = {
        let (schema, _) = schema();
        Index::builder()
            .schema(schema)
            .register_plugin(Arc::new(
                SourceStorePlugin::new(codec("zstd", None)).with_block_size(100),
            ))
            .create_in_ram()
            .unwrap()
    };
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    // Mostly absent sources: blocks are cut by doc count, not only by size.
    let docs: Docs = (0..9000)
        .map(|i| {
            let source = (i % 1000 == 0).then(|| format!("{{\"i\":{i}}}").into_bytes());
            (i.to_string(), source)
        })
        .collect();
    add_docs(&mut writer, &fields, &docs);
    writer.commit().unwrap();
    assert_same(&index, &docs);
}

#[test]
fn documents_of_another_type_are_read_through_the_erased_view() {
    let index = create_in_ram(codec("default", None));
    let fields = fields_of(&index);
    let mut writer: IndexWriter<BTreeMap<Field, OwnedValue>> =
        index.writer_with_num_threads(1, BUDGET).unwrap();
    let mut expected = Docs::new();
    for i in 0..20 {
        let mut doc = BTreeMap::new();
        doc.insert(fields.id, OwnedValue::Str(i.to_string()));
        let source = (i != 3).then(|| format!(r#"{{"doc":{i}}}"#).into_bytes());
        if let Some(source) = &source {
            doc.insert(fields.source, OwnedValue::Custom(source.clone()));
        }
        writer.add_document(doc).unwrap();
        expected.push((i.to_string(), source));
    }
    writer.commit().unwrap();
    assert_same(&index, &expected);
}

#[test]
fn builtin_components_ignore_the_source_field() {
    let index = create_in_ram(codec("default", None));
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    let big = vec![b'x'; 200_000];
    add_docs(
        &mut writer,
        &fields,
        &[("1".to_string(), Some(big.clone()))],
    );
    writer.commit().unwrap();
    let searcher = index.reader().unwrap().searcher();
    let stored: TantivyDocument = searcher.doc(DocAddress::new(0, 0)).unwrap();
    assert!(stored.get_first(fields.source).is_none());
    assert!(stored.get_first(fields.id).is_some());
    let segment = searcher.segment_reader(0);
    let usage = segment.space_usage().unwrap();
    // The 200 KB source is not in the doc store (nor postings / fast fields)...
    assert!(usage.total().get_bytes() < 10_000, "{:?}", usage.total());
    // ...only in the plugin's file.
    assert!(segment_source_bytes(segment) > 0);
    assert_eq!(
        SourceReader::open(segment).unwrap().get(0).unwrap(),
        Some(big)
    );
}

#[test]
fn mixed_codecs_reopen_and_force_merge_rewrites_with_the_new_codec() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, fields) = schema();
    let first = varied_docs("lz4", 300);
    {
        let index = Index::builder()
            .schema(schema)
            .register_plugin(plugin(codec("default", None)))
            .create_in_dir(dir.path())
            .unwrap();
        let mut writer = writer(&index);
        add_docs(&mut writer, &fields, &first);
        writer.commit().unwrap();
    }

    // Reopening without registering the plugin: reading works, writing fails closed.
    let index = Index::open_in_dir(dir.path()).unwrap();
    assert_same(&index, &first);
    match index.writer_with_num_threads::<TantivyDocument>(1, BUDGET) {
        Err(TantivyError::MissingPlugin(ext)) => assert!(ext.contains(SOURCE_EXTENSION)),
        Err(other) => panic!("unexpected error {other:?}"),
        Ok(_) => panic!("writer must not open without the _source plugin"),
    }

    // The engine's flow: open, register the plugin with the index's current codec, write.
    let zstd = codec("zstd", Some(3));
    let mut index = Index::open_in_dir(dir.path()).unwrap();
    index.register_plugin(plugin(zstd));
    let mut writer = writer(&index);
    let second = varied_docs("zstd", 300);
    add_docs(&mut writer, &fields, &second);
    writer.commit().unwrap();

    let expected: Docs = first
        .iter()
        .cloned()
        .chain(second.iter().cloned())
        .collect();
    assert_same(&index, &expected);
    let searcher = index.reader().unwrap().searcher();
    let mut codecs: Vec<&str> = searcher
        .segment_readers()
        .iter()
        .map(|s| SourceReader::open(s).unwrap().codec().name())
        .collect();
    codecs.sort();
    assert_eq!(codecs, ["default", "zstd"]);

    // Force merge: every surviving document re-encoded with the plugin's (new) codec.
    let ids = index.searchable_segment_ids().unwrap();
    writer.merge(&ids).wait().unwrap();
    writer.wait_merging_threads().unwrap();

    let index = Index::open_in_dir(dir.path()).unwrap();
    let searcher = index.reader().unwrap().searcher();
    assert_eq!(searcher.segment_readers().len(), 1);
    let merged = SourceReader::open(searcher.segment_reader(0)).unwrap();
    assert_eq!(merged.codec(), zstd);
    assert!(merged.has_dictionary());
    assert_same(&index, &expected);
}

#[test]
fn deletes_are_dropped_by_merge_and_doc_ids_realign() {
    let index = create_in_ram(codec("zstd_no_dict", Some(1)));
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    let mut all = Docs::new();
    for segment in 0..3 {
        let docs = varied_docs(&format!("s{segment}"), 120);
        add_docs(&mut writer, &fields, &docs);
        writer.commit().unwrap();
        all.extend(docs);
    }
    let (mut deleted, mut kept) = (Docs::new(), Docs::new());
    for (i, doc) in all.into_iter().enumerate() {
        if i % 3 == 1 {
            deleted.push(doc)
        } else {
            kept.push(doc)
        }
    }
    for (id, _) in &deleted {
        writer.delete_term(Term::from_field_text(fields.id, id));
    }
    writer.commit().unwrap();
    assert_same(&index, &kept);

    let ids = index.searchable_segment_ids().unwrap();
    assert_eq!(ids.len(), 3);
    writer.merge(&ids).wait().unwrap();
    let searcher = index.reader().unwrap().searcher();
    assert_eq!(searcher.segment_readers().len(), 1);
    let segment = searcher.segment_reader(0);
    assert_eq!(segment.max_doc() as usize, kept.len());
    assert!(!segment.has_deletes());
    assert_eq!(
        SourceReader::open(segment).unwrap().num_docs() as usize,
        kept.len()
    );
    // read_all checks each doc's source against its own stored id, i.e. doc ids realigned.
    assert_same(&index, &kept);
}

/// Deterministic pseudo-random numbers (no rand dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// Debian `Packages`-like records as JSON.
fn debian_docs(n: usize) -> Docs {
    const WORDS: &[&str] = &[
        "lib", "python3", "perl", "gtk", "qt", "xml", "ssl", "net", "utils", "dev", "data", "doc",
        "common", "tools", "plugin", "server", "client", "core", "font", "gnome", "kde", "rust",
        "golang", "node", "java", "ruby", "php", "audio", "video", "image",
    ];
    const SECTIONS: &[&str] = &[
        "libs", "devel", "python", "perl", "utils", "net", "doc", "x11", "admin", "web",
    ];
    const TEAMS: &[&str] = &[
        "Debian Python Team <team+python@tracker.debian.org>",
        "Debian Perl Group <pkg-perl-maintainers@lists.alioth.debian.org>",
        "Debian QA Group <packages@qa.debian.org>",
        "Debian Rust Maintainers <pkg-rust-maintainers@alioth-lists.debian.net>",
        "Debian Go Packaging Team <team+pkg-go@tracker.debian.org>",
    ];
    let mut rng = Lcg(42);
    (0..n)
        .map(|i| {
            let mut w = || WORDS[rng.next(WORDS.len())];
            let name = format!("{}-{}{}", w(), w(), w());
            let depends = format!(
                "libc6 (>= 2.{}), lib{}{} (>= {}.{}), {}-common (= ${{source:Version}})",
                rng.next(40),
                WORDS[rng.next(WORDS.len())],
                rng.next(9),
                rng.next(5),
                rng.next(20),
                name
            );
            let description = format!(
                "{} {} for {} - this package provides the {} {} files used by {}",
                WORDS[rng.next(WORDS.len())],
                WORDS[rng.next(WORDS.len())],
                WORDS[rng.next(WORDS.len())],
                WORDS[rng.next(WORDS.len())],
                WORDS[rng.next(WORDS.len())],
                name
            );
            let source = format!(
                r#"{{"Package":"{name}","Version":"{}.{}.{}-{}","Architecture":"{}","Maintainer":"{}","Installed-Size":{},"Depends":"{depends}","Section":"{}","Priority":"optional","Homepage":"https://{name}.example.org/","Description":"{description}","Filename":"pool/main/{}/{name}/{name}_{}_amd64.deb","Size":{},"SHA256":"{:016x}{:016x}"}}"#,
                rng.next(10),
                rng.next(30),
                rng.next(100),
                rng.next(5) + 1,
                ["amd64", "all", "arm64"][rng.next(3)],
                TEAMS[rng.next(TEAMS.len())],
                rng.next(100_000),
                SECTIONS[rng.next(SECTIONS.len())],
                &name[..1],
                rng.next(1000),
                rng.next(10_000_000),
                rng.next(usize::MAX) as u64 * 2654435761,
                rng.next(usize::MAX) as u64 * 40503,
            );
            (i.to_string(), Some(source.into_bytes()))
        })
        .collect()
}

#[test]
fn zstd_dictionary_beats_no_dict_and_best_compression_beats_default() {
    let docs = debian_docs(5000);
    let raw: usize = docs.iter().map(|(_, s)| s.as_ref().unwrap().len()).sum();
    let mut sizes = HashMap::new();
    for name in ["default", "best_compression", "zstd", "zstd_no_dict"] {
        let index = create_in_ram(codec(name, None));
        let fields = fields_of(&index);
        let mut writer = writer(&index);
        add_docs(&mut writer, &fields, &docs);
        writer.commit().unwrap();
        let searcher = index.reader().unwrap().searcher();
        assert_eq!(searcher.segment_readers().len(), 1);
        let segment = searcher.segment_reader(0);
        let reader = SourceReader::open(segment).unwrap();
        assert_eq!(reader.get(4321).unwrap(), docs[4321].1);
        let bytes = segment_source_bytes(segment);
        println!(
            "{name:>16}: {bytes:>8} bytes ({:.1}% of {raw} raw), {} blocks, dictionary {} bytes",
            bytes as f64 * 100.0 / raw as f64,
            reader.num_blocks(),
            reader.dictionary_len()
        );
        sizes.insert(name, bytes);
    }
    // A merge retrains the dictionary over the merged data (sampled, > 1 MiB here) and
    // lands close to the single-flush size.
    let index = create_in_ram(codec("zstd", None));
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    add_docs(&mut writer, &fields, &docs[..2500]);
    writer.commit().unwrap();
    add_docs(&mut writer, &fields, &docs[2500..]);
    writer.commit().unwrap();
    let ids = index.searchable_segment_ids().unwrap();
    writer.merge(&ids).wait().unwrap();
    let searcher = index.reader().unwrap().searcher();
    let merged = segment_source_bytes(searcher.segment_reader(0));
    println!("    zstd, merged: {merged:>8} bytes");
    assert!(SourceReader::open(searcher.segment_reader(0))
        .unwrap()
        .has_dictionary());
    assert!(
        (merged as f64) < sizes["zstd"] as f64 * 1.05,
        "{merged} vs {sizes:?}"
    );
    assert_same(&index, &docs);

    assert!(sizes["zstd"] < sizes["zstd_no_dict"], "{sizes:?}");
    assert!(sizes["best_compression"] < sizes["default"], "{sizes:?}");
    assert!(sizes["zstd_no_dict"] < sizes["default"], "{sizes:?}");
}

#[test]
fn sequential_reads_decompress_each_block_once() {
    let index = create_in_ram(codec("default", None));
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    add_docs(&mut writer, &fields, &debian_docs(500));
    writer.commit().unwrap();
    let searcher = index.reader().unwrap().searcher();
    let reader = SourceReader::open(searcher.segment_reader(0)).unwrap();
    assert!(reader.num_blocks() > 3);
    for doc in 0..reader.num_docs() {
        reader.get(doc).unwrap().unwrap();
    }
    assert_eq!(reader.blocks_decompressed(), reader.num_blocks() as u64);
    // Going back to a recent block hits the cache; the first block was evicted.
    reader.get(reader.num_docs() - 1).unwrap();
    assert_eq!(reader.blocks_decompressed(), reader.num_blocks() as u64);
    reader.get(0).unwrap();
    assert_eq!(reader.blocks_decompressed(), reader.num_blocks() as u64 + 1);
    assert!(reader.get(reader.num_docs()).is_err());
}

#[test]
fn reader_cache_keeps_one_reader_per_segment() {
    let index = create_in_ram(codec("zstd", None));
    let fields = fields_of(&index);
    let mut writer = writer(&index);
    add_docs(&mut writer, &fields, &varied_docs("x", 100));
    writer.commit().unwrap();
    add_docs(&mut writer, &fields, &varied_docs("y", 100));
    writer.commit().unwrap();
    let cache = Arc::new(SourceReaderCache::new());
    let searcher = index.reader().unwrap().searcher();
    let a = cache.get_or_open(searcher.segment_reader(0)).unwrap();
    let b = cache.get_or_open(searcher.segment_reader(0)).unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let cache = cache.clone();
            let searcher = searcher.clone();
            scope.spawn(move || {
                for segment in searcher.segment_readers() {
                    let reader = cache.get_or_open(segment).unwrap();
                    for doc in 0..reader.num_docs() {
                        reader.get(doc).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(cache.len(), 2);
    cache.retain_segments([searcher.segment_reader(1).segment_id()]);
    assert_eq!(cache.len(), 1);
    assert!(cache.get(searcher.segment_reader(0).segment_id()).is_none());
    cache.clear();
    assert!(cache.is_empty());
}

#[test]
fn index_sorting_fails_closed() {
    let mut builder = Schema::builder();
    let n = builder.add_u64_field("n", FAST);
    let source = add_source_field(&mut builder);
    let index = Index::builder()
        .schema(builder.build())
        .settings(IndexSettings {
            sort_by_field: Some(IndexSortByField {
                field: "n".to_string(),
                order: Order::Desc,
            }),
            ..IndexSettings::default()
        })
        .register_plugin(plugin(codec("default", None)))
        .create_in_ram()
        .unwrap();
    let mut writer: IndexWriter = index.writer_with_num_threads(1, BUDGET).unwrap();
    let mut doc = TantivyDocument::new();
    doc.add_u64(n, 1);
    doc.add_custom(source, b"{}");
    writer.add_document(doc).unwrap();
    match writer.commit() {
        Err(TantivyError::InvalidArgument(msg)) => assert!(msg.contains("index sorting"), "{msg}"),
        other => panic!("commit must fail on a sorted index, got {other:?}"),
    }
}

#[test]
fn corrupt_files_are_rejected() {
    use tantivy::directory::FileSlice;
    for bytes in [vec![], vec![0u8; 31], vec![0u8; 64]] {
        assert!(SourceReader::open_file(FileSlice::from(bytes), 1).is_err());
    }
}

#[test]
fn settings_accept_opensearch_codecs_and_aliases() {
    assert_eq!(codec("default", None), SourceCodec::Default);
    assert_eq!(codec("lz4", None), SourceCodec::Default);
    assert_eq!(codec("best_speed", None), SourceCodec::Default);
    assert_eq!(
        codec("best_compression", None),
        SourceCodec::BestCompression
    );
    assert_eq!(codec("zlib", None), SourceCodec::BestCompression);
    assert_eq!(codec("zstd", None), SourceCodec::Zstd { level: 3 });
    assert_eq!(codec("zstd", Some(6)), SourceCodec::Zstd { level: 6 });
    assert_eq!(
        codec("zstd_no_dict", Some(1)),
        SourceCodec::ZstdNoDict { level: 1 }
    );
    assert_eq!(codec("zlib", None).name(), "best_compression");
    assert_eq!(codec("zstd_no_dict", None).name(), "zstd_no_dict");
    assert_eq!(codec("zstd", None).compression_level(), Some(3));
    assert_eq!(codec("default", None).compression_level(), None);
    assert_eq!(
        SourceCodec::from_optional_settings(None, None),
        Ok(SourceCodec::Default)
    );
}

#[test]
fn settings_reject_like_opensearch() {
    let err = |codec: &str, level: Option<i64>| {
        let err = SourceCodec::from_settings(codec, level).unwrap_err();
        assert_eq!(err.error_type(), "illegal_argument_exception");
        err.message()
    };
    assert_eq!(
        err("snappy", None),
        "unknown value for [index.codec] must be one of [default, lz4, best_compression, zlib] but was: snappy"
    );
    assert_eq!(
        err("ZSTD", Some(3)),
        "unknown value for [index.codec] must be one of [default, lz4, best_compression, zlib] but was: ZSTD"
    );
    assert_eq!(
        err("zstd", Some(7)),
        "Failed to parse value [7] for setting [index.codec.compression_level] must be <= 6"
    );
    assert_eq!(
        err("zstd_no_dict", Some(0)),
        "Failed to parse value [0] for setting [index.codec.compression_level] must be >= 1"
    );
    assert_eq!(
        err("best_compression", Some(3)),
        "Compression level cannot be set for the best_compression codec."
    );
    assert_eq!(
        err("lz4", Some(1)),
        "Compression level cannot be set for the lz4 codec."
    );
    // Range is checked before the codec dependency, as in OpenSearch.
    assert_eq!(
        err("default", Some(9)),
        "Failed to parse value [9] for setting [index.codec.compression_level] must be <= 6"
    );
    assert_eq!(
        SourceCodec::from_optional_settings(None, Some(3))
            .unwrap_err()
            .message(),
        "missing required setting [index.codec] for setting [index.codec.compression_level]"
    );
}

#[test]
fn sources_are_compressed_while_indexing_unless_a_dictionary_needs_them_all() {
    use tantivy::SegmentPlugin;

    // Repetitive sources: every codec shrinks them severalfold.
    let docs: Docs = (0..2_000)
        .map(|n| {
            let text = "the quick brown fox jumps over the lazy dog ".repeat(12);
            let source = format!(r#"{{"n":{n},"text":"{text}"}}"#).into_bytes();
            (format!("doc-{n}"), Some(source))
        })
        .collect();
    let raw: usize = docs
        .iter()
        .filter_map(|(_, s)| s.as_ref())
        .map(Vec::len)
        .sum();
    for (name, compressing) in [
        ("default", true),
        ("best_compression", true),
        ("zstd_no_dict", true),
        ("zstd", false),
    ] {
        let index = create_in_ram(codec(name, None));
        let fields = fields_of(&index);
        let segment = index.new_segment();
        let context = tantivy::PluginWriterContext {
            segment: &segment,
            memory_budget_in_bytes: BUDGET,
        };
        let mut writer = plugin(codec(name, None)).create_writer(&context).unwrap();
        let schema = index.schema();
        for (doc_id, (id, source)) in docs.iter().enumerate() {
            let mut doc = TantivyDocument::new();
            doc.add_text(fields.id, id);
            if let Some(source) = source {
                doc.add_custom(fields.source, source);
            }
            writer.add_document(doc_id as u32, &doc, &schema).unwrap();
        }
        let held = writer.mem_usage();
        if compressing {
            assert!(held * 4 < raw, "{name}: {held} bytes held for {raw} raw");
        } else {
            assert!(held >= raw, "{name}: the dictionary samples every source");
        }
    }
}
