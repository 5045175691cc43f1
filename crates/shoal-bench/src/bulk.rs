//! `shoal-bench bulk`: N connections sending prebuilt `_bulk` bodies as fast as the server
//! answers (closed loop). Bodies are built before the clock starts so the client's own CPU
//! stays out of the measurement.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Value};

use crate::http::{parse_url, Conn};
use crate::stats::{round3, Latency};

#[derive(clap::Args, Debug)]
pub struct BulkArgs {
    /// Server URL, e.g. http://127.0.0.1:9200
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub index: String,
    /// NDJSON corpus: one document per line.
    #[arg(long)]
    pub file: std::path::PathBuf,
    #[arg(long, default_value_t = 500)]
    pub docs_per_bulk: usize,
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    /// Stop sending new bulks after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Index at most this many documents (after --repeat).
    #[arg(long)]
    pub max_docs: Option<usize>,
    /// Send the corpus this many times, with distinct ids.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// `explicit`: `_id` = document number (prefixed by --id-prefix); `auto`: server-generated.
    #[arg(long, default_value = "explicit")]
    pub ids: String,
    #[arg(long, default_value = "")]
    pub id_prefix: String,
    /// Skip this many documents of the corpus first (continue an earlier load).
    #[arg(long, default_value_t = 0)]
    pub skip: usize,
    /// Offer at most this many documents per second (bulk i is not sent before
    /// i × docs_per_bulk / rate seconds): a steady load below saturation. Unset: as fast as
    /// the server answers.
    #[arg(long)]
    pub rate: Option<f64>,
}

struct Shared {
    bodies: Vec<(Bytes, usize)>,
    next: AtomicUsize,
    latency: Mutex<Latency>,
    /// (ms since start at completion, docs acknowledged) per bulk.
    timeline: Mutex<Vec<(u64, usize)>>,
    errors: Mutex<Errors>,
}

#[derive(Default)]
struct Errors {
    failed_requests: u64,
    failed_items: u64,
    sample: Option<String>,
}

/// When bulk `i` is due under an offered `rate` of documents per second.
fn send_time(start: Instant, i: usize, docs_per_bulk: usize, rate: Option<f64>) -> Option<Instant> {
    let rate = rate?;
    Some(start + Duration::from_secs_f64((i * docs_per_bulk) as f64 / rate))
}

pub async fn run(args: BulkArgs) -> anyhow::Result<Value> {
    let (addr, host) = parse_url(&args.url)?;
    let text = std::fs::read(&args.file).with_context(|| format!("read {:?}", args.file))?;
    let docs: Vec<&[u8]> = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .collect();
    anyhow::ensure!(!docs.is_empty(), "empty corpus {:?}", args.file);
    let mut total = docs.len() * args.repeat.max(1);
    total = total.saturating_sub(args.skip);
    if let Some(max) = args.max_docs {
        total = total.min(max);
    }
    let explicit = match args.ids.as_str() {
        "explicit" => true,
        "auto" => false,
        other => anyhow::bail!("--ids must be explicit or auto, not {other}"),
    };
    let mut bodies = Vec::with_capacity(total / args.docs_per_bulk + 1);
    let mut n = args.skip;
    let end = args.skip + total;
    while n < end {
        let upto = (n + args.docs_per_bulk).min(end);
        let mut body = Vec::with_capacity((upto - n) * 800);
        for i in n..upto {
            if explicit {
                body.extend_from_slice(b"{\"index\":{\"_id\":\"");
                body.extend_from_slice(args.id_prefix.as_bytes());
                body.extend_from_slice(i.to_string().as_bytes());
                body.extend_from_slice(b"\"}}\n");
            } else {
                body.extend_from_slice(b"{\"index\":{}}\n");
            }
            body.extend_from_slice(docs[i % docs.len()]);
            body.push(b'\n');
        }
        bodies.push((Bytes::from(body), upto - n));
        n = upto;
    }
    let body_bytes: usize = bodies.iter().map(|(b, _)| b.len()).sum();
    let shared = Arc::new(Shared {
        bodies,
        next: AtomicUsize::new(0),
        latency: Mutex::new(Latency::default()),
        timeline: Mutex::new(Vec::new()),
        errors: Mutex::new(Errors::default()),
    });
    let path = format!("/{}/_bulk", args.index);
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let (docs_per_bulk, rate) = (args.docs_per_bulk, args.rate);
    if let Some(rate) = rate {
        anyhow::ensure!(rate > 0.0, "--rate must be above 0, not {rate}");
    }
    let mut tasks = Vec::new();
    for _ in 0..args.clients.max(1) {
        let shared = Arc::clone(&shared);
        let path = path.clone();
        let host = host.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(addr, host);
            let mut local = Latency::default();
            let mut acked = 0usize;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = shared.next.fetch_add(1, Ordering::Relaxed);
                let Some((body, count)) = shared.bodies.get(i) else {
                    break;
                };
                if let Some(due) = send_time(start, i, docs_per_bulk, rate) {
                    tokio::time::sleep_until(due.into()).await;
                }
                let t0 = Instant::now();
                let result = conn
                    .request(Method::POST, &path, "application/x-ndjson", body.clone())
                    .await;
                let elapsed = t0.elapsed();
                match result {
                    Ok((200, response)) => {
                        local.record_micros(elapsed.as_micros() as u64);
                        let failed = failed_items(&response);
                        let ok = count - failed.0;
                        acked += ok;
                        shared
                            .timeline
                            .lock()
                            .unwrap()
                            .push((start.elapsed().as_millis() as u64, ok));
                        if failed.0 > 0 {
                            let mut e = shared.errors.lock().unwrap();
                            e.failed_items += failed.0 as u64;
                            if e.sample.is_none() {
                                e.sample = failed.1;
                            }
                        }
                    }
                    Ok((status, response)) => {
                        let mut e = shared.errors.lock().unwrap();
                        e.failed_requests += 1;
                        if e.sample.is_none() {
                            let text = String::from_utf8_lossy(&response);
                            e.sample = Some(format!("HTTP {status}: {}", truncate(&text, 500)));
                        }
                    }
                    Err(err) => {
                        let mut e = shared.errors.lock().unwrap();
                        e.failed_requests += 1;
                        if e.sample.is_none() {
                            e.sample = Some(format!("{err:#}"));
                        }
                    }
                }
            }
            shared.latency.lock().unwrap().add(&local);
            acked
        }));
    }
    let mut acked = 0;
    for t in tasks {
        acked += t.await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let latency = shared.latency.lock().unwrap();
    let errors = shared.errors.lock().unwrap();
    let mut timeline = shared.timeline.lock().unwrap().clone();
    timeline.sort();
    let buckets = (seconds.ceil() as usize).max(1);
    let mut per_second = vec![0usize; buckets];
    for (ms, docs) in &timeline {
        per_second[((*ms / 1000) as usize).min(buckets - 1)] += docs;
    }
    Ok(json!({
        "docs": acked,
        "docs_sent": shared.bodies.iter().take(shared.next.load(Ordering::Relaxed)).map(|(_, c)| c).sum::<usize>(),
        "bulks": latency.count(),
        "seconds": round3(seconds),
        "docs_per_s": round3(acked as f64 / seconds),
        "mb_per_s": round3(body_bytes as f64 / 1e6 / seconds * (acked as f64 / total.max(1) as f64)),
        "clients": args.clients,
        "docs_per_bulk": args.docs_per_bulk,
        "offered_docs_per_s": args.rate,
        "ids": args.ids,
        "bulk_latency_ms": latency.to_json(),
        "failed_requests": errors.failed_requests,
        "failed_items": errors.failed_items,
        "error_sample": errors.sample,
        "docs_per_second_timeline": per_second,
    }))
}

/// Number of failed items of a 200 bulk response, and a sample error. Only parses the body
/// when the `errors` flag near its start says so.
fn failed_items(body: &[u8]) -> (usize, Option<String>) {
    let head = &body[..body.len().min(128)];
    if !contains(head, b"\"errors\":true") {
        return (0, None);
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (0, Some("unparsable bulk response".into()));
    };
    let mut failed = 0;
    let mut sample = None;
    for item in value["items"].as_array().into_iter().flatten() {
        if let Some(obj) = item.as_object().and_then(|o| o.values().next()) {
            if obj.get("error").is_some() {
                failed += 1;
                if sample.is_none() {
                    sample = Some(truncate(&obj["error"].to_string(), 500));
                }
            }
        }
    }
    (failed, sample)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

pub fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut end = n;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
