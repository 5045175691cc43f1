//! The wire form of shard results: what a data node sends the coordinator after the query
//! phase, as JSON (`serde_json::to_vec` / `from_slice` on [`ShardResult`]).
//!
//! Most of a shard result is plain JSON. Three things need care, and get a codec here:
//! - floats (scores, sort values): serde_json's default parser may miss the exact double by
//!   an ulp on long decimals, which would change merged order and printed values, and JSON
//!   has no NaN/Infinity. [`float`] writes JSON numbers (non-finite values as OpenSearch's
//!   strings) and reads them back with Rust's exact parser through a `RawValue`;
//! - `DocAddress` is a `[segment_ord, doc_id]` pair ([`doc_address`]), meaningful only to
//!   the node that produced it, which keeps its searcher open until the fetch phase;
//! - aggregation state: tantivy's intermediate results "should not be de/serialized via JSON"
//!   (terms keyed by an enum, NaN/infinite sketch bounds, HLL sketches as bytes), and the
//!   aggregation plan embeds tantivy requests and user `meta` values with exact doubles.
//!   [`packed`] encodes those with a compact self-describing binary format (`pack.rs`,
//!   `unpack.rs`) carried as one base64 JSON string.
//!
//! [`ShardResult`]: super::ShardResult

mod pack;
#[cfg(test)]
mod tests;
mod unpack;

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::ser::{self, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub(crate) use pack::pack;
pub(crate) use unpack::unpack;

/// A value that could not be packed or unpacked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PackError(String);

impl PackError {
    fn new(message: impl Into<String>) -> PackError {
        PackError(message.into())
    }
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PackError {}

impl ser::Error for PackError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        PackError(msg.to_string())
    }
}

impl de::Error for PackError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        PackError(msg.to_string())
    }
}

/// A field packed (see the module docs) into a base64 JSON string.
pub(crate) mod packed {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;

    use super::*;

    pub fn serialize<T: Serialize + ?Sized, S: Serializer>(
        value: &T,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let bytes = pack(value).map_err(ser::Error::custom)?;
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<T, D::Error> {
        let text = String::deserialize(deserializer)?;
        let bytes = STANDARD.decode(text).map_err(de::Error::custom)?;
        unpack(&bytes).map_err(de::Error::custom)
    }
}

/// [`packed`] for a shared value (serde's `rc` feature is off in the workspace).
pub(crate) mod packed_arc {
    use std::sync::Arc;

    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        super::packed::serialize(&**value, serializer)
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        super::packed::deserialize(deserializer).map(Arc::new)
    }
}

/// An optional shared value as plain JSON.
pub(crate) mod opt_arc {
    use std::sync::Arc;

    use super::*;

    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Arc<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.as_deref().serialize(serializer)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Arc<T>>, D::Error> {
        Ok(Option::<T>::deserialize(deserializer)?.map(Arc::new))
    }
}

/// A non-finite float as OpenSearch spells it in JSON.
fn non_finite_name(v: f64) -> &'static str {
    if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "Infinity"
    } else {
        "-Infinity"
    }
}

/// Parses a float's raw JSON text exactly (see the module docs).
fn parse_raw_float(raw: &str) -> Option<f64> {
    match raw {
        "\"NaN\"" => Some(f64::NAN),
        "\"Infinity\"" => Some(f64::INFINITY),
        "\"-Infinity\"" => Some(f64::NEG_INFINITY),
        number => number.parse().ok(),
    }
}

fn raw_float<'de, D: Deserializer<'de>>(deserializer: D) -> Result<(f64, Box<RawValue>), D::Error> {
    let raw = Box::<RawValue>::deserialize(deserializer)?;
    match parse_raw_float(raw.get()) {
        Some(v) => Ok((v, raw)),
        None => Err(de::Error::custom(format!(
            "expected a float, found {}",
            raw.get()
        ))),
    }
}

/// An `f64` with an exact JSON round trip. Only for JSON: it reads through `RawValue`.
pub(crate) mod float {
    use super::*;

    pub fn serialize<S: Serializer>(v: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            serializer.serialize_f64(*v)
        } else {
            serializer.serialize_str(non_finite_name(*v))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        raw_float(deserializer).map(|(v, _)| v)
    }
}

/// An `f32` with an exact JSON round trip: written with f32's shortest digits, read back
/// as f32 (parsing those digits as f64 first could round twice).
pub(crate) mod float32 {
    use super::*;

    pub fn serialize<S: Serializer>(v: &f32, serializer: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            serializer.serialize_f32(*v)
        } else {
            serializer.serialize_str(non_finite_name(f64::from(*v)))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f32, D::Error> {
        let (v, raw) = raw_float(deserializer)?;
        if !v.is_finite() {
            return Ok(v as f32);
        }
        raw.get().parse().map_err(de::Error::custom)
    }
}

/// [`float32`] for an optional value.
pub(crate) mod opt_float32 {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Exact(#[serde(with = "super::float32")] f32);

    pub fn serialize<S: Serializer>(v: &Option<f32>, serializer: S) -> Result<S::Ok, S::Error> {
        v.map(Exact).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<f32>, D::Error> {
        Ok(Option::<Exact>::deserialize(deserializer)?.map(|e| e.0))
    }
}

/// tantivy's `DocAddress` as `[segment_ord, doc_id]`.
pub(crate) mod doc_address {
    use tantivy::DocAddress;

    use super::*;

    pub fn serialize<S: Serializer>(a: &DocAddress, serializer: S) -> Result<S::Ok, S::Error> {
        (a.segment_ord, a.doc_id).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DocAddress, D::Error> {
        let (segment_ord, doc_id) = <(u32, u32)>::deserialize(deserializer)?;
        Ok(DocAddress::new(segment_ord, doc_id))
    }
}

/// A named time zone by its IANA name (chrono-tz's serde feature is off in the workspace).
pub(crate) mod tz {
    use super::*;

    pub fn serialize<S: Serializer>(tz: &chrono_tz::Tz, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(tz.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<chrono_tz::Tz, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse()
            .map_err(|_| de::Error::custom(format!("unknown time zone [{name}]")))
    }
}

/// An analyzer by its name (shoal-mapping's types are not serde types).
pub(crate) mod analyzer {
    use shoal_mapping::Analyzer;

    use super::*;

    pub fn serialize<S: Serializer>(a: &Analyzer, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(a.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Analyzer, D::Error> {
        let name = String::deserialize(deserializer)?;
        Analyzer::parse(&name)
            .ok_or_else(|| de::Error::custom(format!("unknown analyzer [{name}]")))
    }
}
