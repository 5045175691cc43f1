//! Detection of damaged store files: one flipped byte in any file of a flushed segment (or
//! the commit, or a translog generation) is caught on open, on read or before a merge.

use std::path::{Path, PathBuf};

use serde_json::json;
use shoal_mapping::{DocumentParser, MapperError, Mapping};
use tantivy::TantivyDocument;

use crate::store::{read_marker, CheckOnStartup};
use crate::*;

fn mapping() -> Mapping {
    Mapping::from_json(&json!({"properties": {"n": {"type": "long"}, "t": {"type": "text"}}}))
        .unwrap()
}

fn parse(id: &str, source: &[u8]) -> Result<TantivyDocument, MapperError> {
    let schema = shoal_mapping::ShardSchema::build(shoal_codec::add_source_field);
    Ok(DocumentParser::new(&mapping(), &schema)
        .parse(id, source)?
        .doc)
}

fn open(dir: &Path, check: CheckOnStartup) -> Result<Engine, EngineError> {
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.check_on_startup = check;
    Engine::open(config, 1, &parse)
}

/// `docs` documents in one flushed segment, engine closed.
fn flushed_store(dir: &Path, docs: usize) {
    let engine = open(dir, CheckOnStartup::Checksum).unwrap();
    let ops = (0..docs)
        .map(|i| {
            let source = serde_json::to_vec(&json!({"n": i, "t": format!("text {i}")})).unwrap();
            WriteOp::Index {
                id: i.to_string(),
                routing: None,
                doc: parse(&i.to_string(), &source).unwrap(),
                source,
                request: DocRequest::default(),
                seq_no: UNASSIGNED_SEQ_NO,
                primary_term: 0,
                version: 0,
            }
        })
        .collect();
    for result in engine.apply(ops, Origin::Primary) {
        result.unwrap();
    }
    engine.flush(true).unwrap();
    engine.close().unwrap();
}

fn file_with_extension(dir: &Path, ext: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == ext))
        .unwrap_or_else(|| panic!("no .{ext} file in {}", dir.display()))
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x04;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_in_any_segment_file_fails_the_open_and_marks_the_store() {
    for ext in ["idx", "pos", "term", "store", "fast", "fieldnorm", "src"] {
        let dir = tempfile::tempdir().unwrap();
        flushed_store(dir.path(), 200);
        let index_dir = dir.path().join("index");
        let file = file_with_extension(&index_dir, ext);
        flip(&file, std::fs::metadata(&file).unwrap().len() as usize / 3);
        let err = open(dir.path(), CheckOnStartup::Checksum)
            .err()
            .unwrap_or_else(|| panic!(".{ext}: a damaged store opened"));
        assert!(matches!(&err, EngineError::Corrupted(_)), ".{ext}: {err}");
        assert!(read_marker(&index_dir).is_some(), ".{ext}: no marker");
        // Marked: refused at once, whatever the check level.
        let again = open(dir.path(), CheckOnStartup::False).err().unwrap();
        assert!(
            matches!(&again, EngineError::Corrupted(r) if r.contains("marked corrupted")),
            "{again}"
        );
    }
}

#[test]
fn a_damaged_commit_payload_or_translog_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    flushed_store(dir.path(), 20);
    let meta = dir.path().join("index/meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    let at = text.find("local_checkpoint").unwrap() + 20;
    flip(&meta, at);
    let err = open(dir.path(), CheckOnStartup::False).err().unwrap();
    assert!(matches!(err, EngineError::Corrupted(_)), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), CheckOnStartup::Checksum).unwrap();
    let source = br#"{"n":1}"#.to_vec();
    let op = WriteOp::Index {
        id: "1".into(),
        routing: None,
        doc: parse("1", &source).unwrap(),
        source,
        request: DocRequest::default(),
        seq_no: UNASSIGNED_SEQ_NO,
        primary_term: 0,
        version: 0,
    };
    let location = engine
        .apply(vec![op], Origin::Primary)
        .pop()
        .unwrap()
        .unwrap();
    engine.sync_to(&location.location.unwrap()).unwrap();
    drop(engine);
    let generation = file_with_extension(&dir.path().join("translog"), "tlog");
    let len = std::fs::metadata(&generation).unwrap().len() as usize;
    flip(&generation, len - 10);
    let err = open(dir.path(), CheckOnStartup::Checksum).err().unwrap();
    assert!(matches!(err, EngineError::Corrupted(_)), "{err}");
    assert!(read_marker(&dir.path().join("index")).is_some());
}

#[test]
fn a_damaged_source_block_is_refused_on_read_and_fails_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    flushed_store(dir.path(), 200);
    let src = file_with_extension(&dir.path().join("index"), "src");
    flip(&src, 5);
    // Footers only: the damage is not seen on open, but never served.
    let engine = open(dir.path(), CheckOnStartup::False).unwrap();
    let mut errors = 0;
    for i in 0..200 {
        match engine.get(&i.to_string()) {
            Ok(Some(got)) => {
                let value: serde_json::Value = serde_json::from_slice(&got.source).unwrap();
                assert_eq!(value["n"], json!(i), "doc {i} served wrong");
            }
            Ok(None) => panic!("doc {i} lost"),
            Err(e) => {
                assert!(matches!(e, EngineError::Corrupted(_)), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "the damaged block was never read");
    assert!(engine.failure().is_some());
    assert!(read_marker(&dir.path().join("index")).is_some());
}

#[test]
fn a_damaged_segment_is_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    flushed_store(dir.path(), 50);
    flushed_store(dir.path(), 0);
    {
        let engine = open(dir.path(), CheckOnStartup::False).unwrap();
        let source = br#"{"n":1000}"#.to_vec();
        let op = WriteOp::Index {
            id: "x".into(),
            routing: None,
            doc: parse("x", &source).unwrap(),
            source,
            request: DocRequest::default(),
            seq_no: UNASSIGNED_SEQ_NO,
            primary_term: 0,
            version: 0,
        };
        engine
            .apply(vec![op], Origin::Primary)
            .pop()
            .unwrap()
            .unwrap();
        engine.flush(true).unwrap();
        engine.close().unwrap();
    }
    let term = file_with_extension(&dir.path().join("index"), "term");
    flip(&term, 30);
    let engine = open(dir.path(), CheckOnStartup::False).unwrap();
    let err = engine
        .force_merge(ForceMergeTarget::MaxSegments(1))
        .unwrap_err();
    assert!(matches!(err, EngineError::Corrupted(_)), "{err}");
    assert!(engine.failure().is_some());
    assert!(read_marker(&dir.path().join("index")).is_some());
}

#[test]
fn checksum_file_verifies_the_footer_crc_and_the_commit_payload() {
    let dir = tempfile::tempdir().unwrap();
    flushed_store(dir.path(), 20);
    let index_dir = dir.path().join("index");
    for entry in std::fs::read_dir(&index_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with(".lock") || name.starts_with("shoal_") {
            continue;
        }
        store::checksum_file(&entry.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let fast = file_with_extension(&index_dir, "fast");
    flip(&fast, 5);
    let err = store::checksum_file(&fast).unwrap_err();
    assert!(
        matches!(&err, store::FileCheckError::Corrupted(r) if r.contains("checksum failed")),
        "{err}"
    );
    let missing = store::checksum_file(&index_dir.join("nope.fast")).unwrap_err();
    assert!(matches!(missing, store::FileCheckError::Unreadable(_)));
}

/// Every `step`-th byte of `meta.json` flipped in turn: the open fails as corrupted, or every
/// document reads back exactly (a flip tantivy's parser does not see, e.g. in whitespace).
#[test]
fn a_flipped_byte_anywhere_in_the_commit_fails_the_open_or_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    flushed_store(dir.path(), 30);
    let meta = dir.path().join("index/meta.json");
    let original = std::fs::read(&meta).unwrap();
    for at in (0..original.len()).step_by(13) {
        let mut damaged = original.clone();
        damaged[at] ^= 0x04;
        std::fs::write(&meta, &damaged).unwrap();
        match open(dir.path(), CheckOnStartup::False) {
            Err(EngineError::Corrupted(_)) => {
                for entry in std::fs::read_dir(dir.path().join("index"))
                    .unwrap()
                    .flatten()
                {
                    if entry
                        .file_name()
                        .to_string_lossy()
                        .starts_with("corrupted_")
                    {
                        std::fs::remove_file(entry.path()).unwrap();
                    }
                }
            }
            Err(other) => panic!("byte {at}: not reported as corruption: {other}"),
            Ok(engine) => {
                for i in 0..30 {
                    let got = engine.get(&i.to_string()).unwrap().expect("document kept");
                    let value: serde_json::Value = serde_json::from_slice(&got.source).unwrap();
                    assert_eq!(value["n"], json!(i), "byte {at}: doc {i} served wrong");
                }
                // Only flips serde cannot see (an unknown key falling back to the value it
                // had) get here; the schema checksum caught every changed value.
                drop(engine);
            }
        }
        std::fs::write(&meta, &original).unwrap();
    }
}
