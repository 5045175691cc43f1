//! Metadata changes proposed to the cluster manager, and the waits for this node to apply them:
//! a proposal answers once this node applied the state that holds it and, for a change of an
//! existing index or a deletion, once the work on its copies here (open, close, delete) is done.
//! The applier's per-copy tasks ([`crate::applier`]) are kept here so those waits can see them.

use std::sync::Arc;
use std::time::Duration;

use shoal_state::{ClusterState, Command};

use super::NodeCore;
use crate::config::CLUSTER_MANAGER_TIMEOUT;
use crate::error::ApiResult;
use crate::index_service::IndexService;
use crate::metadata::IndexMetadata;
use crate::pressure::shard_tasks::ShardTasks;

/// One shard copy's place in the task queue: per index uuid (a recreated index of the same
/// name is another key) and shard; the name lets a caller wait on an index by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CopyKey {
    pub index: String,
    pub uuid: String,
    pub shard: usize,
}

impl CopyKey {
    pub(crate) fn of(service: &IndexService, shard: usize) -> CopyKey {
        let (index, uuid) = service.with_meta(|m| (m.name.clone(), m.uuid.clone()));
        CopyKey { index, uuid, shard }
    }
}

impl NodeCore {
    /// The applier's per-copy tasks (set when the applier starts).
    pub(crate) fn copy_tasks(&self) -> Option<&ShardTasks<CopyKey>> {
        self.copy_tasks.get()
    }

    /// Wakes the threads waiting in `wait_until_applied` to check again.
    pub(crate) fn wake_applied_waiters(&self) {
        let _applied = self.applied_version.lock();
        self.notify_applied_waiters();
    }

    fn copy_tasks_settled(&self, indices: &[String], version: u64) -> bool {
        self.copy_tasks()
            .is_none_or(|t| t.settled(version, |k| indices.contains(&k.index)))
    }

    /// Waits until this node applied `version` and finished the work of every state up to it
    /// on its copies of the indices `indices` (by name); false at `timeout`.
    pub(crate) fn wait_copies_applied(
        &self,
        indices: &[String],
        version: u64,
        timeout: Duration,
    ) -> bool {
        self.wait_until_applied(timeout, |_, applied| {
            (applied >= version && self.copy_tasks_settled(indices, version)).then_some(())
        })
        .is_some()
    }

    /// Proposes a command and waits until this node's applier has applied it, including the
    /// work on its copies of the indices the command changes (closing or deleting an index
    /// answers once the stores are released here).
    pub fn propose(&self, command: Command) -> ApiResult<Arc<ClusterState>> {
        let indices = indices_changed_by(&command);
        let state = self
            .runtime
            .block_on(self.cluster.propose(command, CLUSTER_MANAGER_TIMEOUT))?;
        // With no index named this is just "applied": no copy task is asked about.
        self.wait_copies_applied(&indices, state.version, CLUSTER_MANAGER_TIMEOUT);
        Ok(state)
    }

    /// Publishes index metadata through the cluster manager (create or replace).
    pub fn publish_index(&self, meta: IndexMetadata, create: bool) -> ApiResult<Arc<ClusterState>> {
        self.propose(Command::PutIndex { meta, create })
    }
}

/// The indices whose local copies a command opens, closes or deletes by changing their
/// metadata (a shard's failure or start moves one copy, which nobody waits for). A new index
/// is not among them: its creation waits for its primaries after it let go of the lock that
/// serializes creations, so a copy slow to open never holds back the next creation.
fn indices_changed_by(command: &Command) -> Vec<String> {
    match command {
        Command::PutIndex {
            meta,
            create: false,
        } => vec![meta.name.clone()],
        Command::DeleteIndices { names } => names.clone(),
        _ => Vec::new(),
    }
}
