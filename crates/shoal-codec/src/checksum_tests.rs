//! Detection of damaged `_source` files (format version 2 checksums), the segment number of
//! version 3, and reading versions 1 and 2.

use tantivy::directory::FileSlice;

use crate::format::{SourceFileWriter, FOOTER_LEN, INDEX_ENTRY_LEN};
use crate::*;

const DOCS: usize = 300;

fn doc(i: usize) -> Vec<u8> {
    format!(r#"{{"n":{i},"text":"document number {i} with some words"}}"#).into_bytes()
}

/// A file of several small blocks; returns its bytes and where the blocks end.
fn written(codec: SourceCodec) -> (Vec<u8>, usize) {
    let mut writer = SourceFileWriter::new(Vec::new(), codec, 512, None).unwrap();
    for i in 0..DOCS {
        writer.add(Some(&doc(i))).unwrap();
    }
    let bytes = writer.finish(7).unwrap();
    let descriptor = u64::from_le_bytes(bytes[bytes.len() - FOOTER_LEN..][..8].try_into().unwrap());
    (bytes, descriptor as usize)
}

fn open(bytes: Vec<u8>) -> tantivy::Result<SourceReader> {
    SourceReader::open_file(FileSlice::from(bytes), 0)
}

/// Reads every document; the first error, if any.
fn read_all(reader: &SourceReader) -> Result<(), tantivy::TantivyError> {
    for i in 0..DOCS {
        let got = reader.get(i as u32)?;
        assert_eq!(got.as_deref(), Some(&doc(i)[..]), "doc {i} read wrong");
    }
    Ok(())
}

#[test]
fn every_flipped_block_byte_is_refused_when_read_never_decoded() {
    for codec in [
        SourceCodec::Default,
        SourceCodec::BestCompression,
        SourceCodec::ZstdNoDict { level: 3 },
    ] {
        let (bytes, blocks_end) = written(codec);
        assert!(open(bytes.clone()).unwrap().num_blocks() > 3);
        // Every 7th byte of the blocks: each flip must be caught, never read as a source.
        for at in (0..blocks_end).step_by(7) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            let reader = open(damaged).expect("the tail is intact");
            let err = read_all(&reader).expect_err("a damaged block must not read");
            assert!(is_corruption(&err), "{codec}: byte {at}: {err}");
            assert!(err.to_string().contains("checksum mismatch"), "{err}");
        }
    }
}

#[test]
fn a_flipped_byte_in_the_descriptor_index_or_footer_fails_the_open() {
    let (bytes, blocks_end) = written(SourceCodec::Default);
    for at in blocks_end..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        match open(damaged) {
            Err(err) => assert!(is_corruption(&err), "byte {at}: {err}"),
            Ok(_) => panic!("byte {at} of the tail flipped but the file opened"),
        }
    }
}

/// Rewrites a version 3 file as an older version: without the segment number (version 2),
/// and also without block crcs and tail crc (version 1).
fn as_version(bytes: &[u8], version: u32) -> Vec<u8> {
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let u64_at = |i: usize| u64::from_le_bytes(footer[i..i + 8].try_into().unwrap());
    let (descriptor, index) = (u64_at(0) as usize, u64_at(8) as usize - 8);
    let mut out = bytes[..index].to_vec();
    let entry_len = if version == 1 { 16 } else { INDEX_ENTRY_LEN };
    for entry in bytes[index + 8..bytes.len() - FOOTER_LEN].chunks_exact(INDEX_ENTRY_LEN) {
        out.extend_from_slice(&entry[..entry_len]);
    }
    out.extend_from_slice(&(descriptor as u64).to_le_bytes());
    out.extend_from_slice(&(index as u64).to_le_bytes());
    out.extend_from_slice(&footer[16..24]);
    if version == 2 {
        let crc = crc32c::crc32c(&out[descriptor..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&footer[32..36]);
    out
}

#[test]
fn version_1_and_2_files_are_still_read_without_a_segment_number() {
    let (bytes, _) = written(SourceCodec::Default);
    assert_eq!(open(bytes.clone()).unwrap().segment_number(), Some(7));
    let file = FileSlice::from(bytes.clone());
    assert_eq!(SourceReader::read_segment_number(&file).unwrap(), Some(7));
    for version in [1, 2] {
        let reader = open(as_version(&bytes, version)).expect("an older version opens");
        read_all(&reader).expect("an older version reads");
        assert_eq!(reader.segment_number(), None, "version {version}");
        let file = FileSlice::from(as_version(&bytes, version));
        assert_eq!(SourceReader::read_segment_number(&file).unwrap(), None);
    }
}

#[test]
fn segment_names_are_lucenes_base_36_numbers() {
    assert_eq!(segment_name(0), "_0");
    assert_eq!(segment_name(35), "_z");
    assert_eq!(segment_name(36), "_10");
    let numbers = SegmentNumbers::default();
    assert_eq!((numbers.next(), numbers.next()), (0, 1));
    numbers.observe(40);
    numbers.observe(3);
    assert_eq!(numbers.next(), 41);
}
