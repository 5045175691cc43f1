//! The write path: version checks, seq_no assignment, the tantivy document and the translog.

use super::*;
use crate::id_filter::{IdDeleteQuery, Searched};
use crate::lookup::find_live_docs;

impl Engine {
    /// Applies a batch of writes under one lock acquisition and one translog append.
    /// Results are per operation; a failed operation does not fail the others.
    pub fn apply(&self, ops: Vec<WriteOp>, origin: Origin) -> Vec<Result<OpResult, EngineError>> {
        if let Some(reason) = self.failure() {
            return closed_results(ops.len(), &reason);
        }
        let started = Instant::now();
        let mut state = self.state.lock();
        self.wait_for_room(&mut state);
        // Again under the lock: a commit that failed meanwhile left tantivy's writer with no
        // indexing thread, and documents sent to it would queue until the channel blocks.
        if let Some(reason) = self.failure() {
            return closed_results(ops.len(), &reason);
        }
        if state.is_writer_less() {
            return self.log_without_indexing(&mut state, ops, origin);
        }
        let searcher = self.reader.searcher();
        let mut results = Vec::with_capacity(ops.len());
        let mut translog_ops = Vec::with_capacity(ops.len());
        let mut pending_ids = Vec::with_capacity(ops.len());
        let batch_len = ops.len();
        for op in ops {
            match self.apply_one(&mut state, &searcher, op, origin) {
                Ok((result, translog_op, id)) => {
                    if let Some(translog_op) = translog_op {
                        translog_ops.push(translog_op);
                        pending_ids.push((results.len(), id));
                    }
                    results.push(Ok(result));
                }
                // The index writer refused a document (a dead indexing thread, a full disk):
                // what it holds of this batch and of earlier ones can no longer be committed.
                Err(EngineError::Index(e)) => {
                    let reason = self.fail_engine(format!("index writer failed: {e}"));
                    return closed_results(batch_len, &reason);
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if origin != Origin::LocalRecovery && !translog_ops.is_empty() {
            match self.translog.add_batch(&translog_ops) {
                Ok(locations) => {
                    for ((slot, id), location) in pending_ids.into_iter().zip(locations) {
                        if let Some(Ok(result)) = results.get_mut(slot) {
                            result.location = Some(location);
                        }
                        if let Some(id) = id {
                            state.version_map.set_location(&id, location);
                        }
                    }
                }
                Err(e) => {
                    // Ops are in the index but not durable: fail the engine so nothing
                    // unlogged is ever acknowledged or served as committed history.
                    let reason = self.fail_engine(format!("translog write failed: {e}"));
                    return closed_results(batch_len, &reason);
                }
            }
        }
        for translog_op in &translog_ops {
            state.tracker.mark_processed(translog_op.seq_no);
        }
        if origin == Origin::LocalRecovery {
            for result in results.iter().flatten() {
                state.tracker.mark_processed(result.seq_no);
            }
        }
        drop(state);
        let elapsed = started.elapsed().as_nanos() as u64;
        Counters::add(&self.counters.index_time_nanos, elapsed);
        Ok::<(), ()>(()).ok();
        self.maybe_refresh_for_memory();
        results
    }

    /// Applies one op; returns the result, the translog record to write and the id whose
    /// version-map entry should point at that record.
    fn apply_one(
        &self,
        state: &mut WriteState,
        searcher: &Searcher,
        op: WriteOp,
        origin: Origin,
    ) -> Result<(OpResult, Option<Operation>, Option<String>), EngineError> {
        match op {
            WriteOp::Index {
                id,
                routing,
                source,
                mut doc,
                request,
                seq_no,
                primary_term,
                version,
            } => {
                let append_only =
                    (request.auto_generated_id && !request.is_retry && origin == Origin::Primary)
                        || (origin == Origin::Replica && self.replica_can_append(state, seq_no));
                let (current, searched) = if append_only {
                    (None, None)
                } else {
                    self.current(state, searcher, &id)?
                };
                // A retried auto-id item replaces what an earlier attempt may have written and
                // answers as that attempt would have (OpenSearch's "override existing as if not
                // there"): created, version 1.
                let retried_append = request.auto_generated_id && request.is_retry;
                let (seq_no, primary_term, version) = match origin {
                    Origin::Primary => {
                        let version = if retried_append {
                            1
                        } else {
                            resolve_version(&id, current, &request)?
                        };
                        let seq_no = state.tracker.generate_seq_no();
                        if current.is_some_and(|c| !c.deleted) {
                            self.advance_max_seq_no_of_updates(seq_no);
                        }
                        (seq_no, self.primary_term(), version)
                    }
                    _ => {
                        if is_stale(current, seq_no) || state.tracker.has_processed(seq_no) {
                            let translog_op = (origin == Origin::Replica).then(|| {
                                let mut op = Operation::index(
                                    id.clone(),
                                    seq_no,
                                    primary_term,
                                    version,
                                    source,
                                );
                                op.routing = routing;
                                op
                            });
                            return Ok((
                                noop_result(seq_no, primary_term, version),
                                translog_op,
                                None,
                            ));
                        }
                        (seq_no, primary_term, version)
                    }
                };
                self.add_meta_fields(
                    &mut doc,
                    &id,
                    routing.as_deref(),
                    &source,
                    seq_no,
                    primary_term,
                    version,
                );
                // Under the write lock the version map and the searcher together know every
                // document written (a commit reloads the reader before it prunes the map): a
                // document with neither is new, and deleting its id first would only give
                // tantivy a delete to look up in every segment at each commit and merge (as
                // OpenSearch, an update only when the document may exist).
                if current.is_some() {
                    let delete = IdDeleteQuery::new(&id, self.id_filters.clone(), searched);
                    state.delete_id(&id, delete)?;
                }
                state.add_document(&id, doc)?;
                state.dirty = true;
                let created = (retried_append && origin == Origin::Primary)
                    || current.is_none_or(|c| c.deleted);
                state.version_map.put(
                    &id,
                    VersionValue {
                        seq_no,
                        primary_term,
                        version,
                        deleted: false,
                        location: None,
                        routing: routing.clone(),
                        time: Instant::now(),
                    },
                );
                Counters::add(&self.counters.index_total, 1);
                let mut translog_op =
                    Operation::index(id.clone(), seq_no, primary_term, version, source);
                translog_op.routing = routing;
                if request.auto_generated_id {
                    translog_op.auto_generated_id_timestamp = 0;
                }
                let kind = if created {
                    OpResultKind::Created
                } else {
                    OpResultKind::Updated
                };
                let result = not_yet_located(kind, seq_no, primary_term, version);
                Ok((result, Some(translog_op), Some(id)))
            }
            WriteOp::Delete {
                id,
                routing,
                request,
                seq_no,
                primary_term,
                version,
            } => {
                let (current, searched) = self.current(state, searcher, &id)?;
                let (seq_no, primary_term, version) = match origin {
                    Origin::Primary => {
                        let version = resolve_version(&id, current, &request)?;
                        let seq_no = state.tracker.generate_seq_no();
                        self.advance_max_seq_no_of_updates(seq_no);
                        (seq_no, self.primary_term(), version)
                    }
                    _ => {
                        if is_stale(current, seq_no) || state.tracker.has_processed(seq_no) {
                            let translog_op = (origin == Origin::Replica).then(|| {
                                Operation::delete(id.clone(), seq_no, primary_term, version)
                            });
                            return Ok((
                                noop_result(seq_no, primary_term, version),
                                translog_op,
                                None,
                            ));
                        }
                        (seq_no, primary_term, version)
                    }
                };
                let found = current.is_some_and(|c| !c.deleted);
                let delete = IdDeleteQuery::new(&id, self.id_filters.clone(), searched);
                state.delete_id(&id, delete)?;
                state.dirty = true;
                state.version_map.put(
                    &id,
                    VersionValue {
                        seq_no,
                        primary_term,
                        version,
                        deleted: true,
                        location: None,
                        routing: routing.clone(),
                        time: Instant::now(),
                    },
                );
                Counters::add(&self.counters.delete_total, 1);
                let mut translog_op = Operation::delete(id.clone(), seq_no, primary_term, version);
                translog_op.routing = routing;
                let kind = if found {
                    OpResultKind::Deleted
                } else {
                    OpResultKind::NotFound
                };
                let result = not_yet_located(kind, seq_no, primary_term, version);
                Ok((result, Some(translog_op), Some(id)))
            }
            WriteOp::NoOp {
                seq_no,
                primary_term,
                reason,
            } => {
                let seq_no = if origin == Origin::Primary {
                    state.tracker.generate_seq_no()
                } else {
                    seq_no
                };
                if origin != Origin::Primary && state.tracker.has_processed(seq_no) {
                    return Ok((noop_result(seq_no, primary_term, 0), None, None));
                }
                let translog_op = Operation::no_op(seq_no, primary_term, reason);
                Ok((
                    noop_result(seq_no, primary_term, 0),
                    Some(translog_op),
                    None,
                ))
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_meta_fields(
        &self,
        doc: &mut TantivyDocument,
        id: &str,
        routing: Option<&str>,
        source: &[u8],
        seq_no: i64,
        primary_term: i64,
        version: i64,
    ) {
        doc.add_text(self.schema.id, id);
        doc.add_i64(self.schema.seq_no, seq_no);
        doc.add_i64(self.schema.primary_term, primary_term);
        doc.add_i64(self.schema.version, version);
        if let Some(routing) = routing {
            doc.add_text(self.schema.routing, routing);
        }
        doc.add_custom(self.schema.source, source);
    }

    /// Whether a replica may add the document of operation `seq_no` without looking its id
    /// up (and without deleting older versions): every update or delete up to the
    /// primary's max_seq_no_of_updates is processed here, so no other version of that id can
    /// be in this copy (OpenSearch's append-only optimisation for replicas).
    fn replica_can_append(&self, state: &WriteState, seq_no: i64) -> bool {
        !state.tracker.has_processed(seq_no)
            && self.max_seq_no_of_updates.load(Ordering::Acquire) <= state.tracker.checkpoint()
    }

    /// The current version of `id`: from the version map, or else from the searcher, with
    /// what that search saw (see [`IdDeleteQuery`]).
    fn current(
        &self,
        state: &WriteState,
        searcher: &Searcher,
        id: &str,
    ) -> Result<(Option<Current>, Option<Searched>), EngineError> {
        if let Some(v) = state.version_map.get(id) {
            let current = Current {
                seq_no: v.seq_no,
                primary_term: v.primary_term,
                version: v.version,
                deleted: v.deleted,
            };
            return Ok((Some(current), None));
        }
        let (found, searched) = find_live_docs(searcher, &self.schema, &self.id_filters, id)?;
        let current = found.map(|d| Current {
            seq_no: d.seq_no,
            primary_term: d.primary_term,
            version: d.version,
            deleted: false,
        });
        Ok((current, Some(searched)))
    }
}

pub(super) fn closed_results(len: usize, reason: &str) -> Vec<Result<OpResult, EngineError>> {
    (0..len)
        .map(|_| Err(EngineError::Closed(reason.to_string())))
        .collect()
}

pub(super) fn noop_result(seq_no: i64, primary_term: i64, version: i64) -> OpResult {
    not_yet_located(OpResultKind::Noop, seq_no, primary_term, version)
}

/// Whether a replica/recovery op is older than the copy's current state of the doc.
fn is_stale(current: Option<Current>, seq_no: i64) -> bool {
    current.is_some_and(|c| c.seq_no >= seq_no)
}

/// Checks a primary write's concurrency constraints and returns the new version.
fn resolve_version(
    id: &str,
    current: Option<Current>,
    request: &DocRequest,
) -> Result<i64, EngineError> {
    let live = current.filter(|c| !c.deleted);
    let conflict = |detail: String| EngineError::VersionConflict {
        id: id.to_string(),
        detail,
    };
    if let Some(if_seq_no) = request.if_seq_no {
        let if_term = request.if_primary_term.unwrap_or(0);
        match live {
            None => {
                return Err(conflict(format!(
                    "required seqNo [{if_seq_no}], primary term [{if_term}]. but no document was found"
                )))
            }
            Some(c) if c.seq_no != if_seq_no || c.primary_term != if_term => {
                return Err(conflict(format!(
                    "required seqNo [{if_seq_no}], primary term [{if_term}]. current document has seqNo [{}] and primary term [{}]",
                    c.seq_no, c.primary_term
                )))
            }
            Some(_) => {}
        }
    }
    if request.create_only {
        if let Some(c) = live {
            return Err(conflict(format!(
                "document already exists (current version [{}])",
                c.version
            )));
        }
    }
    match request.version_type {
        VersionType::Internal => Ok(current.map_or(1, |c| c.version + 1)),
        VersionType::External | VersionType::ExternalGte => {
            let given = request.version.unwrap_or(1);
            if let Some(c) = current {
                let ok = match request.version_type {
                    VersionType::External => given > c.version,
                    _ => given >= c.version,
                };
                if !ok {
                    let relation = if request.version_type == VersionType::External {
                        "higher or equal to"
                    } else {
                        "higher than"
                    };
                    return Err(conflict(format!(
                        "current version [{}] is {relation} the one provided [{given}]",
                        c.version
                    )));
                }
            }
            Ok(given)
        }
    }
}

/// An operation's result before the translog gives it a location.
pub(super) fn not_yet_located(
    kind: OpResultKind,
    seq_no: i64,
    primary_term: i64,
    version: i64,
) -> OpResult {
    OpResult {
        kind,
        seq_no,
        primary_term,
        version,
        location: None,
    }
}
