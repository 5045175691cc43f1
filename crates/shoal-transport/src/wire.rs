//! Messages on the wire, and the tonic stubs generated for them by `build.rs`.
//!
//! The messages are written by hand with prost's derive instead of being generated from a
//! `.proto` file, so building needs no protoc. Field tags are the compatibility contract between
//! nodes of different versions: never reuse or renumber them.

use bytes::Bytes;

use crate::error::RemoteError;

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
}

impl WireReply {
    pub fn ok(body: Bytes) -> Self {
        WireReply { body, error: None }
    }

    pub fn err(error: RemoteError) -> Self {
        WireReply {
            body: Bytes::new(),
            error: Some(WireError {
                status: u32::from(error.status),
                error_type: error.error_type,
                reason: error.reason,
            }),
        }
    }

    pub fn into_result(self) -> Result<Bytes, RemoteError> {
        match self.error {
            None => Ok(self.body),
            Some(error) => Err(RemoteError {
                // A status outside u16 can only come from a broken peer; keep it visible as a 500.
                status: u16::try_from(error.status).unwrap_or(500),
                error_type: error.error_type,
                reason: error.reason,
            }),
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/shoal.transport.Rpc.rs"));
