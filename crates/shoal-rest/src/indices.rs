//! Index management APIs.

use shoal_node::blocks::BlockLevel;
use shoal_node::broadcast::BroadcastOp;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use shoal_node::admin::ActiveShardsWait;
use shoal_node::index_service::IndexService;
use shoal_node::metadata::AliasMetadata;
use shoal_node::replication::active_shards::ActiveShards;
use shoal_node::settings::{self, FlatSettings};
use shoal_node::{ApiError, ApiResult, Node, ResolveOptions};

use crate::cluster_admin::DEFAULT_TIMEOUT;
use crate::request::{object_body, Params};
use crate::response::{ok, status_only, RestResult};
use crate::router::blocking;
use crate::tasks::run_as_task;

/// The parameters [`options`] reads: how an index expression resolves.
const RESOLVE_PARAMS: [&str; 3] = ["ignore_unavailable", "allow_no_indices", "expand_wildcards"];

/// [`options`] of a request that takes the resolution parameters and `known`, refusing any
/// other parameter (`path` names the request in the refusal).
pub(crate) fn resolving(
    params: &Params,
    path: &str,
    known: &[&str],
    base: ResolveOptions,
) -> ApiResult<ResolveOptions> {
    let known: Vec<&str> = RESOLVE_PARAMS.iter().chain(known).copied().collect();
    params.refuse_unknown(path, &known)?;
    options(params, base)
}

/// `base` as the request's index options change it.
pub(crate) fn options(params: &Params, base: ResolveOptions) -> ApiResult<ResolveOptions> {
    base.from_request(&params.0)
}

pub(crate) fn ack() -> Value {
    json!({"acknowledged": true})
}

/// `PUT /{index}`.
pub async fn create(
    node: Arc<Node>,
    index: String,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    params.refuse_unknown(&format!("/{index}"), ACTIVE_SHARDS_PARAMS)?;
    let wait = active_shards_wait(&params, "timeout", DEFAULT_TIMEOUT)?;
    let body = object_body(&body)?;
    let name = index.clone();
    let created = node.clone();
    let (_, started) =
        blocking(move || created.admin.create_index(&name, &body, no_wait(wait))).await?;
    let acknowledged = started || copies_started(&node, &[index.clone()], wait).await?;
    ok(
        json!({"acknowledged": true, "shards_acknowledged": acknowledged, "index": index}),
        &params,
    )
}

/// `wait` without its timeout: a REST request waits for the copies with
/// [`copies_started`], which holds no thread (an index whose copies cannot be allocated
/// would hold a `management` thread for the whole timeout).
fn no_wait(wait: ActiveShardsWait) -> ActiveShardsWait {
    ActiveShardsWait {
        timeout: Duration::ZERO,
        ..wait
    }
}

/// Waits, holding no thread, until every shard of `indices` has the copies `wait` asks for,
/// at most its timeout; whether they did.
async fn copies_started(
    node: &Node,
    indices: &[String],
    wait: ActiveShardsWait,
) -> ApiResult<bool> {
    let (_, started) = crate::state_wait::until(node, wait.timeout, || {
        let started = indices.iter().try_fold(true, |all, index| {
            Ok::<_, ApiError>(all && node.admin.copies_started(index, wait.wanted)?)
        });
        std::future::ready(started.map(|started| ((), started)))
    })
    .await?;
    Ok(started)
}

/// What index creation and open take besides the indices: OpenSearch's waits. The cluster
/// manager timeouts are accepted: a Raft commit is bounded by Shoal's own timeout.
const ACTIVE_SHARDS_PARAMS: &[&str] = &[
    "wait_for_active_shards",
    "timeout",
    "master_timeout",
    "cluster_manager_timeout",
];

/// `wait_for_active_shards` (`None`: the index's own setting), for at most the `timeout_key`
/// parameter (`default` without it).
fn active_shards_wait(
    params: &Params,
    timeout_key: &str,
    default: Duration,
) -> ApiResult<ActiveShardsWait> {
    let wanted = params
        .get("wait_for_active_shards")
        .map(ActiveShards::parse)
        .transpose()?;
    let timeout = crate::cluster_admin::timeout_param(params, timeout_key, default)?;
    Ok(ActiveShardsWait { wanted, timeout })
}

/// `DELETE /{index}` (lists and wildcards; `_all`/`*` need `action.destructive_requires_name=false`).
pub async fn delete(node: Arc<Node>, index: String, params: Params) -> RestResult {
    let opts = options(
        &params,
        ResolveOptions {
            include_closed: true,
            ignore_aliases: true,
            ..ResolveOptions::search()
        },
    )?;
    blocking(move || {
        let destructive = index
            .split(',')
            .any(|p| p == "_all" || p == "*" || (p.contains('*') && !p.starts_with('-')));
        if destructive
            && node
                .core()
                .cluster_setting("action.destructive_requires_name")
                .as_deref()
                == Some("true")
        {
            return Err(ApiError::bad_request(
                "Wildcard expressions or all indices are not allowed",
            ));
        }
        let services = node.core().resolve(&index, opts)?;
        node.admin.delete_indices(&services)
    })
    .await?;
    ok(ack(), &params)
}

/// `HEAD /{index}` (`flat_settings` and `include_defaults` shape a body this answer has not).
pub async fn exists(node: Arc<Node>, index: String, params: Params) -> RestResult {
    let opts = options(&params, ResolveOptions::admin())?;
    params.bool_or("local", false)?;
    let status = blocking(move || {
        let found = match node.core().resolve(&index, opts) {
            Ok(services) if !services.is_empty() => services,
            _ => return Ok(StatusCode::NOT_FOUND),
        };
        // A get-index request underneath: a metadata block answers its status, bodiless.
        Ok(match metadata_readable(&node, found) {
            Ok(_) => StatusCode::OK,
            Err(e) => StatusCode::from_u16(e.status).unwrap_or(StatusCode::FORBIDDEN),
        })
    })
    .await?;
    Ok(status_only(status))
}

/// `GET /{index}`.
pub async fn get(node: Arc<Node>, index: String, params: Params) -> RestResult {
    let opts = options(&params, ResolveOptions::admin())?;
    let flat = params.flag("flat_settings");
    let body = blocking(move || {
        let mut out = Map::new();
        for service in metadata_readable(&node, node.core().resolve(&index, opts)?)? {
            let (meta, mapping) = service.meta_and_mapping();
            out.insert(
                meta.name.clone(),
                json!({
                    "aliases": aliases_json(&meta.aliases),
                    "mappings": mapping.to_json(),
                    "settings": render_settings(&meta.settings, flat),
                }),
            );
        }
        Ok(Value::Object(out))
    })
    .await?;
    ok(body, &params)
}

fn aliases_json(aliases: &std::collections::BTreeMap<String, AliasMetadata>) -> Value {
    Value::Object(
        aliases
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect(),
    )
}

fn render_settings(flat: &FlatSettings, flat_form: bool) -> Value {
    if flat_form {
        json!(flat)
    } else {
        settings::nest_settings_opensearch(flat)
    }
}

/// `GET /_mapping`, `/{index}/_mapping`.
pub async fn get_mapping(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let opts = options(&params, ResolveOptions::admin())?;
    let body = blocking(move || {
        let mut out = Map::new();
        for service in metadata_readable(
            &node,
            node.core()
                .resolve(index.as_deref().unwrap_or("_all"), opts)?,
        )? {
            out.insert(
                service.name(),
                json!({"mappings": service.mapping().to_json()}),
            );
        }
        Ok(Value::Object(out))
    })
    .await?;
    ok(body, &params)
}

/// A mapping wrapped in its type (`{"_doc": {...}}`), which OpenSearch 2 refuses.
fn is_typed_mapping(body: &Value) -> bool {
    body.as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key("_doc"))
}

/// `PUT|POST /{index}/_mapping`.
pub async fn put_mapping(
    node: Arc<Node>,
    index: String,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    if body.is_null() {
        return Err(
            ApiError::action_request_validation(&["mapping source is empty".to_string()]).into(),
        );
    }
    if is_typed_mapping(&body) {
        return Err(
            ApiError::bad_request("Types cannot be provided in put mapping requests").into(),
        );
    }
    let opts = options(&params, ResolveOptions::admin())?;
    let write_index_only = params.bool_or("write_index_only", false)?;
    blocking(move || {
        let update = shoal_mapping::Mapping::from_json(&body)?;
        let services = match write_index_only {
            true => write_indices(&node, &index)?,
            false => node.core().resolve(&index, opts)?,
        };
        node.core()
            .blocks()
            .check_indices(BlockLevel::MetadataWrite, &names_of(&services))?;
        for service in services {
            service.merge_mapping(&update)?;
        }
        Ok(())
    })
    .await?;
    ok(ack(), &params)
}

/// `write_index_only`: each name of the expression is an index, or an alias standing for its
/// write index.
fn write_indices(node: &Node, expression: &str) -> ApiResult<Vec<Arc<IndexService>>> {
    expression
        .split(',')
        .map(|name| {
            node.core()
                .resolve_write_index(name)?
                .ok_or_else(|| ApiError::index_not_found(name))
        })
        .collect()
}

/// `GET /_settings`, `/{index}/_settings`, `/{index}/_settings/{name}`.
pub async fn get_settings(
    node: Arc<Node>,
    index: Option<String>,
    name: Option<String>,
    params: Params,
) -> RestResult {
    let opts = options(&params, ResolveOptions::admin())?;
    let flat = params.flag("flat_settings");
    let include_defaults = params.flag("include_defaults");
    let body = blocking(move || {
        let mut out = Map::new();
        for service in metadata_readable(
            &node,
            node.core()
                .resolve(index.as_deref().unwrap_or("_all"), opts)?,
        )? {
            let meta = service.meta();
            let filter = |s: &FlatSettings| -> FlatSettings {
                s.iter()
                    .filter(|(k, _)| {
                        name.as_deref().is_none_or(|n| {
                            n.split(',')
                                .any(|p| shoal_node::routing::wildcard_match(p, k))
                        })
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let mut entry = Map::new();
            entry.insert(
                "settings".into(),
                render_settings(&filter(&meta.settings), flat),
            );
            if include_defaults {
                let defaults: FlatSettings = settings::registry()
                    .index_defaults()
                    .filter(|d| !meta.settings.contains_key(&d.key))
                    .map(|d| (d.key.clone(), json!(d.default)))
                    .collect();
                entry.insert("defaults".into(), render_settings(&filter(&defaults), flat));
            }
            out.insert(meta.name.clone(), Value::Object(entry));
        }
        Ok(Value::Object(out))
    })
    .await?;
    ok(body, &params)
}

/// `PUT /{index}/_settings`.
pub async fn put_settings(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    let body = body.get("settings").cloned().unwrap_or(body);
    let update = settings::flatten_settings(&body, true)?;
    if update.is_empty() {
        return Err(
            ApiError::action_request_validation(&["no settings to update".to_string()]).into(),
        );
    }
    let opts = options(&params, ResolveOptions::admin())?;
    let preserve_existing = params.bool_or("preserve_existing", false)?;
    blocking(move || {
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), opts)?;
        let keys: Vec<String> = update.keys().cloned().collect();
        node.core()
            .blocks()
            .check_index_settings_update(&keys, &names_of(&services))?;
        // `preserve_existing`: each index takes only the settings it does not have yet.
        let updates = services
            .into_iter()
            .map(|service| {
                let meta = service.meta();
                let own: FlatSettings = update
                    .iter()
                    .filter(|(k, _)| !preserve_existing || !meta.settings.contains_key(*k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                settings::validate_settings_update(
                    &own,
                    &meta.name,
                    &meta.uuid,
                    service.is_open(),
                )?;
                Ok((service, own))
            })
            .collect::<ApiResult<Vec<(Arc<IndexService>, FlatSettings)>>>()?;
        check_replica_limit(&node, &update, &updates)?;
        for (service, update) in updates {
            apply_settings_update(&service, &update)?;
        }
        Ok(())
    })
    .await?;
    ok(ack(), &params)
}

/// A new replica count must keep the cluster under its shard limit, counting the indices
/// that take it (`preserve_existing` leaves it out of those that have one).
fn check_replica_limit(
    node: &Node,
    requested: &FlatSettings,
    updates: &[(Arc<IndexService>, FlatSettings)],
) -> ApiResult<()> {
    const REPLICAS: &str = "index.number_of_replicas";
    let Some(replicas) = requested.get(REPLICAS).and_then(Value::as_str) else {
        return Ok(());
    };
    let taking: Vec<String> = updates
        .iter()
        .filter(|(_, own)| own.contains_key(REPLICAS))
        .map(|(service, _)| service.name())
        .collect();
    if taking.is_empty() {
        return Ok(());
    }
    node.admin
        .check_shard_limit_for_replicas(&taking, replicas.parse().unwrap_or(0))
}

fn apply_settings_update(service: &IndexService, update: &FlatSettings) -> ApiResult<()> {
    service.update_meta(|meta| {
        let mut candidate = meta.settings.clone();
        for (key, value) in update {
            if value.is_null() {
                candidate.remove(key);
            } else {
                candidate.insert(key.clone(), value.clone());
            }
        }
        settings::codec_of(&candidate)?;
        meta.settings = candidate;
        meta.settings_version += 1;
        Ok(())
    })?;
    Ok(())
}

/// `POST /{index}/_close` and `/_open`.
pub async fn open_close(node: Arc<Node>, index: String, open: bool, params: Params) -> RestResult {
    let path = format!("/{index}/_{}", if open { "open" } else { "close" });
    // A closed index has no active copies to wait for.
    let known: Vec<&str> = ACTIVE_SHARDS_PARAMS
        .iter()
        .copied()
        .chain(open.then_some("wait_for_completion"))
        .chain(open.then_some("task_execution_timeout"))
        .filter(|p| open || *p != "wait_for_active_shards")
        .collect();
    let opts = resolving(&params, &path, &known, ResolveOptions::admin())?;
    if !open {
        return close(node, index, opts, &params).await;
    }
    // In the background the copies are waited for up to the task's own limit (OpenSearch's,
    // 1h by default).
    let in_background = !params.bool_or("wait_for_completion", true)?;
    let wait = match in_background {
        true => active_shards_wait(&params, "task_execution_timeout", Duration::from_secs(3600))?,
        false => active_shards_wait(&params, "timeout", DEFAULT_TIMEOUT)?,
    };
    let opening = node.clone();
    let (body, opened) = blocking(move || {
        let node = opening;
        let services = node.core().resolve(&index, opts)?;
        let names = names_of(&services);
        let description = format!("open indices [{}]", names.join(", "));
        let open_all = move |node: &Node, wait: ActiveShardsWait| {
            let mut acknowledged = true;
            for service in &services {
                acknowledged &= node.admin.open_index(service, wait)?;
            }
            ApiResult::Ok(acknowledged)
        };
        if in_background {
            let task = run_as_task(&node, "indices:admin/open", description, move |node| {
                let acknowledged = open_all(node, wait)?;
                Ok(json!({"acknowledged": true, "shards_acknowledged": acknowledged}))
            });
            return Ok((json!({ "task": task }), None));
        }
        let started = open_all(&node, no_wait(wait))?;
        Ok((json!({"acknowledged": true}), Some((started, names))))
    })
    .await?;
    let mut body = body;
    if let Some((started, names)) = opened {
        body["shards_acknowledged"] = json!(started || copies_started(&node, &names, wait).await?);
    }
    ok(body, &params)
}

async fn close(
    node: Arc<Node>,
    index: String,
    opts: ResolveOptions,
    params: &Params,
) -> RestResult {
    let names = blocking(move || {
        let services = node.core().resolve(&index, opts)?;
        for service in &services {
            node.admin.close_index(service)?;
        }
        Ok(names_of(&services))
    })
    .await?;
    let indices: Map<String, Value> = names
        .into_iter()
        .map(|n| (n, json!({"closed": true})))
        .collect();
    ok(
        json!({"acknowledged": true, "shards_acknowledged": true, "indices": indices}),
        params,
    )
}

/// `POST /_refresh`, `/_flush`, `/_forcemerge` (and per index).
pub async fn maintenance(
    node: Arc<Node>,
    index: Option<String>,
    action: &'static str,
    params: Params,
) -> RestResult {
    let path = match &index {
        Some(index) => format!("/{index}/_{action}"),
        None => format!("/_{action}"),
    };
    let opts = resolving(
        &params,
        &path,
        maintenance_params(action),
        ResolveOptions::search(),
    )?;
    let op = match action {
        "refresh" => BroadcastOp::Refresh,
        "flush" => flush_op(&params)?,
        _ => force_merge_op(&params)?,
    };
    let is_merge = action != "refresh" && action != "flush";
    let in_background = is_merge && !params.bool_or("wait_for_completion", true)?;
    let expunge_with_max_segments = matches!(
        op,
        BroadcastOp::ForceMerge {
            only_expunge_deletes: true,
            max_segments: Some(_),
            ..
        }
    );
    let (summary, worst) = blocking(move || {
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), opts)?;
        if matches!(op, BroadcastOp::ForceMerge { .. }) {
            node.core()
                .blocks()
                .check_global_then_indices(BlockLevel::MetadataWrite, &names_of(&services))?;
        }
        if in_background {
            return Ok((json!(start_background_merge(&node, services, op)), 200));
        }
        let summary = node.broadcast.broadcast(&services, op)?;
        Ok((summary.to_json(), summary.worst_failure_status()))
    })
    .await?;
    let (status, body) = match in_background {
        true => (200, json!({ "task": summary })),
        false if is_merge => (worst, json!({"_shards": summary})),
        false => (200, json!({"_shards": summary})),
    };
    let response = crate::response::json(crate::response::status_of(status), body, &params);
    Ok(match expunge_with_max_segments {
        true => crate::response::with_deprecation_warning(response, EXPUNGE_AND_MAX_SEGMENTS),
        false => response,
    })
}

/// The parameters `_refresh`, `_flush` and `_forcemerge` take besides the resolution ones
/// (OpenSearch's).
fn maintenance_params(action: &str) -> &'static [&'static str] {
    match action {
        "refresh" => &[],
        "flush" => &["force", "wait_if_ongoing"],
        _ => &[
            "max_num_segments",
            "only_expunge_deletes",
            "flush",
            "primary_only",
            "wait_for_completion",
        ],
    }
}

/// `_flush`: OpenSearch's defaults (`force` false, `wait_if_ongoing` true) and validation.
fn flush_op(params: &Params) -> ApiResult<BroadcastOp> {
    let force = params.bool_or("force", false)?;
    let wait_if_ongoing = params.bool_or("wait_if_ongoing", true)?;
    if force && !wait_if_ongoing {
        return Err(ApiError::action_request_validation(&[
            "wait_if_ongoing must be true for a force flush".to_string(),
        ]));
    }
    Ok(BroadcastOp::Flush {
        force,
        wait_if_ongoing,
    })
}

/// A force merge run as a task (`wait_for_completion=false`).
fn start_background_merge(
    node: &Arc<Node>,
    services: Vec<Arc<IndexService>>,
    op: BroadcastOp,
) -> String {
    let description = format!("Force-merge indices [{}]", names_of(&services).join(", "));
    run_as_task(node, "indices:admin/forcemerge", description, move |node| {
        let summary = node.broadcast.broadcast(&services, op)?;
        Ok(json!({"_shards": summary.to_json()}))
    })
}

/// OpenSearch 2.x takes both parameters, expunges deletes and warns (3.0 refuses them).
const EXPUNGE_AND_MAX_SEGMENTS: &str = "setting only_expunge_deletes and max_num_segments at the same time is deprecated and will be rejected in a future version";

fn force_merge_op(params: &Params) -> ApiResult<BroadcastOp> {
    Ok(BroadcastOp::ForceMerge {
        max_segments: params.usize("max_num_segments")?,
        only_expunge_deletes: params.bool_or("only_expunge_deletes", false)?,
        flush: params.bool_or("flush", true)?,
        primary_only: params.bool_or("primary_only", false)?,
    })
}

fn names_of(services: &[Arc<IndexService>]) -> Vec<String> {
    services.iter().map(|s| s.name()).collect()
}

/// The indices whose metadata may be read (`index.blocks.metadata` refuses it).
fn metadata_readable(
    node: &Node,
    services: Vec<Arc<IndexService>>,
) -> Result<Vec<Arc<IndexService>>, ApiError> {
    node.core()
        .blocks()
        .check_indices(BlockLevel::MetadataRead, &names_of(&services))?;
    Ok(services)
}
