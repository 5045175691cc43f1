//! What a snapshot repository's registration asks of the snapshots written to it, beside its
//! storage and its rates, as OpenSearch names the settings:
//! - `readonly` (false): the repository is only read here. Snapshots are neither created nor
//!   deleted in it (another cluster writes it), and registering it writes nothing.
//! - `compress` (false): the repository's metadata files (its generations and each
//!   snapshot's details) are deflate-compressed behind OpenSearch's `DFL\0` header. Segment
//!   files are stored as they are: their codec already compressed them. Reads accept either
//!   form, so turning the setting on or off leaves older snapshots readable.
//! - `chunk_size` (unlimited): a segment file larger than this is stored as parts of this
//!   size (for stores that limit an object's size). Each snapshot records how it stored each
//!   file, so a repository whose `chunk_size` changed restores its older snapshots all the same.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{Read, Write};

use crate::error::{ApiError, ApiResult};

pub const READONLY: &str = "readonly";
pub const COMPRESS: &str = "compress";
pub const CHUNK_SIZE: &str = "chunk_size";

/// OpenSearch's `DeflateCompressor` header, in front of a raw deflate stream.
const DEFLATE_HEADER: &[u8; 4] = b"DFL\0";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RepositoryOptions {
    pub readonly: bool,
    pub compress: bool,
    /// `chunk_size`: files larger than this are stored in parts of this many bytes.
    pub chunk_bytes: Option<u64>,
}

impl RepositoryOptions {
    /// The options a repository's settings give, taken out of `settings`.
    pub(crate) fn take(
        name: &str,
        settings: &mut BTreeMap<String, String>,
    ) -> ApiResult<RepositoryOptions> {
        Ok(RepositoryOptions {
            readonly: take_bool(name, settings, READONLY)?,
            compress: take_bool(name, settings, COMPRESS)?,
            chunk_bytes: take_chunk_size(name, settings)?,
        })
    }

    /// Refuses a write (`what`: "create snapshot in", "delete snapshot from") to a repository
    /// registered as read-only.
    pub(crate) fn check_writable(&self, name: &str, what: &str) -> ApiResult<()> {
        match self.readonly {
            true => Err(ApiError::new(
                400,
                "repository_exception",
                format!("[{name}] cannot {what} a readonly repository: register it again without [readonly] on the one cluster that writes it"),
            )),
            false => Ok(()),
        }
    }

    /// A metadata file's bytes as stored.
    pub(crate) fn encode_metadata(&self, json: Vec<u8>) -> Vec<u8> {
        if !self.compress {
            return json;
        }
        let mut encoder = flate2::write::DeflateEncoder::new(
            DEFLATE_HEADER.to_vec(),
            flate2::Compression::default(),
        );
        encoder
            .write_all(&json)
            .and_then(|()| encoder.finish())
            .expect("deflating into memory does not fail")
    }
}

/// A metadata file's JSON, whether it was stored compressed or not.
pub(crate) fn decode_metadata(stored: &[u8]) -> std::io::Result<Cow<'_, [u8]>> {
    let Some(deflated) = stored.strip_prefix(DEFLATE_HEADER) else {
        return Ok(Cow::Borrowed(stored));
    };
    let mut json = Vec::with_capacity(deflated.len() * 4);
    flate2::read::DeflateDecoder::new(deflated).read_to_end(&mut json)?;
    Ok(Cow::Owned(json))
}

/// `chunk_size`: a byte size above zero; absent, `-1` or `null`: files are stored whole.
fn take_chunk_size(name: &str, settings: &mut BTreeMap<String, String>) -> ApiResult<Option<u64>> {
    let Some(text) = settings.remove(CHUNK_SIZE) else {
        return Ok(None);
    };
    let refuse = |why: String| {
        ApiError::new(
            400,
            "repository_exception",
            format!("[{name}] failed to parse [{CHUNK_SIZE}] value [{text}]: {why}; give a size such as [1gb] or [64mb], or leave it out to store files whole"),
        )
    };
    if matches!(text.trim(), "null" | "") {
        return Ok(None);
    }
    match crate::settings::parse_byte_size(&text).map_err(refuse)? {
        0 => Err(refuse("it must be above zero".into())),
        u64::MAX => Ok(None),
        bytes => Ok(Some(bytes)),
    }
}

fn take_bool(name: &str, settings: &mut BTreeMap<String, String>, key: &str) -> ApiResult<bool> {
    match settings.remove(key).as_deref().map(str::trim) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::new(
            400,
            "repository_exception",
            format!("[{name}] failed to parse value [{other}] of [{key}] as only [true] or [false] are allowed"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::settings_map as settings;

    #[test]
    fn options_default_off_are_taken_out_of_the_settings_and_refuse_other_words() {
        let mut plain = settings(&[("location", "x")]);
        assert_eq!(
            RepositoryOptions::take("r", &mut plain).unwrap(),
            RepositoryOptions::default()
        );
        let mut all = settings(&[
            ("location", "x"),
            (READONLY, "true"),
            (COMPRESS, "true"),
            (CHUNK_SIZE, "64mb"),
        ]);
        let options = RepositoryOptions::take("r", &mut all).unwrap();
        assert!(options.readonly && options.compress);
        assert_eq!(options.chunk_bytes, Some(64 << 20));
        assert_eq!(all, settings(&[("location", "x")]));
        for unlimited in ["-1", "null"] {
            let mut whole = settings(&[(CHUNK_SIZE, unlimited)]);
            let options = RepositoryOptions::take("r", &mut whole).unwrap();
            assert_eq!(options.chunk_bytes, None, "{unlimited}");
        }
        for bad in ["0b", "lots"] {
            let mut refused = settings(&[(CHUNK_SIZE, bad)]);
            let error = RepositoryOptions::take("r", &mut refused).unwrap_err();
            assert_eq!(error.status, 400);
            assert!(
                error.reason.contains("[chunk_size] value"),
                "{}",
                error.reason
            );
        }
        let mut bad = settings(&[(COMPRESS, "yes")]);
        let error = RepositoryOptions::take("r", &mut bad).unwrap_err();
        assert_eq!(
            (error.status, error.error_type.as_str()),
            (400, "repository_exception")
        );
        assert!(error.reason.contains("[compress]"), "{}", error.reason);
    }

    #[test]
    fn compressed_metadata_carries_the_deflate_header_and_both_forms_decode() {
        let json = br#"{"snapshots":[{"name":"nightly","uuid":"u1"}],"generation":7}"#.repeat(20);
        let compressed = RepositoryOptions {
            compress: true,
            ..Default::default()
        }
        .encode_metadata(json.clone());
        assert!(compressed.starts_with(DEFLATE_HEADER));
        assert!(
            compressed.len() < json.len() / 4,
            "{} bytes",
            compressed.len()
        );
        assert_eq!(decode_metadata(&compressed).unwrap().as_ref(), &json[..]);
        let plain = RepositoryOptions::default().encode_metadata(json.clone());
        assert_eq!(plain, json);
        assert_eq!(decode_metadata(&plain).unwrap().as_ref(), &json[..]);
    }

    #[test]
    fn a_readonly_repository_refuses_writes_with_a_repository_exception() {
        let readonly = RepositoryOptions {
            readonly: true,
            ..Default::default()
        };
        let error = readonly
            .check_writable("backups", "create snapshot in")
            .unwrap_err();
        assert_eq!(error.status, 400);
        assert!(
            error
                .reason
                .starts_with("[backups] cannot create snapshot in a readonly repository"),
            "{}",
            error.reason
        );
        assert!(RepositoryOptions::default()
            .check_writable("backups", "create snapshot in")
            .is_ok());
    }
}
