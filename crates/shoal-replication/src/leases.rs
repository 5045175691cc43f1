//! Retention leases: a copy (or a follower cluster) asks the primary to keep the history of
//! operations from some seq_no on, so that it can later catch up by replaying operations
//! instead of copying files. A lease lives while it is renewed and expires after
//! `index.soft_deletes.retention_lease.period` (12h by default) without renewal.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One lease, as OpenSearch's `_stats?level=shards` `retention_leases` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionLease {
    pub id: String,
    /// Operations with a seq_no at or above this are kept.
    pub retaining_seq_no: i64,
    pub timestamp_millis: i64,
    pub source: String,
}

/// The leases of one shard, versioned so copies can tell newer sets from older.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionLeases {
    pub primary_term: i64,
    pub version: u64,
    pub leases: BTreeMap<String, RetentionLease>,
}

/// The lease id OpenSearch gives the peer-recovery lease of a node's copy. It is per node,
/// not per allocation id: a copy that returns to its node gets a new allocation id, and the
/// lease must still be there for it.
pub fn peer_recovery_lease_id(node_id: &str) -> String {
    format!("peer_recovery/{node_id}")
}

/// The lease a running recovery holds on the history it will replay.
pub fn recovery_lease_id(recovery_id: &str) -> String {
    format!("recovery/{recovery_id}")
}

impl RetentionLeases {
    /// Adds a lease; an existing id is an error (OpenSearch's
    /// `RetentionLeaseAlreadyExistsException`), so two recoveries cannot share one.
    pub fn add(
        &mut self,
        id: &str,
        retaining_seq_no: i64,
        source: &str,
        now_millis: i64,
    ) -> Result<(), String> {
        if self.leases.contains_key(id) {
            return Err(format!("retention lease with ID [{id}] already exists"));
        }
        self.leases.insert(
            id.to_string(),
            RetentionLease {
                id: id.to_string(),
                retaining_seq_no,
                timestamp_millis: now_millis,
                source: source.to_string(),
            },
        );
        self.version += 1;
        Ok(())
    }

    /// Renews a lease; its retained seq_no never moves backwards (history already released
    /// cannot be promised again).
    pub fn renew(
        &mut self,
        id: &str,
        retaining_seq_no: i64,
        now_millis: i64,
    ) -> Result<(), String> {
        let lease = self
            .leases
            .get_mut(id)
            .ok_or_else(|| format!("retention lease with ID [{id}] not found"))?;
        if retaining_seq_no < lease.retaining_seq_no {
            return Err(format!(
                "the current retention lease with [{id}] is retaining [{}] which is greater than the new retaining sequence number [{retaining_seq_no}]",
                lease.retaining_seq_no
            ));
        }
        lease.retaining_seq_no = retaining_seq_no;
        lease.timestamp_millis = now_millis;
        self.version += 1;
        Ok(())
    }

    pub fn remove(&mut self, id: &str) -> bool {
        let removed = self.leases.remove(id).is_some();
        if removed {
            self.version += 1;
        }
        removed
    }

    /// Drops leases not renewed within `period_millis`; returns their ids.
    pub fn expire(&mut self, now_millis: i64, period_millis: i64) -> Vec<String> {
        self.expire_except(now_millis, period_millis, &Default::default())
    }

    /// [`RetentionLeases::expire`], sparing the ids in `keep` (the leases of copies that are
    /// still assigned never expire, as in OpenSearch).
    pub fn expire_except(
        &mut self,
        now_millis: i64,
        period_millis: i64,
        keep: &std::collections::BTreeSet<String>,
    ) -> Vec<String> {
        let expired: Vec<String> = self
            .leases
            .values()
            .filter(|l| !keep.contains(&l.id))
            .filter(|l| now_millis - l.timestamp_millis > period_millis)
            .map(|l| l.id.clone())
            .collect();
        for id in &expired {
            self.leases.remove(id);
        }
        if !expired.is_empty() {
            self.version += 1;
        }
        expired
    }

    /// The lowest seq_no some lease still needs (`None`: no lease, history may go).
    pub fn min_retained_seq_no(&self) -> Option<i64> {
        self.leases.values().map(|l| l.retaining_seq_no).min()
    }

    /// Whether the history from `from_seq_no` on is retained for this lease's holder.
    pub fn retains_from(&self, id: &str, from_seq_no: i64) -> bool {
        self.leases
            .get(id)
            .is_some_and(|l| l.retaining_seq_no <= from_seq_no)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_id_can_be_added_once() {
        let mut leases = RetentionLeases::default();
        leases
            .add("peer_recovery/a", 0, "peer recovery", 10)
            .unwrap();
        let error = leases
            .add("peer_recovery/a", 5, "peer recovery", 11)
            .unwrap_err();
        assert!(error.contains("already exists"));
        assert_eq!(leases.version, 1);
    }

    #[test]
    fn renewal_moves_forward_only_and_refreshes_the_timestamp() {
        let mut leases = RetentionLeases::default();
        leases.add("l", 10, "ccr", 0).unwrap();
        leases.renew("l", 20, 100).unwrap();
        assert!(leases.renew("l", 15, 200).is_err());
        assert_eq!(leases.leases["l"].retaining_seq_no, 20);
        assert_eq!(leases.leases["l"].timestamp_millis, 100);
        assert!(leases.renew("missing", 1, 1).is_err());
    }

    #[test]
    fn unrenewed_leases_expire_and_release_history() {
        let mut leases = RetentionLeases::default();
        leases.add("old", 5, "peer recovery", 0).unwrap();
        leases.add("fresh", 50, "peer recovery", 900).unwrap();
        assert_eq!(leases.min_retained_seq_no(), Some(5));
        assert_eq!(leases.expire(1_000, 500), vec!["old".to_string()]);
        assert_eq!(leases.min_retained_seq_no(), Some(50));
        assert!(leases.expire(1_000, 500).is_empty());
    }

    #[test]
    fn history_is_retained_only_from_the_leased_seq_no() {
        let mut leases = RetentionLeases::default();
        leases
            .add(&peer_recovery_lease_id("r1"), 30, "peer recovery", 0)
            .unwrap();
        assert!(leases.retains_from("peer_recovery/r1", 30));
        assert!(leases.retains_from("peer_recovery/r1", 31));
        assert!(!leases.retains_from("peer_recovery/r1", 29));
        assert!(!leases.retains_from("peer_recovery/r2", 100));
    }
}
