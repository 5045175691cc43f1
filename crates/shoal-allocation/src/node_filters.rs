//! `include` / `exclude` / `require` node filters (`DiscoveryNodeFilters`): `_name`, `_id`, `_ip`,
//! `_host_ip`, `_publish_ip`, `_host` and custom attributes, comma lists with `*` wildcards.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use shoal_state::DiscoveryNode;

/// `require` needs every filter to match (AND); `include` and `exclude` need one (OR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterOp {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFilters {
    op: FilterOp,
    /// Attribute → accepted patterns; sorted so messages are stable.
    filters: BTreeMap<String, Vec<String>>,
}

impl NodeFilters {
    /// Builds filters from `(attribute, comma list)` pairs; `None` when nothing is set, which is
    /// how OpenSearch tells "no filter" from "filter matching nothing". `_tier*` keys belong to
    /// another decider and are dropped, as `trimTier` does.
    pub fn build(
        op: FilterOp,
        entries: impl IntoIterator<Item = (String, String)>,
    ) -> Option<NodeFilters> {
        let filters: BTreeMap<String, Vec<String>> = entries
            .into_iter()
            .filter(|(attr, _)| !attr.starts_with("_tier"))
            .map(|(attr, value)| (attr, split_list(&value)))
            .filter(|(_, values)| !values.is_empty())
            .collect();
        (!filters.is_empty()).then_some(NodeFilters { op, filters })
    }

    /// Filters from flat index settings under `prefix` (`index.routing.allocation.require.`).
    pub fn from_index_settings(
        op: FilterOp,
        settings: &BTreeMap<String, Value>,
        prefix: &str,
    ) -> Option<NodeFilters> {
        let entries = settings
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k[prefix.len()..].to_string(), setting_text(v)));
        NodeFilters::build(op, entries)
    }

    pub fn matches(&self, node: &DiscoveryNode) -> bool {
        for (attr, values) in &self.filters {
            match self.attribute_matches(attr, values, node) {
                Some(true) if self.op == FilterOp::Or => return true,
                Some(false) if self.op == FilterOp::And => return false,
                _ => {}
            }
        }
        self.op == FilterOp::And
    }

    /// `Some(matched)` for the filter on one attribute; `None` when an OR filter names an
    /// attribute the node lacks (ignored rather than failed, as in OpenSearch).
    fn attribute_matches(
        &self,
        attr: &str,
        values: &[String],
        node: &DiscoveryNode,
    ) -> Option<bool> {
        let publish_ip = publish_ip(node);
        let candidates: Vec<&str> = match attr {
            "_ip" => vec![node.ip.as_str(), publish_ip],
            "_host_ip" => vec![node.ip.as_str()],
            "_publish_ip" => vec![publish_ip],
            "_host" => vec![node.host.as_str(), node.ip.as_str()],
            "_id" => return Some(self.each_value(values, |v| v == node.id)),
            "_name" | "name" => vec![node.name.as_str()],
            _ => match node.attributes.get(attr) {
                Some(value) => vec![value.as_str()],
                None if self.op == FilterOp::And => return Some(false),
                None => return None,
            },
        };
        if matches!(attr, "_ip" | "_host_ip" | "_publish_ip") {
            // IP filters match when any listed value matches, whatever the operator.
            let hit = values.iter().any(|v| {
                candidates
                    .iter()
                    .any(|c| !c.is_empty() && simple_match(v, c))
            });
            return Some(hit);
        }
        Some(self.each_value(values, |v| {
            candidates
                .iter()
                .any(|c| !c.is_empty() && simple_match(v, c))
        }))
    }

    /// OpenSearch walks the values of one attribute with the operator too: for AND every value
    /// must match, for OR one is enough.
    fn each_value(&self, values: &[String], matches: impl Fn(&str) -> bool) -> bool {
        match self.op {
            FilterOp::And => values.iter().all(|v| matches(v)),
            FilterOp::Or => values.iter().any(|v| matches(v)),
        }
    }
}

/// `_id:"a OR b",zone:"z1"` — the `DiscoveryNodeFilters.toString()` used in explanations.
impl fmt::Display for NodeFilters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FilterOp::And => " AND ",
            FilterOp::Or => " OR ",
        };
        let parts: Vec<String> = self
            .filters
            .iter()
            .map(|(attr, values)| format!("{attr}:\"{}\"", values.join(op)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

fn publish_ip(node: &DiscoveryNode) -> &str {
    node.transport_address
        .rsplit_once(':')
        .map(|(host, _)| host.trim_start_matches('[').trim_end_matches(']'))
        .unwrap_or("")
}

pub fn split_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A setting value as text: strings as-is, arrays comma-joined.
pub fn setting_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// `Regex.simpleMatch`: `*` matches any run of characters, everything else literally.
pub fn simple_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, rest) = (parts[0], &parts[1..]);
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let (last, middle) = match rest.split_last() {
        Some(split) => split,
        None => return true,
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::data_node;

    fn filters(op: FilterOp, pairs: &[(&str, &str)]) -> NodeFilters {
        NodeFilters::build(
            op,
            pairs.iter().map(|(a, v)| (a.to_string(), v.to_string())),
        )
        .expect("filters")
    }

    #[test]
    fn wildcards_follow_simple_match() {
        assert!(simple_match("node-*", "node-1"));
        assert!(simple_match("*-1", "node-1"));
        assert!(simple_match("n*e*1", "node-1"));
        assert!(!simple_match("node-*", "other"));
        assert!(simple_match("*", ""));
        assert!(!simple_match("a*a", "a"));
    }

    #[test]
    fn or_filters_match_any_listed_value() {
        let node = data_node("n1", "zone-a");
        assert!(filters(FilterOp::Or, &[("_name", "x,n1")]).matches(&node));
        assert!(filters(FilterOp::Or, &[("_id", "n1")]).matches(&node));
        assert!(filters(FilterOp::Or, &[("zone", "zone-*")]).matches(&node));
        assert!(!filters(FilterOp::Or, &[("rack", "r1")]).matches(&node));
        assert!(filters(FilterOp::Or, &[("_ip", "10.0.0.*")]).matches(&node));
    }

    #[test]
    fn and_filters_need_every_attribute() {
        let node = data_node("n1", "zone-a");
        assert!(filters(FilterOp::And, &[("zone", "zone-a"), ("_name", "n*")]).matches(&node));
        assert!(!filters(FilterOp::And, &[("zone", "zone-a"), ("rack", "r1")]).matches(&node));
    }

    #[test]
    fn empty_values_mean_no_filter_and_display_is_stable() {
        assert!(
            NodeFilters::build(FilterOp::Or, [("_name".to_string(), " ".to_string())]).is_none()
        );
        let f = filters(FilterOp::Or, &[("_name", "a,b"), ("_id", "c")]);
        assert_eq!(f.to_string(), "_id:\"c\",_name:\"a OR b\"");
    }
}
