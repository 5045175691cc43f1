//! The work of one local copy for one cluster state, run as that copy's task (see the module
//! above): open and follow, recover, close, delete redundant data, remove a deleted index's copy.

use std::sync::Arc;

use shoal_state::{ClusterState, ShardRouting, ShardState};

use super::decide::CopyAction;
use super::Applier;
use crate::error::ApiResult;
use crate::index_service::IndexService;
use crate::shard::IndexShard;

fn now_millis() -> i64 {
    crate::remote::layout::now_millis() as i64
}

impl Applier {
    pub(super) fn run_copy_action(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
        action: CopyAction,
        state: &ClusterState,
    ) {
        match action {
            CopyAction::Follow { copy, current } => {
                // One copy that cannot be brought in line never holds back the others.
                if let Err(e) = self.apply_local_copy(state, service, &copy, current) {
                    self.reports.copy_failed_to_open(service, &copy, &e);
                }
            }
            CopyAction::Recover(copy) => self.follow_recovering_copy(state, service, &copy),
            // An open index's copy not assigned here any more moved away; a closed index's
            // copies close with it (their last uploads finish: a restore reads them).
            CopyAction::Close => match index_is_open(state, &service.name()) {
                true => service.remove_copy(shard),
                false => close_with_its_index(service, shard),
            },
            CopyAction::DeleteData => {
                // A recovery of this shard into this node holds the lock while it writes.
                let lock = self.recoveries.shard_lock(&service.name(), shard);
                let _no_recovery = lock.lock();
                service.delete_shard_data(shard);
            }
        }
    }

    /// A copy that needs peer recovery starts it (once per allocation id); once recovered and
    /// waiting to be reported started, it keeps following the state.
    fn follow_recovering_copy(
        self: &Arc<Self>,
        state: &ClusterState,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
    ) {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.as_deref().unwrap_or_default();
        match service
            .replication(shard)
            .filter(|r| r.allocation_id == allocation_id)
        {
            Some(recovered) => recovered.apply_cluster_state(state, &copy.index, shard),
            None => self.recoveries.start_peer_recovery(service, copy),
        }
    }

    /// Brings one local copy (not recovering from a peer) in line with the cluster state: opens
    /// it, follows the in-sync set, takes the primary role when it holds it, and reports itself
    /// started when initializing. With `current` false (a state this node persisted before it
    /// restarted: its copies there are about to be failed and recovered) it only opens for reads.
    fn apply_local_copy(
        self: &Arc<Self>,
        state: &ClusterState,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
        current: bool,
    ) -> ApiResult<()> {
        let shard = copy.shard as usize;
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        let term = state.primary_term(&copy.index, copy.shard).unwrap_or(1) as i64;
        crate::failpoints::failpoint!(self.core, "applier_before_open");
        let restoring = copy.primary
            && copy.state == ShardState::Initializing
            && copy.recovery_source == Some(shoal_state::RecoverySource::RemoteStore)
            && service.copy(shard).is_err();
        // A restore's record starts before its download.
        let started = now_millis();
        let restored = match restoring {
            true => Some((self.remote.download_store(service, shard, term)?, started)),
            false => None,
        };
        let from_snapshot = match restores_from_snapshot(service, copy) {
            true => Some((self.snapshots.restore_shard(service, shard, term)?, started)),
            false => None,
        };
        service.ensure_shard_open(shard, term, copy.primary)?;
        if let Some((files, started)) = restored {
            let replayed = self.remote.replay_translog(service, shard)?;
            let local = service.copy(shard)?;
            self.record_restore(copy, &local, files, replayed, started, None);
        }
        if let Some(((files, source), started)) = from_snapshot {
            let local = service.copy(shard)?;
            // Operations the snapshot's commit skipped were never acknowledged.
            local.engine().fill_seq_no_gaps(term)?;
            let snapshot = Some((source.repository, source.snapshot));
            self.record_restore(copy, &local, files, 0, started, snapshot);
        }
        self.segrep.install_checkpoint_publisher(service, shard);
        self.segrep.install_merge_warmer(service, shard);
        let local = service.copy(shard)?;
        // An index closed and opened again: its copies keep the record of their recovery.
        service.restore_recovery(shard, &local, &allocation_id);
        local.advance_to(if copy.state == ShardState::Started {
            shoal_shard::ShardState::Started
        } else {
            shoal_shard::ShardState::PostRecovery
        });
        let engine = local.engine().clone();
        let replication = local.replication_for(&allocation_id, engine.global_checkpoint());
        replication.apply_cluster_state(state, &copy.index, shard);
        if !current {
            return Ok(());
        }
        if copy.primary && copy.state == ShardState::Started {
            local.resume_after_cancelled_relocation();
        }
        if copy.primary && !replication.tracker.lock().is_primary_mode() {
            self.take_primary_role(service, copy, &engine, &replication)?;
        }
        if copy.state == ShardState::Initializing {
            self.record_store_recovery(copy, &local);
            self.reports.report_started(copy);
        }
        Ok(())
    }

    /// A copy the state makes primary that is not acting as one yet: a primary opening its own
    /// store (new or existing) activates at once, with no copies to resync; a promoted replica
    /// or a relocation target handed the role resyncs its replicas first.
    fn take_primary_role(
        &self,
        service: &Arc<IndexService>,
        copy: &ShardRouting,
        engine: &Arc<shoal_engine::Engine>,
        replication: &Arc<crate::replication::ShardReplication>,
    ) -> ApiResult<()> {
        let shard = copy.shard as usize;
        if copy.state != ShardState::Initializing {
            self.replication.start_primary_resync(
                service,
                shard,
                engine.clone(),
                replication.clone(),
            );
            return Ok(());
        }
        crate::segrep::ensure_writer(service, engine)?;
        if copy.bootstrap_new_history_uuid {
            engine.bootstrap_new_history()?;
            tracing::info!(index = %copy.index, shard, history_uuid = %engine.history_uuid(), "forced primary starts a new history");
        }
        replication.activate_primary(engine, &self.core.node_id);
        Ok(())
    }

    /// A primary restored from the remote store or a snapshot shows in `_cat/recovery` with
    /// what it downloaded and replayed.
    fn record_restore(
        &self,
        copy: &ShardRouting,
        local: &IndexShard,
        files: Vec<crate::recovery::progress::FileDetail>,
        replayed: usize,
        started: i64,
        snapshot: Option<(String, String)>,
    ) {
        use crate::recovery::progress::{RecoveryProgress, RecoveryRecord, RecoveryType};
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        let mut record = RecoveryRecord::new(
            &copy.index,
            copy.shard as usize,
            &allocation_id,
            true,
            match snapshot {
                Some(_) => RecoveryType::Snapshot,
                None => RecoveryType::RemoteStore,
            },
            &self.core.node_id,
        );
        record.snapshot = snapshot;
        record.start_millis = started;
        record.record_files(files);
        record.ops_total = replayed as u64;
        record.ops_recovered = replayed as u64;
        record.finish();
        local.set_recovery(RecoveryProgress::new(record));
    }

    /// A primary initialized from its own store (new or existing) shows in `_cat/recovery`.
    fn record_store_recovery(&self, copy: &ShardRouting, local: &IndexShard) {
        use crate::recovery::progress::{RecoveryProgress, RecoveryRecord, RecoveryType};
        let allocation_id = copy.allocation_id.clone().unwrap_or_default();
        if local
            .recovery()
            .is_some_and(|p| p.allocation_id() == allocation_id)
        {
            return;
        }
        let kind = match copy.recovery_source {
            Some(shoal_state::RecoverySource::ExistingStore) => RecoveryType::ExistingStore,
            Some(shoal_state::RecoverySource::RemoteStore) => RecoveryType::RemoteStore,
            Some(shoal_state::RecoverySource::Snapshot) => RecoveryType::Snapshot,
            _ => RecoveryType::EmptyStore,
        };
        let record = RecoveryRecord::new(
            &copy.index,
            copy.shard as usize,
            &allocation_id,
            copy.primary,
            kind,
            &self.core.node_id,
        );
        local.set_recovery(RecoveryProgress::new(store_recovery(record, local)));
    }

    /// A copy of an index the state no longer has: closed, and its files deleted (the index
    /// directory with the last of them).
    pub(super) fn remove_copy_of_deleted_index(&self, service: &IndexService, shard: usize) {
        service.remove_copy(shard);
        service.remove_shard_files(shard);
        let index_dir = self.core.paths.index_dir(&service.uuid());
        // Only empty once every shard's directory is gone: the last task to get here removes it.
        if std::fs::remove_dir(&index_dir).is_ok() {
            tracing::info!(index = %service.name(), "index deleted");
        }
    }
}

fn index_is_open(state: &ClusterState, index: &str) -> bool {
    state
        .metadata
        .indices
        .get(index)
        .is_some_and(|meta| meta.state == shoal_state::IndexState::Open)
}

/// A recovery of `local` from its own store, finished: every file of its commit reused, no
/// operation replayed. A new, empty store reuses nothing (OpenSearch lists no file for it).
fn store_recovery(
    mut record: crate::recovery::progress::RecoveryRecord,
    local: &IndexShard,
) -> crate::recovery::progress::RecoveryRecord {
    use crate::recovery::progress::RecoveryType;
    if record.recovery_type != RecoveryType::EmptyStore {
        if let Ok(files) = local.engine().commit_files() {
            record.reuse_commit_files(&files);
        }
    }
    record.finish();
    record
}

/// Closes a copy whose index closed. As OpenSearch reinitializes a closed index's copies from
/// their own store, its recovery record becomes an existing-store one (what `_cat/recovery`
/// shows, then and once reopened).
fn close_with_its_index(service: &IndexService, shard: usize) {
    use crate::recovery::progress::{RecoveryProgress, RecoveryRecord, RecoveryType};
    let record = service.copy(shard).ok().and_then(|local| {
        let old = local.recovery()?.snapshot();
        let record = RecoveryRecord::new(
            &old.index,
            old.shard,
            &old.allocation_id,
            old.primary,
            RecoveryType::ExistingStore,
            &old.target_node,
        );
        Some(store_recovery(record, &local))
    });
    service.close_shard(shard);
    if let Some(record) = record {
        service.keep_recovery(shard, RecoveryProgress::new(record));
    }
}

/// A primary of a restored index starting on this node with nothing open yet: its files
/// come from the snapshot.
fn restores_from_snapshot(service: &IndexService, copy: &ShardRouting) -> bool {
    copy.primary
        && copy.state == ShardState::Initializing
        && copy.recovery_source == Some(shoal_state::RecoverySource::Snapshot)
        && service.copy(copy.shard as usize).is_err()
}
