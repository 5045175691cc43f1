//! On-disk layout of the `_source` segment file (`<segment>.src`).
//!
//! ```text
//! blocks      block*                    block = [block codec u8][compressed payload]
//! descriptor  [codec id u8][level u8][block size u32][has dict u8]
//!             (if has dict: [dict len u32][stored len u32][dict, zstd-compressed w/o dict])
//!             [segment number u64]                                      (version 3)
//! index       per block: [first doc u32][offset u64][raw len u32][crc32c u32]  (20 bytes)
//! footer      [descriptor offset u64][index offset u64][num docs u32][num blocks u32]
//!             [tail crc32c u32][format version u32][magic u32]                  (36 bytes)
//! ```
//! (then tantivy's own footer/checksum, stripped by the directory on read.)
//!
//! Checksums (format version 2): each index entry carries the crc32c of its block record
//! (codec byte + compressed payload), checked every time the block is read, so a damaged
//! block is refused instead of decoded into wrong or missing sources (and a merge never
//! copies it); the tail crc32c covers the descriptor, the index and the first 24 footer bytes,
//! checked when the file is opened (from version 3, with the format version after them).
//! tantivy's footer crc covers the whole file but is only checked when the engine verifies
//! the store (on open, before a merge, for recovery).
//!
//! The segment number (version 3) names the segment as Lucene names its own (`_<n>` in base
//! 36): the writer takes it from the index's [`crate::SegmentNumbers`] when it writes the file,
//! so every copy that holds the file (segment replication copies it) shows the same name.
//!
//! Version 2 (no segment number) and version 1 (no checksums: 16-byte index entries, 32-byte
//! footer without the tail crc) are still read, version 1 without per-block checks; its blocks
//! are only covered by tantivy's file crc. Every flush and merge writes version 3, so a merge
//! of old segments upgrades them.
//!
//! A raw (decompressed) block is `[varint (len + 1) per doc, 0 = no source][doc bytes...]`.
//! A block holds the documents `first_doc .. next block's first_doc`; its compressed bytes run
//! from `offset` to the next block's offset (the last one to the descriptor offset).
//! All integers are little-endian.

use std::io::{self, Write};

use crate::codec::SourceCodec;
use crate::compress::{BlockCodec, BlockEncoder};

pub(crate) const MAGIC: u32 = u32::from_le_bytes(*b"SHSR");
pub(crate) const FORMAT_VERSION: u32 = 3;
/// The version without the segment number, still readable.
pub(crate) const FORMAT_VERSION_V2: u32 = 2;
/// The version without checksums, still readable.
pub(crate) const FORMAT_VERSION_V1: u32 = 1;
/// Footer length of versions 2 and 3 (36) and of version 1 (32).
pub(crate) const FOOTER_LEN: usize = 36;
pub(crate) const FOOTER_LEN_V1: usize = 32;
/// Version and magic, the last 8 bytes of every version's footer.
pub(crate) const FOOTER_TRAILER_LEN: usize = 8;
pub(crate) const INDEX_ENTRY_LEN: usize = 20;
pub(crate) const INDEX_ENTRY_LEN_V1: usize = 16;
/// A block is cut after this many documents even if it is still small (bounds the header
/// scan of a block holding many absent/tiny sources).
pub(crate) const MAX_DOCS_PER_BLOCK: u32 = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BlockMeta {
    pub first_doc: u32,
    pub offset: u64,
    pub raw_len: u32,
    /// crc32c of the block record; `None` in version 1 files.
    pub crc: Option<u32>,
}

/// Streams documents into blocks and writes the whole file.
pub(crate) struct SourceFileWriter<W: Write> {
    out: W,
    written: u64,
    codec: SourceCodec,
    block_size: usize,
    encoder: BlockEncoder,
    dictionary: Option<Vec<u8>>,
    header: Vec<u8>,
    body: Vec<u8>,
    docs_in_block: u32,
    num_docs: u32,
    index: Vec<BlockMeta>,
    raw_scratch: Vec<u8>,
    out_scratch: Vec<u8>,
}

impl<W: Write> SourceFileWriter<W> {
    pub(crate) fn new(
        out: W,
        codec: SourceCodec,
        block_size: usize,
        dictionary: Option<Vec<u8>>,
    ) -> io::Result<Self> {
        let encoder = BlockEncoder::new(codec, dictionary.as_deref())?;
        Ok(SourceFileWriter {
            out,
            written: 0,
            codec,
            block_size: block_size.max(1),
            encoder,
            dictionary,
            header: Vec::new(),
            body: Vec::new(),
            docs_in_block: 0,
            num_docs: 0,
            index: Vec::new(),
            raw_scratch: Vec::new(),
            out_scratch: Vec::new(),
        })
    }

    /// Appends the next document's source (`None` = document without source).
    pub(crate) fn add(&mut self, doc: Option<&[u8]>) -> io::Result<()> {
        match doc {
            Some(bytes) => {
                write_varint(&mut self.header, bytes.len() as u64 + 1);
                self.body.extend_from_slice(bytes);
            }
            None => write_varint(&mut self.header, 0),
        }
        self.docs_in_block += 1;
        self.num_docs += 1;
        if self.header.len() + self.body.len() >= self.block_size
            || self.docs_in_block >= MAX_DOCS_PER_BLOCK
        {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.docs_in_block == 0 {
            return Ok(());
        }
        self.raw_scratch.clear();
        self.raw_scratch.extend_from_slice(&self.header);
        self.raw_scratch.extend_from_slice(&self.body);
        let raw_len = u32::try_from(self.raw_scratch.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "source block over 4 GiB"))?;
        self.out_scratch.clear();
        self.out_scratch.push(0);
        let block_codec = self
            .encoder
            .encode(&self.raw_scratch, &mut self.out_scratch)?;
        self.out_scratch[0] = block_codec as u8;
        self.index.push(BlockMeta {
            first_doc: self.num_docs - self.docs_in_block,
            offset: self.written,
            raw_len,
            crc: Some(crc32c::crc32c(&self.out_scratch)),
        });
        self.out.write_all(&self.out_scratch)?;
        self.written += self.out_scratch.len() as u64;
        self.header.clear();
        self.body.clear();
        self.docs_in_block = 0;
        Ok(())
    }

    /// Documents added so far.
    pub(crate) fn num_docs(&self) -> u32 {
        self.num_docs
    }

    /// Heap bytes held besides the output.
    fn buffered_bytes(&self) -> usize {
        self.header.capacity()
            + self.body.capacity()
            + self.raw_scratch.capacity()
            + self.out_scratch.capacity()
            + self.index.capacity() * std::mem::size_of::<BlockMeta>()
    }

    /// Writes the last block, descriptor, index and footer, naming the segment
    /// `segment_number` (given last: a flush takes its number when its file is complete, in
    /// the order segments are written); returns the inner writer.
    pub(crate) fn finish(mut self, segment_number: u64) -> io::Result<W> {
        self.flush_block()?;
        let descriptor_offset = self.written;
        let mut tail = Vec::with_capacity(64 + self.index.len() * INDEX_ENTRY_LEN);
        tail.push(self.codec.id());
        tail.push(self.codec.compression_level().unwrap_or(0));
        tail.extend_from_slice(&(self.block_size.min(u32::MAX as usize) as u32).to_le_bytes());
        match &self.dictionary {
            Some(dict) => {
                let stored = zstd::bulk::compress(dict, 3)?;
                tail.push(1);
                tail.extend_from_slice(&(dict.len() as u32).to_le_bytes());
                tail.extend_from_slice(&(stored.len() as u32).to_le_bytes());
                tail.extend_from_slice(&stored);
            }
            None => tail.push(0),
        }
        tail.extend_from_slice(&segment_number.to_le_bytes());
        let index_offset = descriptor_offset + tail.len() as u64;
        for block in &self.index {
            tail.extend_from_slice(&block.first_doc.to_le_bytes());
            tail.extend_from_slice(&block.offset.to_le_bytes());
            tail.extend_from_slice(&block.raw_len.to_le_bytes());
            tail.extend_from_slice(&block.crc.unwrap_or_default().to_le_bytes());
        }
        tail.extend_from_slice(&descriptor_offset.to_le_bytes());
        tail.extend_from_slice(&index_offset.to_le_bytes());
        tail.extend_from_slice(&self.num_docs.to_le_bytes());
        tail.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        // Version 3 also covers the version: flipped to 2, the same bytes would parse.
        let tail_crc = crc32c::crc32c_append(crc32c::crc32c(&tail), &FORMAT_VERSION.to_le_bytes());
        tail.extend_from_slice(&tail_crc.to_le_bytes());
        tail.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        tail.extend_from_slice(&MAGIC.to_le_bytes());
        self.out.write_all(&tail)?;
        Ok(self.out)
    }
}

impl SourceFileWriter<Vec<u8>> {
    /// Heap bytes held, the compressed output included.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.out.capacity() + self.buffered_bytes()
    }
}

/// Everything but the blocks, parsed from the file's tail.
pub(crate) struct FileMeta {
    pub descriptor_offset: u64,
    pub codec: SourceCodec,
    pub block_size: u32,
    pub dictionary: Option<Vec<u8>>,
    pub index: Vec<BlockMeta>,
    pub num_docs: u32,
    /// `None` before version 3.
    pub segment_number: Option<u64>,
}

/// A `_source` file's bytes do not match what was written: the payload of the
/// [`io::Error`] (kind `InvalidData`) of every corruption the reader detects, so callers can
/// tell damage from other I/O failures (see [`crate::is_corruption`]).
#[derive(Debug)]
pub struct SourceCorruption(pub String);

impl std::fmt::Display for SourceCorruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "corrupt _source file: {}", self.0)
    }
}

impl std::error::Error for SourceCorruption {}

pub(crate) fn corrupt(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, SourceCorruption(msg.into()))
}

/// The format version from the last [`FOOTER_TRAILER_LEN`] bytes; checks the magic.
pub(crate) fn parse_trailer(trailer: &[u8]) -> io::Result<u32> {
    if trailer.len() != FOOTER_TRAILER_LEN {
        return Err(corrupt("file too short"));
    }
    let magic = u32::from_le_bytes(trailer[4..8].try_into().unwrap());
    if magic != MAGIC {
        return Err(corrupt("bad magic"));
    }
    let version = u32::from_le_bytes(trailer[0..4].try_into().unwrap());
    match version {
        FORMAT_VERSION | FORMAT_VERSION_V2 | FORMAT_VERSION_V1 => Ok(version),
        other => Err(corrupt(format!("unsupported format version {other}"))),
    }
}

/// The footer length of a format version (see [`parse_trailer`]).
pub(crate) fn footer_len(version: u32) -> usize {
    if version == FORMAT_VERSION_V1 {
        FOOTER_LEN_V1
    } else {
        FOOTER_LEN
    }
}

/// (descriptor offset, index offset, num docs, num blocks, tail crc) of a footer of
/// [`footer_len`]`(version)` bytes; the tail crc is `None` for version 1.
pub(crate) fn parse_footer(
    footer: &[u8],
    version: u32,
) -> io::Result<(u64, u64, u32, u32, Option<u32>)> {
    if footer.len() != footer_len(version) {
        return Err(corrupt("file too short"));
    }
    let u64_at = |i: usize| u64::from_le_bytes(footer[i..i + 8].try_into().unwrap());
    let u32_at = |i: usize| u32::from_le_bytes(footer[i..i + 4].try_into().unwrap());
    let tail_crc = (version != FORMAT_VERSION_V1).then(|| u32_at(24));
    Ok((u64_at(0), u64_at(8), u32_at(16), u32_at(20), tail_crc))
}

/// Parses descriptor + index. `tail` is the file from `descriptor_offset` up to (excluding)
/// the footer.
pub(crate) fn parse_tail(
    tail: &[u8],
    descriptor_offset: u64,
    index_offset: u64,
    num_docs: u32,
    num_blocks: u32,
    version: u32,
) -> io::Result<FileMeta> {
    let entry_len = if version == FORMAT_VERSION_V1 {
        INDEX_ENTRY_LEN_V1
    } else {
        INDEX_ENTRY_LEN
    };
    let desc_len = index_offset
        .checked_sub(descriptor_offset)
        .ok_or_else(|| corrupt("index before descriptor"))? as usize;
    let number_len = if version >= FORMAT_VERSION { 8 } else { 0 };
    if desc_len < 7 + number_len || tail.len() != desc_len + num_blocks as usize * entry_len {
        return Err(corrupt("bad descriptor/index length"));
    }
    let (desc, index_bytes) = tail.split_at(desc_len);
    let (desc, number) = desc.split_at(desc_len - number_len);
    let segment_number = (number_len > 0).then(|| u64::from_le_bytes(number.try_into().unwrap()));
    let codec = SourceCodec::from_id(desc[0], desc[1])
        .ok_or_else(|| corrupt(format!("unknown codec id {}", desc[0])))?;
    let block_size = u32::from_le_bytes(desc[2..6].try_into().unwrap());
    let dictionary = match desc[6] {
        0 => None,
        1 => {
            if desc.len() < 15 {
                return Err(corrupt("truncated dictionary header"));
            }
            let dict_len = u32::from_le_bytes(desc[7..11].try_into().unwrap()) as usize;
            let stored_len = u32::from_le_bytes(desc[11..15].try_into().unwrap()) as usize;
            let stored = desc
                .get(15..15 + stored_len)
                .ok_or_else(|| corrupt("truncated dictionary"))?;
            let dict = zstd::bulk::decompress(stored, dict_len)?;
            if dict.len() != dict_len {
                return Err(corrupt("dictionary length mismatch"));
            }
            Some(dict)
        }
        other => return Err(corrupt(format!("bad dictionary flag {other}"))),
    };
    let mut index = Vec::with_capacity(num_blocks as usize);
    for entry in index_bytes.chunks_exact(entry_len) {
        let block = BlockMeta {
            first_doc: u32::from_le_bytes(entry[0..4].try_into().unwrap()),
            offset: u64::from_le_bytes(entry[4..12].try_into().unwrap()),
            raw_len: u32::from_le_bytes(entry[12..16].try_into().unwrap()),
            crc: (version != FORMAT_VERSION_V1)
                .then(|| u32::from_le_bytes(entry[16..20].try_into().unwrap())),
        };
        if let Some(prev) = index.last() {
            let prev: &BlockMeta = prev;
            if block.first_doc <= prev.first_doc || block.offset <= prev.offset {
                return Err(corrupt("block index not increasing"));
            }
        } else if block.first_doc != 0 || block.offset != 0 {
            return Err(corrupt("first block does not start at 0"));
        }
        if block.offset >= descriptor_offset || block.first_doc >= num_docs {
            return Err(corrupt("block out of range"));
        }
        index.push(block);
    }
    if num_docs > 0 && index.is_empty() {
        return Err(corrupt("documents without blocks"));
    }
    Ok(FileMeta {
        descriptor_offset,
        codec,
        block_size,
        dictionary,
        index,
        num_docs,
        segment_number,
    })
}

/// A decompressed block: its bytes and each document's span.
pub(crate) struct DecodedBlock {
    data: Vec<u8>,
    /// Per document: (start, len) in `data`; `start == u32::MAX` for no source.
    spans: Vec<(u32, u32)>,
}

const ABSENT: u32 = u32::MAX;

impl DecodedBlock {
    pub(crate) fn parse(data: Vec<u8>, num_docs: usize) -> io::Result<DecodedBlock> {
        let mut spans = Vec::with_capacity(num_docs);
        let mut pos = 0usize;
        let mut lens = Vec::with_capacity(num_docs);
        for _ in 0..num_docs {
            let (v, read) =
                read_varint(&data[pos..]).ok_or_else(|| corrupt("truncated block header"))?;
            pos += read;
            lens.push(v);
        }
        let mut start = pos as u64;
        for v in lens {
            if v == 0 {
                spans.push((ABSENT, 0));
                continue;
            }
            let len = v - 1;
            let end = start + len;
            if end > data.len() as u64 {
                return Err(corrupt("document runs past its block"));
            }
            spans.push((start as u32, len as u32));
            start = end;
        }
        if start != data.len() as u64 {
            return Err(corrupt("trailing bytes in block"));
        }
        Ok(DecodedBlock { data, spans })
    }

    /// The source of the `i`-th document of the block.
    pub(crate) fn doc(&self, i: usize) -> Option<&[u8]> {
        let (start, len) = self.spans[i];
        if start == ABSENT {
            return None;
        }
        Some(&self.data[start as usize..start as usize + len as usize])
    }

    pub(crate) fn heap_size(&self) -> usize {
        self.data.capacity() + self.spans.capacity() * 8
    }
}

pub(crate) fn decode_block_record(record: &[u8]) -> io::Result<(BlockCodec, &[u8])> {
    let (&codec, payload) = record.split_first().ok_or_else(|| corrupt("empty block"))?;
    let codec = BlockCodec::from_u8(codec)
        .ok_or_else(|| corrupt(format!("unknown block codec {codec}")))?;
    Ok((codec, payload))
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Checks a block record against the crc32c its index entry recorded (version 2 files).
pub(crate) fn check_block(record: &[u8], meta: &BlockMeta, ord: usize) -> io::Result<()> {
    match meta.crc {
        Some(expected) if crc32c::crc32c(record) != expected => Err(corrupt(format!(
            "checksum mismatch in block {ord} (documents from {}): crc32c {:08x}, recorded {expected:08x}",
            meta.first_doc,
            crc32c::crc32c(record)
        ))),
        _ => Ok(()),
    }
}
