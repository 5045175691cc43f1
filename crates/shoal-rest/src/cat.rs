//! `_cat` APIs: tables with `v`, `h`, `s`, `help`, `format=json` and `bytes`.

use shoal_state::HealthStatus;
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::Value;
use shoal_node::metadata::IndexMetadataExt;
use shoal_node::settings::format_bytes;
use shoal_node::stats;
use shoal_node::{ApiResult, Node, ResolveOptions};

use crate::request::Params;
use crate::response::{json, text, RestResult};
use crate::router::blocking;

/// One cell: raw value (for sorting and `bytes`) and how it prints.
#[derive(Debug, Clone)]
pub(crate) enum Cell {
    Text(String),
    Number(i64),
    Bytes(u64),
    Null,
}

pub(crate) struct Column {
    pub(crate) name: &'static str,
    pub(crate) aliases: &'static [&'static str],
    pub(crate) default: bool,
    pub(crate) description: &'static str,
}

pub(crate) struct Table {
    pub(crate) columns: Vec<Column>,
    pub(crate) rows: Vec<Vec<Cell>>,
}

macro_rules! col {
    ($name:expr, [$($alias:expr),*], $default:expr, $desc:expr) => {
        Column { name: $name, aliases: &[$($alias),*], default: $default, description: $desc }
    };
}
pub(crate) use col;

impl Table {
    pub(crate) fn render(self, params: &Params) -> RestResult {
        if params.flag("help") {
            let lines: Vec<String> = self
                .columns
                .iter()
                .map(|c| {
                    format!(
                        "{:<15} | {:<10} | {}",
                        c.name,
                        c.aliases.join(","),
                        c.description
                    )
                })
                .collect();
            return Ok(text(StatusCode::OK, lines.join("\n") + "\n"));
        }
        let selected = self.select_columns(params.get("h"));
        let names = self.display_names(params.get("h"));
        let mut rows = self.rows;
        if let Some(sort) = params.get("s") {
            sort_rows(&self.columns, &mut rows, sort);
        }
        let bytes_unit = params.get("bytes");
        let cell_text = |cell: &Cell| -> Option<String> {
            match cell {
                Cell::Text(s) => Some(s.clone()),
                Cell::Number(n) => Some(n.to_string()),
                Cell::Bytes(b) => Some(match bytes_unit {
                    Some("b") => b.to_string(),
                    Some("kb") => (b / 1024).to_string(),
                    Some("mb") => (b >> 20).to_string(),
                    Some("gb") => (b >> 30).to_string(),
                    _ => format_bytes(*b),
                }),
                Cell::Null => None,
            }
        };
        if params.get("format") == Some("json") {
            let out: Vec<Value> = rows
                .iter()
                .map(|row| {
                    let obj: serde_json::Map<String, Value> = selected
                        .iter()
                        .zip(&names)
                        .map(|(&i, name)| {
                            (
                                name.clone(),
                                cell_text(&row[i]).map(Value::String).unwrap_or(Value::Null),
                            )
                        })
                        .collect();
                    Value::Object(obj)
                })
                .collect();
            return Ok(json(StatusCode::OK, Value::Array(out), params));
        }
        let mut table: Vec<Vec<(String, bool)>> = Vec::new();
        if params.flag("v") {
            table.push(names.iter().map(|name| (name.clone(), false)).collect());
        }
        for row in &rows {
            table.push(
                selected
                    .iter()
                    .map(|&i| {
                        (
                            cell_text(&row[i]).unwrap_or_default(),
                            matches!(row[i], Cell::Number(_) | Cell::Bytes(_)),
                        )
                    })
                    .collect(),
            );
        }
        let widths: Vec<usize> = (0..selected.len())
            .map(|c| {
                table
                    .iter()
                    .map(|r| r[c].0.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        let last = widths.len().saturating_sub(1);
        for row in table {
            // As OpenSearch's table: every cell padded to its column's width but a left-aligned
            // last one, so empty trailing cells still leave their separators.
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, ((s, right), w))| match (*right, c == last) {
                    (true, _) => format!("{s:>w$}"),
                    (false, true) => s.clone(),
                    (false, false) => format!("{s:<w$}"),
                })
                .collect();
            out.push_str(&line.join(" "));
            out.push('\n');
        }
        Ok(text(StatusCode::OK, out))
    }

    /// Header names as requested in `h` (an alias stays an alias, like OpenSearch).
    fn display_names(&self, h: Option<&str>) -> Vec<String> {
        match h {
            None => self
                .select_columns(None)
                .into_iter()
                .map(|i| self.columns[i].name.to_string())
                .collect(),
            Some(spec) => spec
                .split(',')
                .flat_map(|name| {
                    let name = name.trim();
                    self.columns
                        .iter()
                        .filter(|c| {
                            shoal_node::routing::wildcard_match(name, c.name)
                                || c.aliases.contains(&name)
                        })
                        .map(|c| {
                            if c.aliases.contains(&name) {
                                name.to_string()
                            } else {
                                c.name.to_string()
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
        }
    }

    fn select_columns(&self, h: Option<&str>) -> Vec<usize> {
        match h {
            None => (0..self.columns.len())
                .filter(|&i| self.columns[i].default)
                .collect(),
            Some(spec) => spec
                .split(',')
                .flat_map(|name| {
                    let name = name.trim();
                    self.columns
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| {
                            shoal_node::routing::wildcard_match(name, c.name)
                                || c.aliases.contains(&name)
                        })
                        .map(|(i, _)| i)
                        .collect::<Vec<_>>()
                })
                .collect(),
        }
    }
}

fn sort_rows(columns: &[Column], rows: &mut [Vec<Cell>], spec: &str) {
    let keys: Vec<(usize, bool)> = spec
        .split(',')
        .filter_map(|k| {
            let (name, desc) = match k.split_once(':') {
                Some((n, order)) => (n, order == "desc"),
                None => (k, false),
            };
            columns
                .iter()
                .position(|c| c.name == name || c.aliases.contains(&name))
                .map(|i| (i, desc))
        })
        .collect();
    rows.sort_by(|a, b| {
        for &(i, desc) in &keys {
            let ord = compare(&a[i], &b[i]);
            let ord = if desc { ord.reverse() } else { ord };
            if ord != std::cmp::Ordering::Equal {
                return ord;
            }
        }
        std::cmp::Ordering::Equal
    });
}

fn compare(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    match (a, b) {
        (Cell::Number(x), Cell::Number(y)) => x.cmp(y),
        (Cell::Bytes(x), Cell::Bytes(y)) => x.cmp(y),
        (Cell::Text(x), Cell::Text(y)) => x.cmp(y),
        (Cell::Null, Cell::Null) => std::cmp::Ordering::Equal,
        (Cell::Null, _) => std::cmp::Ordering::Greater,
        (_, Cell::Null) => std::cmp::Ordering::Less,
        _ => std::cmp::Ordering::Equal,
    }
}

pub(crate) fn t(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

pub(crate) fn n(v: impl TryInto<i64>) -> Cell {
    Cell::Number(v.try_into().unwrap_or(i64::MAX))
}

/// `GET /_cat/indices[/{index}]`.
pub async fn indices(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let health_filter = match params.get("health") {
        None => None,
        Some(h) => Some(HealthStatus::parse(h).ok_or_else(|| {
            shoal_node::ApiError::bad_request(format!(
                "Invalid health status [{h}], expected one of [green, yellow, red]"
            ))
        })?),
    };
    let options = ResolveOptions::admin().from_request(&params.0)?;
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let table = blocking(move || -> ApiResult<Table> {
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), options)?;
        // `_cat/indices` reads index settings: a metadata block refuses it, as in OpenSearch.
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        node.core()
            .blocks()
            .check_indices(shoal_node::blocks::BlockLevel::MetadataRead, &names)?;
        let health = state.health(None);
        let copies = node.broadcast.copy_stats(&services);
        let mut rows = Vec::new();
        for service in services {
            let Some(index_health) = health.indices.get(&service.name()) else {
                continue;
            };
            if health_filter.is_some_and(|h| index_health.status != h) {
                continue;
            }
            let open = service.is_open();
            let (primaries, total) = stats::index_copy_totals(&state, &service.name(), &copies);
            let (docs, deleted, store, pri_store) = if open {
                (
                    n(primaries.docs_count),
                    n(primaries.docs_deleted),
                    Cell::Bytes(total.store_size_in_bytes),
                    Cell::Bytes(primaries.store_size_in_bytes),
                )
            } else {
                (Cell::Null, Cell::Null, Cell::Null, Cell::Null)
            };
            rows.push(vec![
                t(index_health.status.as_str()),
                t(if open { "open" } else { "close" }),
                t(service.name()),
                t(service.uuid()),
                n(index_health.number_of_shards),
                n(index_health.number_of_replicas),
                docs,
                deleted,
                store,
                pri_store,
                n(service.with_meta(|m| m.creation_date())),
                t(shoal_mapping::date::format_iso(
                    service.with_meta(|m| m.creation_date()),
                )),
            ]);
        }
        Ok(Table {
            columns: vec![
                col!("health", ["h"], true, "current health status"),
                col!("status", ["s"], true, "open/close status"),
                col!("index", ["i", "idx"], true, "index name"),
                col!("uuid", ["id", "uuid"], true, "index uuid"),
                col!(
                    "pri",
                    ["p", "shards.primary", "shardsPrimary"],
                    true,
                    "number of primary shards"
                ),
                col!(
                    "rep",
                    ["r", "shards.replica", "shardsReplica"],
                    true,
                    "number of replica shards"
                ),
                col!("docs.count", ["dc", "docsCount"], true, "available docs"),
                col!("docs.deleted", ["dd", "docsDeleted"], true, "deleted docs"),
                col!(
                    "store.size",
                    ["ss", "storeSize"],
                    true,
                    "store size of primaries & replicas"
                ),
                col!("pri.store.size", [], true, "store size of primaries"),
                col!(
                    "creation.date",
                    ["cd"],
                    false,
                    "index creation date (millisecond value)"
                ),
                col!(
                    "creation.date.string",
                    ["cds"],
                    false,
                    "index creation date (as string)"
                ),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat/shards[/{index}]`.
pub async fn shards(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let table = blocking(move || -> ApiResult<Table> {
        let mut rows = Vec::new();
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), ResolveOptions::admin())?;
        let copy_stats = node.broadcast.copy_stats(&services);
        for service in services {
            let name = service.name();
            for copies in state.shard_copies(&name) {
                for copy in copies {
                    let holder = copy.node.as_deref().and_then(|id| state.node(id));
                    let s = copy.node.as_ref().and_then(|node_id| {
                        copy_stats.get(&(name.clone(), copy.shard as usize, node_id.clone()))
                    });
                    rows.push(vec![
                        t(name.clone()),
                        n(copy.shard),
                        t(if copy.primary { "p" } else { "r" }),
                        t(copy.state.as_str()),
                        s.as_ref().map_or(Cell::Null, |s| n(s.docs_count)),
                        s.as_ref()
                            .map_or(Cell::Null, |s| Cell::Bytes(s.store_size_in_bytes)),
                        holder.map_or(Cell::Null, |h| t(h.ip.clone())),
                        holder.map_or(Cell::Null, |h| t(h.name.clone())),
                        copy.unassigned
                            .as_ref()
                            .filter(|_| copy.state == shoal_state::ShardState::Unassigned)
                            .map_or(Cell::Null, |u| t(u.reason.as_str())),
                        s.as_ref().map_or(Cell::Null, |s| n(s.max_seq_no)),
                        s.as_ref().map_or(Cell::Null, |s| n(s.local_checkpoint)),
                        s.as_ref().map_or(Cell::Null, |s| n(s.global_checkpoint)),
                    ]);
                }
            }
        }
        Ok(Table {
            columns: vec![
                col!("index", ["i", "idx"], true, "index name"),
                col!("shard", ["s", "sh"], true, "shard name"),
                col!(
                    "prirep",
                    ["p", "pr", "primaryOrReplica"],
                    true,
                    "primary or replica"
                ),
                col!("state", ["st"], true, "shard state"),
                col!("docs", ["d", "dc"], true, "number of docs in shard"),
                col!(
                    "store",
                    ["sto"],
                    true,
                    "store size of shard (how much disk it uses)"
                ),
                col!("ip", [], true, "ip of node where it lives"),
                col!("node", ["n"], true, "name of node where it lives"),
                col!(
                    "unassigned.reason",
                    ["ur"],
                    false,
                    "reason shard is unassigned"
                ),
                col!(
                    "seq_no.max",
                    ["sqm", "maxSeqNo"],
                    false,
                    "max sequence number"
                ),
                col!(
                    "seq_no.local_checkpoint",
                    ["sql", "localCheckpoint"],
                    false,
                    "local checkpoint"
                ),
                col!(
                    "seq_no.global_checkpoint",
                    ["sqg", "globalCheckpoint"],
                    false,
                    "global checkpoint"
                ),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat/health`.
pub async fn health(node: Arc<Node>, params: Params) -> RestResult {
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let view = crate::health::read_view(&node, confirm).await?;
    let table = blocking(move || -> ApiResult<Table> {
        let now = shoal_node::node::now_millis();
        let health = view.health(None);
        let c = &health.counts;
        let discovered = node.admin.has_cluster_manager();
        let time = chrono_time(now);
        Ok(Table {
            columns: vec![
                col!(
                    "epoch",
                    ["t", "time"],
                    true,
                    "seconds since 1970-01-01 00:00:00"
                ),
                col!(
                    "timestamp",
                    ["ts", "hms", "hhmmss"],
                    true,
                    "time in HH:MM:SS"
                ),
                col!("cluster", ["cl"], true, "cluster name"),
                col!("status", ["st"], true, "health status"),
                col!(
                    "node.total",
                    ["nt", "nodeTotal"],
                    true,
                    "total number of nodes"
                ),
                col!(
                    "node.data",
                    ["nd", "nodeData"],
                    true,
                    "number of nodes that can store data"
                ),
                col!(
                    "discovered_cluster_manager",
                    ["dcm"],
                    true,
                    "cluster manager is discovered"
                ),
                col!(
                    "shards",
                    ["t", "sh", "shards.total", "shardsTotal"],
                    true,
                    "total number of shards"
                ),
                col!(
                    "pri",
                    ["p", "shards.primary", "shardsPrimary"],
                    true,
                    "number of primary shards"
                ),
                col!(
                    "relo",
                    ["r", "shards.relocating", "shardsRelocating"],
                    true,
                    "number of relocating nodes"
                ),
                col!(
                    "init",
                    ["i", "shards.initializing", "shardsInitializing"],
                    true,
                    "number of initializing nodes"
                ),
                col!(
                    "unassign",
                    ["u", "shards.unassigned", "shardsUnassigned"],
                    true,
                    "number of unassigned shards"
                ),
                col!(
                    "pending_tasks",
                    ["pt", "pendingTasks"],
                    true,
                    "number of pending tasks"
                ),
                col!(
                    "max_task_wait_time",
                    ["mtwt", "maxTaskWaitTime"],
                    true,
                    "wait time of longest task pending"
                ),
                col!(
                    "active_shards_percent",
                    ["asp", "activeShardsPercent"],
                    true,
                    "active number of shards in percent"
                ),
            ],
            rows: vec![vec![
                n(now / 1000),
                t(time),
                t(node.core().config.cluster_name.clone()),
                t(health.status.as_str()),
                n(health.number_of_nodes),
                n(health.number_of_data_nodes),
                t(discovered.to_string()),
                n(c.active_shards),
                n(c.active_primary_shards),
                n(c.relocating_shards),
                n(c.initializing_shards),
                n(c.unassigned_shards),
                n(0),
                t("-"),
                t(format!("{:.1}%", health.active_shards_percent())),
            ]],
        })
    })
    .await?;
    table.render(&params)
}

fn chrono_time(millis: i64) -> String {
    let secs = millis / 1000 % 86400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// `GET /_cat/count[/{index}]`.
pub async fn count(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let table = blocking(move || -> ApiResult<Table> {
        let total: u64 = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), ResolveOptions::search())?
            .iter()
            .flat_map(|s| s.shards())
            .map(|e| e.searcher().num_docs())
            .sum();
        let now = shoal_node::node::now_millis();
        Ok(Table {
            columns: vec![
                col!(
                    "epoch",
                    ["t", "time"],
                    true,
                    "seconds since 1970-01-01 00:00:00"
                ),
                col!(
                    "timestamp",
                    ["ts", "hms", "hhmmss"],
                    true,
                    "time in HH:MM:SS"
                ),
                col!(
                    "count",
                    ["dc", "docs.count", "docsCount"],
                    true,
                    "the document count"
                ),
            ],
            rows: vec![vec![n(now / 1000), t(chrono_time(now)), n(total)]],
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat/nodes`.
pub async fn nodes(node: Arc<Node>, params: Params) -> RestResult {
    let confirm = crate::health::cluster_manager_confirmation(&params)?;
    let state = crate::health::read_view(&node, confirm).await?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let loads: Vec<String> = load
        .split_whitespace()
        .take(3)
        .map(str::to_string)
        .collect();
    let table = Table {
        columns: vec![
            col!("ip", ["i"], true, "ip address"),
            col!(
                "heap.percent",
                ["hp", "heapPercent"],
                true,
                "used heap ratio"
            ),
            col!(
                "ram.percent",
                ["rp", "ramPercent"],
                true,
                "used machine memory ratio"
            ),
            col!("cpu", [], true, "recent cpu usage"),
            col!("load_1m", ["l"], true, "1m load avg"),
            col!("load_5m", ["l"], true, "5m load avg"),
            col!("load_15m", ["l"], true, "15m load avg"),
            col!(
                "node.role",
                ["r", "role", "nodeRole"],
                true,
                "m:master eligible node, d:data node, i:ingest node, -:coordinating node only"
            ),
            col!("node.roles", ["rs", "all roles"], true, "node roles"),
            col!(
                "cluster_manager",
                ["cm", "m"],
                true,
                "*:current cluster manager"
            ),
            col!("name", ["n"], true, "node name"),
            col!("id", ["nodeId"], false, "unique node id"),
        ],
        rows: {
            let manager = state.cluster_manager().map(str::to_string);
            state
                .nodes()
                .map(|d| {
                    vec![
                        t(d.ip.clone()),
                        n(0),
                        n(0),
                        n(0),
                        t(loads.first().cloned().unwrap_or_default()),
                        t(loads.get(1).cloned().unwrap_or_default()),
                        t(loads.get(2).cloned().unwrap_or_default()),
                        t(d.role_letters()),
                        t(d.roles
                            .iter()
                            .map(|r| r.as_str())
                            .collect::<Vec<_>>()
                            .join(",")),
                        t(if manager.as_deref() == Some(d.id.as_str()) {
                            "*"
                        } else {
                            "-"
                        }),
                        t(d.name.clone()),
                        t(d.id.clone()),
                    ]
                })
                .collect()
        },
    };
    table.render(&params)
}

/// The format version segments report (OpenSearch reports the Lucene version).
pub(crate) const SEGMENT_VERSION: &str = "tantivy-0.27";

/// `GET /_cat/segments[/{index}]`.
pub async fn segments(node: Arc<Node>, index: Option<String>, params: Params) -> RestResult {
    let table = blocking(move || -> ApiResult<Table> {
        let mut rows = Vec::new();
        let services = node
            .core()
            .resolve(index.as_deref().unwrap_or("_all"), ResolveOptions::search())?;
        let state = node.admin.view();
        for ((name, shard, node_id), segments) in node.broadcast.copy_segments(&services) {
            let Some(copy) = state
                .copies(&name, shard as u32)
                .iter()
                .find(|c| c.node.as_deref() == Some(node_id.as_str()))
                .cloned()
            else {
                continue;
            };
            let ip = state
                .node(&node_id)
                .map_or(String::new(), |n| n.host.clone());
            for seg in segments {
                rows.push(vec![
                    t(name.clone()),
                    n(shard),
                    t(if copy.primary { "p" } else { "r" }),
                    t(ip.clone()),
                    t(node_id.clone()),
                    t(seg.name.clone()),
                    n(seg.generation),
                    n(seg.docs_count),
                    n(seg.docs_deleted),
                    Cell::Bytes(seg.size_in_bytes),
                    Cell::Bytes(0),
                    t(seg.committed.to_string()),
                    t(seg.searchable.to_string()),
                    t(SEGMENT_VERSION),
                    t("false"),
                ]);
            }
        }
        Ok(Table {
            columns: vec![
                col!("index", ["i", "idx"], true, "index name"),
                col!("shard", ["s", "sh"], true, "shard name"),
                col!(
                    "prirep",
                    ["p", "pr", "primaryOrReplica"],
                    true,
                    "primary or replica"
                ),
                col!("ip", [], true, "ip of node where it lives"),
                col!("id", [], false, "unique id of node where it lives"),
                col!("segment", ["seg"], true, "segment name"),
                col!("generation", ["g", "gen"], true, "segment generation"),
                col!(
                    "docs.count",
                    ["dc", "docsCount"],
                    true,
                    "number of docs in segment"
                ),
                col!(
                    "docs.deleted",
                    ["dd", "docsDeleted"],
                    true,
                    "number of deleted docs in segment"
                ),
                col!("size", ["si"], true, "segment size in bytes"),
                col!(
                    "size.memory",
                    ["sm", "sizeMemory"],
                    true,
                    "segment memory in bytes"
                ),
                col!(
                    "committed",
                    ["ic", "isCommitted"],
                    true,
                    "is segment committed"
                ),
                col!(
                    "searchable",
                    ["is", "isSearchable"],
                    true,
                    "is segment searched"
                ),
                col!("version", ["v", "ver"], true, "version"),
                col!(
                    "compound",
                    ["ico", "isCompound"],
                    true,
                    "is segment compound"
                ),
            ],
            rows,
        })
    })
    .await?;
    table.render(&params)
}

/// `GET /_cat`: every `_cat` endpoint this node serves (`test_cluster_cat` requests each).
pub async fn help() -> RestResult {
    let endpoints = [
        "/_cat/aliases",
        "/_cat/aliases/{alias}",
        "/_cat/allocation",
        "/_cat/allocation/{node_id}",
        "/_cat/cluster_manager",
        "/_cat/count",
        "/_cat/count/{index}",
        "/_cat/health",
        "/_cat/indices",
        "/_cat/indices/{index}",
        "/_cat/nodeattrs",
        "/_cat/nodes",
        "/_cat/pending_tasks",
        "/_cat/recovery",
        "/_cat/recovery/{index}",
        "/_cat/repositories",
        "/_cat/segment_replication",
        "/_cat/segment_replication/{index}",
        "/_cat/segments",
        "/_cat/segments/{index}",
        "/_cat/shards",
        "/_cat/shards/{index}",
        "/_cat/snapshots/{repository}",
        "/_cat/tasks",
        "/_cat/thread_pool",
        "/_cat/thread_pool/{thread_pools}",
    ];
    Ok(text(
        StatusCode::OK,
        format!("=^.^=\n{}\n", endpoints.join("\n")),
    ))
}
