//! Errors of the transport layer.
//!
//! [`RemoteError`] is what a remote handler answers when it fails: it keeps OpenSearch's error
//! shape (HTTP status, `type`, `reason`, extra fields and the `caused_by` chain) so the REST
//! layer of the coordinating node can render it as if it had happened locally, plus the
//! [`ErrorKind`] callers branch on. [`TransportError`] is what a caller of the transport sees:
//! either the remote error or a failure to get an answer at all.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shoal_types::ErrorKind;

/// An error returned by a remote handler, in OpenSearch's error shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("[{error_type}] {reason} (status {status})")]
pub struct RemoteError {
    /// HTTP status the REST layer should answer with.
    pub status: u16,
    /// OpenSearch error type, e.g. `index_not_found_exception`.
    pub error_type: String,
    /// Human readable reason.
    pub reason: String,
    /// What the caller should do about it; control flow branches on this, never on the type.
    pub kind: ErrorKind,
    /// Extra fields OpenSearch shows beside type and reason (`index`, `shard`, `index_uuid`…).
    /// Boxed: an ordered map is large, and errors travel inside every `Result` of the transport.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Box<Map<String, Value>>,
    /// The error this one wraps (OpenSearch's `caused_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caused_by: Option<Box<RemoteError>>,
}

/// The error type of an action nobody registered a handler for.
pub(crate) const ACTION_NOT_FOUND: &str = "action_not_found_transport_exception";

impl RemoteError {
    /// An error whose kind follows from its status and type ([`ErrorKind::classify`]); use
    /// [`RemoteError::with_kind`] where the producer knows better.
    pub fn new(status: u16, error_type: impl Into<String>, reason: impl Into<String>) -> Self {
        let error_type = error_type.into();
        RemoteError {
            status,
            kind: ErrorKind::classify(status, &error_type),
            error_type,
            reason: reason.into(),
            metadata: Box::default(),
            caused_by: None,
        }
    }

    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn with_cause(mut self, cause: RemoteError) -> Self {
        self.caused_by = Some(Box::new(cause));
        self
    }

    /// 500 with OpenSearch's generic `exception` type.
    pub fn internal(reason: impl Into<String>) -> Self {
        RemoteError::new(500, "exception", reason)
    }

    /// 400 `illegal_argument_exception`.
    pub fn bad_request(reason: impl Into<String>) -> Self {
        RemoteError::new(400, "illegal_argument_exception", reason)
    }

    /// 400 answered for an action nobody registered a handler for.
    pub fn action_not_found(action: &str) -> Self {
        RemoteError::new(
            400,
            ACTION_NOT_FOUND,
            format!("No handler for action [{action}]"),
        )
    }

    /// The node asked has no handler for the action (an older release, during an upgrade).
    pub fn is_action_not_found(&self) -> bool {
        self.error_type == ACTION_NOT_FOUND
    }

    /// OpenSearch's `caused_by` object: `{"type", "reason", ...metadata, "caused_by"}`.
    pub fn to_cause_json(&self) -> Value {
        let mut body = Map::new();
        body.insert("type".into(), Value::from(self.error_type.clone()));
        body.insert("reason".into(), Value::from(self.reason.clone()));
        body.extend(self.metadata.as_ref().clone());
        if let Some(cause) = &self.caused_by {
            body.insert("caused_by".into(), cause.to_cause_json());
        }
        Value::Object(body)
    }
}

/// Why a call through the transport failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer could not be reached, or the connection broke during the call.
    #[error("node [{addr}] is unreachable: {reason}")]
    Unreachable { addr: String, reason: String },
    /// No answer within the caller's deadline.
    #[error("request [{action}] to [{addr}] timed out after {after:?}")]
    Timeout {
        addr: String,
        action: String,
        after: Duration,
    },
    /// The peer belongs to another cluster (both cluster uuids are known and differ).
    #[error("cluster uuid mismatch: local [{local}], remote [{remote}]")]
    ClusterMismatch { local: String, remote: String },
    /// The remote handler answered with an error.
    #[error("remote error: {0}")]
    Remote(RemoteError),
    /// The message was dropped by a fault-injection [`crate::Filter`].
    #[error("request dropped by a transport filter")]
    Dropped,
}

impl TransportError {
    /// True when the message may not have reached the peer at all, so the peer must not be
    /// assumed to have acted on it (connection failures and injected drops).
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            TransportError::Unreachable { .. } | TransportError::Dropped
        )
    }

    /// What the caller should do about the failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TransportError::Remote(remote) => remote.kind,
            TransportError::Unreachable { .. }
            | TransportError::Timeout { .. }
            | TransportError::Dropped => ErrorKind::Unavailable,
            // The peer will never serve this cluster: sending again cannot help.
            TransportError::ClusterMismatch { .. } => ErrorKind::Invalid,
        }
    }

    /// Renders the error in OpenSearch's shape, the way OpenSearch reports transport failures.
    pub fn to_remote_error(&self) -> RemoteError {
        let remote = match self {
            TransportError::Remote(remote) => return remote.clone(),
            TransportError::Unreachable { addr, reason } => RemoteError::new(
                500,
                "connect_transport_exception",
                format!("[{addr}] connect_exception: {reason}"),
            ),
            TransportError::Dropped => RemoteError::new(
                500,
                "connect_transport_exception",
                "request dropped by a transport filter",
            ),
            TransportError::Timeout {
                addr,
                action,
                after,
            } => RemoteError::new(
                500,
                "receive_timeout_transport_exception",
                format!(
                    "[{addr}][{action}] request timed out after [{}ms]",
                    after.as_millis()
                ),
            ),
            TransportError::ClusterMismatch { local, remote } => RemoteError::new(
                500,
                "illegal_state_exception",
                format!("remote node belongs to cluster [{remote}], local cluster is [{local}]"),
            ),
        };
        remote.with_kind(self.kind())
    }
}
