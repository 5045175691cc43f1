//! Decoding side of the packed format (see `pack.rs` for its layout). Values are visited the
//! way serde_json would visit the equivalent JSON, so that types written against JSON
//! (tantivy's `deserialize_any`-based helpers, `#[serde(flatten)]`) decode unchanged.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};

use super::pack::{tag, MAX_INTERNED};
use super::PackError;

/// Far deeper than any aggregation tree; keeps corrupt input from exhausting the stack.
const MAX_DEPTH: u32 = 512;

/// Decodes a value written by [`super::pack::pack`].
pub(crate) fn unpack<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, PackError> {
    let mut unpacker = Unpacker {
        input: bytes,
        depth: 0,
        interned: Vec::new(),
    };
    let value = T::deserialize(&mut unpacker)?;
    if !unpacker.input.is_empty() {
        return Err(PackError::new("trailing bytes after a packed value"));
    }
    Ok(value)
}

struct Unpacker<'de> {
    input: &'de [u8],
    depth: u32,
    /// Interned strings in order of appearance, as the packer numbered them.
    interned: Vec<&'de str>,
}

fn truncated() -> PackError {
    PackError::new("packed value is truncated")
}

impl<'de> Unpacker<'de> {
    fn take(&mut self, n: usize) -> Result<&'de [u8], PackError> {
        if self.input.len() < n {
            return Err(truncated());
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, PackError> {
        Ok(self.take(1)?[0])
    }

    fn peek(&self) -> Result<u8, PackError> {
        self.input.first().copied().ok_or_else(truncated)
    }

    fn varint(&mut self) -> Result<u64, PackError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(PackError::new("varint longer than 64 bits"))
    }

    fn negative(&mut self) -> Result<i64, PackError> {
        let zigzag = self.varint()?;
        Ok(((zigzag >> 1) as i64) ^ -((zigzag & 1) as i64))
    }

    fn float(&mut self) -> Result<f64, PackError> {
        let bits = self.take(8)?.try_into().expect("8 bytes");
        Ok(f64::from_bits(u64::from_le_bytes(bits)))
    }

    fn blob(&mut self) -> Result<&'de [u8], PackError> {
        let len = usize::try_from(self.varint()?).map_err(|_| truncated())?;
        self.take(len)
    }

    /// The string after a `STR` or `STR_REF` tag; every string is read through here, so that
    /// interned strings are numbered as the packer numbered them.
    fn text(&mut self, t: u8) -> Result<&'de str, PackError> {
        if t == tag::STR_REF {
            let number = self.varint()?;
            let found = usize::try_from(number)
                .ok()
                .and_then(|n| self.interned.get(n));
            return found
                .copied()
                .ok_or_else(|| PackError::new(format!("unknown interned string {number}")));
        }
        let text = std::str::from_utf8(self.blob()?).map_err(|e| PackError::new(e.to_string()))?;
        if text.len() <= MAX_INTERNED {
            self.interned.push(text);
        }
        Ok(text)
    }

    fn count(&mut self) -> Result<u32, PackError> {
        let bytes = self.take(4)?.try_into().expect("4 bytes");
        Ok(u32::from_le_bytes(bytes))
    }

    /// Runs `f` one nesting level deeper.
    fn nested<R>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<R, PackError>,
    ) -> Result<R, PackError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(PackError::new("packed value nests too deeply"));
        }
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// A sequence whose tag was read; every element must be consumed to stay in sync.
    fn seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, PackError> {
        let left = self.count()?;
        self.nested(|de| {
            let mut access = Elements { de, left };
            let value = visitor.visit_seq(&mut access)?;
            match access.left {
                0 => Ok(value),
                n => Err(PackError::new(format!(
                    "{n} sequence element(s) left unread"
                ))),
            }
        })
    }

    /// A map whose tag was read; every entry must be consumed to stay in sync.
    fn map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, PackError> {
        let left = self.count()?;
        self.nested(|de| {
            let mut access = Entries { de, left };
            let value = visitor.visit_map(&mut access)?;
            match access.left {
                0 => Ok(value),
                n => Err(PackError::new(format!("{n} map entry(ies) left unread"))),
            }
        })
    }

    /// `{variant: payload}` whose map tag was read.
    fn variant<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, PackError> {
        let key = match self.count()? {
            1 => self.byte()?,
            _ => tag::NONE,
        };
        if key != tag::STR && key != tag::STR_REF {
            return Err(PackError::new(
                "an enum must be a one-entry map keyed by its variant",
            ));
        }
        let name = self.text(key)?;
        self.nested(|de| visitor.visit_enum(Variant { de, name }))
    }
}

impl<'de> de::Deserializer<'de> for &mut Unpacker<'de> {
    type Error = PackError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PackError> {
        match self.byte()? {
            tag::NONE => visitor.visit_none(),
            tag::UNIT => visitor.visit_unit(),
            tag::FALSE => visitor.visit_bool(false),
            tag::TRUE => visitor.visit_bool(true),
            tag::I64 => visitor.visit_i64(self.negative()?),
            tag::U64 => visitor.visit_u64(self.varint()?),
            tag::F64 => visitor.visit_f64(self.float()?),
            t @ (tag::STR | tag::STR_REF) => visitor.visit_borrowed_str(self.text(t)?),
            // JSON has no bytes: `Vec<u8>` and friends expect a sequence of numbers.
            tag::BYTES => visitor.visit_seq(Bytes(self.blob()?)),
            tag::SEQ => self.seq(visitor),
            tag::MAP => self.map(visitor),
            other => Err(PackError::new(format!("unknown packed tag {other}"))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PackError> {
        match self.peek()? {
            tag::NONE | tag::UNIT => {
                self.byte()?;
                visitor.visit_none()
            }
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PackError> {
        match self.byte()? {
            t @ (tag::STR | tag::STR_REF) => {
                visitor.visit_enum(BorrowedStrDeserializer::new(self.text(t)?))
            }
            tag::MAP => self.variant(visitor),
            other => Err(PackError::new(format!(
                "expected an enum, found tag {other}"
            ))),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, PackError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PackError> {
        if self.peek()? == tag::BYTES {
            self.byte()?;
            return visitor.visit_borrowed_bytes(self.blob()?);
        }
        self.deserialize_any(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, PackError> {
        self.deserialize_bytes(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Elements<'a, 'de> {
    de: &'a mut Unpacker<'de>,
    left: u32,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = PackError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, PackError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        // Every element takes at least a byte: a corrupt count cannot over-allocate.
        Some((self.left as usize).min(self.de.input.len()))
    }
}

struct Entries<'a, 'de> {
    de: &'a mut Unpacker<'de>,
    left: u32,
}

impl<'de> de::MapAccess<'de> for Entries<'_, 'de> {
    type Error = PackError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, PackError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, PackError> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        Some((self.left as usize).min(self.de.input.len() / 2))
    }
}

/// Bytes seen as a sequence of `u8`.
struct Bytes<'de>(&'de [u8]);

impl<'de> de::SeqAccess<'de> for Bytes<'de> {
    type Error = PackError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, PackError> {
        let Some((first, rest)) = self.0.split_first() else {
            return Ok(None);
        };
        self.0 = rest;
        seed.deserialize(first.into_deserializer()).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Variant<'a, 'de> {
    de: &'a mut Unpacker<'de>,
    name: &'de str,
}

impl<'a, 'de> de::EnumAccess<'de> for Variant<'a, 'de> {
    type Error = PackError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), PackError> {
        let variant = seed.deserialize(BorrowedStrDeserializer::<PackError>::new(self.name))?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = PackError;

    fn unit_variant(self) -> Result<(), PackError> {
        match self.de.byte()? {
            tag::NONE | tag::UNIT => Ok(()),
            other => Err(PackError::new(format!(
                "expected a unit variant, found tag {other}"
            ))),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, PackError> {
        seed.deserialize(self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, PackError> {
        de::Deserializer::deserialize_seq(self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, PackError> {
        de::Deserializer::deserialize_map(self.de, visitor)
    }
}
