//! Alias APIs: `POST /_aliases`, `PUT|DELETE /{index}/_alias/{name}`, `GET /_alias…`.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{json, Map, Value};
use shoal_node::admin::AliasAction;
use shoal_node::metadata::parse_alias;
use shoal_node::{ApiError, Node, ResolveOptions};

use crate::indices::{ack, options};
use crate::request::{object_body, Params};
use crate::response::{json, ok, RestResult};
use crate::router::blocking;

/// `POST /_aliases`.
pub async fn update_aliases(
    node: Arc<Node>,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    let Some(actions) = body.get("actions").and_then(Value::as_array) else {
        return Err(
            ApiError::action_request_validation(&["No action specified".to_string()]).into(),
        );
    };
    let actions = actions.clone();
    blocking(move || {
        let mut expanded = Vec::new();
        for action in &actions {
            let Some((kind, spec)) = action.as_object().and_then(|m| m.iter().next()) else {
                return Err(ApiError::parsing(
                    "[aliases] failed to parse field [actions]",
                ));
            };
            let list = |single: &str, plural: &str| -> Vec<String> {
                match (spec.get(single), spec.get(plural)) {
                    (Some(Value::String(s)), _) => vec![s.clone()],
                    (_, Some(Value::Array(a))) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                }
            };
            let indices = list("index", "indices");
            if indices.is_empty() {
                return Err(ApiError::action_request_validation(&[
                    "One of [index] or [indices] is required".to_string(),
                ]));
            }
            let mut concrete = Vec::new();
            for pattern in &indices {
                concrete.extend(
                    node.core()
                        .resolve(pattern, ResolveOptions::admin())?
                        .into_iter()
                        .map(|s| s.name()),
                );
            }
            match kind.as_str() {
                "add" => {
                    let aliases = list("alias", "aliases");
                    if aliases.is_empty() {
                        return Err(ApiError::action_request_validation(&[
                            "One of [alias] or [aliases] is required".to_string(),
                        ]));
                    }
                    let mut meta_spec = spec.clone();
                    if let Some(m) = meta_spec.as_object_mut() {
                        for k in ["index", "indices", "alias", "aliases", "must_exist"] {
                            m.remove(k);
                        }
                    }
                    let alias_meta = parse_alias(&meta_spec)?;
                    for index in &concrete {
                        for alias in &aliases {
                            expanded.push(AliasAction::Add {
                                index: index.clone(),
                                alias: alias.clone(),
                                spec: alias_meta.clone(),
                            });
                        }
                    }
                }
                "remove" => {
                    let aliases = list("alias", "aliases");
                    let must_exist = spec.get("must_exist").and_then(Value::as_bool);
                    for index in &concrete {
                        for alias in &aliases {
                            expanded.push(AliasAction::Remove {
                                index: index.clone(),
                                alias: alias.clone(),
                                must_exist,
                            });
                        }
                    }
                }
                "remove_index" => {
                    for index in &concrete {
                        expanded.push(AliasAction::RemoveIndex {
                            index: index.clone(),
                        });
                    }
                }
                other => {
                    return Err(ApiError::parsing(format!(
                        "[aliases] unknown field [{other}]"
                    )))
                }
            }
        }
        node.admin.update_aliases(&expanded)
    })
    .await?;
    ok(ack(), &params)
}

/// `PUT|POST /{index}/_alias/{name}`.
pub async fn put_alias(
    node: Arc<Node>,
    index: String,
    alias: String,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    blocking(move || {
        let spec = parse_alias(&body)?;
        on_each_index(&node, &index, |index| AliasAction::Add {
            index,
            alias: alias.clone(),
            spec: spec.clone(),
        })
    })
    .await?;
    ok(ack(), &params)
}

/// `DELETE /{index}/_alias/{name}`.
pub async fn delete_alias(
    node: Arc<Node>,
    index: String,
    alias: String,
    params: Params,
) -> RestResult {
    blocking(move || {
        on_each_index(&node, &index, |index| AliasAction::Remove {
            index,
            alias: alias.clone(),
            must_exist: None,
        })
    })
    .await?;
    ok(ack(), &params)
}

/// Applies `action` to every index of the `index` expression, in one alias update.
fn on_each_index(
    node: &Node,
    index: &str,
    action: impl Fn(String) -> AliasAction,
) -> shoal_node::ApiResult<()> {
    let actions: Vec<AliasAction> = node
        .core()
        .resolve(index, ResolveOptions::admin())?
        .into_iter()
        .map(|s| action(s.name()))
        .collect();
    node.admin.update_aliases(&actions)
}

/// `GET /_alias`, `/_alias/{name}`, `/{index}/_alias`, `/{index}/_alias/{name}`, `/_aliases`.
pub async fn get_aliases(
    node: Arc<Node>,
    index: Option<String>,
    alias: Option<String>,
    params: Params,
) -> RestResult {
    let alias_filter = alias.clone();
    let opts = options(&params, ResolveOptions::admin())?;
    // Every node answers from its own applied state, so `local` changes nothing here.
    params.bool_or("local", false)?;
    let (body, missing) = blocking(move || {
        let mut out = Map::new();
        let mut found_names = std::collections::BTreeSet::new();
        for service in node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), opts)?
        {
            let meta = service.meta();
            let selected: Map<String, Value> = meta
                .aliases
                .iter()
                .filter(|(name, _)| {
                    alias_filter.as_deref().is_none_or(|f| {
                        f.split(',')
                            .any(|p| p == "_all" || shoal_node::routing::wildcard_match(p, name))
                    })
                })
                .map(|(name, spec)| {
                    found_names.insert(name.clone());
                    (name.clone(), spec.to_json())
                })
                .collect();
            if alias_filter.is_some() && selected.is_empty() {
                continue;
            }
            out.insert(meta.name.clone(), json!({"aliases": selected}));
        }
        let missing: Vec<String> = alias_filter
            .map(|f| {
                f.split(',')
                    .filter(|p| !p.contains('*') && *p != "_all" && !found_names.contains(*p))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok((Value::Object(out), missing))
    })
    .await?;
    if !missing.is_empty() {
        let mut body = body;
        let reason = if missing.len() == 1 {
            format!("alias [{}] missing", missing[0])
        } else {
            format!("aliases [{}] missing", missing.join(","))
        };
        body["error"] = json!(reason);
        body["status"] = json!(404);
        return Ok(json(StatusCode::NOT_FOUND, body, &params));
    }
    ok(body, &params)
}
