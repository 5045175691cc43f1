//! The node-to-node protocol version: every request carries the sender's, and the cluster
//! manager refuses a joining node whose range does not overlap its own (as OpenSearch's join
//! validation refuses an incompatible node version).

use serde::{Deserialize, Serialize};

/// The protocol this build speaks, and the oldest one it still talks to. Raise `current` when
/// a request or response changes shape; raise `min_compatible` when support for an older shape
/// is dropped.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion {
    current: 1,
    min_compatible: 1,
};

/// A node's protocol range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtocolVersion {
    pub current: u32,
    pub min_compatible: u32,
}

impl ProtocolVersion {
    /// Reads the fields of a request; a node that sent none (0) predates versions and speaks
    /// the first one.
    pub fn from_wire(current: u32, min_compatible: u32) -> ProtocolVersion {
        let current = current.max(1);
        ProtocolVersion {
            current,
            min_compatible: min_compatible.clamp(1, current),
        }
    }

    /// Whether two nodes can talk: each speaks at least what the other still understands.
    pub fn is_compatible_with(self, other: ProtocolVersion) -> bool {
        self.current >= other.min_compatible && other.current >= self.min_compatible
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (compatible with {} and later)",
            self.current, self.min_compatible
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(current: u32, min_compatible: u32) -> ProtocolVersion {
        ProtocolVersion {
            current,
            min_compatible,
        }
    }

    #[test]
    fn overlapping_ranges_are_compatible_both_ways() {
        assert!(range(3, 2).is_compatible_with(range(2, 1)));
        assert!(range(2, 1).is_compatible_with(range(3, 2)));
        assert!(range(1, 1).is_compatible_with(range(1, 1)));
    }

    #[test]
    fn a_node_older_than_the_others_minimum_is_incompatible_both_ways() {
        assert!(!range(5, 4).is_compatible_with(range(3, 1)));
        assert!(!range(3, 1).is_compatible_with(range(5, 4)));
    }

    #[test]
    fn a_sender_without_a_version_speaks_the_first_one() {
        assert_eq!(ProtocolVersion::from_wire(0, 0), range(1, 1));
        assert_eq!(ProtocolVersion::from_wire(4, 0), range(4, 1));
    }
}
