//! Named failpoints for in-process fault tests (`--features failpoints`; compiled out of
//! other builds). A point is evaluated under its bare name (any node) and as
//! `name@<node.name>`, so a test running several nodes in one process can stop one node.
//!
//! Points:
//! - `replica_apply_after_term_check`: a replica batch holds its permit (term checked), not
//!   yet applied;
//! - `before_term_bump`: a copy is about to adopt a newer primary term (the applier's bump,
//!   or a replica batch of a newer term), before the bump waits for the permits in flight;
//! - `primary_resync_before_batch`: a promoted primary is about to send a resync batch;
//! - `applier_before_open`: a copy's applier task is about to open it (or bring an open one
//!   in line with the state);
//! - `recovery_before_file_chunk`, `recovery_after_file_chunk`: a recovery target takes the next
//!   file chunk / has written one; `recovery_before_finalize`: files done, before finalize;
//! - `broadcast_before_copies`: a node has listed its copies for a broadcast (`_refresh`,
//!   `_flush`, `_forcemerge`), before running the operation on them;
//! - `search_before_fetch`: a coordinator has the query phase's answers, before the fetch phase;
//! - `started_report_lost` (a `return` point, see [`failpoint_fails`]): a copy's started report
//!   is about to be proposed; set, the proposal is treated as lost on the way.

/// Evaluates the failpoint `$name` on the node `$scope` (a [`Scope`]).
macro_rules! failpoint {
    ($scope:expr, $name:literal) => {
        #[cfg(feature = "failpoints")]
        {
            use $crate::failpoints::Scope as _;
            fail::fail_point!($name);
            let scoped = format!(concat!($name, "@{}"), $scope.node_name());
            fail::fail_point!(scoped.as_str());
        }
    };
}
pub(crate) use failpoint;

/// Whether the `return` failpoint `$name` fires on the node `$scope` this visit (always false
/// in builds without failpoints).
macro_rules! failpoint_fails {
    ($scope:expr, $name:literal) => {{
        #[cfg(feature = "failpoints")]
        let fails = {
            use $crate::failpoints::Scope as _;
            let scoped = format!(concat!($name, "@{}"), $scope.node_name());
            fail::eval($name, |_| ()).is_some() || fail::eval(scoped.as_str(), |_| ()).is_some()
        };
        #[cfg(not(feature = "failpoints"))]
        let fails = false;
        fails
    }};
}
pub(crate) use failpoint_fails;

/// What names the node a failpoint is evaluated on.
#[cfg(feature = "failpoints")]
pub(crate) trait Scope {
    fn node_name(&self) -> String;
}
