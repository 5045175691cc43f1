//! Block compression primitives and zstd dictionary training.

use std::io::{self, Read, Write};

use parking_lot::Mutex;

use crate::codec::SourceCodec;

/// Codec id written in front of every block, so a reader never has to trust the file-level
/// descriptor to know how a block was compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum BlockCodec {
    /// LZ4 block format (`lz4_flex`), uncompressed size prepended (u32 LE).
    Lz4 = 1,
    /// zlib (DEFLATE) stream.
    Deflate = 2,
    /// zstd frame, no dictionary.
    Zstd = 3,
    /// zstd frame compressed with the file's dictionary.
    ZstdDict = 4,
}

impl BlockCodec {
    pub(crate) fn from_u8(v: u8) -> Option<BlockCodec> {
        match v {
            1 => Some(BlockCodec::Lz4),
            2 => Some(BlockCodec::Deflate),
            3 => Some(BlockCodec::Zstd),
            4 => Some(BlockCodec::ZstdDict),
            _ => None,
        }
    }
}

/// DEFLATE level used for `best_compression` (zlib's own default, what Lucene's
/// BEST_COMPRESSION mode uses too).
pub(crate) const DEFLATE_LEVEL: u32 = 6;

/// Compresses blocks with one codec (and, for zstd, maybe a dictionary).
pub(crate) enum BlockEncoder {
    Lz4,
    Deflate,
    Zstd {
        compressor: zstd::bulk::Compressor<'static>,
        with_dict: bool,
    },
}

impl BlockEncoder {
    pub(crate) fn new(codec: SourceCodec, dictionary: Option<&[u8]>) -> io::Result<BlockEncoder> {
        Ok(match codec {
            SourceCodec::Default => BlockEncoder::Lz4,
            SourceCodec::BestCompression => BlockEncoder::Deflate,
            SourceCodec::Zstd { level } | SourceCodec::ZstdNoDict { level } => {
                let dict = dictionary.unwrap_or(&[]);
                BlockEncoder::Zstd {
                    compressor: zstd::bulk::Compressor::with_dictionary(level as i32, dict)?,
                    with_dict: !dict.is_empty(),
                }
            }
        })
    }

    /// Appends the compressed form of `raw` to `out`; returns the block codec used.
    pub(crate) fn encode(&mut self, raw: &[u8], out: &mut Vec<u8>) -> io::Result<BlockCodec> {
        match self {
            BlockEncoder::Lz4 => {
                out.extend_from_slice(&lz4_flex::block::compress_prepend_size(raw));
                Ok(BlockCodec::Lz4)
            }
            BlockEncoder::Deflate => {
                let mut encoder = flate2::write::ZlibEncoder::new(
                    std::mem::take(out),
                    flate2::Compression::new(DEFLATE_LEVEL),
                );
                encoder.write_all(raw)?;
                *out = encoder.finish()?;
                Ok(BlockCodec::Deflate)
            }
            BlockEncoder::Zstd {
                compressor,
                with_dict,
            } => {
                out.extend_from_slice(&compressor.compress(raw)?);
                Ok(if *with_dict {
                    BlockCodec::ZstdDict
                } else {
                    BlockCodec::Zstd
                })
            }
        }
    }
}

/// Decompresses blocks of any codec. Keeps a small pool of zstd contexts (with the file's
/// dictionary already loaded) so concurrent readers do not serialise on one context and no
/// context is re-created per block.
pub(crate) struct BlockDecoder {
    dictionary: Option<Vec<u8>>,
    zstd_plain: Mutex<Vec<zstd::bulk::Decompressor<'static>>>,
    zstd_dict: Mutex<Vec<zstd::bulk::Decompressor<'static>>>,
}

const MAX_POOLED_CONTEXTS: usize = 4;

impl BlockDecoder {
    pub(crate) fn new(dictionary: Option<Vec<u8>>) -> BlockDecoder {
        BlockDecoder {
            dictionary,
            zstd_plain: Mutex::new(Vec::new()),
            zstd_dict: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn decode(
        &self,
        codec: BlockCodec,
        payload: &[u8],
        raw_len: usize,
    ) -> io::Result<Vec<u8>> {
        let raw = match codec {
            BlockCodec::Lz4 => lz4_flex::block::decompress_size_prepended(payload)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            BlockCodec::Deflate => {
                let mut raw = Vec::with_capacity(raw_len);
                flate2::read::ZlibDecoder::new(payload).read_to_end(&mut raw)?;
                raw
            }
            BlockCodec::Zstd => self.zstd_decode(&self.zstd_plain, &[], payload, raw_len)?,
            BlockCodec::ZstdDict => {
                let dict = self.dictionary.as_deref().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        "block needs the zstd dictionary but the file has none",
                    )
                })?;
                self.zstd_decode(&self.zstd_dict, dict, payload, raw_len)?
            }
        };
        if raw.len() != raw_len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "block decompressed to {} bytes, expected {raw_len}",
                    raw.len()
                ),
            ));
        }
        Ok(raw)
    }

    fn zstd_decode(
        &self,
        pool: &Mutex<Vec<zstd::bulk::Decompressor<'static>>>,
        dict: &[u8],
        payload: &[u8],
        raw_len: usize,
    ) -> io::Result<Vec<u8>> {
        let pooled = pool.lock().pop();
        let mut decompressor = match pooled {
            Some(d) => d,
            None => zstd::bulk::Decompressor::with_dictionary(dict)?,
        };
        let result = decompressor.decompress(payload, raw_len);
        if result.is_ok() {
            let mut pool = pool.lock();
            if pool.len() < MAX_POOLED_CONTEXTS {
                pool.push(decompressor);
            }
        }
        result
    }
}

/// Hard cap of a trained dictionary.
pub(crate) const MAX_DICT_SIZE: usize = 64 * 1024;
/// Total sample bytes fed to the trainer (sampled evenly over the segment when larger).
/// zstd suggests ~100x the dictionary size; 1 MiB keeps training around 0.1-0.3 s.
pub(crate) const SAMPLE_BUDGET: usize = 1024 * 1024;
/// A single sample is at most this long (the head of a larger document).
pub(crate) const MAX_SAMPLE_LEN: usize = 16 * 1024;
/// Consecutive documents sampled together (see [`DictTrainer::is_sampled`]).
const SAMPLE_RUN: u64 = 16;
/// Below this many samples or bytes, no dictionary is trained.
const MIN_SAMPLES: usize = 32;
const MIN_SAMPLE_BYTES: usize = 16 * 1024;
/// Dictionaries smaller than this are not worth it.
const MIN_DICT_SIZE: usize = 2 * 1024;

/// Collects dictionary training samples.
#[derive(Default)]
pub(crate) struct DictTrainer {
    data: Vec<u8>,
    sizes: Vec<usize>,
}

impl DictTrainer {
    /// Picks every `stride`-th document out of `num_docs` so that about [`SAMPLE_BUDGET`] bytes
    /// are sampled, given the segment holds `total_bytes` of source.
    pub(crate) fn stride(num_docs: u64, total_bytes: u64) -> u64 {
        if num_docs == 0 || total_bytes <= SAMPLE_BUDGET as u64 {
            return 1;
        }
        let avg = (total_bytes / num_docs).clamp(1, MAX_SAMPLE_LEN as u64);
        let wanted_docs = (SAMPLE_BUDGET as u64 / avg).max(1);
        (num_docs / wanted_docs).max(1)
    }

    /// Whether the `ord`-th document (in new doc id order) is sampled at `stride`. Samples
    /// come in runs of [`SAMPLE_RUN`] consecutive documents so that a merge, which reads the
    /// samples back from compressed blocks, decompresses few blocks for them.
    pub(crate) fn is_sampled(ord: u64, stride: u64) -> bool {
        let run_stride = (stride / SAMPLE_RUN).max(1);
        (ord / SAMPLE_RUN).is_multiple_of(run_stride)
    }

    pub(crate) fn is_full(&self) -> bool {
        self.data.len() >= SAMPLE_BUDGET
    }

    pub(crate) fn add(&mut self, doc: &[u8]) {
        if doc.is_empty() || self.is_full() {
            return;
        }
        let sample = &doc[..doc.len().min(MAX_SAMPLE_LEN)];
        self.data.extend_from_slice(sample);
        self.sizes.push(sample.len());
    }

    /// Trains a dictionary, `None` when there is too little data or training fails (the
    /// segment is then written with plain zstd and the descriptor records "no dictionary").
    pub(crate) fn train(self) -> Option<Vec<u8>> {
        if self.sizes.len() < MIN_SAMPLES || self.data.len() < MIN_SAMPLE_BYTES {
            return None;
        }
        let max_size = (self.data.len() / 8).min(MAX_DICT_SIZE);
        if max_size < MIN_DICT_SIZE {
            return None;
        }
        match zstd::dict::from_continuous(&self.data, &self.sizes, max_size) {
            Ok(dict) if dict.len() >= 256 => Some(dict),
            Ok(_) => None,
            Err(err) => {
                tracing::debug!(%err, samples = self.sizes.len(), "zstd dictionary training failed; writing without dictionary");
                None
            }
        }
    }
}
