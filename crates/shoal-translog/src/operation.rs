//! Translog operations and their compact binary encoding.
//!
//! Payload layout (little endian), format version 1:
//!
//! ```text
//! u8  format version
//! u8  kind (0 = index, 1 = delete, 2 = no-op)
//! i64 seq_no
//! i64 primary_term
//! i64 version
//! i64 auto_generated_id_timestamp
//! str id                      (u32 len + utf-8 bytes)
//! u8  has_routing, [str routing]
//! bytes source                (u32 len + bytes)
//! str reason
//! ```
//!
//! `seq_no` and `primary_term` sit at a fixed offset so that history scans can
//! dedup operations without decoding their (possibly large) source.

/// Current payload format version. Bump it (and keep decoding the old one)
/// whenever the layout changes.
const OPERATION_FORMAT_VERSION: u8 = 1;

/// Length of the fixed prefix holding version, kind, seq_no and primary_term.
pub(crate) const OPERATION_PREFIX_LEN: usize = 1 + 1 + 8 + 8;

/// Smallest possible encoded operation (all strings empty, no routing).
pub(crate) const MIN_OPERATION_LEN: usize = OPERATION_PREFIX_LEN + 8 + 8 + 4 + 1 + 4 + 4;

/// The kind of a translog operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum OpKind {
    /// A document was indexed (created or overwritten).
    Index,
    /// A document was deleted.
    Delete,
    /// A sequence number was consumed without touching a document.
    NoOp,
}

impl OpKind {
    fn to_byte(self) -> u8 {
        match self {
            OpKind::Index => 0,
            OpKind::Delete => 1,
            OpKind::NoOp => 2,
        }
    }

    fn from_byte(byte: u8) -> Option<OpKind> {
        match byte {
            0 => Some(OpKind::Index),
            1 => Some(OpKind::Delete),
            2 => Some(OpKind::NoOp),
            _ => None,
        }
    }
}

/// One write operation as recorded in the translog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub kind: OpKind,
    pub seq_no: i64,
    pub primary_term: i64,
    /// Document version (0 for no-op).
    pub version: i64,
    /// Document `_id` (empty for no-op).
    pub id: String,
    pub routing: Option<String>,
    /// Raw `_source` JSON bytes for index operations; empty otherwise.
    pub source: Vec<u8>,
    /// No-op reason; empty otherwise.
    pub reason: String,
    /// `-1` if the id was not auto generated.
    pub auto_generated_id_timestamp: i64,
}

impl Operation {
    /// An index operation.
    pub fn index(
        id: impl Into<String>,
        seq_no: i64,
        primary_term: i64,
        version: i64,
        source: impl Into<Vec<u8>>,
    ) -> Operation {
        Operation {
            kind: OpKind::Index,
            seq_no,
            primary_term,
            version,
            id: id.into(),
            routing: None,
            source: source.into(),
            reason: String::new(),
            auto_generated_id_timestamp: -1,
        }
    }

    /// A delete operation.
    pub fn delete(
        id: impl Into<String>,
        seq_no: i64,
        primary_term: i64,
        version: i64,
    ) -> Operation {
        Operation {
            kind: OpKind::Delete,
            seq_no,
            primary_term,
            version,
            id: id.into(),
            routing: None,
            source: Vec::new(),
            reason: String::new(),
            auto_generated_id_timestamp: -1,
        }
    }

    /// A no-op operation.
    pub fn no_op(seq_no: i64, primary_term: i64, reason: impl Into<String>) -> Operation {
        Operation {
            kind: OpKind::NoOp,
            seq_no,
            primary_term,
            version: 0,
            id: String::new(),
            routing: None,
            source: Vec::new(),
            reason: reason.into(),
            auto_generated_id_timestamp: -1,
        }
    }

    /// Size of the encoded payload, so buffers can be sized up front.
    pub(crate) fn encoded_len(&self) -> usize {
        MIN_OPERATION_LEN
            + self.id.len()
            + self.routing.as_ref().map_or(0, |routing| 4 + routing.len())
            + self.source.len()
            + self.reason.len()
    }

    /// Appends the encoded payload to `buf`.
    pub(crate) fn encode_into(&self, buf: &mut Vec<u8>) {
        let start = buf.len();
        buf.push(OPERATION_FORMAT_VERSION);
        buf.push(self.kind.to_byte());
        buf.extend_from_slice(&self.seq_no.to_le_bytes());
        buf.extend_from_slice(&self.primary_term.to_le_bytes());
        buf.extend_from_slice(&self.version.to_le_bytes());
        buf.extend_from_slice(&self.auto_generated_id_timestamp.to_le_bytes());
        put_bytes(buf, self.id.as_bytes());
        match &self.routing {
            Some(routing) => {
                buf.push(1);
                put_bytes(buf, routing.as_bytes());
            }
            None => buf.push(0),
        }
        put_bytes(buf, &self.source);
        put_bytes(buf, self.reason.as_bytes());
        debug_assert_eq!(buf.len() - start, self.encoded_len());
    }

    /// Decodes a full payload. The error is a human readable reason; callers
    /// attach the file and offset.
    pub(crate) fn decode(payload: &[u8]) -> Result<Operation, String> {
        let (seq_no, primary_term) = decode_seq_no_and_term(payload)?;
        let kind = OpKind::from_byte(payload[1])
            .ok_or_else(|| format!("unknown operation kind {}", payload[1]))?;
        let mut cursor = Cursor {
            buf: payload,
            pos: OPERATION_PREFIX_LEN,
        };
        let version = cursor.i64()?;
        let auto_generated_id_timestamp = cursor.i64()?;
        let id = cursor.string()?;
        let routing = match cursor.u8()? {
            0 => None,
            1 => Some(cursor.string()?),
            other => return Err(format!("invalid routing flag {other}")),
        };
        let source = cursor.bytes()?.to_vec();
        let reason = cursor.string()?;
        if cursor.pos != payload.len() {
            return Err(format!(
                "{} trailing bytes after operation",
                payload.len() - cursor.pos
            ));
        }
        Ok(Operation {
            kind,
            seq_no,
            primary_term,
            version,
            id,
            routing,
            source,
            reason,
            auto_generated_id_timestamp,
        })
    }
}

/// Reads `(seq_no, primary_term)` from the fixed payload prefix.
pub(crate) fn decode_seq_no_and_term(prefix: &[u8]) -> Result<(i64, i64), String> {
    if prefix.len() < OPERATION_PREFIX_LEN {
        return Err(format!("operation too short ({} bytes)", prefix.len()));
    }
    if prefix[0] != OPERATION_FORMAT_VERSION {
        return Err(format!(
            "unsupported operation format version {}",
            prefix[0]
        ));
    }
    let seq_no = i64::from_le_bytes(prefix[2..10].try_into().expect("8 bytes"));
    let primary_term = i64::from_le_bytes(prefix[10..18].try_into().expect("8 bytes"));
    Ok((seq_no, primary_term))
}

fn put_bytes(buf: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(bytes.len() <= u32::MAX as usize);
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// Bounds-checked little endian reader over a payload.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| format!("operation truncated at byte {}", self.pos))?;
        let slice = &self.buf[self.pos..end];
        self.pos = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"));
        self.take(len as usize)
    }

    fn string(&mut self) -> Result<String, String> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "invalid utf-8 in string field".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(op: &Operation) -> Vec<u8> {
        let mut buf = Vec::new();
        op.encode_into(&mut buf);
        buf
    }

    #[test]
    fn every_kind_round_trips_through_encoding() {
        let mut routed = Operation::index("doc-1", 7, 3, 2, br#"{"a":1}"#.to_vec());
        routed.routing = Some("shard-key".to_string());
        routed.auto_generated_id_timestamp = 1_700_000_000_000;
        let ops = [
            routed,
            Operation::delete("doc-2", 8, 3, 5),
            Operation::no_op(9, 3, "filling gaps"),
        ];
        for op in ops {
            let buf = encode(&op);
            assert_eq!(buf.len(), op.encoded_len());
            assert_eq!(Operation::decode(&buf).unwrap(), op);
            assert_eq!(
                decode_seq_no_and_term(&buf).unwrap(),
                (op.seq_no, op.primary_term)
            );
        }
    }

    #[test]
    fn truncated_or_padded_payload_is_rejected() {
        let buf = encode(&Operation::index("id", 1, 1, 1, b"{}".to_vec()));
        for cut in 0..buf.len() {
            assert!(Operation::decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let mut padded = buf.clone();
        padded.push(0);
        assert!(Operation::decode(&padded).is_err());
    }

    #[test]
    fn unknown_version_and_kind_are_rejected() {
        let mut buf = encode(&Operation::delete("id", 1, 1, 1));
        buf[1] = 9;
        assert!(Operation::decode(&buf).unwrap_err().contains("kind"));
        buf[0] = 2;
        assert!(Operation::decode(&buf).unwrap_err().contains("version"));
    }
}
