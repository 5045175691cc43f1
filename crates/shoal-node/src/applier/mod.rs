//! The cluster-state applier: follows every committed cluster state on one thread, which only
//! installs index metadata and decides what each local copy needs ([`decide`]); the work itself
//! (open, close, delete, start a recovery) runs as per-copy tasks on a bounded pool
//! ([`crate::pressure::shard_tasks`]), so one slow or failing copy never holds back another
//! copy, another index, or the publication of the applied version.
//!
//! Two notions of "applied" follow from that:
//! - the applied version (`NodeCore::applied_version`): metadata installed and every copy's work
//!   handed out for that state. Waiters on it (`NodeCore::wait_until_applied`) are woken again
//!   after every copy task, so a check on a copy's state ("open", "acting as primary") sees it
//!   as soon as its task is done;
//! - a copy's work for a version is done when [`NodeCore::wait_copies_applied`](crate::core::NodeCore::wait_copies_applied) says so: a metadata
//!   change through [`NodeCore::propose`](crate::core::NodeCore::propose) waits for it on the indices it names, so closing or
//!   deleting an index answers once this node released the stores.

pub mod decide;
mod tasks;

use std::sync::{Arc, Weak};
use std::time::Duration;

use shoal_state::ClusterState;
use tracing::warn;

use crate::copy_reports::CopyReports;
use crate::core::{CopyKey, NodeCore};
use crate::error::ApiResult;
use crate::index_service::{IndexService, MetadataPublisher};
use crate::metadata::IndexMetadata;
use crate::pressure::shard_tasks::ShardTasks;
use crate::recovery::RecoveryService;
use crate::remote::RemoteStoreService;
use crate::replication::ReplicationService;
use crate::segrep::SegrepService;
use crate::snapshot::SnapshotService;
use decide::{CopyAction, LocalNode};

/// How often a copy that could not open for a passing reason tries again.
const OPEN_RETRY: Duration = Duration::from_secs(1);

/// Copy tasks running at once: enough that copies blocked in a slow open (a cold store
/// checked byte by byte) leave room for the others; a bound so a node with many copies does
/// not open them all at once.
fn task_limit() -> usize {
    (crate::pressure::settings::allocated_processors() * 2).clamp(4, 16)
}

/// The cluster-state applier: what it needs to bring this node's copies in line with each
/// state. The node owns it (the only strong reference, so the applier thread and the copy
/// tasks stop with the node); it holds the core and the services a copy task calls.
pub(crate) struct Applier {
    core: Arc<NodeCore>,
    /// Started and failed reports of this node's copies.
    reports: Arc<CopyReports>,
    /// A copy recovering from a peer starts its recovery; a delete waits for one writing.
    recoveries: Arc<RecoveryService>,
    /// A promoted primary resyncs its replicas.
    replication: Arc<ReplicationService>,
    /// A segment-replicated copy gets its checkpoint publisher and merge warmer.
    segrep: Arc<SegrepService>,
    /// A remote-backed primary restores its store from the repository.
    remote: Arc<RemoteStoreService>,
    /// A restored primary copies its files from the snapshot.
    snapshots: Arc<SnapshotService>,
}

/// The services the applier calls (see [`Applier`]).
pub(crate) struct ApplierParts {
    pub reports: Arc<CopyReports>,
    pub recoveries: Arc<RecoveryService>,
    pub replication: Arc<ReplicationService>,
    pub segrep: Arc<SegrepService>,
    pub remote: Arc<RemoteStoreService>,
    pub snapshots: Arc<SnapshotService>,
}

impl Applier {
    pub(crate) fn new(core: Arc<NodeCore>, parts: ApplierParts) -> Applier {
        Applier {
            core,
            reports: parts.reports,
            recoveries: parts.recoveries,
            replication: parts.replication,
            segrep: parts.segrep,
            remote: parts.remote,
            snapshots: parts.snapshots,
        }
    }
}

/// The applier, which creates the index services, publishes the metadata changes they make
/// (held weakly by each: an index never keeps a stopped node's applier alive).
impl crate::index_service::MetadataPublisher for Applier {
    fn node_name(&self) -> String {
        self.core.config.node_name.clone()
    }

    fn check_metadata_write(&self, index: &str) -> ApiResult<()> {
        self.core
            .blocks()
            .check_index(crate::blocks::BlockLevel::MetadataWrite, index)
    }

    fn publish_index(&self, meta: IndexMetadata) -> ApiResult<()> {
        self.core.publish_index(meta, false).map(|_| ())
    }

    fn wait_applied(&self, timeout: Duration, check: &mut dyn FnMut() -> bool) {
        self.core
            .wait_until_applied(timeout, |_, _| check().then_some(()));
    }
}

/// Follows the cluster state on a dedicated thread.
pub(crate) fn spawn_applier(applier: &Arc<Applier>) {
    let weak = Arc::downgrade(applier);
    let woken = weak.clone();
    let core = &applier.core;
    let tasks = ShardTasks::new(
        core.pressure
            .pool(crate::pressure::settings::GENERIC)
            .clone(),
        task_limit(),
        move || {
            if let Some(applier) = woken.upgrade() {
                applier.core.wake_applied_waiters();
            }
        },
    );
    let _ = core.copy_tasks.set(tasks);
    let mut rx = core.cluster.subscribe();
    let runtime = core.runtime.clone();
    std::thread::Builder::new()
        .name("cluster-applier".into())
        .spawn(move || loop {
            let state = rx.borrow_and_update().clone();
            let Some(applier) = weak.upgrade() else {
                return;
            };
            applier.apply_cluster_state(&state);
            drop(applier);
            // A copy whose open failed for a passing reason (a full disk) is retried by
            // applying the same state again.
            loop {
                let next = runtime
                    .block_on(async { tokio::time::timeout(OPEN_RETRY, rx.changed()).await });
                match next {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => return,
                    Err(_elapsed) => {
                        let retry = weak.upgrade().is_some_and(|a| a.reports.take_retry_open());
                        if retry {
                            break;
                        }
                    }
                }
            }
        })
        .expect("spawn applier");
}

impl Applier {
    /// Applies a cluster state to this node: installs the index metadata, hands each local
    /// copy's work to its task, drops the indices the state no longer has, and publishes the
    /// applied version.
    pub(crate) fn apply_cluster_state(self: &Arc<Self>, state: &Arc<ClusterState>) {
        if self.core.cluster.is_leaving() {
            // A node shutting down keeps its copies as they are (a state without this node
            // would close or delete them); waiters still see each version go by.
            self.publish_applied(state.version);
            return;
        }
        // Every task of this round stands for each state since the last one applied (the
        // applier may skip states that came in quick succession).
        let since = *self.core.applied_version.lock() + 1;
        let local = LocalNode {
            node_id: &self.core.node_id,
            current_incarnation: self.state_knows_this_incarnation(state),
            is_failed: &|id| self.reports.is_failed_copy(id),
        };
        for (name, state_meta) in &state.metadata.indices {
            match self.sync_index_service(name, state_meta) {
                Ok(service) => {
                    for (shard, action) in decide::copy_actions(state, state_meta, &local) {
                        self.dispatch(&service, shard, action, state, since);
                    }
                }
                Err(e) => warn!(index = %name, error = %e.reason, "could not apply index metadata"),
            }
        }
        self.remove_gone_indices(state, since);
        self.reports.forget_replaced_failed_copies(state);
        self.publish_applied(state.version);
    }

    fn publish_applied(&self, version: u64) {
        let mut applied = self.core.applied_version.lock();
        *applied = version;
        self.core.notify_applied_waiters();
    }

    /// Queues one copy's action; a close or delete with nothing to act on is skipped (most
    /// states only move other shards).
    fn dispatch(
        self: &Arc<Self>,
        service: &Arc<IndexService>,
        shard: usize,
        action: CopyAction,
        state: &Arc<ClusterState>,
        since: u64,
    ) {
        let Some(tasks) = self.core.copy_tasks() else {
            return;
        };
        let key = CopyKey::of(service, shard);
        let idle = !tasks.busy(&key);
        let nothing_to_do = match &action {
            CopyAction::Close => idle && service.copy(shard).is_err(),
            CopyAction::DeleteData => {
                idle && service.copy(shard).is_err() && !service.shard_dir_exists(shard)
            }
            CopyAction::Follow { .. } | CopyAction::Recover(_) => false,
        };
        if nothing_to_do {
            return;
        }
        let (applier, service, state) = (Arc::downgrade(self), service.clone(), state.clone());
        tasks.submit(key, since, move || {
            let Some(applier) = applier.upgrade().filter(|a| !a.core.is_killed()) else {
                return;
            };
            applier.run_copy_action(&service, shard, action, &state);
        });
    }

    /// Drops the local indices the state no longer has: out of the node's map now, their
    /// copies closed and files deleted by their tasks (after any task of theirs running).
    fn remove_gone_indices(self: &Arc<Self>, state: &ClusterState, since: u64) {
        let services = self.core.all_indices();
        let local: Vec<(String, String)> = services.iter().map(|s| (s.name(), s.uuid())).collect();
        let gone = decide::gone_indices(state, local.iter().map(|(n, u)| (n.as_str(), u.as_str())));
        for service in services {
            if !gone.contains(&(service.name().as_str(), service.uuid().as_str())) {
                continue;
            }
            self.core.forget_index(&service);
            let Some(tasks) = self.core.copy_tasks() else {
                continue;
            };
            for shard in 0..service.shard_count() {
                let (applier, service_) = (Arc::downgrade(self), service.clone());
                tasks.submit(CopyKey::of(&service, shard), since, move || {
                    if let Some(applier) = applier.upgrade() {
                        applier.remove_copy_of_deleted_index(&service_, shard);
                    }
                });
            }
        }
    }

    /// Whether `state` was made after this process joined (it lists this node with the
    /// ephemeral id of this process), rather than persisted before a restart.
    fn state_knows_this_incarnation(&self, state: &ClusterState) -> bool {
        let local = self.core.cluster.local();
        state
            .nodes
            .get(&local.id)
            .is_some_and(|known| known.ephemeral_id == local.ephemeral_id)
    }

    /// The local service of an index, created or given the cluster's metadata (the applied
    /// state's own value; the mapping is parsed again only when its version changed).
    fn sync_index_service(
        self: &Arc<Self>,
        name: &str,
        state_meta: &Arc<IndexMetadata>,
    ) -> ApiResult<Arc<IndexService>> {
        if let Some(service) = self
            .core
            .index(name)
            .filter(|s| s.uuid() == state_meta.uuid)
        {
            service.replace_meta(state_meta.clone())?;
            return Ok(service);
        }
        let service = Arc::new(IndexService::new(
            state_meta.clone(),
            self.core.paths.clone(),
            Arc::downgrade(self) as Weak<dyn MetadataPublisher>,
        )?);
        self.core.insert_index(name, service.clone());
        Ok(service)
    }

    /// At startup, waits until the replayed cluster state is applied, the work on its copies
    /// is done (a copy that cannot open has been reported failed) and every active shard copy
    /// it places on this node is open, so the node does not answer reads from a shard it has
    /// not reopened yet. Needs no cluster manager, so a node never waits for its peers.
    pub(crate) fn wait_for_local_shards(&self, timeout: Duration) {
        let ready = self.core.wait_until_applied(timeout, |state, applied| {
            let settled = self
                .core
                .copy_tasks()
                .is_none_or(|t| t.settled(state.version, |_| true));
            (applied >= state.version && settled && self.local_copies_open(state)).then_some(())
        });
        if ready.is_none() {
            warn!("started before every local shard copy was open");
        }
    }

    fn local_copies_open(&self, state: &ClusterState) -> bool {
        state
            .copies_on_node(&self.core.node_id)
            .filter(|c| c.is_active())
            .filter(|c| {
                state
                    .metadata
                    .indices
                    .get(&c.index)
                    .is_some_and(|m| m.state == shoal_state::IndexState::Open)
            })
            .all(|c| {
                self.core
                    .index(&c.index)
                    .is_some_and(|s| s.shard(c.shard as usize).is_ok())
            })
    }
}
