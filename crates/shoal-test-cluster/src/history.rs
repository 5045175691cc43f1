//! The history of acknowledged writes, checked against what every copy's engine holds (the
//! Rust twin of `tests/history.py`).
//!
//! Writers record every acknowledged write (id, seq_no, primary term, version, value) and
//! every write whose outcome is unknown (an error or a lost connection: the primary may have
//! applied it before failing). Values written to an id only grow. [`History::verify`] reads
//! each started copy's engine directly on its node and fails if an acknowledged document is
//! missing or holds an older value, if a copy holds a value nobody wrote, or if the copies of
//! a shard disagree (documents, versions, doc count, max seq_no).
//!
//! One exception to "older value", as in `tests/history.py`: a write that got no answer at all
//! (its coordinator was killed with it in flight) is still pending, so the primary may apply it
//! after writes the client sent later. It is accepted only where the copy shows exactly that
//! (the held value sits after the acknowledged one in the shard's history) and counted in
//! [`Summary::applied_late`]. A write the cluster answered as failed must never come back.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use serde_json::Value;
use shoal_engine::Engine;
use tantivy::schema::IndexRecordOption;
use tantivy::{DocSet, Term, TERMINATED};

use crate::TestCluster;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub version: i64,
    pub seq_no: i64,
    pub primary_term: i64,
    pub value: i64,
}

/// A document as one copy holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocState {
    pub seq_no: i64,
    pub primary_term: i64,
    pub version: i64,
    pub value: i64,
}

/// Everything one shard copy holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyContents {
    pub docs: BTreeMap<String, DocState>,
    pub max_seq_no: i64,
    /// Ids with more than one live document (a broken delete-then-add).
    pub duplicates: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub acknowledged: usize,
    pub attempted: usize,
    pub failed: usize,
    pub copies_checked: usize,
    /// Ids holding an unanswered write applied after their last acknowledged one.
    pub applied_late: usize,
}

/// How a write whose outcome is unknown ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No answer (refused, reset, timed out): the write may still be applied later.
    NoAnswer(String),
    /// The cluster answered it failed (or it was never sent).
    Answered(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoAnswer(why) => write!(f, "no answer: {why}"),
            Failure::Answered(why) => write!(f, "answered: {why}"),
        }
    }
}

#[derive(Default)]
struct Inner {
    acks: HashMap<String, Ack>,
    /// Per id, the values of writes whose outcome is unknown, with how each ended.
    indeterminate: HashMap<String, HashMap<i64, Failure>>,
    /// Every acknowledged write, also the ones a later write to the same id superseded.
    acknowledged_writes: usize,
    attempted: usize,
    failed: usize,
}

#[derive(Default)]
pub struct History {
    inner: Mutex<Inner>,
}

impl History {
    /// Records the items of a `_bulk` answer (`sent`: (id, value) in request order).
    pub fn record_bulk(&self, sent: &[(String, i64)], response: &Value) {
        let items = response["items"].as_array().cloned().unwrap_or_default();
        let mut inner = self.inner.lock();
        inner.attempted += sent.len();
        for (i, (id, value)) in sent.iter().enumerate() {
            let result = items
                .get(i)
                .and_then(|item| item.get("index").or_else(|| item.get("create")).cloned());
            match result {
                Some(r) if matches!(r["status"].as_u64(), Some(200 | 201)) => {
                    inner.acknowledge(id, *value, &r)
                }
                other => inner.unknown(id, *value, Failure::Answered(item_failure(other.as_ref()))),
            }
        }
    }

    /// Records a single-document write's answer (`PUT /{index}/_doc/{id}`).
    pub fn record_doc(&self, id: &str, value: i64, status: u16, body: &Value) {
        let mut inner = self.inner.lock();
        inner.attempted += 1;
        if matches!(status, 200 | 201) {
            inner.acknowledge(id, value, body);
        } else {
            let why = format!("HTTP {status}: {}", body["error"]["type"]);
            inner.unknown(id, value, Failure::Answered(why));
        }
    }

    /// A request that failed as a whole: any of its writes may have been applied.
    pub fn record_failure(&self, sent: &[(String, i64)], failure: Failure) {
        let mut inner = self.inner.lock();
        inner.attempted += sent.len();
        for (id, value) in sent {
            inner.unknown(id, *value, failure.clone());
        }
    }

    /// Ids with an acknowledged write.
    pub fn acknowledged(&self) -> usize {
        self.inner.lock().acks.len()
    }

    /// Acknowledged writes so far (grows with every one, unlike [`History::acknowledged`]).
    pub fn acknowledged_writes(&self) -> usize {
        self.inner.lock().acknowledged_writes
    }

    /// Checks every started copy of `index` (read from its node's engine, after a refresh)
    /// against the history and against the other copies of its shard. Call it once the
    /// cluster agrees on a green state and no writer runs. Panics listing the problems.
    pub fn verify(&self, cluster: &TestCluster, index: &str) -> Summary {
        // Copies may still be applying a write nobody was answered for (a client that timed
        // out while its batch replicated): what is checked must hold once they settle, within
        // a few seconds. An acknowledged write that is gone never comes back.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let (copies, checked) = self.check_copies(cluster, index);
            if checked.problems.is_empty() || std::time::Instant::now() > deadline {
                assert!(
                    checked.problems.is_empty(),
                    "{}",
                    checked.problems.join("\n")
                );
                let inner = self.inner.lock();
                return Summary {
                    acknowledged: inner.acks.len(),
                    attempted: inner.attempted,
                    failed: inner.failed,
                    copies_checked: copies,
                    applied_late: checked.applied_late,
                };
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    /// Reads every started copy of `index` and lists what is wrong: (copies read, problems).
    fn check_copies(&self, cluster: &TestCluster, index: &str) -> (usize, Checked) {
        let mut per_shard: BTreeMap<usize, Vec<(String, CopyContents)>> = BTreeMap::new();
        let copies = cluster.started_copies(index);
        for &(shard, slot, primary) in &copies {
            let engine = cluster.engine(slot, index, shard).unwrap_or_else(|| {
                panic!("started copy [{index}][{shard}] has no open engine on node {slot}")
            });
            let label = format!(
                "{}{}",
                cluster.slot(slot).name,
                if primary { " (primary)" } else { "" }
            );
            per_shard
                .entry(shard)
                .or_default()
                .push((label, read_copy(&engine)));
        }
        (copies.len(), self.problems(&per_shard))
    }

    fn problems(&self, per_shard: &BTreeMap<usize, Vec<(String, CopyContents)>>) -> Checked {
        let inner = self.inner.lock();
        let mut problems = Vec::new();
        let mut applied_late = 0;
        let mut found: HashMap<&str, DocState> = HashMap::new();
        for (shard, copies) in per_shard {
            let (reference_label, reference) = &copies[0];
            for (label, contents) in copies {
                if !contents.duplicates.is_empty() {
                    problems.push(format!(
                        "shard {shard} on {label}: live duplicates of {:?}",
                        &contents.duplicates[..contents.duplicates.len().min(5)]
                    ));
                }
                problems.extend(disagreements(
                    *shard,
                    label,
                    contents,
                    reference_label,
                    reference,
                ));
                for (id, doc) in &contents.docs {
                    found.insert(id, *doc);
                }
            }
        }
        let mut lost: Vec<&str> = Vec::new();
        for (id, ack) in &inner.acks {
            let Some(&held) = found.get(id.as_str()) else {
                lost.push(id);
                continue;
            };
            let value = held.value;
            let failure = inner.indeterminate.get(id).and_then(|u| u.get(&value));
            if value < ack.value {
                let after_ack = (held.primary_term, held.seq_no) > (ack.primary_term, ack.seq_no);
                if after_ack && matches!(failure, Some(Failure::NoAnswer(_))) {
                    applied_late += 1;
                    continue;
                }
                let outcome = failure.map_or("acknowledged".to_string(), |f| f.to_string());
                problems.push(format!(
                    "{id}: holds value {value} (term {}, seq_no {}; its write: {outcome}), acknowledged {} later (term {}, seq_no {})",
                    held.primary_term, held.seq_no, ack.value, ack.primary_term, ack.seq_no,
                ));
            } else if value > ack.value && failure.is_none() {
                problems.push(format!(
                    "{id}: holds value {value}, never written after the acknowledged {}",
                    ack.value
                ));
            }
        }
        for (id, held) in &found {
            let value = held.value;
            let written = inner.acks.contains_key(*id)
                || inner
                    .indeterminate
                    .get(*id)
                    .is_some_and(|u| u.contains_key(&value));
            if !written {
                problems.push(format!("{id}: holds value {value}, which nobody wrote"));
            }
        }
        if !lost.is_empty() {
            lost.sort();
            problems.push(format!(
                "{} acknowledged documents lost, e.g. {:?}",
                lost.len(),
                &lost[..lost.len().min(5)]
            ));
        }
        Checked {
            problems,
            applied_late,
        }
    }
}

/// What [`History::problems`] found.
struct Checked {
    problems: Vec<String>,
    applied_late: usize,
}

impl Inner {
    fn acknowledge(&mut self, id: &str, value: i64, result: &Value) {
        self.acknowledged_writes += 1;
        let field = |name: &str| result[name].as_i64().unwrap_or(-1);
        let ack = Ack {
            version: field("_version"),
            seq_no: field("_seq_no"),
            primary_term: field("_primary_term"),
            value,
        };
        let newer = self
            .acks
            .get(id)
            .is_none_or(|p| (ack.primary_term, ack.seq_no) > (p.primary_term, p.seq_no));
        if newer {
            self.acks.insert(id.to_string(), ack);
        }
    }

    fn unknown(&mut self, id: &str, value: i64, failure: Failure) {
        self.failed += 1;
        self.indeterminate
            .entry(id.to_string())
            .or_default()
            .insert(value, failure);
    }
}

/// Why a bulk item is not acknowledged: its status and error type, or no item at all.
fn item_failure(item: Option<&Value>) -> String {
    match item {
        Some(r) => format!("item status {} {}", r["status"], r["error"]["type"]),
        None => "no item in the answer".to_string(),
    }
}

/// How a copy differs from the shard's first copy.
fn disagreements(
    shard: usize,
    label: &str,
    contents: &CopyContents,
    reference_label: &str,
    reference: &CopyContents,
) -> Vec<String> {
    let mut problems = Vec::new();
    if contents.docs.len() != reference.docs.len() {
        problems.push(format!(
            "shard {shard}: {label} holds {} documents, {reference_label} {}",
            contents.docs.len(),
            reference.docs.len()
        ));
    }
    if contents.max_seq_no != reference.max_seq_no {
        problems.push(format!(
            "shard {shard}: max_seq_no {} on {label}, {} on {reference_label}",
            contents.max_seq_no, reference.max_seq_no
        ));
    }
    let differing: Vec<String> = contents
        .docs
        .iter()
        .filter(|(id, doc)| reference.docs.get(*id) != Some(doc))
        .map(|(id, doc)| format!("{id}: {doc:?} vs {:?}", reference.docs.get(id)))
        .take(3)
        .collect();
    if !differing.is_empty() {
        problems.push(format!(
            "shard {shard}: {label} differs from {reference_label}, e.g. {differing:?}"
        ));
    }
    problems
}

/// Every live document of one copy with its version fields and `value`, read from the
/// engine after a refresh (ids from the terms of `_id`, fields by a realtime get).
pub fn read_copy(engine: &Engine) -> CopyContents {
    engine.refresh().expect("refresh before reading a copy");
    let searcher = engine.searcher();
    let id_field = engine.schema().id;
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(id_field).expect("_id terms");
        let mut terms = inverted.terms().stream().expect("_id term stream");
        while terms.advance() {
            let id = String::from_utf8_lossy(terms.key()).into_owned();
            let term = Term::from_field_text(id_field, &id);
            let Some(mut postings) = inverted
                .read_postings(&term, IndexRecordOption::Basic)
                .expect("_id postings")
            else {
                continue;
            };
            let alive = segment.alive_bitset();
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if alive.is_none_or(|bits| bits.is_alive(doc)) {
                    *live.entry(id.clone()).or_default() += 1;
                }
                doc = postings.advance();
            }
        }
    }
    let duplicates = live
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| id.clone())
        .collect();
    let docs = live
        .keys()
        .filter_map(|id| {
            let got = engine.get(id).expect("get from a copy")?;
            let source: Value = serde_json::from_slice(&got.source).unwrap_or(Value::Null);
            let state = DocState {
                seq_no: got.seq_no,
                primary_term: got.primary_term,
                version: got.version,
                value: source["value"].as_i64().unwrap_or(i64::MIN),
            };
            Some((id.clone(), state))
        })
        .collect();
    CopyContents {
        docs,
        max_seq_no: engine.max_seq_no(),
        duplicates,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(seq_no: i64, version: i64, value: i64) -> DocState {
        DocState {
            seq_no,
            primary_term: 1,
            version,
            value,
        }
    }

    fn copy(docs: &[(&str, DocState)], max_seq_no: i64) -> CopyContents {
        CopyContents {
            docs: docs.iter().map(|(id, d)| (id.to_string(), *d)).collect(),
            max_seq_no,
            duplicates: Vec::new(),
        }
    }

    /// One acknowledged write of `a` = 5 (seq_no 3, version 2), one unanswered `b` = 7.
    fn history() -> History {
        let history = History::default();
        let answer = json!({"items": [
            {"index": {"status": 200, "_version": 2, "_seq_no": 3, "_primary_term": 1}},
            {"index": {"status": 503}}]});
        history.record_bulk(&[("a".into(), 5), ("b".into(), 7)], &answer);
        history
    }

    fn problems(history: &History, copies: Vec<CopyContents>) -> Vec<String> {
        let copies = copies
            .into_iter()
            .enumerate()
            .map(|(i, c)| (format!("copy-{i}"), c))
            .collect();
        history.problems(&BTreeMap::from([(0, copies)])).problems
    }

    #[test]
    fn identical_copies_holding_every_acknowledged_write_pass() {
        let good = copy(&[("a", doc(3, 2, 5)), ("b", doc(4, 1, 7))], 4);
        assert_eq!(
            problems(&history(), vec![good.clone(), good]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_lost_acknowledged_write_is_reported() {
        let found = problems(&history(), vec![copy(&[("b", doc(4, 1, 7))], 4)]);
        assert!(
            found
                .iter()
                .any(|p| p.contains("1 acknowledged documents lost")),
            "{found:?}"
        );
    }

    #[test]
    fn an_older_value_or_one_nobody_wrote_is_reported() {
        let older = problems(&history(), vec![copy(&[("a", doc(2, 1, 4))], 2)]);
        assert!(
            older.iter().any(|p| p.contains("acknowledged 5 later")),
            "{older:?}"
        );
        let invented = problems(
            &history(),
            vec![copy(&[("a", doc(3, 2, 5)), ("c", doc(4, 1, 1))], 4)],
        );
        assert!(
            invented.iter().any(|p| p.contains("which nobody wrote")),
            "{invented:?}"
        );
    }

    fn assert_reported(found: Vec<String>, needle: &str) {
        assert!(found.iter().any(|p| p.contains(needle)), "{found:?}");
    }

    /// `a` = 5 acknowledged at seq_no 3, then `a` = 4 sent again in a request that ended as
    /// `failure`.
    fn history_with_an_older_write_that(failure: Failure) -> History {
        let history = history();
        history.record_failure(&[("a".into(), 4)], failure);
        history
    }

    #[test]
    fn an_unanswered_write_applied_after_a_later_acknowledged_one_is_counted_not_reported() {
        let history = history_with_an_older_write_that(Failure::NoAnswer("reset".into()));
        let applied_after = copy(&[("a", doc(6, 3, 4)), ("b", doc(4, 1, 7))], 6);
        let checked = history.problems(&BTreeMap::from([(0, vec![("c".into(), applied_after)])]));
        assert_eq!(checked.problems, Vec::<String>::new());
        assert_eq!(checked.applied_late, 1);
    }

    #[test]
    fn an_older_value_before_the_acknowledged_one_or_from_an_answered_failure_is_reported() {
        let unanswered = history_with_an_older_write_that(Failure::NoAnswer("reset".into()));
        let before_the_ack = copy(&[("a", doc(2, 1, 4))], 3);
        assert_reported(
            problems(&unanswered, vec![before_the_ack]),
            "acknowledged 5 later",
        );
        let answered = history_with_an_older_write_that(Failure::Answered("HTTP 503".into()));
        let applied_after = copy(&[("a", doc(6, 3, 4))], 6);
        assert_reported(
            problems(&answered, vec![applied_after]),
            "answered: HTTP 503",
        );
    }

    #[test]
    fn copies_that_disagree_on_a_version_or_max_seq_no_are_reported() {
        let primary = copy(&[("a", doc(3, 2, 5))], 4);
        let replica = copy(&[("a", doc(3, 3, 5))], 3);
        let found = problems(&history(), vec![primary, replica]);
        assert!(
            found.iter().any(|p| p.contains("max_seq_no 3 on copy-1")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|p| p.contains("differs from copy-0")),
            "{found:?}"
        );
    }
}
