//! `index.codec` / `index.codec.compression_level` parsing and validation.
//!
//! The error texts are those of OpenSearch (`EngineConfig.INDEX_CODEC_SETTING`,
//! `EngineConfig.INDEX_CODEC_COMPRESSION_LEVEL_SETTING` and `Setting.parseInt`), so the REST layer
//! can return [`CodecError::message`] verbatim as an `illegal_argument_exception`.
//!
//! Checked against OpenSearch's `server/src/main/java/org/opensearch/index/engine/EngineConfig.java`
//! (main branch; the 2.18 text is the same as far as we know) and `common/settings/Setting.java`.

use std::fmt;

/// Name of the codec setting.
pub const INDEX_CODEC_SETTING: &str = "index.codec";
/// Name of the compression level setting.
pub const INDEX_CODEC_COMPRESSION_LEVEL_SETTING: &str = "index.codec.compression_level";
/// Default `index.codec.compression_level` (OpenSearch: `Integer.toString(3)`).
pub const DEFAULT_COMPRESSION_LEVEL: u8 = 3;
/// Smallest accepted `index.codec.compression_level`.
pub const MIN_COMPRESSION_LEVEL: i64 = 1;
/// Largest accepted `index.codec.compression_level`.
pub const MAX_COMPRESSION_LEVEL: i64 = 6;

/// How the `_source` of a segment is compressed; the value of OpenSearch's `index.codec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SourceCodec {
    /// `default` (aliases `lz4`, `best_speed`, `lucene_default`): LZ4 blocks.
    #[default]
    Default,
    /// `best_compression` (alias `zlib`): DEFLATE (zlib) level 6 on larger blocks.
    BestCompression,
    /// `zstd`: Zstandard with a dictionary trained per segment and stored in the segment.
    Zstd {
        /// zstd level, 1..=6 (OpenSearch levels map 1:1 onto zstd levels).
        level: u8,
    },
    /// `zstd_no_dict`: Zstandard without dictionary.
    ZstdNoDict {
        /// zstd level, 1..=6.
        level: u8,
    },
}

impl SourceCodec {
    /// Parses and validates `index.codec` (+ optional `index.codec.compression_level`) the way
    /// OpenSearch 2.18 does.
    ///
    /// Accepted codec names: `default`, `lz4`, `best_speed`, `lucene_default` (all LZ4),
    /// `best_compression`, `zlib` (DEFLATE), `zstd`, `zstd_no_dict`. A level may only be given for
    /// the zstd codecs and must be within 1..=6; it defaults to 3.
    ///
    /// Note: OpenSearch itself does not accept `best_speed`; Shoal accepts it as an alias of
    /// `default`.
    pub fn from_settings(
        codec: &str,
        compression_level: Option<i64>,
    ) -> Result<SourceCodec, CodecError> {
        let parsed = match codec {
            "default" | "lz4" | "best_speed" | "lucene_default" => SourceCodec::Default,
            "best_compression" | "zlib" => SourceCodec::BestCompression,
            "zstd" => SourceCodec::Zstd {
                level: DEFAULT_COMPRESSION_LEVEL,
            },
            "zstd_no_dict" => SourceCodec::ZstdNoDict {
                level: DEFAULT_COMPRESSION_LEVEL,
            },
            other => return Err(CodecError::UnknownCodec(other.to_string())),
        };
        let Some(level) = compression_level else {
            return Ok(parsed);
        };
        // OpenSearch parses the level (range check) before it validates the dependency on the
        // codec, so an out-of-range level wins over "cannot be set for the codec".
        if !(MIN_COMPRESSION_LEVEL..=MAX_COMPRESSION_LEVEL).contains(&level) {
            return Err(CodecError::LevelOutOfRange(level));
        }
        let level = level as u8;
        match parsed {
            SourceCodec::Zstd { .. } => Ok(SourceCodec::Zstd { level }),
            SourceCodec::ZstdNoDict { .. } => Ok(SourceCodec::ZstdNoDict { level }),
            SourceCodec::Default | SourceCodec::BestCompression => {
                Err(CodecError::LevelNotSupported(codec.to_string()))
            }
        }
    }

    /// Like [`from_settings`](Self::from_settings), for index settings where `index.codec` may be
    /// absent. OpenSearch rejects a compression level without an explicit `index.codec` (the
    /// level setting declares a dependency on the codec setting); without either, the codec is
    /// `default`.
    pub fn from_optional_settings(
        codec: Option<&str>,
        compression_level: Option<i64>,
    ) -> Result<SourceCodec, CodecError> {
        match (codec, compression_level) {
            (Some(codec), level) => SourceCodec::from_settings(codec, level),
            (None, Some(_)) => Err(CodecError::MissingCodec),
            (None, None) => Ok(SourceCodec::Default),
        }
    }

    /// Canonical `index.codec` name of this codec (`default`, `best_compression`, `zstd`,
    /// `zstd_no_dict`). Aliases are normalised away.
    pub fn name(&self) -> &'static str {
        match self {
            SourceCodec::Default => "default",
            SourceCodec::BestCompression => "best_compression",
            SourceCodec::Zstd { .. } => "zstd",
            SourceCodec::ZstdNoDict { .. } => "zstd_no_dict",
        }
    }

    /// The compression level for the zstd codecs, `None` for the others.
    pub fn compression_level(&self) -> Option<u8> {
        match self {
            SourceCodec::Zstd { level } | SourceCodec::ZstdNoDict { level } => Some(*level),
            SourceCodec::Default | SourceCodec::BestCompression => None,
        }
    }

    /// Default number of raw (uncompressed) source bytes per compressed block.
    ///
    /// LZ4 and zstd use 16 KiB blocks: a `get` decompresses one block, so small blocks keep
    /// single-document fetches cheap (zstd with a dictionary does not need big blocks to find
    /// redundancy). `best_compression` trades fetch latency for ratio like OpenSearch's
    /// BEST_COMPRESSION mode (which uses much larger chunks than BEST_SPEED): DEFLATE level 6 on
    /// 60 KiB blocks.
    pub fn default_block_size(&self) -> usize {
        match self {
            SourceCodec::BestCompression => 60 * 1024,
            SourceCodec::Default | SourceCodec::Zstd { .. } | SourceCodec::ZstdNoDict { .. } => {
                16 * 1024
            }
        }
    }

    /// On-disk id of the codec in the per-file descriptor.
    pub(crate) fn id(&self) -> u8 {
        match self {
            SourceCodec::Default => 1,
            SourceCodec::BestCompression => 2,
            SourceCodec::Zstd { .. } => 3,
            SourceCodec::ZstdNoDict { .. } => 4,
        }
    }

    pub(crate) fn from_id(id: u8, level: u8) -> Option<SourceCodec> {
        match id {
            1 => Some(SourceCodec::Default),
            2 => Some(SourceCodec::BestCompression),
            3 => Some(SourceCodec::Zstd { level }),
            4 => Some(SourceCodec::ZstdNoDict { level }),
            _ => None,
        }
    }
}

impl fmt::Display for SourceCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.compression_level() {
            Some(level) => write!(f, "{}(level={level})", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

/// Invalid `index.codec` / `index.codec.compression_level`. `Display` (and
/// [`message`](Self::message)) is OpenSearch's exact text; the REST layer reports it as
/// [`error_type`](Self::error_type) (`illegal_argument_exception`) with HTTP 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// `index.codec` is not a known codec.
    #[error(
        "unknown value for [index.codec] must be one of [default, lz4, best_compression, zlib] but was: {0}"
    )]
    UnknownCodec(String),
    /// `index.codec.compression_level` outside 1..=6.
    #[error("{}", level_range_message(*.0))]
    LevelOutOfRange(i64),
    /// `index.codec.compression_level` given for a codec without levels (the payload is the
    /// codec name as the user spelled it).
    #[error("Compression level cannot be set for the {0} codec.")]
    LevelNotSupported(String),
    /// `index.codec.compression_level` given without `index.codec`.
    #[error("missing required setting [index.codec] for setting [index.codec.compression_level]")]
    MissingCodec,
}

fn level_range_message(level: i64) -> String {
    // OpenSearch `Setting.parseInt(s, 1, 6, "index.codec.compression_level", false)`.
    if level < MIN_COMPRESSION_LEVEL {
        format!(
            "Failed to parse value [{level}] for setting [{INDEX_CODEC_COMPRESSION_LEVEL_SETTING}] must be >= {MIN_COMPRESSION_LEVEL}"
        )
    } else {
        format!(
            "Failed to parse value [{level}] for setting [{INDEX_CODEC_COMPRESSION_LEVEL_SETTING}] must be <= {MAX_COMPRESSION_LEVEL}"
        )
    }
}

impl CodecError {
    /// The OpenSearch error message (same as `Display`).
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// The OpenSearch error `type` for this error.
    pub fn error_type(&self) -> &'static str {
        "illegal_argument_exception"
    }

    /// The setting the error is about (`index.codec` or `index.codec.compression_level`).
    pub fn setting(&self) -> &'static str {
        match self {
            CodecError::UnknownCodec(_) => INDEX_CODEC_SETTING,
            CodecError::LevelOutOfRange(_)
            | CodecError::LevelNotSupported(_)
            | CodecError::MissingCodec => INDEX_CODEC_COMPRESSION_LEVEL_SETTING,
        }
    }
}
