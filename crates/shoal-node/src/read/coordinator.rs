//! The coordinating side of distributed searches: which copy of every shard a search reads
//! (see [`super::copies`]), the query phase sent to those copies (in parallel, this node's own
//! copies inline), and read failover: a copy that is gone, closed or unreachable is replaced by
//! the next copy of the same shard before any failure is reported. The fetch phase is in
//! [`super::fetch`].

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use shoal_query::search::{SearchRequest, ShardResult};

use super::actions::{QueryAction, QueryMode, QueryReply, QueryRequest};
use super::copies::{ordered_copies, CopyRef, Preference};
use super::fetch::PhaseError;
use super::ReadService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::rpc::Pending;

/// How long a shard-level read may take before the copy counts as failed.
pub(super) const SHARD_READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A shard a read touches, with the copies it may use in the order to try them.
#[derive(Clone)]
pub struct PlannedShard {
    pub service: Arc<IndexService>,
    pub shard: usize,
    pub copies: Vec<CopyRef>,
}

/// The copy that answered a shard's query phase, and the context it kept.
#[derive(Clone, Debug)]
pub struct Reader {
    pub copy: CopyRef,
    pub context: Option<u64>,
}

/// A shard that no copy could answer.
#[derive(Debug, Clone)]
pub struct ShardFailure {
    pub index: String,
    pub shard: usize,
    pub node: Option<String>,
    pub error: ApiError,
}

impl ShardFailure {
    /// OpenSearch's entry in `_shards.failures` / `failed_shards`.
    pub fn to_json(&self) -> Value {
        // A search phase error names its shard-level cause, as OpenSearch's shard failures do.
        let cause = match (&self.error.caused_by, self.error.error_type.as_str()) {
            (Some(cause), "search_phase_execution_exception") => cause.as_ref(),
            _ => &self.error,
        };
        let mut reason = cause.to_cause_json();
        if let Value::Object(map) = &mut reason {
            map.remove("root_cause");
        }
        json!({"shard": self.shard, "index": self.index, "node": self.node, "reason": reason})
    }

    /// Whether another request would fail alike everywhere (a bad query), as opposed to a
    /// copy that was not there to answer.
    pub fn is_request_error(&self) -> bool {
        !is_copy_error(&self.error)
    }
}

/// Errors that mean "this copy could not answer", worth trying on another copy.
pub(super) fn is_copy_error(error: &ApiError) -> bool {
    error.kind.is_copy_problem()
}

/// One query phase round: the same request on every planned shard.
pub struct QueryPhase<'a> {
    pub body: &'a Value,
    pub params: &'a HashMap<String, String>,
    pub parsed: Arc<SearchRequest>,
    pub mode: QueryMode,
    pub keep_alive: Duration,
    /// Scroll pages search the contexts of the first page again, on the same copies.
    pub readers: Option<&'a [Option<Reader>]>,
    pub from: Option<usize>,
    pub now: i64,
}

impl<'a> QueryPhase<'a> {
    /// The query phase of a request's first (or only) page, on whichever copies the plan
    /// picks. Search contexts are kept for the fetch phase only when `fetch`.
    pub fn first_page(
        body: &'a Value,
        params: &'a HashMap<String, String>,
        parsed: Arc<SearchRequest>,
        mode: QueryMode,
        fetch: bool,
    ) -> QueryPhase<'a> {
        QueryPhase {
            body,
            params,
            parsed,
            mode,
            keep_alive: if fetch {
                super::fetch::FETCH_KEEP_ALIVE
            } else {
                Duration::ZERO
            },
            readers: None,
            from: None,
            now: shoal_cluster::now_millis(),
        }
    }
}

/// What every shard answered: results (in shard order) or failures.
pub struct QueryOutcome {
    pub results: Vec<ShardResult>,
    pub readers: Vec<Option<Reader>>,
    pub failures: Vec<ShardFailure>,
}

impl ReadService {
    /// The shards of these indices a read touches (after routing and `_shards:`), each with
    /// its copies ordered by `preference`.
    pub fn plan_shards(
        &self,
        services: &[Arc<IndexService>],
        routing: Option<&str>,
        only_shards: Option<&[usize]>,
        preference: &Preference,
    ) -> ApiResult<Vec<PlannedShard>> {
        let state = self.core.cluster_state();
        let rotation = self.read_rotation.fetch_add(1, Ordering::Relaxed);
        let mut planned = Vec::new();
        for service in services {
            let name = service.name();
            let shard_count = service.with_meta(|m| m.settings().number_of_shards());
            let mut shards: Vec<usize> = match routing {
                Some(routing) => routing
                    .split(',')
                    .map(|r| service.route(r.trim()))
                    .collect(),
                None => (0..shard_count).collect(),
            };
            shards.sort_unstable();
            shards.dedup();
            for shard in shards {
                if only_shards.is_some_and(|only| !only.contains(&shard)) {
                    continue;
                }
                let copies = ordered_copies(
                    &state,
                    &name,
                    shard,
                    preference,
                    &self.core.node_id,
                    rotation,
                )?;
                planned.push(PlannedShard {
                    service: service.clone(),
                    shard,
                    copies,
                });
            }
        }
        Ok(planned)
    }

    /// Runs the query phase on every planned shard: remote copies in parallel, local ones
    /// inline meanwhile; a shard whose copy fails moves on to its next copy.
    pub fn query_phase(&self, shards: &[PlannedShard], phase: &QueryPhase<'_>) -> QueryOutcome {
        let mut answers: Vec<Option<Answer>> = (0..shards.len()).map(|_| None).collect();
        let mut attempts = vec![0usize; shards.len()];
        let mut last_error: Vec<Option<(Option<String>, ApiError)>> = vec![None; shards.len()];
        while answers.iter().any(Option::is_none) {
            let mut remote: Vec<(usize, CopyRef, Pending<Result<QueryReply, ApiError>>)> =
                Vec::new();
            for (i, shard) in shards.iter().enumerate() {
                if answers[i].is_some() {
                    continue;
                }
                let Some(copy) = next_copy(shard, phase.readers.map(|r| &r[i]), attempts[i]) else {
                    answers[i] = Some(Err(last_error[i]
                        .take()
                        .unwrap_or_else(|| (None, no_copy_available(shard)))));
                    continue;
                };
                attempts[i] += 1;
                let request = self.query_request(shard, i, phase);
                match &copy.address {
                    None => {
                        let outcome = self.shard_query(&request);
                        settle(i, copy, outcome, &mut answers, &mut last_error);
                    }
                    Some(address) => {
                        let pending = self.send_query(address, &request);
                        remote.push((i, copy, pending));
                    }
                }
            }
            for (i, copy, pending) in remote {
                let address = copy.address.clone().unwrap_or_default();
                let outcome = self
                    .core
                    .wait_unless_gone(&address, pending)
                    .and_then(|reply| reply);
                settle(i, copy, outcome, &mut answers, &mut last_error);
            }
        }
        let mut outcome = QueryOutcome {
            results: Vec::new(),
            readers: Vec::new(),
            failures: Vec::new(),
        };
        for (i, answer) in answers.into_iter().enumerate() {
            match answer.expect("every shard answered") {
                Ok((reader, result)) => {
                    outcome.results.push(result);
                    outcome.readers.push(Some(reader));
                }
                Err((node, error)) => {
                    outcome.failures.push(ShardFailure {
                        index: shards[i].service.name(),
                        shard: shards[i].shard,
                        node,
                        error,
                    });
                    outcome.readers.push(None);
                }
            }
        }
        outcome
    }

    fn send_query(
        &self,
        address: &str,
        request: &QueryRequest,
    ) -> Pending<Result<QueryReply, ApiError>> {
        self.core
            .send::<QueryAction>(address, request, SHARD_READ_TIMEOUT)
    }

    fn query_request(
        &self,
        shard: &PlannedShard,
        i: usize,
        phase: &QueryPhase<'_>,
    ) -> QueryRequest {
        QueryRequest {
            index: shard.service.name(),
            index_uuid: shard.service.uuid(),
            shard: shard.shard,
            context: phase
                .readers
                .and_then(|r| r[i].as_ref())
                .and_then(|r| r.context),
            keep_alive_ms: phase.keep_alive.as_millis() as u64,
            body: phase.body.clone(),
            params: phase.params.clone(),
            from: phase.from,
            mode: phase.mode,
            shard_index: i,
            now: phase.now,
            parsed: Some(phase.parsed.clone()),
        }
    }

    /// Runs the query phase, then `fetch` (the fetch phase and rendering) on what it found.
    ///
    /// A search context lives on the copy that ran the query phase; when that copy's node dies
    /// or leaves between the phases, its documents cannot be fetched anywhere else (another
    /// copy's segments differ). Both phases then run again without that node's copies, so the
    /// client gets a complete, consistent answer instead of a failed fetch; each round drops a
    /// node, so this ends. Scroll pages, whose contexts are fixed, never come here.
    pub fn query_then_fetch<T>(
        &self,
        shards: &[PlannedShard],
        phase: &QueryPhase<'_>,
        mut fetch: impl FnMut(&[PlannedShard], QueryOutcome) -> Result<T, PhaseError>,
    ) -> ApiResult<T> {
        debug_assert!(phase.readers.is_none(), "scroll pages keep their copies");
        let mut shards = shards.to_vec();
        loop {
            let outcome = self.query_phase(&shards, phase);
            crate::failpoints::failpoint!(self.core, "search_before_fetch");
            match fetch(&shards, outcome) {
                Err(PhaseError::Fetch { node_id, error })
                    if is_copy_error(&error) && without_node(&mut shards, &node_id) =>
                {
                    tracing::info!(node = %node_id, error = %error, "fetch phase lost its copy, searching again without that node");
                }
                other => return other.map_err(ApiError::from),
            }
        }
    }
}

/// A shard's answer: the reader and result, or the failure and the node it came from.
type Answer = Result<(Reader, ShardResult), (Option<String>, ApiError)>;

/// The copy a shard tries at its `attempt`: scroll pages stay on the copy that holds their
/// context; other reads walk the ordered copies.
fn next_copy(
    shard: &PlannedShard,
    reader: Option<&Option<Reader>>,
    attempt: usize,
) -> Option<CopyRef> {
    match reader {
        Some(reader) if attempt == 0 => reader.as_ref().map(|r| r.copy.clone()),
        Some(_) => None,
        None => shard.copies.get(attempt).cloned(),
    }
}

/// Records a copy's answer: a result, a request error (final), or a copy error (the shard
/// tries its next copy in the next round).
fn settle(
    i: usize,
    copy: CopyRef,
    outcome: ApiResult<QueryReply>,
    answers: &mut [Option<Answer>],
    last_error: &mut [Option<(Option<String>, ApiError)>],
) {
    match outcome {
        Ok(reply) => {
            let reader = Reader {
                copy,
                context: reply.context,
            };
            answers[i] = Some(Ok((reader, reply.result)));
        }
        Err(error) if is_copy_error(&error) => {
            tracing::debug!(node = %copy.node_id, error = %error, "shard copy failed, trying the next copy");
            last_error[i] = Some((Some(copy.node_id), error));
        }
        Err(error) => answers[i] = Some(Err((Some(copy.node_id), error))),
    }
}

fn no_copy_available(shard: &PlannedShard) -> ApiError {
    ApiError::new(
        503,
        "no_shard_available_action_exception",
        format!(
            "[{}][{}] no active copy of the shard",
            shard.service.name(),
            shard.shard
        ),
    )
}
/// Drops the copies on `node_id` from every shard; false when no shard had one (searching
/// again would change nothing).
fn without_node(shards: &mut [PlannedShard], node_id: &str) -> bool {
    let mut dropped = false;
    for shard in shards {
        let before = shard.copies.len();
        shard.copies.retain(|c| c.node_id != node_id);
        dropped |= shard.copies.len() != before;
    }
    dropped
}
