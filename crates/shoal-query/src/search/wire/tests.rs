//! The packed format and the JSON codecs on their own: exactness, serde_json's data model
//! semantics where tantivy relies on them, and refusal of corrupt input.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::pack::MAX_INTERNED;
use super::{pack, unpack};

fn round_trip<T: Serialize + for<'de> Deserialize<'de>>(value: &T) -> T {
    unpack(&pack(value).unwrap()).unwrap()
}

#[derive(Debug, PartialEq, Serialize, Deserialize, PartialOrd, Ord, Eq, Clone)]
enum Key {
    Unit,
    Str(String),
    Pair(i64, u64),
    Named { a: bool },
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Inner {
    x: Option<i32>,
    y: String,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Outer {
    floats: Vec<f64>,
    single: f32,
    ints: (i64, i64, u64, i8),
    by_key: BTreeMap<Key, u32>,
    maybe: Option<Option<u8>>,
    #[serde(flatten)]
    inner: Inner,
    nothing: (),
}

#[test]
fn values_round_trip_exactly_including_non_finite_floats_and_enum_keys() {
    let mut by_key = BTreeMap::new();
    by_key.insert(Key::Unit, 1);
    by_key.insert(Key::Str("é".into()), 2);
    by_key.insert(Key::Pair(-5, u64::MAX), 3);
    by_key.insert(Key::Named { a: true }, 4);
    let value = Outer {
        floats: vec![
            0.1 + 0.2,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            f64::MIN_POSITIVE,
            5e-324,
        ],
        single: 0.1,
        ints: (i64::MIN, i64::MAX, u64::MAX, -1),
        by_key,
        maybe: Some(Some(7)),
        inner: Inner {
            x: None,
            y: "flattened".into(),
        },
        nothing: (),
    };
    let back = round_trip(&value);
    assert_eq!(back, value);
    assert!(back.floats[3].is_sign_negative());
    let nan: f64 = round_trip(&f64::NAN);
    assert!(nan.is_nan());
}

#[test]
fn bytes_decode_as_a_sequence_like_json_arrays() {
    struct Raw(Vec<u8>);
    impl Serialize for Raw {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }
    let bytes: Vec<u8> = (0..=255).collect();
    let packed = pack(&Raw(bytes.clone())).unwrap();
    assert!(packed.len() < 262, "bytes are stored raw: {}", packed.len());
    assert_eq!(unpack::<Vec<u8>>(&packed).unwrap(), bytes);
}

#[test]
fn some_is_transparent_like_json_null_is_none() {
    // tantivy reads optional floats with `deserialize_any` visitors that know no `Some`.
    assert_eq!(pack(&Some(3u8)).unwrap(), pack(&3u8).unwrap());
    let none: Option<Option<u8>> = round_trip(&Some(None::<u8>));
    assert_eq!(none, None, "as in JSON, Some(None) reads back as None");
    let as_json: serde_json::Value = round_trip(&json!({"a": [1, -2, 2.5, null, true, "s"]}));
    assert_eq!(as_json, json!({"a": [1, -2, 2.5, null, true, "s"]}));
}

#[test]
fn corrupt_input_is_refused() {
    let packed = pack(&vec!["abc".to_string(), "def".to_string()]).unwrap();
    assert!(unpack::<Vec<String>>(&packed[..packed.len() - 1]).is_err());
    let mut trailing = packed.clone();
    trailing.push(0);
    assert!(unpack::<Vec<String>>(&trailing).is_err());
    assert!(unpack::<Vec<String>>(&[42]).is_err());
    // A huge announced count does not allocate: elements run out first.
    assert!(unpack::<Vec<u8>>(&[9, 0xff, 0xff, 0xff, 0xff]).is_err());
    let deep = [[9u8, 1, 0, 0, 0]; 600].concat();
    assert!(unpack::<serde_json::Value>(&deep).is_err());
}

#[test]
fn repeated_short_strings_are_written_once() {
    let rows: Vec<Inner> = (0..100)
        .map(|i| Inner {
            x: Some(i),
            y: "same".into(),
        })
        .collect();
    let packed = pack(&rows).unwrap();
    // A row is its map header and three 2-byte references plus its number.
    assert!(packed.len() < 100 * 14, "{}", packed.len());
    assert_eq!(round_trip(&rows), rows);
    let long = vec!["x".repeat(MAX_INTERNED + 1); 3];
    assert_eq!(round_trip(&long), long);
    assert!(
        unpack::<String>(&[11, 0]).is_err(),
        "a reference to nothing"
    );
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Floats {
    #[serde(with = "super::float")]
    double: f64,
    #[serde(with = "super::float32")]
    single: f32,
    #[serde(with = "super::opt_float32")]
    maybe: Option<f32>,
}

/// Deterministic pseudo-random bit patterns (xorshift), for floats of every magnitude.
fn bit_patterns(n: usize) -> impl Iterator<Item = u64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n).map(move |_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    })
}

#[test]
fn json_floats_round_trip_bit_for_bit() {
    for bits in bit_patterns(20_000) {
        let value = Floats {
            double: f64::from_bits(bits),
            single: f32::from_bits(bits as u32),
            maybe: Some(f32::from_bits((bits >> 32) as u32)),
        };
        let text = serde_json::to_vec(&value).unwrap();
        let back: Floats = serde_json::from_slice(&text).unwrap();
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(same(back.double, value.double), "{}", value.double);
        assert!(
            same(back.single.into(), value.single.into()),
            "{}",
            value.single
        );
        assert!(same(
            back.maybe.unwrap().into(),
            value.maybe.unwrap().into()
        ));
    }
}

#[test]
fn json_floats_are_numbers_and_non_finite_ones_named() {
    let value = Floats {
        double: 1.5,
        single: f32::NAN,
        maybe: None,
    };
    let text = serde_json::to_string(&value).unwrap();
    assert_eq!(text, r#"{"double":1.5,"single":"NaN","maybe":null}"#);
    let back: Floats =
        serde_json::from_str(r#"{"double":"-Infinity","single":2,"maybe":1e-3}"#).unwrap();
    assert_eq!(back.double, f64::NEG_INFINITY);
    assert_eq!((back.single, back.maybe), (2.0, Some(0.001)));
    assert!(serde_json::from_str::<Floats>(r#"{"double":"x","single":1,"maybe":null}"#).is_err());
}
