//! Allocation filtering (`FilterAllocationDecider`): cluster-wide
//! `cluster.routing.allocation.{require,include,exclude}.*` first, then the index's
//! `index.routing.allocation.{require,include,exclude}.*`. A copy that no longer passes must
//! move away, which is how an `exclude` drains a node.

use std::ops::Bound;

use shoal_state::{DiscoveryNode, IndexMetadata, ShardRouting};

use super::Decider;
use crate::context::AllocationContext;
use crate::decision::Decision;
use crate::node_filters::{FilterOp, NodeFilters};
use crate::settings::AllocationSettings;

pub struct Filter;

impl Decider for Filter {
    fn name(&self) -> &'static str {
        "filter"
    }

    fn can_allocate(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        should_filter(ctx.index(&copy.index), node, ctx)
    }

    fn can_remain(
        &self,
        copy: &ShardRouting,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        should_filter(ctx.index(&copy.index), node, ctx)
    }

    fn can_allocate_index(
        &self,
        index: &IndexMetadata,
        node: &DiscoveryNode,
        ctx: &AllocationContext<'_>,
    ) -> Decision {
        should_filter(Some(index), node, ctx)
    }
}

/// `shouldAutoExpandToNode`: whether the cluster's and the index's filters let copies of
/// `index` on `node`.
pub(crate) fn passes_filters(
    index: &IndexMetadata,
    node: &DiscoveryNode,
    settings: &AllocationSettings,
) -> bool {
    cluster_filter(node, settings).is_none() && index_filter(index, node).is_none()
}

fn should_filter(
    index: Option<&IndexMetadata>,
    node: &DiscoveryNode,
    ctx: &AllocationContext<'_>,
) -> Decision {
    if let Some(no) = cluster_filter(node, ctx.settings) {
        return no;
    }
    if let Some(no) = index.and_then(|meta| index_filter(meta, node)) {
        return no;
    }
    Decision::yes("node passes include/exclude/require filters")
}

fn cluster_filter(node: &DiscoveryNode, s: &AllocationSettings) -> Option<Decision> {
    if let Some(require) = s.require.as_ref().filter(|f| !f.matches(node)) {
        return Some(Decision::no(format!(
            "node does not match cluster setting [cluster.routing.allocation.require] filters [{require}]"
        )));
    }
    // "does not cluster setting" is OpenSearch's wording, typo included.
    if let Some(include) = s.include.as_ref().filter(|f| !f.matches(node)) {
        return Some(Decision::no(format!(
            "node does not cluster setting [cluster.routing.allocation.include] filters [{include}]"
        )));
    }
    if let Some(exclude) = s.exclude.as_ref().filter(|f| f.matches(node)) {
        return Some(Decision::no(format!(
            "node matches cluster setting [cluster.routing.allocation.exclude] filters [{exclude}]"
        )));
    }
    None
}

fn index_filter(meta: &IndexMetadata, node: &DiscoveryNode) -> Option<Decision> {
    // Most indices have no filters; skip building them (this runs for every copy).
    let prefix = "index.routing.allocation.";
    let from = (Bound::Included(prefix), Bound::Unbounded);
    let mut keys = meta.settings.range::<str, (Bound<&str>, Bound<&str>)>(from);
    if !keys.next().is_some_and(|(key, _)| key.starts_with(prefix)) {
        return None;
    }
    let filters = |op, prefix| NodeFilters::from_index_settings(op, &meta.settings, prefix);
    if let Some(require) =
        filters(FilterOp::And, "index.routing.allocation.require.").filter(|f| !f.matches(node))
    {
        return Some(Decision::no(format!(
            "node does not match index setting [index.routing.allocation.require] filters [{require}]"
        )));
    }
    if let Some(include) =
        filters(FilterOp::Or, "index.routing.allocation.include.").filter(|f| !f.matches(node))
    {
        return Some(Decision::no(format!(
            "node does not match index setting [index.routing.allocation.include] filters [{include}]"
        )));
    }
    if let Some(exclude) =
        filters(FilterOp::Or, "index.routing.allocation.exclude.").filter(|f| f.matches(node))
    {
        return Some(Decision::no(format!(
            "node matches index setting [index.routing.allocation.exclude.] filters [{exclude}]"
        )));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::DecisionKind;
    use crate::test_support::*;
    use serde_json::json;

    fn state() -> shoal_state::ClusterState {
        let mut state = cluster(vec![data_node("n1", "a"), data_node("n2", "b")]);
        create_index(&mut state, 0, "idx", 1, 0, &[]);
        state
    }

    #[test]
    fn cluster_exclude_refuses_allocation_and_remaining() {
        let mut state = state();
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.exclude._name",
            json!("n1"),
        );
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let n1 = ctx.node("n1").expect("n1");
            let no = Filter.can_allocate(&copy, n1, ctx);
            assert_eq!(no.explanation(), "node matches cluster setting [cluster.routing.allocation.exclude] filters [_name:\"n1\"]");
            assert_eq!(Filter.can_remain(&copy, n1, ctx).kind(), DecisionKind::No);
            let n2 = ctx.node("n2").expect("n2");
            assert_eq!(
                Filter.can_allocate(&copy, n2, ctx).explanation(),
                "node passes include/exclude/require filters"
            );
        });
    }

    #[test]
    fn cluster_require_and_include() {
        let mut state = state();
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.require.zone",
            json!("b"),
        );
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            let no = Filter.can_allocate(&copy, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(no.explanation(), "node does not match cluster setting [cluster.routing.allocation.require] filters [zone:\"b\"]");
        });
        state.metadata.persistent_settings.clear();
        set_cluster_setting(
            &mut state,
            "cluster.routing.allocation.include._id",
            json!("n2,n3"),
        );
        with_ctx(&state, |ctx| {
            let no = Filter.can_allocate(&copy, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(no.explanation(), "node does not cluster setting [cluster.routing.allocation.include] filters [_id:\"n2 OR n3\"]");
            assert_eq!(
                Filter
                    .can_allocate(&copy, ctx.node("n2").expect("n2"), ctx)
                    .kind(),
                DecisionKind::Yes
            );
        });
    }

    #[test]
    fn index_filters_apply_after_cluster_filters() {
        let mut state = state();
        set_index_setting(
            &mut state,
            "idx",
            "index.routing.allocation.exclude._name",
            "n*1",
        );
        set_index_setting(
            &mut state,
            "idx",
            "index.routing.allocation.require.zone",
            "a,b",
        );
        let copy = copy_at(&state, "idx", 0, 0);
        with_ctx(&state, |ctx| {
            // require with AND over values: a node has one zone, so "a,b" can never match.
            let no = Filter.can_allocate(&copy, ctx.node("n2").expect("n2"), ctx);
            assert_eq!(
                no.explanation(),
                "node does not match index setting [index.routing.allocation.require] filters [zone:\"a AND b\"]"
            );
        });
        set_index_setting(
            &mut state,
            "idx",
            "index.routing.allocation.require.zone",
            "",
        );
        with_ctx(&state, |ctx| {
            let no = Filter.can_allocate(&copy, ctx.node("n1").expect("n1"), ctx);
            assert_eq!(no.explanation(), "node matches index setting [index.routing.allocation.exclude.] filters [_name:\"n*1\"]");
            let meta = ctx.index("idx").expect("idx");
            assert_eq!(
                Filter
                    .can_allocate_index(meta, ctx.node("n1").expect("n1"), ctx)
                    .kind(),
                DecisionKind::No
            );
            assert_eq!(
                Filter
                    .can_allocate_index(meta, ctx.node("n2").expect("n2"), ctx)
                    .kind(),
                DecisionKind::Yes
            );
        });
    }
}
