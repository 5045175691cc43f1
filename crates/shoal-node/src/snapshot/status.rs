//! `GET _snapshot/{repo}/{snap}/_status`: per snapshot, index and shard, how many files and
//! bytes the snapshot holds (`total`) and how many it uploaded itself (`incremental`; the
//! others were already in the repository).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use shoal_state::SnapshotInProgress;

use super::create::{Progress, ShardStage};
use super::layout::{ShardSnapshot, SnapshotDetails};
use super::{snapshot_missing, SnapshotService};
use crate::error::ApiResult;

/// Asks the coordinator of a running snapshot for its `_status` (only it knows the shards'
/// progress): any node answers for any running snapshot.
pub struct RunningStatusAction;
impl shoal_transport::Action for RunningStatusAction {
    // Not on the `snapshot` pool, whose threads a running snapshot may hold.
    const NAME: &'static str = "cluster:admin/snapshot/status[nodes]";
    type Request = RunningStatusRequest;
    type Response = Value;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunningStatusRequest {
    pub repository: String,
    pub entry: SnapshotInProgress,
}

const COORDINATOR_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &Arc<SnapshotService>,
) {
    actions.register_on::<RunningStatusAction, _>(Arc::downgrade(service), |service, request| {
        Ok(service.local_running_status(&request.repository, &request.entry))
    });
}

/// File and byte counts of some shards.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    incremental_files: usize,
    incremental_bytes: u64,
    total_files: usize,
    total_bytes: u64,
    start_millis: i64,
    time_millis: u64,
}

impl Counts {
    /// A shard's counts include its commit point (`meta.json`, Lucene's `segments_N`), kept
    /// inside the snapshot's own file. It is new, as OpenSearch counts it, when the commit
    /// is: when the snapshot uploaded a file, or the shard has none (an empty shard's commit).
    fn of(shard: &ShardSnapshot) -> Counts {
        let commit_point = shard.meta_json.len() as u64;
        let new_commit = shard.incremental_files > 0 || shard.files.is_empty();
        Counts {
            incremental_files: shard.incremental_files + usize::from(new_commit),
            incremental_bytes: shard.incremental_bytes + if new_commit { commit_point } else { 0 },
            total_files: shard.files.len() + 1,
            total_bytes: shard.total_bytes() + commit_point,
            start_millis: shard.start_millis,
            time_millis: shard.time_millis,
        }
    }

    fn add(&mut self, other: Counts) {
        self.incremental_files += other.incremental_files;
        self.incremental_bytes += other.incremental_bytes;
        self.total_files += other.total_files;
        self.total_bytes += other.total_bytes;
        if self.start_millis == 0
            || (other.start_millis != 0 && other.start_millis < self.start_millis)
        {
            self.start_millis = other.start_millis;
        }
        self.time_millis = self.time_millis.max(other.time_millis);
    }

    fn to_json(self) -> Value {
        json!({
            "incremental": { "file_count": self.incremental_files, "size_in_bytes": self.incremental_bytes },
            "total": { "file_count": self.total_files, "size_in_bytes": self.total_bytes },
            "start_time_in_millis": self.start_millis,
            "time_in_millis": self.time_millis,
        })
    }
}

/// Shards by stage.
#[derive(Debug, Default, Clone, Copy)]
struct Stages {
    started: usize,
    done: usize,
    failed: usize,
}

impl Stages {
    fn to_json(self) -> Value {
        json!({
            "initializing": 0, "started": self.started, "finalizing": 0,
            "done": self.done, "failed": self.failed,
            "total": self.started + self.done + self.failed,
        })
    }
}

/// One shard as `_status` sees it.
struct ShardView {
    stage: &'static str,
    counts: Counts,
    reason: Option<String>,
}

impl SnapshotService {
    /// `_status` of named snapshots of a repository (empty `names`: the running ones).
    pub fn snapshot_status(
        &self,
        repository: &str,
        names: &[String],
        ignore_unavailable: bool,
    ) -> ApiResult<Value> {
        let opened = self.repository(repository)?;
        let mut out = Vec::new();
        let running = self.running_in(repository);
        let data = self.repository_data(&opened)?;
        let names: Vec<String> = match names.is_empty() {
            true => running.iter().map(|s| s.snapshot.clone()).collect(),
            false => names.to_vec(),
        };
        for name in &names {
            if let Some(entry) = running.iter().find(|s| &s.snapshot == name) {
                out.push(self.running_status(repository, entry));
                continue;
            }
            match data.find(name) {
                Some(summary) => {
                    let details = self.snapshot_details(&opened, &summary.uuid)?;
                    out.push(finished_status(repository, &details));
                }
                None if ignore_unavailable => {}
                None => return Err(snapshot_missing(repository, name)),
            }
        }
        Ok(json!({ "snapshots": out }))
    }

    /// A running snapshot, with its shards' progress as its coordinator knows it. A
    /// coordinator that cannot be asked (it just left) leaves what the cluster state says.
    fn running_status(&self, repository: &str, entry: &SnapshotInProgress) -> Value {
        if entry.coordinator == self.core.node_id {
            return self.local_running_status(repository, entry);
        }
        let request = RunningStatusRequest {
            repository: repository.to_string(),
            entry: entry.clone(),
        };
        let asked = self.coordinator_address(entry).and_then(|address| {
            self.core
                .call::<RunningStatusAction>(&address, &request, COORDINATOR_TIMEOUT)
                .ok()
        });
        asked.unwrap_or_else(|| self.local_running_status(repository, entry))
    }

    fn coordinator_address(&self, entry: &SnapshotInProgress) -> Option<String> {
        let state = self.core.cluster_state();
        let node = state.nodes.get(&entry.coordinator)?;
        Some(node.transport_address.clone())
    }

    /// A running snapshot as this node knows it: its shards' progress if it coordinates it.
    fn local_running_status(&self, repository: &str, entry: &SnapshotInProgress) -> Value {
        let progress = self.running.lock().get(&entry.uuid).cloned();
        let shards = progress.as_deref().map(shard_views).unwrap_or_default();
        render(
            repository,
            &entry.snapshot,
            &entry.uuid,
            "STARTED",
            progress.as_ref().is_some_and(|p| p.include_global_state),
            &shards,
        )
    }
}

fn shard_views(progress: &Progress) -> BTreeMap<(String, usize), ShardView> {
    progress
        .shards
        .lock()
        .iter()
        .map(|(key, stage)| {
            let view = match stage {
                ShardStage::Started => ShardView {
                    stage: "STARTED",
                    counts: Counts::default(),
                    reason: None,
                },
                ShardStage::Done(done) => ShardView {
                    stage: "DONE",
                    counts: Counts::of(done),
                    reason: None,
                },
                ShardStage::Failed(reason) => ShardView {
                    stage: "FAILURE",
                    counts: Counts::default(),
                    reason: Some(reason.clone()),
                },
            };
            (key.clone(), view)
        })
        .collect()
}

fn finished_status(repository: &str, details: &SnapshotDetails) -> Value {
    let mut shards = BTreeMap::new();
    for (index, snapshot) in &details.indices {
        for (number, shard) in snapshot.shards.iter().enumerate() {
            let view = match shard {
                Some(done) => ShardView {
                    stage: "DONE",
                    counts: Counts::of(done),
                    reason: None,
                },
                None => ShardView {
                    stage: "FAILURE",
                    counts: Counts::default(),
                    reason: details
                        .failures
                        .iter()
                        .find(|f| &f.index == index && f.shard == number)
                        .map(|f| f.reason.clone()),
                },
            };
            shards.insert((index.clone(), number), view);
        }
    }
    render(
        repository,
        &details.name,
        &details.uuid,
        details.state.as_str(),
        details.include_global_state,
        &shards,
    )
}

fn render(
    repository: &str,
    name: &str,
    uuid: &str,
    state: &str,
    include_global_state: bool,
    shards: &BTreeMap<(String, usize), ShardView>,
) -> Value {
    let mut total = (Stages::default(), Counts::default());
    let mut indices: BTreeMap<&str, (Stages, Counts, Map<String, Value>)> = BTreeMap::new();
    for ((index, number), view) in shards {
        let entry = indices.entry(index.as_str()).or_default();
        for stages in [&mut total.0, &mut entry.0] {
            match view.stage {
                "DONE" => stages.done += 1,
                "FAILURE" => stages.failed += 1,
                _ => stages.started += 1,
            }
        }
        total.1.add(view.counts);
        entry.1.add(view.counts);
        let mut shard = json!({ "stage": view.stage, "stats": view.counts.to_json() });
        if let Some(reason) = &view.reason {
            shard["reason"] = json!(reason);
        }
        entry.2.insert(number.to_string(), shard);
    }
    let indices: Map<String, Value> = indices
        .into_iter()
        .map(|(name, (stages, counts, shards))| {
            let body = json!({
                "shards_stats": stages.to_json(),
                "stats": counts.to_json(),
                "shards": shards,
            });
            (name.to_string(), body)
        })
        .collect();
    json!({
        "snapshot": name,
        "repository": repository,
        "uuid": uuid,
        "state": state,
        "include_global_state": include_global_state,
        "shards_stats": total.0.to_json(),
        "stats": total.1.to_json(),
        "indices": indices,
    })
}
