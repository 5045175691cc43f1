//! `shoal-bench search`: a fixed list of queries (each with a `type` name) sent round-robin,
//! closed loop (`--concurrency C`) or open loop (`--rate R` requests/s; latency counted from
//! the scheduled send time, so a server that falls behind is not flattered by coordinated
//! omission). `--check` sends each query once and prints its hit count and aggregation
//! buckets, for comparing two systems.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use crate::bulk::truncate;
use crate::http::{parse_url, Conn};
use crate::stats::{round3, Latency};

#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    #[arg(long)]
    pub url: String,
    #[arg(long, default_value = "_all")]
    pub index: String,
    /// JSON array of {"type": "...", "index": "...", "body": {...}} (or {"queries": [...]});
    /// `index` is optional and defaults to --index.
    #[arg(long)]
    pub queries: std::path::PathBuf,
    /// Closed loop with this many connections.
    #[arg(long, default_value_t = 3)]
    pub concurrency: usize,
    /// Open loop at this many requests per second (overrides --concurrency).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: connection pool size (requests wait for a free connection, and that
    /// wait counts in their latency).
    #[arg(long, default_value_t = 16)]
    pub connections: usize,
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Unmeasured warm-up seconds before the measurement (same mode).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Send each query once, sequentially, and print hit counts.
    #[arg(long)]
    pub check: bool,
}

struct Query {
    kind: String,
    /// `/{index}/_search`: the query's own `index`, else `--index`.
    path: String,
    body: Bytes,
}

#[derive(Default)]
struct PerType {
    latency: Latency,
    errors: u64,
    error_sample: Option<String>,
}

type Results = Mutex<BTreeMap<String, PerType>>;

pub async fn run(args: SearchArgs) -> anyhow::Result<Value> {
    let (addr, host) = parse_url(&args.url)?;
    let text = std::fs::read(&args.queries).with_context(|| format!("read {:?}", args.queries))?;
    let value: Value = serde_json::from_slice(&text)?;
    let list = value
        .get("queries")
        .cloned()
        .unwrap_or(value)
        .as_array()
        .cloned()
        .context("queries file must hold a JSON array")?;
    let queries: Arc<Vec<Query>> = Arc::new(
        list.iter()
            .map(|q| Query {
                kind: q["type"].as_str().unwrap_or("query").to_string(),
                path: format!("/{}/_search", q["index"].as_str().unwrap_or(&args.index)),
                body: Bytes::from(q["body"].to_string()),
            })
            .collect(),
    );
    anyhow::ensure!(!queries.is_empty(), "no queries");
    if args.check {
        return check(addr, host, &queries).await;
    }
    if args.warmup > 0.0 {
        let _ = measure(&args, addr, &host, &queries, args.warmup).await?;
    }
    let (seconds, results) = measure(&args, addr, &host, &queries, args.duration).await?;
    let results = results.into_inner().unwrap();
    let mut all = Latency::default();
    let mut per_type = serde_json::Map::new();
    let mut total_errors = 0;
    for (kind, r) in &results {
        all.add(&r.latency);
        total_errors += r.errors;
        per_type.insert(
            kind.clone(),
            json!({
                "qps": round3(r.latency.count() as f64 / seconds),
                "latency_ms": r.latency.to_json(),
                "errors": r.errors,
                "error_sample": r.error_sample,
            }),
        );
    }
    Ok(json!({
        "mode": if args.rate.is_some() { "open-loop" } else { "closed-loop" },
        "concurrency": if args.rate.is_some() { Value::Null } else { json!(args.concurrency) },
        "target_rate": args.rate,
        "seconds": round3(seconds),
        "requests": all.count(),
        "qps": round3(all.count() as f64 / seconds),
        "latency_ms": all.to_json(),
        "errors": total_errors,
        "per_type": per_type,
    }))
}

async fn measure(
    args: &SearchArgs,
    addr: std::net::SocketAddr,
    host: &str,
    queries: &Arc<Vec<Query>>,
    duration: f64,
) -> anyhow::Result<(f64, Results)> {
    let results: Arc<Results> = Arc::new(Mutex::new(BTreeMap::new()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(duration);
    let next = Arc::new(AtomicUsize::new(0));
    if let Some(rate) = args.rate {
        let pool = Arc::new(tokio::sync::Mutex::new(
            (0..args.connections.max(1))
                .map(|_| Conn::new(addr, host.to_string()))
                .collect::<Vec<_>>(),
        ));
        let permits = Arc::new(tokio::sync::Semaphore::new(args.connections.max(1)));
        let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
        let mut tasks = Vec::new();
        let mut i = 0u64;
        loop {
            let scheduled = start + interval.mul_f64(i as f64);
            if scheduled >= deadline {
                break;
            }
            tokio::time::sleep_until(scheduled.into()).await;
            let q = next.fetch_add(1, Ordering::Relaxed) % queries.len();
            let (queries, results, pool, permits) = (
                Arc::clone(queries),
                Arc::clone(&results),
                Arc::clone(&pool),
                Arc::clone(&permits),
            );
            tasks.push(tokio::spawn(async move {
                let _permit = permits.acquire().await.expect("open semaphore");
                let mut conn = pool.lock().await.pop().expect("a connection per permit");
                let query = &queries[q];
                let result = conn
                    .request(
                        Method::POST,
                        &query.path,
                        "application/json",
                        query.body.clone(),
                    )
                    .await;
                pool.lock().await.push(conn);
                record(&results, &query.kind, scheduled.elapsed(), result);
            }));
            i += 1;
        }
        for t in tasks {
            t.await?;
        }
    } else {
        let mut tasks = Vec::new();
        for _ in 0..args.concurrency.max(1) {
            let (queries, results, next, host) = (
                Arc::clone(queries),
                Arc::clone(&results),
                Arc::clone(&next),
                host.to_string(),
            );
            tasks.push(tokio::spawn(async move {
                let mut conn = Conn::new(addr, host);
                while Instant::now() < deadline {
                    let query = &queries[next.fetch_add(1, Ordering::Relaxed) % queries.len()];
                    let t0 = Instant::now();
                    let result = conn
                        .request(
                            Method::POST,
                            &query.path,
                            "application/json",
                            query.body.clone(),
                        )
                        .await;
                    record(&results, &query.kind, t0.elapsed(), result);
                }
            }));
        }
        for t in tasks {
            t.await?;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let results = Arc::try_unwrap(results).map_err(|_| anyhow::anyhow!("tasks still running"))?;
    Ok((seconds, results))
}

fn record(results: &Results, kind: &str, elapsed: Duration, result: anyhow::Result<(u16, Bytes)>) {
    let mut results = results.lock().unwrap();
    let entry = results.entry(kind.to_string()).or_default();
    match result {
        Ok((200, _)) => entry.latency.record_micros(elapsed.as_micros() as u64),
        Ok((status, body)) => {
            entry.errors += 1;
            if entry.error_sample.is_none() {
                entry.error_sample = Some(format!(
                    "HTTP {status}: {}",
                    truncate(&String::from_utf8_lossy(&body), 400)
                ));
            }
        }
        Err(e) => {
            entry.errors += 1;
            if entry.error_sample.is_none() {
                entry.error_sample = Some(format!("{e:#}"));
            }
        }
    }
}

/// Each query once: status, total hits and a summary of the top-level aggregations.
async fn check(
    addr: std::net::SocketAddr,
    host: String,
    queries: &[Query],
) -> anyhow::Result<Value> {
    let mut conn = Conn::new(addr, host);
    let mut out = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let t0 = Instant::now();
        let result = conn
            .request(Method::POST, &q.path, "application/json", q.body.clone())
            .await;
        let ms = round3(t0.elapsed().as_secs_f64() * 1000.0);
        let entry = match result {
            Ok((200, body)) => {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let total = &v["hits"]["total"];
                let mut aggs = serde_json::Map::new();
                if let Some(map) = v["aggregations"].as_object() {
                    for (name, agg) in map {
                        let summary = if let Some(buckets) = agg["buckets"].as_array() {
                            json!(buckets
                                .iter()
                                .map(|b| json!([
                                    b.get("key_as_string").unwrap_or(&b["key"]),
                                    b["doc_count"]
                                ]))
                                .collect::<Vec<_>>())
                        } else {
                            agg.get("value").cloned().unwrap_or(Value::Null)
                        };
                        aggs.insert(name.clone(), summary);
                    }
                }
                json!({
                    "i": i, "type": q.kind, "status": 200, "ms": ms,
                    "total": total.get("value").cloned().unwrap_or(total.clone()),
                    "relation": total.get("relation").cloned().unwrap_or(Value::Null),
                    "returned": v["hits"]["hits"].as_array().map(|h| h.len()),
                    "aggs": aggs,
                })
            }
            Ok((status, body)) => json!({
                "i": i, "type": q.kind, "status": status, "ms": ms,
                "error": truncate(&String::from_utf8_lossy(&body), 400),
            }),
            Err(e) => json!({"i": i, "type": q.kind, "status": 0, "error": format!("{e:#}")}),
        };
        out.push(entry);
    }
    Ok(json!({"mode": "check", "results": out}))
}
