//! Messages on the wire, and the tonic stubs generated for them by `build.rs`.
//!
//! The messages are written by hand with prost's derive instead of being generated from a
//! `.proto` file, so building needs no protoc. Field tags are the compatibility contract between
//! nodes of different versions: never reuse or renumber them. A field added later reads as its
//! default (0, "", empty) from a node that predates it, and every reader handles that default.

use bytes::Bytes;
use serde_json::{Map, Value};
use shoal_types::ErrorKind;

use crate::error::RemoteError;
use crate::version::ProtocolVersion;

/// One request: the action names the handler, the body is opaque to the transport.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireRequest {
    #[prost(string, tag = "1")]
    pub action: String,
    /// Node id of the sender.
    #[prost(string, tag = "2")]
    pub from_node: String,
    /// Cluster uuid of the sender, empty until it joined or bootstrapped a cluster.
    #[prost(string, tag = "3")]
    pub cluster_uuid: String,
    #[prost(bytes = "bytes", tag = "4")]
    pub body: Bytes,
    /// The sender's transport protocol version; 0 from a node that predates versions.
    #[prost(uint32, tag = "5")]
    pub protocol_version: u32,
    /// The oldest protocol version the sender can still talk to; 0 when unknown.
    #[prost(uint32, tag = "6")]
    pub min_compatible_version: u32,
}

impl WireRequest {
    /// The sender's protocol range (a node predating versions speaks the first one).
    pub fn protocol(&self) -> ProtocolVersion {
        ProtocolVersion::from_wire(self.protocol_version, self.min_compatible_version)
    }
}

/// One answer (or one item of a streamed answer): a body, or the handler's error.
///
/// Handler errors travel in-band rather than as gRPC statuses so that gRPC statuses always mean
/// a transport-level problem (unreachable, cluster mismatch, ...).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WireReply {
    #[prost(bytes = "bytes", tag = "1")]
    pub body: Bytes,
    #[prost(message, optional, tag = "2")]
    pub error: Option<WireError>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WireError {
    #[prost(uint32, tag = "1")]
    pub status: u32,
    #[prost(string, tag = "2")]
    pub error_type: String,
    #[prost(string, tag = "3")]
    pub reason: String,
    /// [`ErrorKind`] in snake case; empty from a node that predates kinds (the reader then
    /// classifies status and type).
    #[prost(string, tag = "4")]
    pub kind: String,
    /// JSON object of the extra fields (`index`, `shard`…); empty when there are none.
    #[prost(bytes = "bytes", tag = "5")]
    pub metadata_json: Bytes,
    #[prost(message, optional, boxed, tag = "6")]
    pub caused_by: Option<Box<WireError>>,
}

impl WireError {
    fn from_remote(error: RemoteError) -> WireError {
        let metadata_json = if error.metadata.is_empty() {
            Bytes::new()
        } else {
            Bytes::from(serde_json::to_vec(&error.metadata).expect("json values serialize"))
        };
        WireError {
            status: u32::from(error.status),
            kind: kind_name(error.kind),
            error_type: error.error_type,
            reason: error.reason,
            metadata_json,
            caused_by: error
                .caused_by
                .map(|cause| Box::new(WireError::from_remote(*cause))),
        }
    }

    fn into_remote(self) -> RemoteError {
        // A status outside u16 can only come from a broken peer; keep it visible as a 500.
        let status = u16::try_from(self.status).unwrap_or(500);
        let kind =
            parse_kind(&self.kind).unwrap_or_else(|| ErrorKind::classify(status, &self.error_type));
        // Unreadable extra fields only cost detail in the rendered error, never the error.
        let metadata =
            serde_json::from_slice::<Map<String, Value>>(&self.metadata_json).unwrap_or_default();
        RemoteError {
            status,
            error_type: self.error_type,
            reason: self.reason,
            kind,
            metadata: Box::new(metadata),
            caused_by: self.caused_by.map(|cause| Box::new(cause.into_remote())),
        }
    }
}

fn kind_name(kind: ErrorKind) -> String {
    match serde_json::to_value(kind) {
        Ok(Value::String(name)) => name,
        _ => String::new(),
    }
}

fn parse_kind(name: &str) -> Option<ErrorKind> {
    if name.is_empty() {
        return None;
    }
    serde_json::from_value(Value::from(name)).ok()
}

impl WireReply {
    pub fn ok(body: Bytes) -> Self {
        WireReply { body, error: None }
    }

    pub fn err(error: RemoteError) -> Self {
        WireReply {
            body: Bytes::new(),
            error: Some(WireError::from_remote(error)),
        }
    }

    pub fn into_result(self) -> Result<Bytes, RemoteError> {
        match self.error {
            None => Ok(self.body),
            Some(error) => Err(error.into_remote()),
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/shoal.transport.Rpc.rs"));

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn an_error_keeps_its_kind_fields_and_causes_through_encoding() {
        let mut cause = RemoteError::new(500, "io_exception", "disk gone");
        cause.metadata.insert("path".into(), Value::from("/data/0"));
        let error = RemoteError::new(503, "engine_closed_exception", "engine failed")
            .with_kind(ErrorKind::CopyFailed)
            .with_cause(cause);
        let bytes = WireReply::err(error.clone()).encode_to_vec();
        let decoded = WireReply::decode(bytes.as_slice()).unwrap().into_result();
        assert_eq!(decoded, Err(error));
    }

    #[test]
    fn an_error_from_a_node_without_kinds_is_classified_by_status_and_type() {
        let legacy = WireError {
            status: 404,
            error_type: "shard_not_found_exception".into(),
            reason: "no such shard".into(),
            ..Default::default()
        };
        let reply = WireReply {
            body: Bytes::new(),
            error: Some(legacy),
        };
        let error = reply.into_result().unwrap_err();
        assert_eq!(error.kind, ErrorKind::Unavailable);
        assert!(error.caused_by.is_none() && error.metadata.is_empty());
    }
}
