//! The coordinator role of a write ([`WriteService`]): route each item to its shard, apply the
//! shard batches whose primary is here (the primary role, [`super::primary`]), forward the
//! others to their primaries' nodes (`forward.rs`) and merge the answers.
//!
//! The reroute phase (OpenSearch's `TransportReplicationAction` has one): an item whose primary
//! could not be reached, or was no longer the primary, is sent again once this node has
//! applied a newer cluster state, to whatever is primary then, until the request's `timeout`.
//! Only then does the client see an error, `unavailable_shards_exception` naming the shard.
//! A resent item is marked a retry, so a write the first attempt did apply is not applied
//! twice as a new document (see `DocRequest::is_retry`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::blocks::BlockLevel;
use crate::documents::{auto_id, DocWrite, LocalItem, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;
use crate::routing::wildcard_match;
use crate::write::WriteService;

/// The longest a rerouted item waits for a newer cluster state before it is sent again anyway
/// (a primary may become reachable without a new state: a connection that came back).
const REROUTE_WAIT: Duration = Duration::from_millis(500);

/// An attempt is not started with less time than this left: it could not wait for anything.
const MIN_ATTEMPT: Duration = Duration::from_millis(20);

/// The shard an item was routed to, named in its error if no attempt reaches its primary.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) index: String,
    pub(crate) shard: usize,
}

/// Per item of a batch: where its last attempt was routed.
pub(crate) type Targets = Vec<Option<Target>>;

impl WriteService {
    /// Executes writes; one result per item, in order. Items that failed because their
    /// primary moved or could not be reached are rerouted until the request's `timeout`.
    /// Every result counts in the node's `indexing.doc_status`.
    pub fn execute_writes(
        &self,
        items: Vec<DocWrite>,
        options: &WriteOptions,
    ) -> Vec<ApiResult<WriteOutcome>> {
        let results = self.write_until_placed(items, options);
        for result in &results {
            self.core.doc_status.record(match result {
                Ok(_) => 200,
                Err(e) => e.status,
            });
        }
        results
    }

    fn write_until_placed(
        &self,
        mut items: Vec<DocWrite>,
        options: &WriteOptions,
    ) -> Vec<ApiResult<WriteOutcome>> {
        if let Err(blocked) = self.core.blocks().check_global(BlockLevel::Write) {
            return items.iter().map(|_| Err(blocked.clone())).collect();
        }
        // Ids are given once, so every attempt of an item writes the same document.
        items.iter_mut().for_each(assign_auto_id);
        let deadline = Instant::now() + options.remaining_time();
        let mut results: Slots = (0..items.len()).map(|_| None).collect();
        let mut targets: Targets = vec![None; items.len()];
        let mut todo: Vec<usize> = (0..items.len()).collect();
        for attempt in 0.. {
            let seen = self.core.cluster_state().version;
            let batch = todo
                .iter()
                .map(|&slot| (slot, items[slot].attempt(attempt > 0)))
                .collect();
            let options = options.with_deadline(deadline);
            self.write_once(
                batch,
                &options,
                Forwarding::Allowed,
                &mut results,
                &mut targets,
            );
            todo.retain(|&slot| results[slot].as_ref().is_some_and(worth_rerouting));
            if todo.is_empty() {
                break;
            }
            if Instant::now() + MIN_ATTEMPT >= deadline {
                for &slot in &todo {
                    give_up(&mut results[slot], targets[slot].as_ref(), options.timeout);
                }
                break;
            }
            tracing::debug!(
                items = todo.len(),
                attempt,
                "rerouting writes after a newer cluster state"
            );
            self.wait_for_state_after(seen, deadline.min(Instant::now() + REROUTE_WAIT));
        }
        results
            .into_iter()
            .map(|r| r.expect("every item has a result"))
            .collect()
    }

    /// A batch forwarded here by a coordinator: one attempt, on this node's primaries only.
    pub(crate) fn write_on_local_primaries(
        &self,
        items: Vec<DocWrite>,
        options: &WriteOptions,
    ) -> Vec<ApiResult<WriteOutcome>> {
        let mut results: Slots = (0..items.len()).map(|_| None).collect();
        let mut targets: Targets = vec![None; items.len()];
        let batch = items.into_iter().enumerate().collect();
        self.write_once(
            batch,
            options,
            Forwarding::Refused,
            &mut results,
            &mut targets,
        );
        results
            .into_iter()
            .map(|r| r.expect("every item has a result"))
            .collect()
    }

    /// One attempt of the items in `batch` (slot, write): fills their result slots.
    fn write_once(
        &self,
        batch: Vec<(usize, DocWrite)>,
        options: &WriteOptions,
        forwarding: Forwarding,
        results: &mut Slots,
        targets: &mut Targets,
    ) {
        let mut routed = self.route_writes(batch, options, results, targets);
        if forwarding == Forwarding::Refused {
            refuse_remote(&mut routed, results, targets);
        }
        let forwarded = self.forward_writes(routed.remote, options);
        // `refresh=true|wait_for` is the primary role's: it refreshes after replicating, and
        // has segment replicas copy the commit (`WriteService::refresh_for_request`).
        self.write_on_local_primaries_of(routed.local, options, results);
        self.merge_forwarded(forwarded, results);
    }

    /// Applies the items whose primary is here, shard by shard, through the primary role.
    fn write_on_local_primaries_of(
        &self,
        local: Vec<(usize, Arc<IndexService>, usize, DocWrite)>,
        options: &WriteOptions,
        results: &mut Slots,
    ) {
        // A node that is stopping writes nothing more.
        if let Err(e) = self.creation() {
            for (slot, ..) in local {
                results[slot] = Some(Err(e.clone()));
            }
            return;
        }
        for ((_, shard), group) in group_by_shard(local) {
            self.write_on_primary(shard, group, options, results);
        }
    }
}

/// Groups routed items by shard, keeping item order within a shard.
fn group_by_shard(
    local: Vec<(usize, Arc<IndexService>, usize, DocWrite)>,
) -> BTreeMap<(String, usize), Vec<LocalItem>> {
    let mut groups: BTreeMap<(String, usize), Vec<LocalItem>> = BTreeMap::new();
    for (slot, service, shard, item) in local {
        groups
            .entry((service.uuid(), shard))
            .or_default()
            .push((slot, service, item));
    }
    groups
}

/// One result slot per item of a batch, filled as the items are routed, applied or forwarded.
pub(crate) type Slots = Vec<Option<ApiResult<WriteOutcome>>>;

/// Whether an attempt may send items to other nodes: only the request's coordinator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forwarding {
    Allowed,
    Refused,
}

/// Fails the items routed to another node's primary as moved (their coordinator reroutes).
fn refuse_remote(routed: &mut Routed, results: &mut Slots, targets: &Targets) {
    for (address, items) in std::mem::take(&mut routed.remote) {
        for (slot, _) in items {
            let target = targets[slot].as_ref().expect("a remote item was routed");
            let error = super::forward::primary_not_here(&target.index, target.shard, &address);
            results[slot] = Some(Err(error));
        }
    }
}

/// A batch after routing: the items whose primary is here, and those per primary node.
struct Routed {
    /// Parsed later, under the shard's `write` slot (parsing is most of the CPU).
    local: Vec<(usize, Arc<IndexService>, usize, DocWrite)>,
    remote: BTreeMap<String, Vec<(usize, DocWrite)>>,
}

impl WriteService {
    /// Resolves each item's index and shard; items whose primary is here are parsed (with
    /// their mapping updates), the others grouped by the node holding their primary.
    fn route_writes(
        &self,
        batch: Vec<(usize, DocWrite)>,
        options: &WriteOptions,
        results: &mut Slots,
        targets: &mut Targets,
    ) -> Routed {
        let blocks = self.core.blocks();
        let mut services: HashMap<String, ApiResult<Arc<IndexService>>> = HashMap::new();
        // Where each shard's primary is, looked up once per shard of the batch.
        let mut primaries: HashMap<(String, usize), ApiResult<Option<String>>> = HashMap::new();
        let mut routed = Routed {
            local: Vec::with_capacity(batch.len()),
            remote: BTreeMap::new(),
        };
        for (slot, item) in batch {
            let name = item.index_name().to_string();
            let service = services
                .entry(name.clone())
                .or_insert_with(|| {
                    let may_create = matches!(item, DocWrite::Index { .. });
                    let service = self.write_target(&name, options.require_alias, may_create)?;
                    blocks.check_index(BlockLevel::Write, &service.name())?;
                    Ok(service)
                })
                .clone();
            let service = match service {
                Ok(service) => service,
                Err(e) => {
                    results[slot] = Some(Err(e));
                    continue;
                }
            };
            let shard = service.route(item.routing_or_id());
            targets[slot] = Some(Target {
                index: service.name(),
                shard,
            });
            let location = primaries
                .entry((service.uuid(), shard))
                .or_insert_with(|| self.primary_location(&service.name(), shard, options))
                .clone();
            match location {
                Ok(None) => routed.local.push((slot, service, shard, item)),
                Ok(Some(address)) => routed.remote.entry(address).or_default().push((slot, item)),
                Err(e) => results[slot] = Some(Err(e)),
            }
        }
        routed
    }

    /// Puts the answers of the forwarded shard batches in their items' slots.
    fn merge_forwarded(&self, forwarded: super::forward::Forwarded, results: &mut Slots) {
        for (slots, outcome) in self.collect_forwarded(forwarded) {
            match outcome {
                Ok(outcomes) if outcomes.len() == slots.len() => {
                    for (slot, outcome) in slots.into_iter().zip(outcomes) {
                        results[slot] = Some(outcome);
                    }
                }
                Ok(_) => {
                    for slot in slots {
                        results[slot] = Some(Err(ApiError::internal(
                            "shard bulk answered a wrong number of items",
                        )));
                    }
                }
                Err(e) => {
                    for slot in slots {
                        results[slot] = Some(Err(e.clone()));
                    }
                }
            }
        }
    }

    /// The index a write goes to, auto-creating it when allowed.
    fn write_target(
        &self,
        name: &str,
        require_alias: bool,
        may_create: bool,
    ) -> ApiResult<Arc<IndexService>> {
        if let Some(service) = self.core.resolve_write_index(name)? {
            if require_alias && service.name() == name {
                return Err(require_alias_error(name));
            }
            if !service.is_open() {
                return Err(ApiError::index_closed(&service.name(), &service.uuid()));
            }
            return Ok(service);
        }
        if require_alias {
            return Err(require_alias_error(name));
        }
        if !may_create || !self.auto_create_allowed(name) {
            return Err(ApiError::index_not_found(name));
        }
        match self.creation()?.create_index(name) {
            Ok(service) => Ok(service),
            // Another request created it meanwhile.
            Err(e) if e.kind == ErrorKind::Conflict => self.core.require_index(name),
            Err(e) => Err(e),
        }
    }

    /// Whether `action.auto_create_index` allows creating `name` on first write.
    pub fn auto_create_allowed(&self, name: &str) -> bool {
        let value = self
            .core
            .cluster_setting("action.auto_create_index")
            .unwrap_or_else(|| "true".into());
        match value.as_str() {
            "true" => true,
            "false" => false,
            patterns => {
                for pattern in patterns.split(',').map(str::trim) {
                    if let Some(p) = pattern.strip_prefix('-') {
                        if wildcard_match(p, name) {
                            return false;
                        }
                    } else if wildcard_match(pattern.trim_start_matches('+'), name) {
                        return true;
                    }
                }
                false
            }
        }
    }
}

fn require_alias_error(name: &str) -> ApiError {
    ApiError::index_not_found(name).with_reason(format!(
        "no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias"
    ))
}

impl ApiError {
    fn with_reason(mut self, reason: String) -> ApiError {
        self.reason = reason;
        self
    }
}

/// Gives an id-less index request its id on the coordinating node, so it is routed once and
/// a forwarded retry keeps the same id.
fn assign_auto_id(item: &mut DocWrite) {
    if let DocWrite::Index { id, request, .. } = item {
        if id.is_none() {
            *id = Some(auto_id());
            request.auto_generated_id = true;
        }
    }
}

/// Whether an item that failed this way may succeed on the primary a newer cluster state
/// names: the primary's node could not be reached or answered that it no longer holds the
/// copy or the role. A closed index stays closed, and a broken copy is failed by its primary
/// (the write reports that), so neither is sent again.
fn worth_rerouting(result: &ApiResult<WriteOutcome>) -> bool {
    let Err(e) = result else {
        return false;
    };
    match e.kind {
        ErrorKind::Moved => true,
        ErrorKind::Unavailable => e.error_type != "index_closed_exception",
        _ => false,
    }
}

/// The answer of an item whose shard had no reachable primary until the request's timeout:
/// a wait that already timed out keeps its own error, anything else (a transport error) becomes
/// OpenSearch's `unavailable_shards_exception` naming the shard, with the last failure as its cause.
fn give_up(
    result: &mut Option<ApiResult<WriteOutcome>>,
    target: Option<&Target>,
    timeout: Option<Duration>,
) {
    let Some(Err(last)) = result.take() else {
        unreachable!("only failed items are rerouted");
    };
    if last.error_type == "unavailable_shards_exception" {
        *result = Some(Err(last));
        return;
    }
    let (index, shard) = target.map_or(("_na", 0), |t| (t.index.as_str(), t.shard));
    *result = Some(Err(super::forward::primary_not_active(
        index, shard, timeout,
    )
    .caused_by(last)));
}

impl WriteService {
    /// Waits until this node has applied a cluster state newer than version `seen`, or `until`.
    fn wait_for_state_after(&self, seen: u64, until: Instant) {
        let wait = until.saturating_duration_since(Instant::now());
        self.core
            .wait_until_applied(wait, |_, applied| (applied > seen).then_some(()));
    }
}
