//! `GET _remotestore/stats/{index}[/{shard}]`: per copy, what its primary uploaded (segments
//! and translog: counts, bytes, time, lag, consecutive failures) or what a replica downloaded,
//! in OpenSearch's shape. Every node answers for its own copies.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::RemoteStoreService;
use crate::error::{ApiError, ApiResult};
use crate::shard::remote::UploadStats;
use crate::shard::IndexShard;

/// Asks a node for the remote-store stats of its copies of an index.
pub struct RemoteStoreStatsAction;
impl shoal_transport::Action for RemoteStoreStatsAction {
    const NAME: &'static str = "indices:monitor/_remotestore/stats[n]";
    type Request = StatsRequest;
    type Response = Vec<CopyStats>;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatsRequest {
    pub index: String,
    pub shard: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyStats {
    pub shard: usize,
    pub body: Value,
}

pub(crate) fn register_actions(
    actions: &mut crate::rpc::NodeActions,
    service: &std::sync::Arc<RemoteStoreService>,
) {
    actions.register_on::<RemoteStoreStatsAction, _>(
        std::sync::Arc::downgrade(service),
        RemoteStoreService::local_copy_stats,
    );
}

impl RemoteStoreService {
    /// The stats of every copy of `index` (or of one shard), from every node; `local` keeps
    /// to this node's copies.
    pub fn stats(&self, index: &str, shard: Option<usize>, local: bool) -> ApiResult<Value> {
        let service = self.core.require_index(index)?;
        if !service.is_remote_store() {
            return Err(ApiError::bad_request(format!(
                "Remote store is not enabled for index: [{index}]"
            )));
        }
        let request = StatsRequest {
            index: index.to_string(),
            shard,
        };
        let addresses = match local {
            true => Vec::new(),
            false => self.core.other_node_addresses(),
        };
        let asked = self.core.ask::<RemoteStoreStatsAction>(
            addresses,
            &request,
            Duration::from_secs(10),
            "remote store stats",
        );
        let mut copies = self.local_copy_stats(request)?;
        copies.extend(self.core.answers(asked).into_iter().flatten());
        copies.sort_by_key(|c| c.shard);
        let mut shards = serde_json::Map::new();
        for copy in &copies {
            shards
                .entry(copy.shard.to_string())
                .or_insert_with(|| json!([]))
                .as_array_mut()
                .expect("an array")
                .push(copy.body.clone());
        }
        Ok(json!({
            "_shards": { "total": copies.len(), "successful": copies.len(), "failed": 0 },
            "indices": { index: { "shards": shards } }
        }))
    }

    fn local_copy_stats(&self, request: StatsRequest) -> ApiResult<Vec<CopyStats>> {
        let Some(service) = self.core.index(&request.index) else {
            return Ok(Vec::new());
        };
        let state = self.core.cluster_state();
        Ok(service
            .local_copies()
            .into_iter()
            .filter(|(shard, _)| request.shard.is_none_or(|s| s == *shard))
            .map(|(shard, copy)| {
                let primary = copy.primary_targets().is_some();
                let routing_state = state
                    .copies(&request.index, shard as u32)
                    .iter()
                    .find(|c| c.node.as_deref() == Some(self.core.node_id.as_str()))
                    .map(|c| format!("{:?}", c.state).to_uppercase())
                    .unwrap_or_else(|| "STARTED".into());
                let body = json!({
                    "routing": { "state": routing_state, "primary": primary, "node": self.core.node_id },
                    "segment": segment_stats(&copy, primary),
                    "translog": translog_stats(&copy, primary),
                });
                CopyStats { shard, body }
            })
            .collect())
    }
}

fn segment_stats(copy: &IndexShard, primary: bool) -> Value {
    let s = &copy.remote.stats;
    let get = UploadStats::get;
    if !primary {
        return json!({
            "download": { "total_downloads": { "succeeded": get(&s.segment_downloads) } },
            "upload": {}
        });
    }
    let now = super::layout::now_millis();
    let last_upload = get(&s.last_segment_upload_at);
    // Time since the last upload while a newer local checkpoint waits for one.
    let lag_millis = match (s.bytes_lag.load(Ordering::Relaxed), last_upload) {
        (0, _) | (_, 0) => 0,
        (_, at) => now.saturating_sub(at),
    };
    json!({
        "download": {},
        "upload": {
            "remote_refresh_timestamp_in_millis": last_upload,
            "refresh_time_lag_in_millis": lag_millis,
            "bytes_lag": s.bytes_lag.load(Ordering::Relaxed),
            "consecutive_failure_count": get(&s.consecutive_segment_failures),
            "backpressure_rejection_count": get(&s.rejections),
            "total_uploads": {
                "started": get(&s.segment_uploads_started),
                "succeeded": get(&s.segment_uploads_succeeded),
                "failed": get(&s.segment_uploads_failed),
            },
            "total_uploads_in_bytes": { "succeeded": get(&s.segment_bytes_uploaded) },
            "total_upload_time_in_millis": get(&s.segment_upload_millis),
        }
    })
}

fn translog_stats(copy: &IndexShard, primary: bool) -> Value {
    if !primary {
        return json!({ "upload": {}, "download": {} });
    }
    let s = &copy.remote.stats;
    let get = UploadStats::get;
    json!({
        "upload": {
            "total_uploads": {
                "started": get(&s.translog_uploads_started),
                "succeeded": get(&s.translog_uploads_succeeded),
                "failed": get(&s.translog_uploads_failed),
            },
            "total_uploads_in_bytes": { "succeeded": get(&s.translog_bytes_uploaded) },
            "total_upload_time_in_millis": get(&s.translog_upload_millis),
        },
        "download": {}
    })
}
