//! The update API: read the current document, merge the partial `doc` (or use the upsert),
//! and write it back guarded by `if_seq_no`/`if_primary_term`, retrying on conflicts.

use serde_json::{json, Value};
use shoal_engine::{DocRequest, OpResult, OpResultKind};
use shoal_query::search::{filter_source, SourceFilter};

use crate::documents::{DocWrite, WriteOptions, WriteOutcome};
use crate::error::{ApiError, ApiResult, ErrorKind};
use crate::index_service::IndexService;
use crate::write::WriteService;
use std::sync::Arc;

/// A parsed update request body plus its parameters.
#[derive(Debug, Clone, Default)]
pub struct UpdateRequest {
    pub doc: Option<Value>,
    pub upsert: Option<Value>,
    pub doc_as_upsert: bool,
    pub detect_noop: bool,
    pub retry_on_conflict: u32,
    pub routing: Option<String>,
    pub if_seq_no: Option<i64>,
    pub if_primary_term: Option<i64>,
    /// `_source` requested back in `get`.
    pub fetch_source: Option<SourceFilter>,
}

impl UpdateRequest {
    pub fn parse(body: &Value) -> ApiResult<UpdateRequest> {
        let Value::Object(map) = body else {
            return Err(ApiError::action_request_validation(&[
                "script or doc is missing".to_string(),
            ]));
        };
        let mut request = UpdateRequest {
            detect_noop: true,
            ..UpdateRequest::default()
        };
        for (key, value) in map {
            match key.as_str() {
                "doc" => request.doc = Some(value.clone()),
                "upsert" => request.upsert = Some(value.clone()),
                "doc_as_upsert" => request.doc_as_upsert = value.as_bool().unwrap_or(false),
                "detect_noop" => request.detect_noop = value.as_bool().unwrap_or(true),
                "_source" => request.fetch_source = Some(source_filter_from_body(value)?),
                "script" | "scripted_upsert" => {
                    return Err(ApiError::bad_request(
                        "scripted updates are not supported by Shoal yet: send a partial [doc] (with [doc_as_upsert] or [upsert]) instead",
                    ))
                }
                other => {
                    return Err(ApiError::new(400, "x_content_parse_exception", format!("[1:2] [UpdateRequest] unknown field [{other}]")))
                }
            }
        }
        if request.doc.is_none() {
            return Err(ApiError::action_request_validation(&[
                "script or doc is missing".to_string(),
            ]));
        }
        if !request.doc.as_ref().is_some_and(Value::is_object) {
            return Err(ApiError::parse_exception("[doc] must be an object"));
        }
        Ok(request)
    }
}

pub fn source_filter_from_body(value: &Value) -> ApiResult<SourceFilter> {
    Ok(SourceFilter::from_json(value)?)
}

/// The result of an update: the write outcome and the updated source when asked.
pub struct UpdateOutcome {
    pub outcome: WriteOutcome,
    pub noop: bool,
    pub source: Option<Value>,
}

/// The document an update starts from: its index and what the primary has for it.
type Current = (Arc<IndexService>, shoal_engine::GetResult);

/// What an update writes: the new source and the write's guard (create-only for an upsert,
/// the read seq_no and term otherwise).
type Planned = (Value, DocRequest);

impl WriteService {
    /// The index an update goes to, once the write blocks let it through.
    fn update_target(&self, index: &str) -> ApiResult<Option<Arc<IndexService>>> {
        let blocks = self.core.blocks();
        blocks.check_global(crate::blocks::BlockLevel::Write)?;
        let Some(service) = self.core.resolve_write_index(index)? else {
            return Ok(None);
        };
        blocks.check_index(crate::blocks::BlockLevel::Write, &service.name())?;
        if !service.is_open() {
            return Err(ApiError::index_closed(&service.name(), &service.uuid()));
        }
        Ok(Some(service))
    }

    pub fn update_document(
        &self,
        index: &str,
        id: &str,
        request: &UpdateRequest,
        options: &WriteOptions,
    ) -> ApiResult<UpdateOutcome> {
        let mut attempt = 0;
        loop {
            match self.try_update(index, id, request, options) {
                Err(e) if e.status == 409 && attempt < request.retry_on_conflict => attempt += 1,
                other => return other,
            }
        }
    }

    /// One attempt: read the current document, merge, and write it back guarded by what was
    /// read (a concurrent change makes it a 409 that `update_document` retries).
    fn try_update(
        &self,
        index: &str,
        id: &str,
        request: &UpdateRequest,
        options: &WriteOptions,
    ) -> ApiResult<UpdateOutcome> {
        let current = self.current_for_update(index, id, request)?;
        let doc = request.doc.clone().unwrap_or_else(|| json!({}));
        let (source, write_request) = match &current {
            None => self.upsert_source(index, id, request, &doc)?,
            Some(current) => match merge_existing(current, id, request, &doc)? {
                Ok(planned) => planned,
                Err(noop) => return Ok(noop),
            },
        };
        let index_name = current
            .as_ref()
            .map(|(s, _)| s.name())
            .unwrap_or_else(|| index.to_string());
        let bytes = serde_json::to_vec(&source).expect("json");
        let write = DocWrite::Index {
            index: index_name,
            id: Some(id.to_string()),
            routing: request.routing.clone(),
            source: bytes,
            request: write_request,
        };
        let outcome = self
            .execute_writes(vec![write], options)
            .pop()
            .expect("one result")?;
        let fetched = request
            .fetch_source
            .as_ref()
            .map(|f| filter_source(&source, f));
        Ok(UpdateOutcome {
            outcome,
            noop: false,
            source: fetched,
        })
    }

    /// The document as the primary has it (a replica may lag), or `None` when it (or its
    /// index) does not exist.
    fn current_for_update(
        &self,
        index: &str,
        id: &str,
        request: &UpdateRequest,
    ) -> ApiResult<Option<Current>> {
        let read = crate::documents::GetOptions {
            preference: crate::read::copies::Preference::Primary,
            ..crate::documents::GetOptions::realtime(request.routing.as_deref())
        };
        match self.update_target(index).and_then(|service| match service {
            Some(service) => self.reads.read_document(service, id, &read),
            None => Err(ApiError::index_not_found(index)),
        }) {
            Ok((service, doc)) => Ok(doc.map(|d| (service, d))),
            Err(e) if e.kind == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The source of an update of a missing document: the upsert, or the doc itself with
    /// `doc_as_upsert`; without either the document is missing.
    fn upsert_source(
        &self,
        index: &str,
        id: &str,
        request: &UpdateRequest,
        doc: &Value,
    ) -> ApiResult<Planned> {
        let upsert = match (&request.upsert, request.doc_as_upsert) {
            (Some(upsert), _) => upsert.clone(),
            (None, true) => doc.clone(),
            (None, false) => {
                let service = self.reads.resolve_single_for_read(index)?;
                let shard = service.route(request.routing.as_deref().unwrap_or(id));
                return Err(ApiError::document_missing(
                    &service.name(),
                    &service.uuid(),
                    shard,
                    id,
                ));
            }
        };
        let create_only = DocRequest {
            create_only: true,
            ..DocRequest::default()
        };
        Ok((upsert, create_only))
    }
}

/// The existing document merged with `doc`, guarded by the seq_no and term it was read at;
/// or, when the merge changes nothing and `detect_noop` is on, the noop outcome (`Err`).
fn merge_existing(
    (service, existing): &Current,
    id: &str,
    request: &UpdateRequest,
    doc: &Value,
) -> ApiResult<Result<Planned, UpdateOutcome>> {
    if let Some(if_seq_no) = request.if_seq_no {
        let if_term = request.if_primary_term.unwrap_or(0);
        if existing.seq_no != if_seq_no || existing.primary_term != if_term {
            let shard = service.route(request.routing.as_deref().unwrap_or(id));
            return Err(ApiError::version_conflict(&service.name(), &service.uuid(), shard, format!(
                "[{id}]: version conflict, required seqNo [{if_seq_no}], primary term [{if_term}]. current document has seqNo [{}] and primary term [{}]",
                existing.seq_no, existing.primary_term
            )));
        }
    }
    let old: Value = serde_json::from_slice(&existing.source).unwrap_or_else(|_| json!({}));
    let mut merged = old.clone();
    let changed = deep_merge(&mut merged, doc);
    if request.detect_noop && !changed {
        return Ok(Err(noop_outcome(service, existing, id, request, &old)));
    }
    let guard = DocRequest {
        if_seq_no: Some(existing.seq_no),
        if_primary_term: Some(existing.primary_term),
        ..DocRequest::default()
    };
    Ok(Ok((merged, guard)))
}

/// An update that changes nothing: counted on the shard, answered `noop` with the document
/// as it is.
fn noop_outcome(
    service: &IndexService,
    existing: &shoal_engine::GetResult,
    id: &str,
    request: &UpdateRequest,
    old: &Value,
) -> UpdateOutcome {
    let shard = service.route(request.routing.as_deref().unwrap_or(id));
    if let Ok(engine) = service.shard(shard) {
        engine.record_noop_update();
    }
    let outcome = WriteOutcome {
        index: service.name(),
        id: id.to_string(),
        shard,
        result: OpResult {
            kind: OpResultKind::Noop,
            seq_no: existing.seq_no,
            primary_term: existing.primary_term,
            version: existing.version,
            location: None,
        },
        shards_total: 0,
        shards_successful: 0,
        shards_failed: 0,
        forced_refresh: false,
    };
    let source = request.fetch_source.as_ref().map(|f| filter_source(old, f));
    UpdateOutcome {
        outcome,
        noop: true,
        source,
    }
}

/// Merges `update` into `target` like OpenSearch's `XContentHelper.update`: objects merge
/// recursively, everything else is replaced. Returns whether anything changed.
pub fn deep_merge(target: &mut Value, update: &Value) -> bool {
    let (Value::Object(target_map), Value::Object(update_map)) = (&mut *target, update) else {
        if target != update {
            *target = update.clone();
            return true;
        }
        return false;
    };
    let mut changed = false;
    for (key, value) in update_map {
        match target_map.get_mut(key) {
            Some(existing @ Value::Object(_)) if value.is_object() => {
                changed |= deep_merge(existing, value)
            }
            Some(existing) => {
                if existing != value {
                    *existing = value.clone();
                    changed = true;
                }
            }
            None => {
                target_map.insert(key.clone(), value.clone());
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_merge_merges_objects_and_detects_noops() {
        let mut doc = json!({"a": 1, "o": {"x": 1, "y": 2}});
        assert!(!deep_merge(&mut doc, &json!({"a": 1, "o": {"x": 1}})));
        assert!(deep_merge(&mut doc, &json!({"o": {"z": 3}, "b": [1]})));
        assert_eq!(
            doc,
            json!({"a": 1, "o": {"x": 1, "y": 2, "z": 3}, "b": [1]})
        );
    }
}
