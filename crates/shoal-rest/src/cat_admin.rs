//! `_cat/allocation`, `_cat/nodeattrs`, `_cat/pending_tasks`, `_cat/aliases` and
//! `_cat/cluster_manager`, on the column machinery of `cat.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::Router;
use shoal_node::{ApiResult, Node, ResolveOptions};

use crate::cat::{col, n, t, Cell, Column, Table};
use crate::request::Params;
use crate::response::RestResult;
use crate::router::blocking;

type S = Arc<Node>;
type Q = Query<std::collections::HashMap<String, String>>;

pub fn routes() -> Router<S> {
    Router::new()
        .route(
            "/_cat/allocation",
            get(|State(s): State<S>, Query(q): Q| allocation(s, None, Params(q))),
        )
        .route(
            "/_cat/allocation/{node_id}",
            get(|State(s): State<S>, Path(id): Path<String>, Query(q): Q| {
                allocation(s, Some(id), Params(q))
            }),
        )
        .route(
            "/_cat/nodeattrs",
            get(|State(s): State<S>, Query(q): Q| nodeattrs(s, Params(q))),
        )
        .route(
            "/_cat/pending_tasks",
            get(|Query(q): Q| pending_tasks(Params(q))),
        )
        .route(
            "/_cat/cluster_manager",
            get(|State(s): State<S>, Query(q): Q| cluster_manager(s, Params(q))),
        )
        .route(
            "/_cat/master",
            get(|State(s): State<S>, Query(q): Q| cluster_manager(s, Params(q))),
        )
        .route(
            "/_cat/aliases",
            get(|State(s): State<S>, Query(q): Q| aliases(s, None, Params(q))),
        )
        .route(
            "/_cat/aliases/{alias}",
            get(|State(s): State<S>, Path(a): Path<String>, Query(q): Q| {
                aliases(s, Some(a), Params(q))
            }),
        )
}

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `GET /_cat/allocation[/{node_id}]`: shards and disk per node (data nodes unless the path
/// names others), and the unassigned copies on a row of their own. This node's disk is
/// measured now; the others' come from their last report to the cluster state.
pub async fn allocation(node: Arc<Node>, nodes: Option<String>, params: Params) -> RestResult {
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let table = blocking(move || -> ApiResult<Table> {
        let selectors = list(nodes.as_deref().unwrap_or("data:true"));
        let mut shards: BTreeMap<Option<&str>, i64> = BTreeMap::new();
        // Relocation targets are not in the routing table OpenSearch counts.
        for copy in state
            .all_copies()
            .filter(|c| c.relocation_target_of().is_none())
        {
            *shards.entry(copy.node.as_deref()).or_default() += 1;
        }
        let mut rows = Vec::new();
        for id in state.resolve_node_selectors(&node.core().node_id, &selectors) {
            let Some(discovery) = state.node(&id) else {
                continue;
            };
            let usage = node.admin.disk_usage(&state, &id);
            let disk = |f: fn(&shoal_state::DiskUsage) -> u64| {
                usage.as_ref().map_or(Cell::Null, |u| Cell::Bytes(f(u)))
            };
            let percent = usage.filter(|u| u.total_bytes > 0).map_or(Cell::Null, |u| {
                let used = u.total_bytes.saturating_sub(u.available_bytes);
                n(used * 100 / (used + u.available_bytes).max(1))
            });
            rows.push(vec![
                n(shards.get(&Some(id.as_str())).copied().unwrap_or(0)),
                Cell::Bytes(usage.map_or(0, |u| u.shards_bytes)),
                disk(|u| u.total_bytes.saturating_sub(u.available_bytes)),
                disk(|u| u.available_bytes),
                disk(|u| u.total_bytes),
                percent,
                t(discovery.host.clone()),
                t(discovery.ip.clone()),
                t(discovery.name.clone()),
            ]);
        }
        if let Some(count) = shards.get(&None) {
            let mut row = vec![n(*count)];
            row.extend(std::iter::repeat_n(Cell::Null, 7));
            row.push(t("UNASSIGNED"));
            rows.push(row);
        }
        Ok(Table {
            columns: vec![
                col!("shards", ["s"], true, "number of shards on node"),
                col!(
                    "disk.indices",
                    ["di", "diskIndices"],
                    true,
                    "disk used by OpenSearch indices"
                ),
                col!(
                    "disk.used",
                    ["du", "diskUsed"],
                    true,
                    "disk used (total, not just OpenSearch)"
                ),
                col!("disk.avail", ["da", "diskAvail"], true, "disk available"),
                col!(
                    "disk.total",
                    ["dt", "diskTotal"],
                    true,
                    "total capacity of all volumes"
                ),
                col!(
                    "disk.percent",
                    ["dp", "diskPercent"],
                    true,
                    "percent disk used"
                ),
                col!("host", ["h"], true, "host of node"),
                col!("ip", [], true, "ip of node"),
                col!("node", ["n"], true, "name of node"),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// Whether the `h` parameter asks for a column (by name or alias).
fn asks_for(params: &Params, name: &str, alias: &str) -> bool {
    params
        .get("h")
        .is_some_and(|h| h.split(',').map(str::trim).any(|c| c == name || c == alias))
}

/// `GET /_cat/nodeattrs`: one row per attribute of every node. `id` is the first four
/// characters unless `full_id`; `pid` asks every node for its process id.
pub async fn nodeattrs(node: Arc<Node>, params: Params) -> RestResult {
    let full_id = params.bool_or("full_id", false)?;
    let want_pid = asks_for(&params, "pid", "p");
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let table = blocking(move || -> ApiResult<Table> {
        let ids: Vec<String> = state.node_ids();
        let pids: BTreeMap<String, i64> = if want_pid {
            node.admin
                .nodes_info(&ids, Duration::from_secs(10))
                .into_iter()
                .filter_map(|(id, info)| Some((id, info.ok()?["process"]["id"].as_i64()?)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let mut rows = Vec::new();
        for discovery in state.nodes() {
            let id = if full_id {
                discovery.id.clone()
            } else {
                discovery.id.chars().take(4).collect()
            };
            let port = discovery
                .transport_address
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<i64>().ok())
                .map_or(Cell::Null, n);
            let pid = pids.get(&discovery.id).map_or(Cell::Null, |p| n(*p));
            for (attr, value) in crate::cluster_admin::display_attributes(discovery) {
                rows.push(vec![
                    t(discovery.name.clone()),
                    t(id.clone()),
                    pid.clone(),
                    t(discovery.host.clone()),
                    t(discovery.ip.clone()),
                    port.clone(),
                    t(attr),
                    t(value.as_str().unwrap_or_default()),
                ]);
            }
        }
        Ok(Table {
            columns: vec![
                col!("node", ["name"], true, "node name"),
                col!("id", ["id", "nodeId"], false, "unique node id"),
                col!("pid", ["p"], false, "process id"),
                col!("host", ["h"], true, "host name"),
                col!("ip", ["i"], true, "ip address"),
                col!("port", ["po"], false, "bound transport port"),
                col!("attr", ["attr.name"], true, "attribute description"),
                col!("value", ["attr.value"], true, "attribute value"),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat/pending_tasks`: cluster state updates are Raft entries applied in order, with
/// no queue of tasks waiting on the cluster manager, so the table is empty.
pub async fn pending_tasks(params: Params) -> RestResult {
    let columns: Vec<Column> = vec![
        col!("insertOrder", ["o"], true, "task insertion order"),
        col!(
            "timeInQueue",
            ["t"],
            true,
            "how long task has been in queue"
        ),
        col!("priority", ["p"], true, "task priority"),
        col!("source", ["s"], true, "task source"),
    ];
    Table {
        columns,
        rows: Vec::new(),
    }
    .render(&params)
}

/// `GET /_cat/aliases[/{alias}]`.
pub async fn aliases(node: Arc<Node>, alias: Option<String>, params: Params) -> RestResult {
    // Every index by default, closed and hidden ones too (OpenSearch's get-aliases options);
    // `expand_wildcards` narrows which indices' aliases are listed.
    let every_index = ResolveOptions {
        expand_hidden: true,
        ..ResolveOptions::admin()
    };
    let options = crate::indices::options(&params, every_index)?;
    // Every node answers from its own applied state, so `local` changes nothing here.
    params.bool_or("local", false)?;
    let table = blocking(move || -> ApiResult<Table> {
        let mut rows = Vec::new();
        for service in node.core().resolve("_all", options)? {
            let meta = service.meta();
            for (name, spec) in &meta.aliases {
                if alias.as_deref().is_some_and(|a| {
                    !a.split(',')
                        .any(|p| shoal_node::routing::wildcard_match(p, name))
                }) {
                    continue;
                }
                rows.push(vec![
                    t(name.clone()),
                    t(meta.name.clone()),
                    t(if spec.filter.is_some() { "*" } else { "-" }),
                    t(spec.index_routing.clone().unwrap_or_else(|| "-".into())),
                    t(spec.search_routing.clone().unwrap_or_else(|| "-".into())),
                    t(spec
                        .is_write_index
                        .map(|w| w.to_string())
                        .unwrap_or_else(|| "-".into())),
                ]);
            }
        }
        Ok(Table {
            columns: vec![
                col!("alias", ["a"], true, "alias name"),
                col!("index", ["i", "idx"], true, "index alias points to"),
                col!("filter", ["f", "fi"], true, "filter"),
                col!(
                    "routing.index",
                    ["ri", "routingIndex"],
                    true,
                    "index routing"
                ),
                col!(
                    "routing.search",
                    ["rs", "routingSearch"],
                    true,
                    "search routing"
                ),
                col!("is_write_index", ["w", "isWriteIndex"], true, "write index"),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat/cluster_manager` (and `/_cat/master`): the elected cluster manager, or a row of
/// `-` as OpenSearch's when the view names none (`local=true` on a node that lost it).
pub async fn cluster_manager(node: Arc<Node>, params: Params) -> RestResult {
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let row = state
        .cluster_manager()
        .and_then(|id| state.node(id))
        .map_or_else(
            || vec![t("-"); 4],
            |d| {
                vec![
                    t(d.id.clone()),
                    t(d.host.clone()),
                    t(d.ip.clone()),
                    t(d.name.clone()),
                ]
            },
        );
    let rows = vec![row];
    let table = Table {
        columns: vec![
            col!("id", [], true, "node id"),
            col!("host", ["h"], true, "host name"),
            col!("ip", [], true, "ip address"),
            col!("node", ["n"], true, "node name"),
        ],
        rows,
    };
    table.render(&params)
}
