//! The cluster layer's transport actions, typed, and the registry the cluster fills with
//! their handlers (discovery, joining, forwarded proposals, fault detection, Raft).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use shoal_state::{Command, DiscoveryNode};
use shoal_transport::{
    Action, ActionContext, ActionRegistry, ErrorKind, ProtocolVersion, RemoteError,
};

use crate::coordinator::{Cluster, PeerInfo};
use crate::raft::types::ApplyResult;

/// An empty answer (`{}` on the wire).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {}

/// Discovery: who are you, which cluster manager do you follow?
pub struct PeersAction;
impl Action for PeersAction {
    const NAME: &'static str = "internal:discovery/peers";
    type Request = ();
    type Response = PeerInfo;
}

/// A node asks the cluster manager to add it to the cluster.
pub struct JoinAction;
impl Action for JoinAction {
    const NAME: &'static str = "internal:cluster/coordination/join";
    type Request = DiscoveryNode;
    type Response = Ack;
}

/// A node that is not the cluster manager forwards a command to it.
pub struct ProposeAction;
impl Action for ProposeAction {
    const NAME: &'static str = "internal:cluster/coordination/propose";
    type Request = Command;
    type Response = ApplyResult;
}

/// The cluster manager checks that a follower is alive.
pub struct FollowerCheckAction;
impl Action for FollowerCheckAction {
    const NAME: &'static str = "internal:coordination/fault_detection/follower_check";
    type Request = ();
    type Response = Ack;
}

impl Cluster {
    /// The handlers of the cluster layer's actions, for the node's transport.
    pub fn actions(self: &Arc<Self>) -> ActionRegistry {
        let mut registry = ActionRegistry::new();
        let cluster = self.clone();
        // A node of an incompatible version does not even discover this one, so it can
        // neither bootstrap a cluster with it nor find its cluster manager.
        registry.register::<PeersAction, _, _>(move |context, ()| {
            let answer = cluster
                .check_compatible(&context.from_node, &context)
                .map(|()| cluster.peer_info());
            async move { answer }
        });
        registry.register::<FollowerCheckAction, _, _>(|_, ()| async { Ok(Ack {}) });
        let cluster = self.clone();
        registry.register::<JoinAction, _, _>(move |context, node| {
            let cluster = cluster.clone();
            async move { cluster.handle_join(context, node).await }
        });
        let cluster = self.clone();
        registry.register::<ProposeAction, _, _>(move |_, command| {
            let cluster = cluster.clone();
            async move { cluster.handle_propose(command).await }
        });
        let cluster = self.clone();
        registry.register::<crate::read_barrier::ReadBarrierAction, _, _>(move |_, request| {
            let answer = cluster.handle_read_barrier(&request);
            async move { answer }
        });
        crate::raft::network::register(&mut registry, self.raft());
        registry
    }
}

/// Refuses a joining (or discovering) node whose protocol range does not overlap this node's, in
/// the spirit of OpenSearch's join validation ("node version [..] is not supported"), and
/// says what to do about it.
pub(crate) fn check_join_compatibility(
    joining: &str,
    context: &ActionContext,
    local_name: &str,
    local: ProtocolVersion,
) -> Result<(), RemoteError> {
    let remote = context.protocol;
    if remote.is_compatible_with(local) {
        return Ok(());
    }
    let advice = if remote.current < local.min_compatible {
        format!(
            "upgrade node [{}] to a release that speaks protocol version [{}] or later before it joins",
            joining, local.min_compatible
        )
    } else {
        format!(
            "node [{}] needs every node of the cluster on protocol version [{}] or later: \
             upgrade the cluster's nodes first, or run [{}] with the cluster's release",
            joining, remote.min_compatible, joining
        )
    };
    Err(RemoteError::new(
        400,
        "illegal_state_exception",
        format!(
            "node [{}] with transport protocol version [{}] cannot join the cluster: node [{local_name}] \
             speaks protocol version [{}] and accepts versions [{}] and later, which is incompatible; {advice}",
            joining, remote.current, local.current, local.min_compatible
        ),
    )
    .with_kind(ErrorKind::Invalid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent_with(current: u32, min_compatible: u32) -> ActionContext {
        ActionContext {
            from_node: "id".into(),
            protocol: ProtocolVersion {
                current,
                min_compatible,
            },
        }
    }

    #[test]
    fn a_node_older_than_the_managers_minimum_is_told_to_upgrade() {
        let manager = ProtocolVersion {
            current: 4,
            min_compatible: 3,
        };
        let error =
            check_join_compatibility("old-node", &sent_with(2, 1), "m", manager).unwrap_err();
        assert_eq!((error.status, error.kind), (400, ErrorKind::Invalid));
        assert!(
            error.reason.contains("protocol version [2]"),
            "{}",
            error.reason
        );
        assert!(
            error.reason.contains("protocol version [4]"),
            "{}",
            error.reason
        );
        assert!(
            error.reason.contains("upgrade node [old-node]"),
            "{}",
            error.reason
        );
    }

    #[test]
    fn overlapping_versions_may_join() {
        let manager = ProtocolVersion {
            current: 4,
            min_compatible: 3,
        };
        assert!(check_join_compatibility("old-node", &sent_with(3, 2), "m", manager).is_ok());
        assert!(check_join_compatibility("old-node", &sent_with(5, 4), "m", manager).is_ok());
    }
}
