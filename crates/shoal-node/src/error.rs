//! The error every node service returns: an OpenSearch exception with its HTTP status.

use serde_json::{json, Map, Value};
use shoal_transport::RemoteError;
pub use shoal_types::ErrorKind;

/// An OpenSearch-shaped error: `{"type", "reason", "index", ...}` plus the HTTP status, and
/// the [`ErrorKind`] code branches on (the type and reason are for the user only).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ApiError {
    pub status: u16,
    pub error_type: String,
    pub reason: String,
    pub kind: ErrorKind,
    /// Extra fields shown beside type/reason (`index`, `index_uuid`, `shard`, `line`, `col`).
    pub extra: Map<String, Value>,
    pub caused_by: Option<Box<ApiError>>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error_type, self.reason)
    }
}

impl std::error::Error for ApiError {}

pub type ApiResult<T> = Result<T, ApiError>;

/// OpenSearch's `RestStatus` name of an HTTP status (shard failures and blocks carry it).
pub fn status_name(status: u16) -> &'static str {
    match status {
        400 => "BAD_REQUEST",
        403 => "FORBIDDEN",
        404 => "NOT_FOUND",
        409 => "CONFLICT",
        429 => "TOO_MANY_REQUESTS",
        503 => "SERVICE_UNAVAILABLE",
        _ => "INTERNAL_SERVER_ERROR",
    }
}

impl ApiError {
    pub fn new(status: u16, error_type: &str, reason: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error_type: error_type.to_string(),
            reason: reason.into(),
            kind: ErrorKind::classify(status, error_type),
            extra: Map::new(),
            caused_by: None,
        }
    }

    /// Sets the kind where the producer knows better than [`ErrorKind::classify`].
    pub fn with_kind(mut self, kind: ErrorKind) -> ApiError {
        self.kind = kind;
        self
    }

    /// The same error in the transport's shape, whole (kind, fields, causes).
    pub fn into_remote(self) -> RemoteError {
        RemoteError {
            status: self.status,
            error_type: self.error_type,
            reason: self.reason,
            kind: self.kind,
            metadata: Box::new(self.extra),
            caused_by: self.caused_by.map(|cause| Box::new(cause.into_remote())),
        }
    }

    /// An error another node answered, whole.
    pub fn from_remote(remote: RemoteError) -> ApiError {
        ApiError {
            status: remote.status,
            error_type: remote.error_type,
            reason: remote.reason,
            kind: remote.kind,
            extra: *remote.metadata,
            caused_by: remote
                .caused_by
                .map(|cause| Box::new(ApiError::from_remote(*cause))),
        }
    }

    pub fn bad_request(reason: impl Into<String>) -> ApiError {
        ApiError::new(400, "illegal_argument_exception", reason)
    }

    pub fn parsing(reason: impl Into<String>) -> ApiError {
        ApiError::new(400, "parsing_exception", reason)
    }

    pub fn parse_exception(reason: impl Into<String>) -> ApiError {
        ApiError::new(400, "parse_exception", reason)
    }

    pub fn action_request_validation(problems: &[String]) -> ApiError {
        let numbered: String = problems
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}: {p};", i + 1))
            .collect();
        ApiError::new(
            400,
            "action_request_validation_exception",
            format!("Validation Failed: {numbered}"),
        )
    }

    pub fn internal(reason: impl Into<String>) -> ApiError {
        ApiError::new(500, "exception", reason)
    }

    pub fn index_not_found(index: &str) -> ApiError {
        ApiError::new(
            404,
            "index_not_found_exception",
            "no such index [".to_string() + index + "]",
        )
        .with("index", json!(index))
        .with("resource.type", json!("index_or_alias"))
        .with("resource.id", json!(index))
        .with("index_uuid", json!("_na_"))
    }

    pub fn index_closed(index: &str, uuid: &str) -> ApiError {
        ApiError::new(400, "index_closed_exception", "closed")
            .with("index", json!(index))
            .with("index_uuid", json!(uuid))
    }

    pub fn resource_already_exists(index: &str, uuid: &str) -> ApiError {
        ApiError::new(
            400,
            "resource_already_exists_exception",
            format!("index [{index}/{uuid}] already exists"),
        )
        .with("index", json!(index))
        .with("index_uuid", json!(uuid))
    }

    pub fn invalid_index_name(index: &str, why: &str) -> ApiError {
        ApiError::new(
            400,
            "invalid_index_name_exception",
            format!("Invalid index name [{index}], {why}"),
        )
        .with("index", json!(index))
        .with("index_uuid", json!("_na_"))
    }

    pub fn version_conflict(index: &str, uuid: &str, shard: usize, reason: String) -> ApiError {
        ApiError::new(409, "version_conflict_engine_exception", reason)
            .with("index", json!(index))
            .with("shard", json!(shard.to_string()))
            .with("index_uuid", json!(uuid))
    }

    pub fn document_missing(index: &str, uuid: &str, shard: usize, id: &str) -> ApiError {
        ApiError::new(
            404,
            "document_missing_exception",
            format!("[{id}]: document missing"),
        )
        .with("index", json!(index))
        .with("shard", json!(shard.to_string()))
        .with("index_uuid", json!(uuid))
    }

    pub fn mapper_parsing(reason: impl Into<String>) -> ApiError {
        ApiError::new(400, "mapper_parsing_exception", reason)
    }

    pub fn cluster_block(reason: impl Into<String>, status: u16) -> ApiError {
        ApiError::new(status, "cluster_block_exception", reason)
    }

    pub fn with(mut self, key: &str, value: Value) -> ApiError {
        self.extra.insert(key.to_string(), value);
        self
    }

    pub fn caused_by(mut self, cause: ApiError) -> ApiError {
        self.caused_by = Some(Box::new(cause));
        self
    }

    /// The inner object: `{"type", "reason", ...extra, "caused_by"}`.
    pub fn to_cause_json(&self) -> Value {
        let mut body = Map::new();
        body.insert("type".into(), json!(self.error_type));
        body.insert("reason".into(), json!(self.reason));
        for (k, v) in &self.extra {
            body.insert(k.clone(), v.clone());
        }
        if let Some(cause) = &self.caused_by {
            body.insert("caused_by".into(), cause.to_cause_json());
        }
        Value::Object(body)
    }

    /// The full response body OpenSearch sends for an error.
    pub fn to_response_json(&self) -> Value {
        // A search phase failure names the shard failures' causes as root causes.
        let root = match (&self.caused_by, self.error_type.as_str()) {
            (Some(cause), "search_phase_execution_exception") => cause.as_ref(),
            _ => self,
        };
        let mut root_cause = root.to_cause_json();
        if let Value::Object(map) = &mut root_cause {
            map.remove("caused_by");
        }
        let mut error = self.to_cause_json();
        if let Value::Object(map) = &mut error {
            // `root_cause` comes first in OpenSearch's rendering.
            let mut ordered = Map::new();
            ordered.insert("root_cause".into(), json!([root_cause]));
            ordered.extend(std::mem::take(map));
            *map = ordered;
        }
        json!({"error": error, "status": self.status})
    }
}

impl From<shoal_mapping::MapperError> for ApiError {
    fn from(e: shoal_mapping::MapperError) -> Self {
        use shoal_mapping::MapperError;
        let error = ApiError::new(400, e.error_type(), e.to_string());
        match &e {
            MapperError::FieldValue { cause, .. } => error.caused_by(ApiError::new(
                400,
                "illegal_argument_exception",
                cause.clone(),
            )),
            MapperError::NotJson(detail) => {
                error.caused_by(ApiError::new(400, "json_parse_exception", detail.clone()))
            }
            _ => error,
        }
    }
}

impl From<shoal_query::QueryError> for ApiError {
    fn from(e: shoal_query::QueryError) -> Self {
        match &e {
            shoal_query::QueryError::SearchPhase {
                reason,
                cause_type,
                cause_reason,
            } => ApiError::new(400, "search_phase_execution_exception", reason.clone())
                .with("phase", json!("query"))
                .with("grouped", json!(true))
                .caused_by(ApiError::new(400, cause_type, cause_reason.clone())),
            shoal_query::QueryError::TooManyBuckets { max, .. } => {
                ApiError::new(400, "search_phase_execution_exception", "")
                    .with("phase", json!("fetch"))
                    .with("grouped", json!(true))
                    .with("failed_shards", json!([]))
                    .caused_by(
                        ApiError::new(400, e.error_type(), e.to_string())
                            .with("max_buckets", json!(max)),
                    )
            }
            shoal_query::QueryError::CircuitBreaking { wanted, limit } => ApiError::new(
                429,
                e.error_type(),
                format!(
                    "[request] Data too large, data for [<aggregations>] would be [{wanted}/{}], which is larger than the limit of [{limit}/{}]",
                    crate::settings::format_bytes(*wanted),
                    crate::settings::format_bytes(*limit)
                ),
            )
            .with("bytes_wanted", json!(wanted))
            .with("bytes_limit", json!(limit))
            .with("durability", json!("TRANSIENT")),
            other => ApiError::new(other.status(), other.error_type(), other.to_string()),
        }
    }
}

impl From<shoal_engine::EngineError> for ApiError {
    fn from(e: shoal_engine::EngineError) -> Self {
        match e {
            shoal_engine::EngineError::Mapper(m) => m.into(),
            shoal_engine::EngineError::VersionConflict { .. } => {
                ApiError::new(409, "version_conflict_engine_exception", e.to_string())
            }
            // The copy failed (a full disk, an I/O error) or is closing: it is reopened or
            // recovered, and the request can be retried.
            shoal_engine::EngineError::Closed(reason) => {
                ApiError::new(503, "engine_closed_exception", reason)
            }
            shoal_engine::EngineError::Corrupted(reason) => {
                ApiError::new(500, "corrupt_index_exception", reason)
            }
            shoal_engine::EngineError::CheckpointBehindStore { .. } => {
                ApiError::new(409, "illegal_index_shard_state_exception", e.to_string())
            }
            shoal_engine::EngineError::StaleCheckpoint { .. } => {
                ApiError::new(409, "illegal_index_shard_state_exception", e.to_string())
                    .with_kind(ErrorKind::Moved)
            }
            other => ApiError::internal(other.to_string()),
        }
    }
}

impl From<std::io::Error> for ApiError {
    fn from(e: std::io::Error) -> Self {
        ApiError::internal(format!("io error: {e}"))
    }
}

/// A boolean request parameter: absent = `default`, present with no value or `true` = true,
/// `false` = false, anything else a 400 in OpenSearch's words.
pub fn bool_param(
    params: &std::collections::HashMap<String, String>,
    key: &str,
    default: bool,
) -> ApiResult<bool> {
    match params.get(key).map(String::as_str) {
        None => Ok(default),
        Some("") | Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(ApiError::bad_request(format!(
            "Failed to parse value [{other}] as only [true] or [false] are allowed."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_failure() -> ApiError {
        ApiError::new(503, "engine_closed_exception", "engine failed")
            .with("shard", json!("0"))
            .with_kind(ErrorKind::CopyFailed)
            .caused_by(ApiError::new(
                500,
                "io_exception",
                "No space left on device",
            ))
    }

    #[test]
    fn an_error_crosses_the_transport_shape_whole() {
        let error = engine_failure();
        assert_eq!(ApiError::from_remote(error.clone().into_remote()), error);
    }

    #[test]
    fn a_remote_errors_cause_is_rendered_inside_error_as_opensearch_does() {
        let rendered = ApiError::from_remote(engine_failure().into_remote()).to_response_json();
        assert_eq!(
            rendered,
            json!({
                "error": {
                    "root_cause": [{"type": "engine_closed_exception", "reason": "engine failed", "shard": "0"}],
                    "type": "engine_closed_exception",
                    "reason": "engine failed",
                    "shard": "0",
                    "caused_by": {"type": "io_exception", "reason": "No space left on device"}
                },
                "status": 503
            })
        );
    }

    #[test]
    fn a_transport_failure_is_unavailable_whatever_its_status() {
        let unreachable = shoal_transport::TransportError::Unreachable {
            addr: "127.0.0.1:9300".into(),
            reason: "connection refused".into(),
        };
        let error = ApiError::from(unreachable);
        assert_eq!(
            (error.status, error.error_type.as_str(), error.kind),
            (500, "connect_transport_exception", ErrorKind::Unavailable)
        );
    }
}
