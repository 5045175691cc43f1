//! Document APIs: index, create, get, exists, source, delete, update, mget, bulk.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use serde_json::{json, Value};
use shoal_engine::{DocRequest, VersionType};
use shoal_node::bulk::{parse_bulk, parse_version_type, BulkAction};
use shoal_node::documents::{DocWrite, Refresh, WriteOptions};
use shoal_node::replication::active_shards::ActiveShards;
use shoal_node::write::update::UpdateRequest;
use shoal_node::{ApiError, ApiResult, Node};
use shoal_query::search::{filter_source, SourceFilter};

use crate::request::{object_body, Params};
use crate::response::{json, ok, status_of, status_only, RestResult};
use crate::router::blocking;
use crate::stored_fields::StoredFields;

fn write_options(params: &Params) -> ApiResult<WriteOptions> {
    let timeout = match params.get("timeout") {
        Some(text) => shoal_node::settings::parse_time(text).map_err(ApiError::bad_request)?,
        None => None,
    };
    Ok(WriteOptions {
        refresh: Refresh::parse(params.get("refresh"))?,
        require_alias: params.bool_or("require_alias", false)?,
        wait_for_active_shards: params
            .get("wait_for_active_shards")
            .map(ActiveShards::parse)
            .transpose()?,
        timeout,
        ..WriteOptions::default()
    })
}

fn doc_request(params: &Params, create: bool) -> ApiResult<DocRequest> {
    if params.get("pipeline").is_some_and(|p| p != "_none") {
        return Err(ApiError::bad_request(
            "ingest pipelines are not supported by Shoal yet: remove the [pipeline] parameter",
        ));
    }
    let op_type_create = match params.get("op_type") {
        None | Some("index") => false,
        Some("create") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "opType must be 'create' or 'index', found: [{other}]"
            )))
        }
    };
    let version_type = match params.get("version_type") {
        Some(v) => parse_version_type(v)?,
        None => VersionType::Internal,
    };
    let version = params.i64("version")?;
    if version.is_some() && version_type == VersionType::Internal {
        return Err(ApiError::action_request_validation(&[
            "internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead".to_string(),
        ]));
    }
    let if_seq_no = params.i64("if_seq_no")?;
    let if_primary_term = params.i64("if_primary_term")?;
    match (if_seq_no, if_primary_term) {
        (Some(_), None | Some(0)) => {
            return Err(ApiError::action_request_validation(&[
                "ifSeqNo is set, but primary term is [0]".to_string(),
            ]))
        }
        (None, Some(term)) if term != 0 => {
            return Err(ApiError::action_request_validation(&[
                "ifSeqNo is unassigned, but primary term is [".to_string()
                    + &term.to_string()
                    + "]",
            ]))
        }
        _ => {}
    }
    if (create || op_type_create) && version_type != VersionType::Internal {
        return Err(ApiError::action_request_validation(&[
            "create operations only support internal versioning. use index instead".to_string(),
        ]));
    }
    Ok(DocRequest {
        if_seq_no,
        if_primary_term,
        version,
        version_type,
        create_only: create || op_type_create,
        ..DocRequest::default()
    })
}

/// `PUT|POST /{index}/_doc/{id}`, `POST /{index}/_doc`, `PUT|POST /{index}/_create/{id}`.
pub async fn index_doc(
    node: Arc<Node>,
    index: String,
    id: Option<String>,
    create: bool,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let request = doc_request(&params, create)?;
    let options = write_options(&params)?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::parse_exception("request body is required").into());
    }
    let write = DocWrite::Index {
        index,
        id,
        routing: params.get("routing").map(str::to_string),
        source: body.to_vec(),
        request,
    };
    let _in_flight = node
        .core()
        .pressure
        .indexing
        .coordinating(body.len() as u64)?;
    let outcome = blocking(move || {
        node.writes
            .execute_writes(vec![write], &options)
            .pop()
            .expect("one result")
    })
    .await?;
    let mut response = json(status_of(outcome.status()), outcome.to_json(), &params);
    if outcome.status() == 201 {
        let location = format!("/{}/_doc/{}", outcome.index, percent_encode(&outcome.id));
        if let Ok(value) = axum::http::HeaderValue::from_str(&location) {
            response
                .headers_mut()
                .insert(axum::http::header::LOCATION, value);
        }
    }
    Ok(response)
}

/// `DELETE /{index}/_doc/{id}`.
pub async fn delete_doc(node: Arc<Node>, index: String, id: String, params: Params) -> RestResult {
    let mut request = doc_request(&params, false)?;
    request.create_only = false;
    let options = write_options(&params)?;
    let write = DocWrite::Delete {
        index: index.clone(),
        id,
        routing: params.get("routing").map(str::to_string),
        request,
    };
    let node2 = node.clone();
    // Deleting from a missing index is a 404, never an auto-create.
    blocking(move || node2.reads.resolve_single_for_read(&index).map(|_| ())).await?;
    let outcome = blocking(move || {
        node.writes
            .execute_writes(vec![write], &options)
            .pop()
            .expect("one result")
    })
    .await?;
    Ok(json(
        status_of(outcome.status()),
        outcome.to_json(),
        &params,
    ))
}

/// Percent-encodes an id for the `Location` header.
fn percent_encode(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn source_filter(params: &Params) -> SourceFilter {
    let mut filter = SourceFilter::default();
    filter.apply_params(&params.0);
    filter
}

/// `GET|HEAD /{index}/_doc/{id}` and `/{index}/_source/{id}`.
pub async fn get_doc(
    node: Arc<Node>,
    index: String,
    id: String,
    params: Params,
    head: bool,
    source_only: bool,
) -> RestResult {
    let options = shoal_node::documents::GetOptions::from_params(&params.0)?;
    let id2 = id.clone();
    let (service, doc) =
        blocking(move || node.reads.get_document_with(&index, &id2, &options)).await?;
    let index_name = service.name();
    let Some(doc) = doc else {
        if head {
            return Ok(status_only(StatusCode::NOT_FOUND));
        }
        if source_only {
            return Err(ApiError::new(
                404,
                "resource_not_found_exception",
                format!("Document not found [{index_name}]/[{id}]"),
            )
            .into());
        }
        return Ok(json(
            StatusCode::NOT_FOUND,
            json!({"_index": index_name, "_id": id, "found": false}),
            &params,
        ));
    };
    if let Some(version_type) = params.get("version_type") {
        parse_version_type(version_type)?;
    }
    if let Some(v) = params.i64("version")? {
        if v != doc.version {
            let shard = service.route(params.get("routing").unwrap_or(&id));
            return Err(ApiError::version_conflict(&index_name, &service.uuid(), shard, format!("[{id}]: version conflict, current version [{}] is different than the one provided [{v}]", doc.version)).into());
        }
    }
    if head {
        return Ok(status_only(StatusCode::OK));
    }
    let source: Value = serde_json::from_slice(&doc.source).unwrap_or(Value::Null);
    if source_only {
        return ok(filter_source(&source, &source_filter(&params)), &params);
    }
    let stored = params.get("stored_fields").map(StoredFields::from_param);
    let filter = source_unless_stored_only(&source_filter(&params), stored.as_ref(), &params);
    let mut body = json!({"_index": index_name, "_id": id, "_version": doc.version, "_seq_no": doc.seq_no, "_primary_term": doc.primary_term, "found": true});
    if let Some(routing) = doc
        .routing
        .or_else(|| params.get("routing").map(str::to_string))
    {
        body["_routing"] = json!(routing);
    }
    if let Some(fields) = stored.and_then(|f| f.render(&service.mapping(), &source)) {
        body["fields"] = fields;
    }
    if filter.fetch {
        body["_source"] = filter_source(&source, &filter);
    }
    ok(body, &params)
}

/// `POST /{index}/_update/{id}`.
pub async fn update_doc(
    node: Arc<Node>,
    index: String,
    id: String,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    params.refuse_unsupported(&format!("/{index}/_update/{id}"), crate::doc_params::UPDATE)?;
    let bytes = body.len() as u64;
    let body = object_body(&body)?;
    let mut request = UpdateRequest::parse(&body)?;
    let _in_flight = node.core().pressure.indexing.coordinating(bytes)?;
    request.retry_on_conflict = params.i64("retry_on_conflict")?.unwrap_or(0).max(0) as u32;
    request.routing = params.get("routing").map(str::to_string);
    request.if_seq_no = params.i64("if_seq_no")?;
    request.if_primary_term = params.i64("if_primary_term")?;
    if params.get("_source").is_some()
        || params.get("_source_includes").is_some()
        || params.get("_source_excludes").is_some()
    {
        request.fetch_source = Some(source_filter(&params));
    }
    let options = write_options(&params)?;
    let update =
        blocking(move || node.writes.update_document(&index, &id, &request, &options)).await?;
    let mut response = update.outcome.to_json();
    if update.noop {
        response["_shards"] = json!({"total": 0, "successful": 0, "failed": 0});
    }
    if let Some(source) = update.source {
        response["get"] = json!({"_seq_no": update.outcome.result.seq_no, "_primary_term": update.outcome.result.primary_term, "found": true, "_source": source});
    }
    Ok(json(status_of(update.outcome.status()), response, &params))
}

/// `GET|POST /_mget` and `/{index}/_mget`.
pub async fn mget(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let body = object_body(&body)?;
    let default_filter = source_filter(&params);
    let default_stored = params.get("stored_fields").map(StoredFields::from_param);
    let mut specs: Vec<MgetDoc> = Vec::new();
    let no_documents = || ApiError::action_request_validation(&["no documents to get".to_string()]);
    if body
        .get("docs")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
        || body
            .get("ids")
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
    {
        return Err(no_documents().into());
    }
    if let Some(docs) = body.get("docs").and_then(Value::as_array) {
        for doc in docs {
            check_mget_doc_keys(doc)?;
            let id = doc.get("_id").map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            });
            let Some(id) = id else {
                return Err(ApiError::action_request_validation(&[
                    "id is missing for doc 0".to_string()
                ])
                .into());
            };
            let stored = match doc.get("stored_fields") {
                Some(listed) => Some(StoredFields::from_json(listed)?),
                None => default_stored.clone(),
            };
            let filter = match doc.get("_source") {
                Some(spec) => SourceFilter::from_json(spec).map_err(ApiError::from)?,
                None => source_unless_stored_only(&default_filter, stored.as_ref(), &params),
            };
            // A number is a routing value too (`routing: 5`).
            let routing = doc.get("routing").and_then(|r| match r {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            });
            specs.push(MgetDoc {
                index: doc
                    .get("_index")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or(index.clone()),
                id,
                routing,
                filter,
                stored,
            });
        }
    } else if let Some(ids) = body.get("ids").and_then(Value::as_array) {
        for id in ids {
            specs.push(MgetDoc {
                index: index.clone(),
                id: id
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| id.to_string()),
                routing: None,
                filter: source_unless_stored_only(
                    &default_filter,
                    default_stored.as_ref(),
                    &params,
                ),
                stored: default_stored.clone(),
            });
        }
    } else {
        return Err(
            ApiError::action_request_validation(&["no documents to get".to_string()]).into(),
        );
    }
    if specs.iter().any(|doc| doc.index.is_none()) {
        return Err(ApiError::action_request_validation(&[
            "index is missing for doc 0".to_string()
        ])
        .into());
    }
    // realtime, refresh and preference apply to every document; the URL's routing to each
    // that names none.
    let base = shoal_node::documents::GetOptions::from_params(&params.0)?;
    let docs = blocking(move || -> ApiResult<Vec<Value>> {
        Ok(specs
            .into_iter()
            .map(|MgetDoc { index, id, routing, filter, stored }| {
                let index = index.expect("checked");
                let routing = routing.or_else(|| base.routing.clone());
                let options = shoal_node::documents::GetOptions { routing: routing.clone(), ..base.clone() };
                match node.reads.get_document_with(&index, &id, &options) {
                    Ok((service, Some(doc))) => {
                        let mut body = json!({"_index": service.name(), "_id": id, "_version": doc.version, "_seq_no": doc.seq_no, "_primary_term": doc.primary_term, "found": true});
                        if let Some(routing) = doc.routing.clone().or_else(|| routing.clone()) {
                            body["_routing"] = json!(routing);
                        }
                        let source: Value = serde_json::from_slice(&doc.source).unwrap_or(Value::Null);
                        if let Some(fields) = stored.and_then(|f| f.render(&service.mapping(), &source)) {
                            body["fields"] = fields;
                        }
                        if filter.fetch {
                            body["_source"] = filter_source(&source, &filter);
                        }
                        body
                    }
                    Ok((service, None)) => json!({"_index": service.name(), "_id": id, "found": false}),
                    // OpenSearch's failure shape: root causes, type and reason.
                    Err(e) => json!({"_index": index, "_id": id, "error": e.to_response_json()["error"]}),
                }
            })
            .collect())
    })
    .await?;
    ok(json!({"docs": docs}), &params)
}

/// An `_mget` document names only what Shoal reads: an unknown key is refused as OpenSearch
/// refuses it, and `version` (a conflict check Shoal does not make on reads) by name.
fn check_mget_doc_keys(doc: &Value) -> ApiResult<()> {
    let Some(doc) = doc.as_object() else {
        return Err(ApiError::parse_exception(
            "failed to parse multi get request. expected an object for each document",
        ));
    };
    for key in doc.keys() {
        match key.as_str() {
            "_index" | "_id" | "routing" | "_source" | "stored_fields" => {}
            "version" | "version_type" => {
                return Err(ApiError::bad_request(format!(
                    "[{key}] in an _mget document is not supported by Shoal yet; leave it out"
                )))
            }
            other => {
                return Err(ApiError::parse_exception(format!(
                    "failed to parse multi get request. unknown field [{other}]"
                )))
            }
        }
    }
    Ok(())
}

/// One document of an `_mget`, as the request names it.
struct MgetDoc {
    /// `None` until checked: each document names one, or the URL does.
    index: Option<String>,
    id: String,
    /// `None`: the URL's routing, if any.
    routing: Option<String>,
    filter: SourceFilter,
    stored: Option<StoredFields>,
}

/// A get's source filter: the request's, off when stored fields are listed without `_source`
/// and the request did not ask for `_source` itself (GET and each `_mget` document).
fn source_unless_stored_only(
    filter: &SourceFilter,
    stored: Option<&StoredFields>,
    params: &Params,
) -> SourceFilter {
    let mut filter = filter.clone();
    if stored.is_some_and(|f| !f.wants_source()) && params.get("_source").is_none() {
        filter.fetch = false;
    }
    filter
}

/// `POST /_bulk` and `/{index}/_bulk`.
pub async fn bulk(
    node: Arc<Node>,
    index: Option<String>,
    params: Params,
    body: axum::body::Bytes,
) -> RestResult {
    let started = Instant::now();
    let path = match &index {
        Some(index) => format!("/{index}/_bulk"),
        None => "/_bulk".to_string(),
    };
    params.refuse_unsupported(&path, crate::doc_params::BULK)?;
    if params.get("pipeline").is_some_and(|p| p != "_none") {
        return Err(ApiError::bad_request(
            "ingest pipelines are not supported by Shoal yet: remove the [pipeline] parameter",
        )
        .into());
    }
    let default_source = params.get("_source").map(|s| json!(s));
    let request_params = params.clone();
    let rendered = blocking(move || -> ApiResult<Vec<Value>> {
        // Parsed on the request's pool, not on the async workers that serve every connection.
        let items = parse_bulk(&body, index.as_deref(), request_params.get("routing"))?;
        let options = write_options(&request_params)?;
        let default_require_alias = options.require_alias;
        // Over `indexing_pressure.memory.limit` the whole request is 429.
        let _in_flight = node
            .core()
            .pressure
            .indexing
            .coordinating(body.len() as u64)?;
        // A cluster-wide write block fails the whole request, index blocks fail their items.
        node.core()
            .blocks()
            .check_global(shoal_node::blocks::BlockLevel::Write)?;
        Ok(execute_bulk(
            &node,
            items,
            &options,
            default_require_alias,
            default_source,
        ))
    })
    .await?;
    let errors = rendered.iter().any(|item| {
        item.as_object()
            .and_then(|m| m.values().next())
            .is_some_and(|v| v.get("error").is_some())
    });
    if errors {
        log_server_errors(&rendered);
    }
    ok(
        json!({"took": started.elapsed().as_millis() as u64, "errors": errors, "items": rendered}),
        &params,
    )
}

/// Runs bulk items: index/create/delete batched per shard, updates one by one, in order.
fn execute_bulk(
    node: &Node,
    items: Vec<shoal_node::bulk::BulkItem>,
    options: &WriteOptions,
    default_require_alias: bool,
    default_source: Option<Value>,
) -> Vec<Value> {
    let mut rendered: Vec<Option<Value>> = (0..items.len()).map(|_| None).collect();
    let mut batch: Vec<(usize, BulkAction, DocWrite)> = Vec::new();
    let run_batch = |batch: &mut Vec<(usize, BulkAction, DocWrite)>,
                     rendered: &mut Vec<Option<Value>>,
                     require_alias: bool| {
        if batch.is_empty() {
            return;
        }
        let writes: Vec<DocWrite> = batch.iter().map(|(_, _, w)| w.clone()).collect();
        let mut opts = options.clone();
        opts.require_alias = require_alias;
        let results = node.writes.execute_writes(writes, &opts);
        for ((slot, action, write), result) in batch.drain(..).zip(results) {
            rendered[slot] = Some(render_item(
                action,
                &write,
                result.map(|o| (o.status(), o.to_json())),
            ));
        }
    };
    let mut batch_require_alias = default_require_alias;
    for (slot, item) in items.into_iter().enumerate() {
        let require_alias = item.require_alias.unwrap_or(default_require_alias);
        if require_alias != batch_require_alias {
            run_batch(&mut batch, &mut rendered, batch_require_alias);
            batch_require_alias = require_alias;
        }
        let index = item.index.clone().expect("bulk parser requires an index");
        match item.action {
            BulkAction::Index | BulkAction::Create => {
                let write = DocWrite::Index {
                    index,
                    id: item.id.clone(),
                    routing: item.routing.clone(),
                    source: item.body.clone(),
                    request: item.request.clone(),
                };
                batch.push((slot, item.action, write));
            }
            BulkAction::Delete => {
                let Some(id) = item.id.clone() else {
                    rendered[slot] = Some(
                        json!({"delete": {"_index": index, "_id": null, "status": 400, "error": ApiError::action_request_validation(&["id is missing".into()]).to_cause_json()}}),
                    );
                    continue;
                };
                batch.push((
                    slot,
                    BulkAction::Delete,
                    DocWrite::Delete {
                        index,
                        id,
                        routing: item.routing.clone(),
                        request: item.request.clone(),
                    },
                ));
            }
            BulkAction::Update => {
                // Updates read the current document, so earlier writes must be applied first.
                run_batch(&mut batch, &mut rendered, batch_require_alias);
                rendered[slot] = Some(run_bulk_update(
                    node,
                    &item,
                    index,
                    options,
                    default_source.clone(),
                ));
            }
        }
    }
    run_batch(&mut batch, &mut rendered, batch_require_alias);
    rendered
        .into_iter()
        .map(|r| r.expect("every bulk item rendered"))
        .collect()
}

fn run_bulk_update(
    node: &Node,
    item: &shoal_node::bulk::BulkItem,
    index: String,
    options: &WriteOptions,
    default_source: Option<Value>,
) -> Value {
    let id = item.id.clone().unwrap_or_default();
    let result = shoal_node::write::update::UpdateRequest::parse(
        &serde_json::from_slice(&item.body).unwrap_or(Value::Null),
    )
    .and_then(|mut request| {
        request.retry_on_conflict = item.retry_on_conflict;
        request.routing = item.routing.clone();
        if let Some(source) = item.source_option.clone().or(default_source) {
            request.fetch_source =
                Some(shoal_node::write::update::source_filter_from_body(&source)?);
        }
        node.writes.update_document(&index, &id, &request, options)
    });
    match result {
        Ok(update) => {
            let mut body = update.outcome.to_json();
            if update.noop {
                body["_shards"] = json!({"total": 0, "successful": 0, "failed": 0});
            }
            body["status"] = json!(update.outcome.status());
            if let Some(source) = update.source {
                body["get"] = json!({"_seq_no": update.outcome.result.seq_no, "_primary_term": update.outcome.result.primary_term, "found": true, "_source": source});
            }
            json!({"update": body})
        }
        Err(e) => {
            json!({"update": {"_index": index, "_id": id, "status": e.status, "error": e.to_cause_json()}})
        }
    }
}

/// In `_bulk`, request validation failures of one item are plain `illegal_argument_exception`s.
fn bulk_item_error(error: ApiError) -> ApiError {
    if error.error_type != "action_request_validation_exception" {
        return error;
    }
    let reason = error
        .reason
        .trim_start_matches("Validation Failed: 1: ")
        .trim_end_matches(';')
        .to_string();
    ApiError::bad_request(reason)
}

fn render_item(action: BulkAction, write: &DocWrite, result: ApiResult<(u16, Value)>) -> Value {
    let (index, id) = match write {
        DocWrite::Index { index, id, .. } => (index.clone(), id.clone()),
        DocWrite::Delete { index, id, .. } => (index.clone(), Some(id.clone())),
    };
    let body = match result {
        Ok((status, mut body)) => {
            body["status"] = json!(status);
            body
        }
        Err(e) => {
            json!({"_index": index, "_id": id, "status": e.status, "error": bulk_item_error(e).to_cause_json()})
        }
    };
    let mut item = serde_json::Map::new();
    item.insert(action.as_str().to_string(), body);
    Value::Object(item)
}

/// Logs the items that failed on the server's side (5xx), as a whole request that fails so is
/// logged: a bulk answers 200 however many of its items failed, and an operator (or a fault
/// test reading the logs) must still see them.
fn log_server_errors(rendered: &[Value]) {
    let failed = rendered
        .iter()
        .filter_map(|item| item.as_object().and_then(|m| m.values().next()))
        .filter(|item| item["status"].as_u64().is_some_and(|s| s >= 500));
    for item in failed {
        let error = &item["error"];
        tracing::error!(
            status = %item["status"],
            error_type = %error["type"].as_str().unwrap_or_default(),
            caused_by = %error["caused_by"]["type"].as_str().unwrap_or_default(),
            reason = %error["reason"].as_str().unwrap_or_default(),
            "bulk item failed"
        );
    }
}
