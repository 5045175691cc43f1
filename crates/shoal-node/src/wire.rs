//! Framing for node-to-node replies that carry document sources: a JSON header followed by
//! raw blobs. Sources are stored as JSON bytes already; embedding them in a JSON reply would
//! mean escaping them on one side and parsing them on the other, so they travel as they are.
//!
//! Layout: `u32 header length | header JSON | (u8 present, u32 length, bytes)*`, big-endian.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encodes a header and blobs (`None` = a document without a source).
pub fn frame<H: Serialize>(header: &H, blobs: &[Option<&[u8]>]) -> Bytes {
    let header = serde_json::to_vec(header).expect("header serializes");
    let blob_bytes: usize = blobs.iter().map(|b| 5 + b.map_or(0, <[u8]>::len)).sum();
    let mut out = BytesMut::with_capacity(4 + header.len() + blob_bytes);
    out.put_u32(header.len() as u32);
    out.put_slice(&header);
    for blob in blobs {
        match blob {
            Some(bytes) => {
                out.put_u8(1);
                out.put_u32(bytes.len() as u32);
                out.put_slice(bytes);
            }
            None => {
                out.put_u8(0);
                out.put_u32(0);
            }
        }
    }
    out.freeze()
}

/// Decodes what [`frame`] encoded; a truncated or malformed frame is an error, not a panic.
pub fn unframe<H: DeserializeOwned>(mut bytes: Bytes) -> Result<(H, Vec<Option<Bytes>>), String> {
    let header_len = take_u32(&mut bytes)? as usize;
    if bytes.remaining() < header_len {
        return Err("truncated frame header".into());
    }
    let header_bytes = bytes.split_to(header_len);
    let header = serde_json::from_slice(&header_bytes).map_err(|e| format!("frame header: {e}"))?;
    let mut blobs = Vec::new();
    while bytes.has_remaining() {
        if bytes.remaining() < 5 {
            return Err("truncated frame blob".into());
        }
        let present = bytes.get_u8() == 1;
        let len = bytes.get_u32() as usize;
        if bytes.remaining() < len {
            return Err("truncated frame blob".into());
        }
        let blob = bytes.split_to(len);
        blobs.push(present.then_some(blob));
    }
    Ok((header, blobs))
}

fn take_u32(bytes: &mut Bytes) -> Result<u32, String> {
    if bytes.remaining() < 4 {
        return Err("truncated frame".into());
    }
    Ok(bytes.get_u32())
}

/// Serde for a document source inside a JSON message (`#[serde(with = "source_json")]`): the
/// source's own JSON inline, `{"json": {...}}`, or `{"base64": "..."}` for bytes that are not
/// JSON. Serde's default for `Vec<u8>` is an array of numbers, about 4 bytes a byte: a
/// forwarded bulk cost 4.4 MB of transport per MB of documents.
pub mod source_json {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::value::RawValue;

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Out<'a> {
        Json(&'a RawValue),
        Base64(String),
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum In {
        Json(Box<RawValue>),
        Base64(String),
    }

    pub fn serialize<S: Serializer>(source: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let raw = std::str::from_utf8(source)
            .ok()
            .and_then(|text| serde_json::from_str::<&RawValue>(text).ok());
        match raw {
            Some(raw) => Out::Json(raw).serialize(serializer),
            None => Out::Base64(base64::engine::general_purpose::STANDARD.encode(source))
                .serialize(serializer),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        match In::deserialize(deserializer)? {
            In::Json(raw) => Ok(raw.get().as_bytes().to_vec()),
            In::Base64(text) => base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_blobs_round_trip_including_missing_and_empty_sources() {
        let framed = frame(&("hdr", 7), &[Some(b"{\"a\":1}"), None, Some(b"")]);
        let (header, blobs): ((String, u32), _) = unframe(framed).unwrap();
        assert_eq!(header, ("hdr".to_string(), 7));
        assert_eq!(blobs.len(), 3);
        assert_eq!(blobs[0].as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(blobs[1], None);
        assert_eq!(blobs[2].as_deref(), Some(&b""[..]));
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Carrier {
        #[serde(with = "source_json")]
        source: Vec<u8>,
    }

    #[test]
    fn a_json_source_travels_as_itself_byte_for_byte_and_other_bytes_as_base64() {
        let source = "{ \"title\": \"café\",  \"n\": [1, 2] }"
            .as_bytes()
            .to_vec();
        let carried = Carrier {
            source: source.clone(),
        };
        let encoded = serde_json::to_vec(&carried).unwrap();
        assert!(
            encoded.len() < source.len() + 24,
            "{}",
            String::from_utf8_lossy(&encoded)
        );
        let back: Carrier = serde_json::from_slice(&encoded).unwrap();
        assert_eq!(back, carried);
        let binary = Carrier {
            source: vec![0xff, 0x00, b'{'],
        };
        let back: Carrier = serde_json::from_slice(&serde_json::to_vec(&binary).unwrap()).unwrap();
        assert_eq!(back, binary);
    }

    #[test]
    fn truncated_frames_are_errors() {
        let framed = frame(&1u8, &[Some(b"abcdef")]);
        for cut in 0..framed.len() {
            let result: Result<(u8, _), _> = unframe(framed.slice(..cut));
            // A cut right after a whole blob list is a valid shorter frame only at the end
            // of the header (no blobs).
            if cut == 5 {
                assert!(result.is_ok());
            } else {
                assert!(result.is_err(), "cut at {cut} accepted");
            }
        }
    }
}
