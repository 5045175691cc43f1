//! The document write path on this node: resolve the index (auto-creating it), route to a
//! shard, parse against the mapping (updating it durably for new fields), apply to the
//! engine in batches, wait for translog durability, refresh if asked.
//! Tomorrow the same coordinator forwards each shard batch to the node holding the primary.

use crate::replication::{ReplicaOp, ReplicaOpHeader};
use shoal_engine::OpKind;
use std::sync::Arc;

use serde_json::{json, Value};
use shoal_engine::{DocRequest, OpResult, OpResultKind, WriteOp, UNASSIGNED_SEQ_NO};
use shoal_mapping::{DocumentParser, Mapping};

use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;

/// `refresh` request parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Refresh {
    #[default]
    False,
    True,
    WaitFor,
}

impl Refresh {
    pub fn parse(value: Option<&str>) -> ApiResult<Refresh> {
        match value {
            None | Some("false") => Ok(Refresh::False),
            Some("") | Some("true") => Ok(Refresh::True),
            Some("wait_for") => Ok(Refresh::WaitFor),
            Some(other) => Err(ApiError::bad_request(format!(
                "Unknown value for refresh: [{other}]."
            ))),
        }
    }
}

/// One document write, before routing.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum DocWrite {
    Index {
        index: String,
        id: Option<String>,
        routing: Option<String>,
        #[serde(with = "crate::wire::source_json")]
        source: Vec<u8>,
        request: DocRequest,
    },
    Delete {
        index: String,
        id: String,
        routing: Option<String>,
        request: DocRequest,
    },
}

impl DocWrite {
    /// The write as one attempt sends it; every attempt after the first is marked a retry.
    pub(crate) fn attempt(&self, retry: bool) -> DocWrite {
        let mut write = self.clone();
        if retry {
            match &mut write {
                DocWrite::Index { request, .. } | DocWrite::Delete { request, .. } => {
                    request.is_retry = true
                }
            }
        }
        write
    }

    /// The value that picks the shard: `routing`, or the id.
    pub(crate) fn routing_or_id(&self) -> &str {
        match self {
            DocWrite::Index { routing, id, .. } => {
                routing.as_deref().or(id.as_deref()).unwrap_or_default()
            }
            DocWrite::Delete { routing, id, .. } => routing.as_deref().unwrap_or(id),
        }
    }

    pub(crate) fn index_name(&self) -> &str {
        match self {
            DocWrite::Index { index, .. } | DocWrite::Delete { index, .. } => index,
        }
    }
}

/// The outcome of one write, rendered as OpenSearch's write response.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct WriteOutcome {
    pub index: String,
    pub id: String,
    pub shard: usize,
    pub result: OpResult,
    pub shards_total: usize,
    pub shards_successful: usize,
    pub shards_failed: usize,
    pub forced_refresh: bool,
}

impl WriteOutcome {
    pub fn status(&self) -> u16 {
        match self.result.kind {
            OpResultKind::Created => 201,
            OpResultKind::NotFound => 404,
            _ => 200,
        }
    }

    pub fn to_json(&self) -> Value {
        let mut body = json!({
            "_index": self.index,
            "_id": self.id,
            "_version": self.result.version,
            "result": self.result.kind.as_str(),
        });
        let map = body.as_object_mut().expect("object");
        if self.forced_refresh {
            map.insert("forced_refresh".into(), json!(true));
        }
        map.insert(
            "_shards".into(),
            json!({"total": self.shards_total, "successful": self.shards_successful, "failed": self.shards_failed}),
        );
        map.insert("_seq_no".into(), json!(self.result.seq_no));
        map.insert("_primary_term".into(), json!(self.result.primary_term));
        body
    }
}

/// Options of a batch of writes.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct WriteOptions {
    pub refresh: Refresh,
    pub require_alias: bool,
    /// `wait_for_active_shards`; `None` uses the index's `index.write.wait_for_active_shards`.
    #[serde(default)]
    pub wait_for_active_shards: Option<crate::replication::active_shards::ActiveShards>,
    /// The request `timeout`: how long a write may wait for its primary and for active copies.
    #[serde(default)]
    pub timeout: Option<std::time::Duration>,
    /// What was left of `timeout` when a coordinator forwarded the request here.
    #[serde(default)]
    pub budget: Option<std::time::Duration>,
    /// When this node stops trying (set by the coordinator; a receiver counts from `budget`).
    #[serde(skip)]
    pub deadline: Option<std::time::Instant>,
}

impl WriteOptions {
    /// How long the request may still take on this node.
    pub(crate) fn remaining_time(&self) -> std::time::Duration {
        match self.deadline {
            Some(deadline) => deadline.saturating_duration_since(std::time::Instant::now()),
            None => self
                .budget
                .or(self.timeout)
                .unwrap_or(crate::replication::active_shards::DEFAULT_WRITE_TIMEOUT),
        }
    }

    pub(crate) fn with_deadline(&self, deadline: std::time::Instant) -> WriteOptions {
        WriteOptions {
            deadline: Some(deadline),
            ..self.clone()
        }
    }

    /// The options a forwarded batch carries: the receiver gets what is left of the time.
    pub(crate) fn forwarded(&self) -> WriteOptions {
        WriteOptions {
            budget: Some(self.remaining_time()),
            deadline: None,
            ..self.clone()
        }
    }
}

/// Generates ids like OpenSearch's time-based UUIDs: 20 URL-safe base64 characters.
pub fn auto_id() -> String {
    use base64::Engine as _;
    let mut bytes = [0u8; 15];
    let now = shoal_cluster::now_millis() as u64;
    bytes[..6].copy_from_slice(&now.to_be_bytes()[2..]);
    let random: [u8; 9] = rand::random();
    bytes[6..].copy_from_slice(&random);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A write routed to a local primary, before parsing: its slot, its index, the write.
pub(crate) type LocalItem = (usize, Arc<IndexService>, DocWrite);

/// A write parsed against its index's mapping, ready for the engine.
pub(crate) struct Prepared {
    pub(crate) slot: usize,
    pub(crate) id: String,
    pub(crate) op: WriteOp,
}

/// The parameters of a get that choose what and where to read.
#[derive(Debug, Clone, Default)]
pub struct GetOptions {
    pub routing: Option<String>,
    pub realtime: bool,
    /// Refresh the copy before reading (`refresh=true`).
    pub refresh: bool,
    pub preference: crate::read::copies::Preference,
}

impl GetOptions {
    pub fn realtime(routing: Option<&str>) -> GetOptions {
        GetOptions {
            routing: routing.map(str::to_string),
            realtime: true,
            ..GetOptions::default()
        }
    }

    /// From a get's query parameters.
    pub fn from_params(
        params: &std::collections::HashMap<String, String>,
    ) -> ApiResult<GetOptions> {
        let flag = |key: &str, default: bool| crate::error::bool_param(params, key, default);
        let (preference, _) =
            crate::read::copies::parse_preference(params.get("preference").map(String::as_str))?;
        Ok(GetOptions {
            routing: params.get("routing").cloned(),
            realtime: flag("realtime", true)?,
            refresh: flag("refresh", false)?,
            preference,
        })
    }
}

/// What a replica needs of a primary operation besides its result: kind, routing, source.
pub(crate) fn replicated_part(op: &WriteOp) -> (OpKind, Option<String>, Vec<u8>) {
    match op {
        WriteOp::Index {
            routing, source, ..
        } => (OpKind::Index, routing.clone(), source.clone()),
        WriteOp::Delete { routing, .. } => (OpKind::Delete, routing.clone(), Vec::new()),
        WriteOp::NoOp { .. } => (OpKind::NoOp, None, Vec::new()),
    }
}

/// The operations of a batch that took a seq_no on the primary, as replicas receive them.
pub(crate) fn replica_ops(
    ids: &[String],
    sent: Vec<(OpKind, Option<String>, Vec<u8>)>,
    outcomes: &[Result<shoal_engine::OpResult, shoal_engine::EngineError>],
) -> Vec<ReplicaOp> {
    ids.iter()
        .zip(sent)
        .zip(outcomes)
        .filter_map(|((id, (kind, routing, source)), outcome)| {
            let result = outcome.as_ref().ok().filter(|r| r.seq_no >= 0)?;
            Some(ReplicaOp {
                header: ReplicaOpHeader {
                    kind,
                    id: id.clone(),
                    routing,
                    seq_no: result.seq_no,
                    primary_term: result.primary_term,
                    version: result.version,
                },
                source,
            })
        })
        .collect()
}

/// Parses one write routed to `shard` (mapping updates included).
pub(crate) fn prepare(service: &IndexService, item: DocWrite, slot: usize) -> ApiResult<Prepared> {
    match item {
        DocWrite::Index {
            id,
            routing,
            source,
            request,
            ..
        } => {
            let id = id.expect("assign_auto_id gives every index request an id before routing");
            validate_id(&id)?;
            let doc = parse_with_mapping_updates(service, &id, &source)?;
            let op = WriteOp::Index {
                id: id.clone(),
                routing,
                source,
                doc,
                request,
                seq_no: UNASSIGNED_SEQ_NO,
                primary_term: 0,
                version: 0,
            };
            Ok(Prepared { slot, id, op })
        }
        DocWrite::Delete {
            id,
            routing,
            request,
            ..
        } => {
            validate_id(&id)?;
            let op = WriteOp::Delete {
                id: id.clone(),
                routing,
                request,
                seq_no: UNASSIGNED_SEQ_NO,
                primary_term: 0,
                version: 0,
            };
            Ok(Prepared { slot, id, op })
        }
    }
}

fn validate_id(id: &str) -> ApiResult<()> {
    if id.is_empty() {
        return Err(ApiError::action_request_validation(&[
            "if _id is specified it must not be empty".to_string(),
        ]));
    }
    if id.len() > 512 {
        return Err(ApiError::action_request_validation(&[format!(
            "id [{id}] is too long, must be no longer than 512 bytes but was: {}",
            id.len()
        )]));
    }
    Ok(())
}

/// Parses a document; if it introduces fields, merges them into the mapping durably
/// (before the write can be acknowledged) and re-parses against the merged mapping.
fn parse_with_mapping_updates(
    service: &IndexService,
    id: &str,
    source: &[u8],
) -> ApiResult<tantivy::TantivyDocument> {
    let schema = service
        .shards()
        .first()
        .map(|e| e.schema().clone())
        .unwrap_or_else(|| shoal_mapping::ShardSchema::build(shoal_codec::add_source_field));
    let mut mapping: Arc<Mapping> = service.mapping();
    for _ in 0..3 {
        let parsed = DocumentParser::new(&mapping, &schema).parse(id, source)?;
        match parsed.dynamic_update {
            None => return Ok(parsed.doc),
            Some(update) => mapping = service.merge_mapping(&update)?,
        }
    }
    Err(ApiError::internal(
        "mapping kept changing while parsing the document; retry the request",
    ))
}
