//! Reading what a repository holds: `GET _snapshot/{repo}/{snapshots}` and `_cat/snapshots`,
//! in OpenSearch's shapes. Running snapshots come from the cluster state.

use serde_json::{json, Value};
use shoal_state::{SnapshotInProgress, SnapshotOperation};

use super::layout::{SnapshotDetails, SnapshotState, SnapshotSummary};
use super::{snapshot_missing, SnapshotService};
use crate::error::ApiResult;

/// The version Shoal's snapshots say they were written by (the OpenSearch it answers as).
const VERSION: &str = "2.18.0";
const VERSION_ID: u64 = 136387927;

/// One row of `_cat/snapshots`.
#[derive(Debug, Clone)]
pub struct SnapshotRow {
    pub id: String,
    pub status: String,
    pub start_millis: i64,
    pub end_millis: i64,
    pub indices: usize,
    pub successful_shards: usize,
    pub failed_shards: usize,
    pub total_shards: usize,
    /// Why shards failed (`[index][shard] reason`, joined); empty when none did.
    pub reason: String,
}

impl SnapshotService {
    /// `GET _snapshot/{repo}/{names}`: `names` is a comma list with wildcards, `_all`, `*`
    /// or `_current` (the running ones).
    pub fn get_snapshots(
        &self,
        repository: &str,
        names: &str,
        ignore_unavailable: bool,
        verbose: bool,
    ) -> ApiResult<Value> {
        let opened = self.repository(repository)?;
        let data = self.repository_data(&opened)?;
        let running = self.running_in(repository);
        let mut out = Vec::new();
        for part in names.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let everything = matches!(part, "_all" | "*");
            let current = part == "_current";
            let matched: Vec<&SnapshotSummary> = data
                .snapshots
                .iter()
                .filter(|s| everything || (!current && wildcard_match(part, &s.name)))
                .collect();
            let running_matched: Vec<&SnapshotInProgress> = running
                .iter()
                .filter(|s| everything || current || wildcard_match(part, &s.snapshot))
                .collect();
            let concrete = !part.contains('*') && !everything && !current;
            if concrete && matched.is_empty() && running_matched.is_empty() && !ignore_unavailable {
                return Err(snapshot_missing(repository, part));
            }
            for summary in matched {
                let info = match verbose {
                    true => snapshot_info(&*self.snapshot_details(&opened, &summary.uuid)?),
                    false => brief_info(summary),
                };
                out.push((summary.start_millis, summary.name.clone(), info));
            }
            for entry in running_matched {
                out.push((
                    entry.start_millis,
                    entry.snapshot.clone(),
                    running_info(entry),
                ));
            }
        }
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.dedup_by(|a, b| a.1 == b.1);
        Ok(json!({ "snapshots": out.into_iter().map(|(_, _, v)| v).collect::<Vec<_>>() }))
    }

    /// `_cat/snapshots/{repo}` rows, oldest first; running snapshots last.
    pub fn snapshot_rows(&self, repository: &str) -> ApiResult<Vec<SnapshotRow>> {
        let opened = self.repository(repository)?;
        let data = self.repository_data(&opened)?;
        let mut rows: Vec<SnapshotRow> = data
            .snapshots
            .iter()
            .map(|s| SnapshotRow {
                id: s.name.clone(),
                status: s.state.as_str().to_string(),
                start_millis: s.start_millis,
                end_millis: s.end_millis,
                indices: s.indices.len(),
                successful_shards: s.shards_total - s.shards_failed,
                failed_shards: s.shards_failed,
                total_shards: s.shards_total,
                reason: match s.shards_failed {
                    0 => String::new(),
                    _ => self.failure_reason(&opened, &s.uuid),
                },
            })
            .collect();
        rows.sort_by_key(|r| r.start_millis);
        rows.extend(self.running_in(repository).iter().map(|s| SnapshotRow {
            id: s.snapshot.clone(),
            status: SnapshotState::InProgress.as_str().to_string(),
            start_millis: s.start_millis,
            end_millis: 0,
            indices: s.indices.len(),
            successful_shards: 0,
            failed_shards: 0,
            total_shards: s.shards,
            reason: String::new(),
        }));
        Ok(rows)
    }

    /// The failed shards of a snapshot and why, as one line (`_cat/snapshots`' `reason`).
    fn failure_reason(&self, repository: &shoal_storage::Repository, uuid: &str) -> String {
        match self.snapshot_details(repository, uuid) {
            Ok(details) => details
                .failures
                .iter()
                .map(|f| format!("[{}][{}] {}", f.index, f.shard, f.reason))
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("the snapshot's file could not be read: {}", e.reason),
        }
    }

    /// The snapshots being created in a repository, as the cluster state records them.
    pub(crate) fn running_in(&self, repository: &str) -> Vec<SnapshotInProgress> {
        self.core
            .cluster_state()
            .snapshots
            .iter()
            .filter(|s| s.repository == repository && s.operation == SnapshotOperation::Create)
            .cloned()
            .collect()
    }
}

/// A finished snapshot as OpenSearch's `SnapshotInfo` renders it.
pub fn snapshot_info(details: &SnapshotDetails) -> Value {
    let total = details.shards_total();
    let failed = details.failures.len();
    let mut info = json!({
        "snapshot": details.name,
        "uuid": details.uuid,
        "version_id": VERSION_ID,
        "version": VERSION,
        "remote_store_index_shallow_copy": false,
        "indices": details.indices.keys().collect::<Vec<_>>(),
        "data_streams": [],
        "include_global_state": details.include_global_state,
        "state": details.state.as_str(),
        "start_time": crate::settings::format_date_millis(details.start_millis),
        "start_time_in_millis": details.start_millis,
        "end_time": crate::settings::format_date_millis(details.end_millis),
        "end_time_in_millis": details.end_millis,
        "duration_in_millis": details.end_millis - details.start_millis,
        "failures": details.failures.iter().map(|f| json!({
            "index": f.index,
            "index_uuid": f.index_uuid,
            "shard_id": f.shard,
            "reason": f.reason,
            "node_id": f.node_id,
            "status": f.status,
        })).collect::<Vec<_>>(),
        "shards": { "total": total, "failed": failed, "successful": total - failed },
    });
    if let Some(metadata) = &details.metadata {
        info["metadata"] = metadata.clone();
    }
    info
}

fn brief_info(summary: &SnapshotSummary) -> Value {
    json!({
        "snapshot": summary.name,
        "uuid": summary.uuid,
        "indices": summary.indices,
        "data_streams": [],
        "state": summary.state.as_str(),
    })
}

fn running_info(entry: &SnapshotInProgress) -> Value {
    json!({
        "snapshot": entry.snapshot,
        "uuid": entry.uuid,
        "version_id": VERSION_ID,
        "version": VERSION,
        "indices": entry.indices,
        "data_streams": [],
        "state": SnapshotState::InProgress.as_str(),
        "start_time": crate::settings::format_date_millis(entry.start_millis),
        "start_time_in_millis": entry.start_millis,
        "end_time_in_millis": 0,
        "duration_in_millis": 0,
        "failures": [],
        "shards": { "total": 0, "failed": 0, "successful": 0 },
    })
}

/// `*` matches any run of characters; everything else matches itself (OpenSearch's
/// `Regex.simpleMatch`).
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    shoal_query::glob_match(pattern, text)
}

/// Whether one part of a `DELETE _snapshot/{repo}/{names}` list (`_all`, a name, a
/// wildcard) selects snapshot `name`.
pub(crate) fn part_selects(part: &str, name: &str) -> bool {
    part == "_all" || wildcard_match(part, name)
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    #[test]
    fn wildcards_match_like_opensearch_simple_match() {
        assert!(wildcard_match("snap-*", "snap-1"));
        assert!(wildcard_match("*-1", "snap-1"));
        assert!(wildcard_match("s*p*1", "snap-1"));
        assert!(wildcard_match("*", ""));
        assert!(!wildcard_match("snap-*", "nap-1"));
        assert!(!wildcard_match("a*a", "a"));
        assert!(wildcard_match("exact", "exact"));
        assert!(!wildcard_match("exact", "exact2"));
    }
}
