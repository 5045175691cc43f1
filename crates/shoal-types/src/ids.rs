use std::fmt;

use serde::{Deserialize, Serialize};

/// A sequence number: the position of an operation in a shard's history. Kept as `i64`
/// because OpenSearch's sentinels below zero travel in the same field.
pub type SeqNo = i64;

/// The local checkpoint of a copy that has applied no operation.
pub const NO_OPS_PERFORMED: SeqNo = -1;

/// The sequence number of an operation not yet given one (a primary assigns it).
pub const UNASSIGNED_SEQ_NO: SeqNo = -2;

/// A node's persistent id (kept in `node.json` across restarts).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub String);

/// The id of one assignment of a shard copy to a node; a copy reassigned gets a new one, so
/// a message naming an old allocation id can never act on its successor.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AllocationId(pub String);

/// A shard of an index, named by the index's uuid so a deleted and recreated index of the
/// same name is never confused with the old one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ShardId {
    pub index_uuid: String,
    pub shard: u32,
}

/// A primary term: bumped by the cluster manager each time a shard's primary changes.
/// Operations of a lower term than a copy's current one are refused.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Term(pub u64);

macro_rules! string_id {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_string())
            }
        }
    };
}

string_id!(NodeId);
string_id!(AllocationId);

impl ShardId {
    pub fn new(index_uuid: impl Into<String>, shard: u32) -> Self {
        Self {
            index_uuid: index_uuid.into(),
            shard,
        }
    }
}

impl fmt::Display for ShardId {
    /// OpenSearch's rendering: `[index_uuid][shard]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}][{}]", self.index_uuid, self.shard)
    }
}

impl Term {
    /// The term a primary starts with.
    pub const FIRST: Term = Term(1);

    /// The term as the translog and the engine store it.
    pub fn as_i64(self) -> i64 {
        debug_assert!(self.0 <= i64::MAX as u64);
        self.0 as i64
    }

    /// A term read from the translog or the engine; negative values (never written) clamp to 0.
    pub fn from_i64(term: i64) -> Term {
        Term(term.max(0) as u64)
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_id_renders_like_opensearch() {
        assert_eq!(ShardId::new("abc", 3).to_string(), "[abc][3]");
    }

    #[test]
    fn terms_round_trip_through_the_engines_i64() {
        assert_eq!(Term::from_i64(Term(7).as_i64()), Term(7));
        assert_eq!(Term::from_i64(-1), Term(0));
        assert!(Term(2) > Term::FIRST);
    }

    #[test]
    fn ids_and_terms_serialize_as_plain_values() {
        let id = AllocationId::from("a1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"a1\"");
        assert_eq!(serde_json::to_string(&Term(4)).unwrap(), "4");
        let shard: ShardId = serde_json::from_str(r#"{"index_uuid":"u","shard":2}"#).unwrap();
        assert_eq!(shard, ShardId::new("u", 2));
    }
}
