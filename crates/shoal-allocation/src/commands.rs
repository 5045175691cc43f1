//! `POST /_cluster/reroute` commands, validated with OpenSearch's error texts. Commands run
//! with allocation/rebalance disabling ignored and full decider output ("don't short circuit
//! deciders, we want a full explanation").

use serde_json::{json, Value};
use shoal_state::{
    ClusterState, DiscoveryNode, RecoverySource, RerouteCommand, ShardRouting, ShardState,
    StateError, UnassignedReason,
};

use crate::context::{AllocationContext, RoutingStats};
use crate::deciders;
use crate::decision::{DebugMode, Decision, DecisionKind, Decisions};
use crate::format::describe_node;
use crate::routing_ops::{self, refs_where, CopyRef};
use crate::settings::AllocationSettings;

pub fn execute(
    state: &mut ClusterState,
    commands: &[RerouteCommand],
    retry_failed: bool,
    now_millis: i64,
) -> Result<Vec<Value>, StateError> {
    // All or nothing: a refused command leaves the state as it was.
    let mut work = state.clone();
    if retry_failed {
        reset_failed_allocations(&mut work);
    }
    let explanations = commands
        .iter()
        .map(|command| execute_one(&mut work, command, now_millis))
        .collect::<Result<Vec<_>, _>>()?;
    *state = work;
    Ok(explanations)
}

fn reset_failed_allocations(state: &mut ClusterState) {
    for table in state.routing.values_mut() {
        for copy in table.shards.iter_mut().flatten() {
            if let Some(info) = copy
                .unassigned
                .as_mut()
                .filter(|_| copy.state == ShardState::Unassigned)
            {
                info.failed_allocations = 0;
            }
        }
    }
}

fn execute_one(
    state: &mut ClusterState,
    command: &RerouteCommand,
    now_millis: i64,
) -> Result<Value, StateError> {
    match command {
        RerouteCommand::Move {
            index,
            shard,
            from_node,
            to_node,
        } => move_copy(state, index, *shard, from_node, to_node),
        RerouteCommand::Cancel {
            index,
            shard,
            node,
            allow_primary,
        } => cancel(state, index, *shard, node, *allow_primary, now_millis),
        RerouteCommand::AllocateReplica { index, shard, node } => {
            allocate_replica(state, index, *shard, node)
        }
        RerouteCommand::AllocateEmptyPrimary {
            index,
            shard,
            node,
            accept_data_loss,
        } => allocate_empty_primary(state, index, *shard, node, *accept_data_loss, now_millis),
        RerouteCommand::AllocateStalePrimary {
            index,
            shard,
            node,
            accept_data_loss,
        } => allocate_stale_primary(state, index, *shard, node, *accept_data_loss),
    }
}

fn illegal(reason: impl Into<String>) -> StateError {
    StateError::new(400, "illegal_argument_exception", reason)
}

fn resolve<'a>(state: &'a ClusterState, node: &str) -> Result<&'a DiscoveryNode, StateError> {
    state
        .resolve_node(node)
        .ok_or_else(|| illegal(format!("failed to resolve [{node}], no matching nodes")))
}

/// Deciders as a command sees them: disabling ignored, every verdict kept.
fn command_decisions(state: &ClusterState, copy: &ShardRouting, node: &DiscoveryNode) -> Decisions {
    let settings = AllocationSettings::from_state(state);
    let stats = RoutingStats::build(state);
    let ctx = AllocationContext {
        state,
        settings: &settings,
        stats: &stats,
        ignore_disable: true,
    };
    deciders::can_allocate(copy, node, &ctx, DebugMode::On)
}

fn explanation(command: &str, parameters: Value, decisions: Vec<Value>) -> Value {
    json!({"command": command, "parameters": parameters, "decisions": decisions})
}

fn single_decision(decider: &str, decision: Decision) -> Vec<Value> {
    vec![json!({
        "decider": decider,
        "decision": decision.kind().as_upper(),
        "explanation": decision.explanation(),
    })]
}

fn copy_on_node(state: &ClusterState, index: &str, shard: u32, node: &str) -> Option<CopyRef> {
    refs_where(state, |c| {
        c.index == index && c.shard == shard && c.node.as_deref() == Some(node)
    })
    .into_iter()
    .next()
}

fn move_copy(
    state: &mut ClusterState,
    index: &str,
    shard: u32,
    from: &str,
    to: &str,
) -> Result<Value, StateError> {
    let from_node = resolve(state, from)?.clone();
    let to_node = resolve(state, to)?.clone();
    let (from_text, to_text) = (describe_node(&from_node), describe_node(&to_node));
    // OpenSearch names the source in both messages; kept as is.
    for node in [&from_node, &to_node] {
        if !node.is_data() {
            return Err(illegal(format!(
                "[move_allocation] can't move [{index}][{shard}] from {from_text} to {to_text}: source [{}] is not a data node.",
                node.name
            )));
        }
    }
    let Some(at) = copy_on_node(state, index, shard, &from_node.id) else {
        return Err(illegal(format!(
            "[move_allocation] can't move {shard}, failed to find it on node {from_text}"
        )));
    };
    let Some(copy) = at.get(state).cloned() else {
        return Err(illegal(format!(
            "[move_allocation] can't move {shard}, failed to find it on node {from_text}"
        )));
    };
    if copy.state != ShardState::Started {
        return Err(illegal(format!(
            "[move_allocation] can't move {shard}, shard is not started (state = {}]",
            copy.state.as_str()
        )));
    }
    let decisions = command_decisions(state, &copy, &to_node);
    if decisions.kind() == DecisionKind::No {
        return Err(illegal(format!(
            "[move_allocation] can't move {shard}, from {from_text}, to {to_text}, since its not allowed, reason: {}",
            decisions.to_java_string()
        )));
    }
    // A throttled move still happens: the user asked for it.
    routing_ops::relocate(state, &at, &to_node.id);
    Ok(explanation(
        "move",
        json!({"index": index, "shard": shard, "from_node": from, "to_node": to}),
        decisions.to_json(),
    ))
}

fn cancel(
    state: &mut ClusterState,
    index: &str,
    shard: u32,
    node: &str,
    allow_primary: bool,
    now_millis: i64,
) -> Result<Value, StateError> {
    let target = resolve(state, node)?.clone();
    let node_text = describe_node(&target);
    if target.is_data() && !state.metadata.indices.contains_key(index) {
        return Err(StateError::new(
            404,
            "index_not_found_exception",
            format!("no such index [{index}]"),
        ));
    }
    let copy = copy_on_node(state, index, shard, &target.id).and_then(|at| at.get(state).cloned());
    let Some(copy) = copy else {
        return Err(illegal(format!(
            "[cancel_allocation] can't cancel {shard}, failed to find it on node {node_text}"
        )));
    };
    let primary_relocation_target =
        copy.state == ShardState::Initializing && copy.relocating_node.is_some();
    if copy.primary && !allow_primary && !primary_relocation_target {
        return Err(illegal(format!(
            "[cancel_allocation] can't cancel {shard} on node {node_text}, shard is primary and {}",
            copy.state.as_str().to_ascii_lowercase()
        )));
    }
    let Some(allocation_id) = copy.allocation_id.clone() else {
        return Err(illegal(format!(
            "[cancel_allocation] can't cancel {shard}, failed to find it on node {node_text}"
        )));
    };
    state.fail_copy(
        index,
        shard,
        &allocation_id,
        UnassignedReason::ReroutedCancelled,
        "",
        now_millis,
    );
    // OpenSearch records a cancellation without details.
    for copy in state
        .routing
        .get_mut(index)
        .into_iter()
        .flat_map(|t| t.shards.iter_mut().flatten())
    {
        if let Some(info) = copy
            .unassigned
            .as_mut()
            .filter(|u| u.details.as_deref() == Some(""))
        {
            info.details = None;
        }
    }
    Ok(explanation(
        "cancel",
        json!({"index": index, "shard": shard, "node": node, "allow_primary": allow_primary}),
        single_decision(
            "cancel_allocation_command",
            Decision::yes(format!(
                "shard {shard} on node {node_text} can be cancelled"
            )),
        ),
    ))
}

/// Node resolution and shard existence shared by the `allocate_*` commands.
fn allocation_target(
    state: &ClusterState,
    name: &str,
    index: &str,
    shard: u32,
    node: &str,
) -> Result<DiscoveryNode, StateError> {
    let target = resolve(state, node)?.clone();
    if !target.is_data() {
        return Err(illegal(format!(
            "[{name}] allocation can only be done on data nodes, not [{node}]"
        )));
    }
    let Some(table) = state.routing.get(index) else {
        return Err(StateError::new(
            404,
            "index_not_found_exception",
            format!("no such index [{index}]"),
        ));
    };
    if table.shards.get(shard as usize).is_none() {
        return Err(StateError::new(
            404,
            "shard_not_found_exception",
            "no such shard",
        ));
    }
    Ok(target)
}

fn unassigned_copy(
    state: &ClusterState,
    index: &str,
    shard: u32,
    primary: bool,
) -> Option<CopyRef> {
    refs_where(state, |c| {
        c.index == index
            && c.shard == shard
            && c.primary == primary
            && c.state == ShardState::Unassigned
    })
    .into_iter()
    .next()
}

fn allocate_replica(
    state: &mut ClusterState,
    index: &str,
    shard: u32,
    node: &str,
) -> Result<Value, StateError> {
    const NAME: &str = "allocate_replica";
    let target = allocation_target(state, NAME, index, shard, node)?;
    if !state
        .copies(index, shard)
        .iter()
        .any(|c| c.primary && c.is_assigned())
    {
        return Err(illegal(format!(
            "[{NAME}] trying to allocate a replica shard [{index}][{shard}], while corresponding primary shard is still unassigned"
        )));
    }
    let Some(at) = unassigned_copy(state, index, shard, false) else {
        return Err(illegal(format!(
            "[{NAME}] all copies of [{index}][{shard}] are already assigned. Use the move allocation command instead"
        )));
    };
    let Some(copy) = at.get(state).cloned() else {
        return Err(illegal(format!(
            "[{NAME}] all copies of [{index}][{shard}] are already assigned"
        )));
    };
    let decisions = command_decisions(state, &copy, &target);
    if decisions.kind() == DecisionKind::No {
        return Err(illegal(format!(
            "[{NAME}] allocation of [{index}][{shard}] on node {} is not allowed, reason: {}",
            describe_node(&target),
            decisions.to_java_string()
        )));
    }
    routing_ops::initialize(state, &at, &target.id, None);
    Ok(explanation(
        NAME,
        json!({"index": index, "shard": shard, "node": node}),
        decisions.to_json(),
    ))
}

fn unassigned_primary(
    state: &ClusterState,
    name: &str,
    index: &str,
    shard: u32,
) -> Result<(CopyRef, ShardRouting), StateError> {
    unassigned_copy(state, index, shard, true)
        .and_then(|at| at.get(state).cloned().map(|copy| (at, copy)))
        .ok_or_else(|| {
            illegal(format!(
                "[{name}] primary [{index}][{shard}] is already assigned"
            ))
        })
}

fn data_loss_refusal(name: &str, index: &str, shard: u32) -> StateError {
    // OpenSearch says "empty primary" for the stale command too.
    illegal(format!(
        "[{name}] allocating an empty primary for [{index}][{shard}] can result in data loss. Please confirm by setting \
         the accept_data_loss parameter to true"
    ))
}

/// The primary starts over: copies that were in sync with the lost data are not any more.
/// A forced primary starts a history of its own: the other copies' histories are not
/// prefixes of it, so they must recover from its files.
fn bootstrap_new_history(state: &mut ClusterState, at: &CopyRef) {
    if let Some(copy) = at.get_mut(state) {
        copy.bootstrap_new_history_uuid = true;
    }
}

fn forget_in_sync(state: &mut ClusterState, index: &str, shard: u32) {
    if let Some(meta) = state.metadata.indices.get_mut(index) {
        meta.normalize();
        if let Some(set) = meta.in_sync_allocations.get_mut(shard as usize) {
            set.clear();
        }
    }
}

fn allocate_empty_primary(
    state: &mut ClusterState,
    index: &str,
    shard: u32,
    node: &str,
    accept_data_loss: bool,
    now_millis: i64,
) -> Result<Value, StateError> {
    const NAME: &str = "allocate_empty_primary";
    let target = allocation_target(state, NAME, index, shard, node)?;
    let (at, copy) = unassigned_primary(state, NAME, index, shard)?;
    if copy.recovery_source != Some(RecoverySource::EmptyStore) && !accept_data_loss {
        return Err(data_loss_refusal(NAME, index, shard));
    }
    if let Some(info) = at.get_mut(state).and_then(|c| c.unassigned.as_mut()) {
        if info.reason != UnassignedReason::ForcedEmptyPrimary {
            info.details = Some(format!(
                "force empty allocation from previous reason {}, {}",
                info.reason.as_str(),
                info.details.as_deref().unwrap_or("null")
            ));
            info.reason = UnassignedReason::ForcedEmptyPrimary;
            info.at_millis = now_millis;
            info.failed_allocations = 0;
            info.delayed = false;
        }
    }
    routing_ops::initialize(state, &at, &target.id, Some(RecoverySource::EmptyStore));
    bootstrap_new_history(state, &at);
    routing_ops::bump_primary_term(state, index, shard);
    forget_in_sync(state, index, shard);
    Ok(explanation(
        NAME,
        json!({"index": index, "shard": shard, "node": node, "accept_data_loss": accept_data_loss}),
        single_decision(
            "allocate_empty_primary (allocation command)",
            Decision::yes("ignore deciders"),
        ),
    ))
}

fn allocate_stale_primary(
    state: &mut ClusterState,
    index: &str,
    shard: u32,
    node: &str,
    accept_data_loss: bool,
) -> Result<Value, StateError> {
    const NAME: &str = "allocate_stale_primary";
    let target = allocation_target(state, NAME, index, shard, node)?;
    let (at, copy) = unassigned_primary(state, NAME, index, shard)?;
    if !accept_data_loss {
        return Err(data_loss_refusal(NAME, index, shard));
    }
    if copy.recovery_source != Some(RecoverySource::ExistingStore) {
        return Err(illegal(format!(
            "[{NAME}] trying to allocate an existing primary shard [{index}][{shard}], while no such shard has ever been active"
        )));
    }
    // Initializing from an existing store bumps the primary term.
    routing_ops::initialize(state, &at, &target.id, Some(RecoverySource::ExistingStore));
    bootstrap_new_history(state, &at);
    forget_in_sync(state, index, shard);
    Ok(explanation(
        NAME,
        json!({"index": index, "shard": shard, "node": node, "accept_data_loss": accept_data_loss}),
        single_decision(
            "allocate_stale_primary (allocation command)",
            Decision::yes("ignore deciders"),
        ),
    ))
}
