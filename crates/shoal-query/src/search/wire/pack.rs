//! Encoding side of the packed format (see [`super::packed`] for why it exists).
//!
//! The format follows serde_json's data model, because tantivy's hand-written serde code
//! (e.g. `deserialize_option_f64`, `#[serde(flatten)]`) was written against JSON: `Some(x)`
//! is written as `x`, unit variants as their name, other variants as a one-entry map
//! `{name: payload}`, non-negative integers as unsigned. It differs from JSON only where
//! JSON loses information: floats are stored as their bits (NaN and infinities included),
//! bytes stay bytes, and map keys may be any value (tantivy keys terms by an enum).
//!
//! Short strings are interned: a struct's field names would otherwise be repeated in every
//! terms bucket. The first occurrence is written in full, later ones refer to it by number.

use std::collections::HashMap;

use serde::ser::{self, Serialize};

use super::PackError;

/// One byte before every value says what follows.
pub(super) mod tag {
    pub const NONE: u8 = 0;
    pub const UNIT: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const TRUE: u8 = 3;
    /// A negative integer, zigzag varint.
    pub const I64: u8 = 4;
    /// A non-negative integer, varint.
    pub const U64: u8 = 5;
    /// 8 bytes, little-endian bits.
    pub const F64: u8 = 6;
    /// Varint length, then UTF-8.
    pub const STR: u8 = 7;
    /// Varint length, then the bytes.
    pub const BYTES: u8 = 8;
    /// A 4-byte little-endian element count, then the elements.
    pub const SEQ: u8 = 9;
    /// A 4-byte little-endian entry count, then key, value, key, value...
    pub const MAP: u8 = 10;
    /// Varint number of an earlier interned string (numbered from 0 in order of appearance).
    pub const STR_REF: u8 = 11;
}

/// Strings up to this length are interned (field and variant names, most bucket keys).
pub(super) const MAX_INTERNED: usize = 64;

/// Encodes a value.
pub(crate) fn pack<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, PackError> {
    let mut packer = Packer {
        out: Vec::new(),
        interned: HashMap::new(),
    };
    value.serialize(&mut packer)?;
    Ok(packer.out)
}

struct Packer {
    out: Vec<u8>,
    interned: HashMap<Box<str>, u64>,
}

impl Packer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn int(&mut self, v: i64) {
        if v >= 0 {
            self.out.push(tag::U64);
            self.varint(v as u64);
        } else {
            self.out.push(tag::I64);
            self.varint(((v << 1) ^ (v >> 63)) as u64);
        }
    }

    fn blob(&mut self, t: u8, bytes: &[u8]) {
        self.out.push(t);
        self.varint(bytes.len() as u64);
        self.out.extend_from_slice(bytes);
    }

    /// Every string goes through here, so that the unpacker numbers interned strings alike.
    fn str(&mut self, s: &str) {
        if s.len() <= MAX_INTERNED {
            if let Some(&number) = self.interned.get(s) {
                self.out.push(tag::STR_REF);
                self.varint(number);
                return;
            }
            let number = self.interned.len() as u64;
            self.interned.insert(s.into(), number);
        }
        self.blob(tag::STR, s.as_bytes());
    }

    /// Starts a sequence or map; its count is patched in by [`Compound::close`] because
    /// serde does not always know it up front (`#[serde(flatten)]`, iterators).
    fn open(&mut self, t: u8) -> Compound<'_> {
        self.out.push(t);
        let at = self.out.len();
        self.out.extend_from_slice(&[0; 4]);
        Compound {
            packer: self,
            at,
            count: 0,
        }
    }

    /// The start of `{variant: payload}`, the way serde_json writes a non-unit variant.
    fn variant_key(&mut self, variant: &str) {
        self.out.push(tag::MAP);
        self.out.extend_from_slice(&1u32.to_le_bytes());
        self.str(variant);
    }

    /// `{variant: payload}` with the payload a sequence or map still to be filled.
    fn open_variant(&mut self, variant: &str, t: u8) -> Compound<'_> {
        self.variant_key(variant);
        self.open(t)
    }
}

pub(super) struct Compound<'a> {
    packer: &'a mut Packer,
    at: usize,
    count: u32,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        self.count += 1;
        value.serialize(&mut *self.packer)
    }

    fn entry<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), PackError> {
        self.count += 1;
        self.packer.str(key);
        value.serialize(&mut *self.packer)
    }

    fn close(self) -> Result<(), PackError> {
        self.packer.out[self.at..self.at + 4].copy_from_slice(&self.count.to_le_bytes());
        Ok(())
    }
}

impl<'a> ser::Serializer for &'a mut Packer {
    type Ok = ();
    type Error = PackError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), PackError> {
        self.out.push(if v { tag::TRUE } else { tag::FALSE });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), PackError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), PackError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), PackError> {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), PackError> {
        self.int(v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), PackError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), PackError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), PackError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), PackError> {
        self.out.push(tag::U64);
        self.varint(v);
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), PackError> {
        // Widening is exact, and narrowing back restores the same f32.
        self.serialize_f64(v.into())
    }
    fn serialize_f64(self, v: f64) -> Result<(), PackError> {
        self.out.push(tag::F64);
        self.out.extend_from_slice(&v.to_bits().to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), PackError> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), PackError> {
        self.str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), PackError> {
        self.blob(tag::BYTES, v);
        Ok(())
    }
    fn serialize_none(self) -> Result<(), PackError> {
        self.out.push(tag::NONE);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), PackError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), PackError> {
        self.out.push(tag::UNIT);
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), PackError> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), PackError> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), PackError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), PackError> {
        self.variant_key(variant);
        value.serialize(self)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, PackError> {
        Ok(self.open(tag::SEQ))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'a>, PackError> {
        Ok(self.open(tag::SEQ))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, PackError> {
        Ok(self.open(tag::SEQ))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, PackError> {
        Ok(self.open_variant(variant, tag::SEQ))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, PackError> {
        Ok(self.open(tag::MAP))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'a>, PackError> {
        Ok(self.open(tag::MAP))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, PackError> {
        Ok(self.open_variant(variant, tag::MAP))
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        self.element(value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        self.element(value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        self.element(value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        self.element(value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), PackError> {
        self.element(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), PackError> {
        value.serialize(&mut *self.packer)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), PackError> {
        self.entry(key, value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = PackError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), PackError> {
        self.entry(key, value)
    }
    fn end(self) -> Result<(), PackError> {
        self.close()
    }
}
