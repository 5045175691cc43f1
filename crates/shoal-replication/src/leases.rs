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
    format!("{PEER_RECOVERY_PREFIX}{node_id}")
}

const PEER_RECOVERY_PREFIX: &str = "peer_recovery/";

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

    /// The leases a primary copies to its replicas: the per-node peer-recovery leases, not
    /// those of its own running recoveries, which end with it.
    pub fn peer_recovery_leases(&self) -> RetentionLeases {
        RetentionLeases {
            primary_term: self.primary_term,
            version: self.version,
            leases: self
                .leases
                .iter()
                .filter(|(id, _)| id.starts_with(PEER_RECOVERY_PREFIX))
                .map(|(id, lease)| (id.clone(), lease.clone()))
                .collect(),
        }
    }

    /// A replica takes the primary's leases when they are newer (a later term, or a later
    /// version of the same term) than the set it holds; returns whether it did. A replica
    /// that becomes primary thus keeps retaining what the copies need.
    pub fn adopt_from_primary(&mut self, incoming: &RetentionLeases) -> bool {
        if (incoming.primary_term, incoming.version) <= (self.primary_term, self.version) {
            return false;
        }
        *self = incoming.clone();
        true
    }

    /// A copy on node `own_node` taking over as primary under `primary_term` owns the set
    /// from now on. The lease its former primary held for this node goes: nothing renews a
    /// primary's own lease, and it would pin the translog for good. The version moves on even
    /// within a term (a relocation hand-over), so replicas take the new primary's sets.
    pub fn take_over(&mut self, primary_term: i64, own_node: &str) {
        self.primary_term = self.primary_term.max(primary_term);
        self.leases.remove(&peer_recovery_lease_id(own_node));
        self.version += 1;
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

    #[test]
    fn a_replica_adopts_only_newer_lease_sets_and_never_a_recoverys_lease() {
        let mut primary = RetentionLeases {
            primary_term: 2,
            ..Default::default()
        };
        primary
            .add(&peer_recovery_lease_id("n1"), 5, "peer recovery", 10)
            .unwrap();
        primary
            .add(&recovery_lease_id("r1"), 3, "recovery", 10)
            .unwrap();
        let synced = primary.peer_recovery_leases();
        assert_eq!(
            synced.leases.keys().collect::<Vec<_>>(),
            ["peer_recovery/n1"]
        );

        let mut replica = RetentionLeases::default();
        assert!(replica.adopt_from_primary(&synced));
        assert_eq!(replica.min_retained_seq_no(), Some(5));
        assert!(
            !replica.adopt_from_primary(&synced),
            "the same version again"
        );

        // A set from an older term never replaces one from a newer term, whatever its version.
        let mut stale = synced.clone();
        stale.primary_term = 1;
        stale.version = 99;
        assert!(!replica.adopt_from_primary(&stale));

        replica.take_over(3, "n1");
        assert_eq!(replica.primary_term, 3);
        assert_eq!(
            replica.min_retained_seq_no(),
            None,
            "its own node's lease is gone"
        );
        assert!(
            !replica.adopt_from_primary(&synced),
            "the new primary owns its set"
        );
    }
}
