//! Operations packed into one blob, for a translog kept somewhere else (the remote store
//! uploads each sync's new operations as one object). Each operation is framed by its length
//! and followed by its crc32c, so a damaged or cut-short blob is refused, never half-read.

use crate::operation::Operation;

const MAGIC: &[u8; 4] = b"SHTB";
const VERSION: u8 = 1;

/// Packs `ops` into one blob.
pub fn encode_batch(ops: &[Operation]) -> Vec<u8> {
    let total: usize = ops.iter().map(|op| op.encoded_len() + 8).sum();
    let mut buf = Vec::with_capacity(5 + total);
    buf.extend_from_slice(MAGIC);
    buf.push(VERSION);
    for op in ops {
        let start = buf.len();
        buf.extend_from_slice(&[0; 4]);
        op.encode_into(&mut buf);
        let len = (buf.len() - start - 4) as u32;
        buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&buf[start + 4..]);
        buf.extend_from_slice(&crc.to_le_bytes());
    }
    buf
}

/// Unpacks a blob [`encode_batch`] made; any damage is an error naming what is wrong.
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Operation>, String> {
    if bytes.len() < 5 || &bytes[..4] != MAGIC {
        return Err("not a translog batch (bad header)".into());
    }
    if bytes[4] != VERSION {
        return Err(format!("translog batch version {} is not known", bytes[4]));
    }
    let mut ops = Vec::new();
    let mut at = 5;
    while at < bytes.len() {
        let len = read_u32(bytes, at)? as usize;
        let payload = bytes
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| format!("operation at {at} is cut short"))?;
        let crc = read_u32(bytes, at + 4 + len)?;
        if crc32c::crc32c(payload) != crc {
            return Err(format!("operation at {at} fails its checksum"));
        }
        ops.push(Operation::decode(payload)?);
        at += 4 + len + 4;
    }
    Ok(ops)
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, String> {
    let word = bytes
        .get(at..at + 4)
        .ok_or_else(|| format!("batch cut short at {at}"))?;
    Ok(u32::from_le_bytes(word.try_into().expect("four bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops() -> Vec<Operation> {
        vec![
            Operation::index("a", 3, 2, 1, br#"{"f":1}"#.to_vec()),
            Operation::delete("a", 4, 2, 2),
            Operation::no_op(5, 2, "gap"),
        ]
    }

    #[test]
    fn a_batch_round_trips_its_operations() {
        assert_eq!(decode_batch(&encode_batch(&ops())).unwrap(), ops());
        assert_eq!(decode_batch(&encode_batch(&[])).unwrap(), vec![]);
    }

    #[test]
    fn a_damaged_or_cut_batch_is_refused() {
        let mut bytes = encode_batch(&ops());
        let cut = &bytes[..bytes.len() - 3];
        assert!(decode_batch(cut).unwrap_err().contains("cut short"));
        bytes[12] ^= 0xff;
        assert!(decode_batch(&bytes).unwrap_err().contains("checksum"));
        assert!(decode_batch(b"nope").is_err());
    }
}
