//! Deleting snapshots (`DELETE _snapshot/{repo}/{names}`): the next generation stops naming
//! them, then their own files go, then every blob no remaining snapshot names. Cleaning up a
//! repository (`POST _snapshot/{repo}/_cleanup`) removes what an interrupted snapshot or delete
//! left behind: blobs and snapshot files no listed snapshot names.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{json, Value};
use shoal_state::{Command, SnapshotInProgress, SnapshotOperation};

use super::layout::{self, RepositoryData, SnapshotDetails};
use super::read::part_selects;
use super::{snapshot_missing, SnapshotService};
use crate::error::ApiResult;
use shoal_cluster::now_millis;

impl SnapshotService {
    /// `POST _snapshot/{repo}/_cleanup`; answers what went, as OpenSearch does.
    pub fn cleanup_repository(&self, repository: &str) -> ApiResult<Value> {
        let opened = self.writable_repository(repository, "cleanup")?;
        let entry = self.repository_operation(repository, "_cleanup", SnapshotOperation::Delete);
        self.propose(Command::SnapshotBegin(entry.clone()))?;
        let result = self.cleanup_under_lock(&opened);
        self.end_operation(&entry);
        let (blobs, bytes) = result?;
        tracing::info!(repository, blobs, bytes, "repository cleaned up");
        Ok(json!({ "results": { "deleted_bytes": bytes, "deleted_blobs": blobs } }))
    }

    /// Returns how many objects and bytes went.
    fn cleanup_under_lock(
        &self,
        repository: &shoal_storage::Repository,
    ) -> ApiResult<(usize, u64)> {
        let data = self.repository_data(repository)?;
        let kept = self.listed_details(repository, &data)?;
        let named: BTreeSet<String> = data
            .snapshots
            .iter()
            .map(|s| layout::snapshot_key(&s.uuid))
            .collect();
        let stored = self.block_on(repository.list(""))?;
        let blobs = stored
            .iter()
            .filter(|o| o.key.starts_with(layout::BLOBS_FOLDER));
        let garbage: BTreeSet<String> =
            layout::unreferenced_blobs(blobs.map(|o| o.key.as_str()), kept.iter().map(|d| &**d))
                .into_iter()
                .collect();
        let stray = |key: &str| {
            garbage.contains(key) || (layout::is_snapshot_key(key) && !named.contains(key))
        };
        let (mut count, mut bytes) = (0, 0);
        for object in stored.iter().filter(|o| stray(&o.key)) {
            self.block_on(repository.delete(&object.key))?;
            count += 1;
            bytes += object.size;
        }
        Ok((count, bytes))
    }

    pub fn delete_snapshots(&self, repository: &str, names: &str) -> ApiResult<Value> {
        let opened = self.writable_repository(repository, "delete snapshot from")?;
        let aborted = self.abort_running(repository, names)?;
        let data = self.repository_data(&opened)?;
        let mut doomed = Vec::new();
        for part in names.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let matched: Vec<String> = data
                .snapshots
                .iter()
                .filter(|s| part_selects(part, &s.name))
                .map(|s| s.uuid.clone())
                .collect();
            let was_running = aborted.iter().any(|name| name == part);
            if matched.is_empty() && !part.contains('*') && part != "_all" && !was_running {
                return Err(snapshot_missing(repository, part));
            }
            doomed.extend(matched);
        }
        doomed.sort();
        doomed.dedup();
        let entry = self.repository_operation(repository, names, SnapshotOperation::Delete);
        self.propose(Command::SnapshotBegin(entry.clone()))?;
        let result = self.delete_under_lock(&opened, &doomed);
        self.end_operation(&entry);
        let (removed, blobs) = result?;
        tracing::info!(repository, snapshots = removed, blobs, "snapshots deleted");
        Ok(json!({ "acknowledged": true }))
    }

    /// The details of every snapshot `data` lists (what a delete or cleanup must keep).
    fn listed_details(
        &self,
        repository: &shoal_storage::Repository,
        data: &RepositoryData,
    ) -> ApiResult<Vec<Arc<SnapshotDetails>>> {
        data.snapshots
            .iter()
            .map(|s| self.snapshot_details(repository, &s.uuid))
            .collect()
    }

    /// The cluster state's record of an operation on `repository` that needs no shard (a
    /// delete, a cleanup, a clone): it keeps every other snapshot operation off the
    /// repository meanwhile.
    pub(super) fn repository_operation(
        &self,
        repository: &str,
        what: &str,
        operation: SnapshotOperation,
    ) -> SnapshotInProgress {
        SnapshotInProgress {
            repository: repository.to_string(),
            snapshot: what.to_string(),
            uuid: shoal_cluster::new_id(),
            operation,
            coordinator: self.core.node_id.clone(),
            start_millis: now_millis(),
            indices: Vec::new(),
            shards: 0,
            aborted: false,
        }
    }

    /// Returns how many snapshots and blobs went.
    fn delete_under_lock(
        &self,
        repository: &shoal_storage::Repository,
        doomed: &[String],
    ) -> ApiResult<(usize, usize)> {
        let mut data = self.repository_data(repository)?;
        let before = data.snapshots.len();
        data.snapshots.retain(|s| !doomed.contains(&s.uuid));
        let removed = before - data.snapshots.len();
        let kept = self.listed_details(repository, &data)?;
        self.write_repository_data(repository, data)?;
        for uuid in doomed {
            self.forget_details(repository, uuid);
            self.block_on(repository.delete(&layout::snapshot_key(uuid)))?;
        }
        let stored = self.block_on(repository.list(layout::BLOBS_FOLDER))?;
        let garbage = layout::unreferenced_blobs(
            stored.iter().map(|o| o.key.as_str()),
            kept.iter().map(|d| &**d),
        );
        for key in &garbage {
            self.block_on(repository.delete(key))?;
        }
        Ok((removed, garbage.len()))
    }
}
