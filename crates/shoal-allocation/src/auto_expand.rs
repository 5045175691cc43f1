//! `index.auto_expand_replicas` (`AutoExpandReplicas`): an index set to `min-max` (or
//! `min-all`) gets one replica per data node its filters allow beyond the first, bounded by
//! min and max. Every reroute adapts `index.number_of_replicas` of open indices to the nodes
//! of the moment, so a node joining or leaving resizes them in the same state change.

use shoal_state::{ClusterState, IndexState};

use crate::deciders::passes_filters;
use crate::settings::AllocationSettings;

pub const SETTING: &str = "index.auto_expand_replicas";

/// A parsed `min-max`; `max` is `None` for `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoExpand {
    pub min: i64,
    pub max: Option<i64>,
}

/// `AutoExpandReplicas.parse`: `Ok(None)` for `false`, with OpenSearch's refusals.
pub fn parse(value: &str) -> Result<Option<AutoExpand>, String> {
    if value == "false" {
        return Ok(None);
    }
    let Some(dash) = value.find('-') else {
        return Err(format!(
            "failed to parse [{SETTING}] from value: [{value}] at index -1"
        ));
    };
    let malformed = || format!("failed to parse [{SETTING}] from value: [{value}] at index {dash}");
    let int = |text: &str| text.parse::<i32>().map(i64::from).map_err(|_| malformed());
    let min = int(&value[..dash])?;
    let max = match &value[dash + 1..] {
        "all" => None,
        text => Some(int(text)?),
    };
    if let Some(max) = max.filter(|max| min > *max) {
        return Err(format!(
            "[{SETTING}] minReplicas must be =< maxReplicas but wasn't {min} > {max}"
        ));
    }
    Ok(Some(AutoExpand { min, max }))
}

impl AutoExpand {
    /// `getDesiredNumberOfReplicas`: one per matching data node beyond the first, within
    /// min and max; `None` when the nodes cannot satisfy the range (too few for `min` with
    /// `all`), which leaves the count as it is.
    pub fn desired(&self, matching_data_nodes: i64) -> Option<i64> {
        let max = self
            .max
            .unwrap_or(i32::MAX as i64)
            .min(matching_data_nodes - 1);
        let mut wanted = matching_data_nodes - 1;
        if wanted < self.min {
            wanted = self.min;
        } else if wanted > max {
            wanted = max;
        }
        (self.min..=max).contains(&wanted).then_some(wanted)
    }
}

/// Sets the replica count of every open auto-expanding index whose count no longer matches
/// the data nodes; true if anything changed.
pub fn adapt_replicas(state: &mut ClusterState, settings: &AllocationSettings, now: i64) -> bool {
    let mut changes = Vec::new();
    for meta in state.metadata.indices.values() {
        if meta.state != IndexState::Open {
            continue;
        }
        let Some(Ok(Some(expand))) = meta.setting(SETTING).map(|v| parse(&v)) else {
            continue;
        };
        let matching = state
            .nodes
            .values()
            .filter(|node| node.is_data() && passes_filters(meta, node, settings))
            .count() as i64;
        if let Some(wanted) = expand.desired(matching) {
            if wanted != i64::from(meta.number_of_replicas()) {
                changes.push((meta.name.clone(), wanted as u32));
            }
        }
    }
    for (index, replicas) in &changes {
        state.set_number_of_replicas(index, *replicas, now);
    }
    !changes.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;

    #[test]
    fn parses_like_opensearch() {
        assert_eq!(parse("false"), Ok(None));
        assert_eq!(
            parse("0-1"),
            Ok(Some(AutoExpand {
                min: 0,
                max: Some(1)
            }))
        );
        assert_eq!(parse("1-all"), Ok(Some(AutoExpand { min: 1, max: None })));
        assert_eq!(
            parse("true").unwrap_err(),
            "failed to parse [index.auto_expand_replicas] from value: [true] at index -1"
        );
        assert_eq!(
            parse("a-2").unwrap_err(),
            "failed to parse [index.auto_expand_replicas] from value: [a-2] at index 1"
        );
        assert_eq!(
            parse("3-1").unwrap_err(),
            "[index.auto_expand_replicas] minReplicas must be =< maxReplicas but wasn't 3 > 1"
        );
    }

    #[test]
    fn desired_count_follows_nodes_within_bounds() {
        let zero_one = AutoExpand {
            min: 0,
            max: Some(1),
        };
        assert_eq!(zero_one.desired(1), Some(0));
        assert_eq!(zero_one.desired(3), Some(1));
        let all = AutoExpand { min: 0, max: None };
        assert_eq!(all.desired(0), None);
        assert_eq!(all.desired(1), Some(0));
        assert_eq!(all.desired(5), Some(4));
        let one_all = AutoExpand { min: 1, max: None };
        // fewer nodes than min + 1: the range cannot hold, the count stays
        assert_eq!(one_all.desired(1), None);
        let two_three = AutoExpand {
            min: 2,
            max: Some(3),
        };
        assert_eq!(two_three.desired(1), None);
        assert_eq!(two_three.desired(3), Some(2));
        assert_eq!(two_three.desired(9), Some(3));
    }

    #[test]
    fn nodes_joining_and_leaving_resize_replicas() {
        let mut state = cluster(three_zones()[..1].to_vec());
        create_index(&mut state, 0, "i", 1, 0, &[(SETTING, "0-all")]);
        crate::reroute(&mut state, 0);
        assert_eq!(state.metadata.indices["i"].number_of_replicas(), 0);
        for node in three_zones()[1..].iter().cloned() {
            apply(&mut state, 1, shoal_state::Command::NodeJoin(node));
        }
        crate::reroute(&mut state, 1);
        let meta = &state.metadata.indices["i"];
        assert_eq!(meta.number_of_replicas(), 2);
        assert_eq!(state.routing["i"].shards[0].len(), 3);
        assert!(meta.settings_version > 1);
    }

    #[test]
    fn filtered_out_nodes_do_not_count() {
        let mut state = cluster(three_zones());
        create_index(
            &mut state,
            0,
            "i",
            1,
            0,
            &[
                (SETTING, "0-all"),
                ("index.routing.allocation.exclude.zone", "b"),
            ],
        );
        crate::reroute(&mut state, 0);
        assert_eq!(state.metadata.indices["i"].number_of_replicas(), 1);
    }
}
