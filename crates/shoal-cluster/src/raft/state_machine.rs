//! The Raft state machine: the cluster state, advanced by committed proposals. Every applied
//! entry is published on a watch channel that the node's applier follows.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};
use serde::{Deserialize, Serialize};
use shoal_state::{ClusterState, Command, Proposal};
use tokio::sync::watch;

use super::log_store::write_json_atomically;
use super::reserve::{is_disk_full, DiskReserve};
use super::types::{ApplyResult, LogId, Snapshot, SnapshotMeta, StoredMembership, TypeConfig};

#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    state: ClusterState,
}

/// How cluster states reached this node, in OpenSearch's `published_cluster_states` terms:
/// a Raft snapshot installed is a full state, a log entry applied a diff (Raft never sends a
/// diff a node cannot apply: a member too far behind for the log gets a snapshot).
#[derive(Debug, Default)]
pub struct ReceivedStates {
    full_states: AtomicU64,
    diffs: AtomicU64,
}

impl ReceivedStates {
    /// (full states, diffs) received so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.full_states.load(Ordering::Relaxed),
            self.diffs.load(Ordering::Relaxed),
        )
    }
}

#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<tokio::sync::Mutex<Inner>>,
    published: watch::Sender<Arc<ClusterState>>,
    received: Arc<ReceivedStates>,
    reserve: Arc<DiskReserve>,
    /// Serializes snapshot files: a build writes without the state lock (a write waiting for
    /// disk space must not stop entries being applied), an install with it.
    snapshot_io: Arc<tokio::sync::Mutex<()>>,
}

struct Inner {
    snapshot_path: PathBuf,
    state: ClusterState,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    snapshot: Option<(SnapshotMeta, Vec<u8>)>,
}

impl StateMachine {
    /// Loads the last snapshot from `dir`; Raft replays committed entries after it.
    pub fn open(
        dir: &Path,
        cluster_name: &str,
        reserve: Arc<DiskReserve>,
    ) -> io::Result<StateMachine> {
        let snapshot_path = dir.join("raft-snapshot.json");
        let loaded: Option<SnapshotFile> = match std::fs::read(&snapshot_path) {
            Ok(bytes) => Some(serde_json::from_slice(&bytes).map_err(io::Error::other)?),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let mut inner = Inner {
            snapshot_path,
            state: ClusterState::new(cluster_name),
            last_applied: None,
            membership: StoredMembership::default(),
            snapshot: None,
        };
        if let Some(file) = loaded {
            let data = serde_json::to_vec(&file.state).map_err(io::Error::other)?;
            inner.last_applied = file.meta.last_log_id.clone();
            inner.membership = file.meta.last_membership.clone();
            inner.state = file.state;
            inner.snapshot = Some((file.meta, data));
        }
        let (published, _) = watch::channel(Arc::new(inner.state.clone()));
        Ok(StateMachine {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            published,
            received: Arc::default(),
            reserve,
            snapshot_io: Arc::default(),
        })
    }

    /// Persists a snapshot with the disk reserve, waiting while the disk is full (openraft
    /// stops a member whose storage fails).
    async fn save_snapshot(&self, path: &Path, file: &SnapshotFile) -> io::Result<()> {
        loop {
            match self.reserve.write(|| write_json_atomically(path, file)) {
                Err(e) if is_disk_full(&e) => {
                    tracing::warn!(path = %path.display(), "disk full: the raft snapshot waits for space");
                    tokio::time::sleep(DiskReserve::retry_delay()).await;
                }
                other => return other,
            }
        }
    }

    /// Follows every applied state.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ClusterState>> {
        self.published.subscribe()
    }

    pub fn current(&self) -> Arc<ClusterState> {
        self.published.borrow().clone()
    }

    pub fn received(&self) -> &ReceivedStates {
        &self.received
    }
}

/// Applies one proposal, then lets allocation place shards; both are deterministic. Reroute
/// commands and state transitions refuse before changing anything, so a refused command
/// leaves the state exactly as it was (no copy of the state per entry).
pub fn apply_proposal(state: &mut ClusterState, proposal: &Proposal) -> ApplyResult {
    let now = proposal.now_millis;
    let outcome = match &proposal.command {
        Command::Reroute {
            commands,
            retry_failed,
        } => shoal_allocation::execute(state, commands, *retry_failed, now).map(|_| ()),
        _ => Ok(()),
    }
    .and_then(|()| state.apply(proposal));
    let error = outcome.err();
    if error.is_none() {
        shoal_allocation::reroute(state, now);
    }
    ApplyResult {
        version: state.version,
        error,
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    type SnapshotData = Cursor<Vec<u8>>;

    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let _io = self.snapshot_io.clone().lock_owned().await;
        let (path, file) = {
            let inner = self.inner.lock().await;
            let meta = SnapshotMeta {
                last_log_id: inner.last_applied.clone(),
                last_membership: inner.membership.clone(),
            };
            let file = SnapshotFile {
                meta,
                state: inner.state.clone(),
            };
            (inner.snapshot_path.clone(), file)
        };
        self.save_snapshot(&path, &file).await?;
        let meta = file.meta.clone();
        let data = serde_json::to_vec(&file.state).map_err(io::Error::other)?;
        self.inner.lock().await.snapshot = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Cursor::new(data),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = Cursor<Vec<u8>>;
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let inner = self.inner.lock().await;
        Ok((inner.last_applied.clone(), inner.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        let mut inner = self.inner.lock().await;
        while let Some((entry, responder)) = entries.try_next().await? {
            inner.last_applied = Some(entry.log_id.clone());
            let result = match &entry.payload {
                EntryPayload::Blank => ApplyResult {
                    version: inner.state.version,
                    error: None,
                },
                EntryPayload::Normal(proposal) => {
                    self.received.diffs.fetch_add(1, Ordering::Relaxed);
                    let result = apply_proposal(&mut inner.state, proposal);
                    if let Some(error) = &result.error {
                        tracing::debug!(command = proposal.command.name(), %error, "command refused");
                    }
                    result
                }
                EntryPayload::Membership(membership) => {
                    inner.membership =
                        StoredMembership::new(Some(entry.log_id.clone()), membership.clone());
                    ApplyResult {
                        version: inner.state.version,
                        error: None,
                    }
                }
            };
            if let Some(responder) = responder {
                responder.send(result);
            }
        }
        // One publication per batch: proposers wait for a version, not for each entry.
        self.published.send_replace(Arc::new(inner.state.clone()));
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        let data = snapshot.into_inner();
        let state: ClusterState = serde_json::from_slice(&data).map_err(io::Error::other)?;
        let _io = self.snapshot_io.clone().lock_owned().await;
        let mut inner = self.inner.lock().await;
        let file = SnapshotFile {
            meta: meta.clone(),
            state: state.clone(),
        };
        self.save_snapshot(&inner.snapshot_path, &file).await?;
        inner.last_applied = meta.last_log_id.clone();
        inner.membership = meta.last_membership.clone();
        inner.state = state;
        inner.snapshot = Some((meta.clone(), data));
        self.received.full_states.fetch_add(1, Ordering::Relaxed);
        self.published.send_replace(Arc::new(inner.state.clone()));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        let inner = self.inner.lock().await;
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Cursor::new(data.clone()),
        }))
    }
}
