//! Cluster-level allocation settings, read once per reroute with OpenSearch 2.18's defaults.
//! Index-level settings (`index.routing.allocation.*`) are read where they apply.

use std::collections::BTreeMap;

use shoal_state::{ClusterState, IndexMetadata, SettingsView};

use crate::format::parse_bytes;
use crate::node_filters::{split_list, FilterOp, NodeFilters};

pub const AWARENESS_ATTRIBUTES: &str = "cluster.routing.allocation.awareness.attributes";
pub const AWARENESS_FORCE_PREFIX: &str = "cluster.routing.allocation.awareness.force.";
pub const SAME_HOST: &str = "cluster.routing.allocation.same_shard.host";
pub const CLUSTER_TOTAL_SHARDS_PER_NODE: &str = "cluster.routing.allocation.total_shards_per_node";
pub const INDEX_TOTAL_SHARDS_PER_NODE: &str = "index.routing.allocation.total_shards_per_node";
pub const ALLOCATION_ENABLE: &str = "cluster.routing.allocation.enable";
pub const INDEX_ALLOCATION_ENABLE: &str = "index.routing.allocation.enable";
pub const REBALANCE_ENABLE: &str = "cluster.routing.rebalance.enable";
pub const INDEX_REBALANCE_ENABLE: &str = "index.routing.rebalance.enable";
pub const ALLOW_REBALANCE: &str = "cluster.routing.allocation.allow_rebalance";
pub const CONCURRENT_RECOVERIES: &str = "cluster.routing.allocation.node_concurrent_recoveries";
pub const INCOMING_RECOVERIES: &str =
    "cluster.routing.allocation.node_concurrent_incoming_recoveries";
pub const OUTGOING_RECOVERIES: &str =
    "cluster.routing.allocation.node_concurrent_outgoing_recoveries";
pub const INITIAL_PRIMARIES: &str = "cluster.routing.allocation.node_initial_primaries_recoveries";
pub const INITIAL_REPLICAS: &str = "cluster.routing.allocation.node_initial_replicas_recoveries";
pub const CONCURRENT_REBALANCE: &str = "cluster.routing.allocation.cluster_concurrent_rebalance";
pub const MAX_RETRIES: &str = "index.allocation.max_retries";
pub const DISK_THRESHOLD_ENABLED: &str = "cluster.routing.allocation.disk.threshold_enabled";
pub const DISK_LOW: &str = "cluster.routing.allocation.disk.watermark.low";
pub const DISK_HIGH: &str = "cluster.routing.allocation.disk.watermark.high";
pub const DISK_FLOOD: &str = "cluster.routing.allocation.disk.watermark.flood_stage";
pub const READ_ONLY_ALLOW_DELETE: &str = "index.blocks.read_only_allow_delete";

/// `cluster.routing.allocation.enable` / `index.routing.allocation.enable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationEnable {
    All,
    Primaries,
    NewPrimaries,
    None,
}

impl AllocationEnable {
    pub fn parse(text: &str) -> Option<AllocationEnable> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" => Some(AllocationEnable::All),
            "primaries" => Some(AllocationEnable::Primaries),
            "new_primaries" => Some(AllocationEnable::NewPrimaries),
            "none" => Some(AllocationEnable::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AllocationEnable::All => "all",
            AllocationEnable::Primaries => "primaries",
            AllocationEnable::NewPrimaries => "new_primaries",
            AllocationEnable::None => "none",
        }
    }
}

/// `cluster.routing.rebalance.enable` / `index.routing.rebalance.enable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceEnable {
    All,
    Primaries,
    Replicas,
    None,
}

impl RebalanceEnable {
    pub fn parse(text: &str) -> Option<RebalanceEnable> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" => Some(RebalanceEnable::All),
            "primaries" => Some(RebalanceEnable::Primaries),
            "replicas" => Some(RebalanceEnable::Replicas),
            "none" => Some(RebalanceEnable::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RebalanceEnable::All => "all",
            RebalanceEnable::Primaries => "primaries",
            RebalanceEnable::Replicas => "replicas",
            RebalanceEnable::None => "none",
        }
    }
}

/// `cluster.routing.allocation.allow_rebalance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowRebalance {
    Always,
    IndicesPrimariesActive,
    IndicesAllActive,
}

impl AllowRebalance {
    fn parse(text: &str) -> Option<AllowRebalance> {
        match text.trim().to_ascii_lowercase().as_str() {
            "always" => Some(AllowRebalance::Always),
            "indices_primaries_active" | "indicesprimariesactive" => {
                Some(AllowRebalance::IndicesPrimariesActive)
            }
            "indices_all_active" | "indicesallactive" => Some(AllowRebalance::IndicesAllActive),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AllowRebalance::Always => "always",
            AllowRebalance::IndicesPrimariesActive => "indices_primaries_active",
            AllowRebalance::IndicesAllActive => "indices_all_active",
        }
    }
}

/// One disk watermark. Like `DiskThresholdSettings`, a percentage (or ratio) watermark sets the
/// free-percent threshold and leaves the free-bytes threshold at 0, an absolute one does the
/// reverse, so both checks can always run.
#[derive(Debug, Clone, PartialEq)]
pub struct Watermark {
    pub raw: String,
    /// Minimum free disk in percent (`100 - used%`).
    pub free_percent: f64,
    /// Minimum free bytes.
    pub free_bytes: u64,
}

impl Watermark {
    fn parse(raw: &str) -> Watermark {
        let free_percent = 100.0 - used_percent_of(raw).unwrap_or(100.0);
        let free_bytes = if used_percent_of(raw).is_some() {
            0
        } else {
            parse_bytes(raw).unwrap_or(0)
        };
        Watermark {
            raw: raw.to_string(),
            free_percent,
            free_bytes,
        }
    }

    /// Whether a node with this much free space is past the watermark.
    pub fn exceeded_by(&self, free_bytes: u64, free_percent: f64) -> bool {
        free_bytes < self.free_bytes || free_percent < self.free_percent
    }
}

/// `85%` → 85, `0.85` → 85 (`RatioValue`); `None` for byte values.
fn used_percent_of(raw: &str) -> Option<f64> {
    let text = raw.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent.trim().parse().ok()?;
        return (0.0..=100.0).contains(&value).then_some(value);
    }
    let ratio: f64 = text.parse().ok()?;
    (0.0..=1.0).contains(&ratio).then_some(ratio * 100.0)
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskSettings {
    pub enabled: bool,
    pub low: Watermark,
    pub high: Watermark,
    pub flood_stage: Watermark,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BalanceSettings {
    /// `balance.shard / (balance.shard + balance.index)`.
    pub theta_shard: f32,
    /// `balance.index / (balance.shard + balance.index)`.
    pub theta_index: f32,
    pub threshold: f32,
    pub prefer_primary: bool,
    /// `cluster.routing.allocation.rebalance.primary.enable`: also even out primaries
    /// cluster-wide when rebalancing.
    pub rebalance_primaries: bool,
    /// `cluster.routing.allocation.rebalance.primary.buffer`.
    pub primary_buffer: f32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AllocationSettings {
    pub awareness_attributes: Vec<String>,
    /// Attribute → forced values (`awareness.force.<attr>.values`).
    pub forced_awareness: BTreeMap<String, Vec<String>>,
    /// Awareness attribute → number of values it counts: distinct values on live data
    /// nodes, united with the forced values. Derived once per reroute (nodes do not change
    /// during one).
    pub awareness_value_counts: BTreeMap<String, usize>,
    /// Live nodes with the data role.
    pub data_node_count: usize,
    pub same_shard_host: bool,
    pub require: Option<NodeFilters>,
    pub include: Option<NodeFilters>,
    pub exclude: Option<NodeFilters>,
    pub disk: DiskSettings,
    pub total_shards_per_node: i64,
    pub enable: AllocationEnable,
    pub rebalance_enable: RebalanceEnable,
    pub allow_rebalance: AllowRebalance,
    pub incoming_recoveries: i64,
    pub outgoing_recoveries: i64,
    pub initial_primaries_recoveries: i64,
    pub initial_replicas_recoveries: i64,
    pub cluster_concurrent_rebalance: i64,
    pub balance: BalanceSettings,
}

impl AllocationSettings {
    pub fn from_state(state: &ClusterState) -> AllocationSettings {
        let view = state.settings();
        let concurrent = view.i64_or(CONCURRENT_RECOVERIES, 2);
        let awareness_attributes = view.list(AWARENESS_ATTRIBUTES);
        let forced_awareness = forced_awareness(&view);
        AllocationSettings {
            awareness_value_counts: awareness_value_counts(
                state,
                &awareness_attributes,
                &forced_awareness,
            ),
            data_node_count: state.nodes.values().filter(|n| n.is_data()).count(),
            awareness_attributes,
            forced_awareness,
            same_shard_host: view.bool_or(SAME_HOST, false),
            require: cluster_filters(&view, "require", FilterOp::And),
            include: cluster_filters(&view, "include", FilterOp::Or),
            exclude: cluster_filters(&view, "exclude", FilterOp::Or),
            disk: DiskSettings {
                enabled: view.bool_or(DISK_THRESHOLD_ENABLED, true),
                low: Watermark::parse(&view.get_or(DISK_LOW, "85%")),
                high: Watermark::parse(&view.get_or(DISK_HIGH, "90%")),
                flood_stage: Watermark::parse(&view.get_or(DISK_FLOOD, "95%")),
            },
            total_shards_per_node: view.i64_or(CLUSTER_TOTAL_SHARDS_PER_NODE, -1),
            enable: view
                .get(ALLOCATION_ENABLE)
                .and_then(|s| AllocationEnable::parse(&s))
                .unwrap_or(AllocationEnable::All),
            rebalance_enable: view
                .get(REBALANCE_ENABLE)
                .and_then(|s| RebalanceEnable::parse(&s))
                .unwrap_or(RebalanceEnable::All),
            allow_rebalance: view
                .get(ALLOW_REBALANCE)
                .and_then(|s| AllowRebalance::parse(&s))
                .unwrap_or(AllowRebalance::IndicesAllActive),
            incoming_recoveries: view.i64_or(INCOMING_RECOVERIES, concurrent),
            outgoing_recoveries: view.i64_or(OUTGOING_RECOVERIES, concurrent),
            initial_primaries_recoveries: view.i64_or(INITIAL_PRIMARIES, 4),
            initial_replicas_recoveries: view.i64_or(INITIAL_REPLICAS, 4),
            cluster_concurrent_rebalance: view.i64_or(CONCURRENT_REBALANCE, 2),
            balance: balance_settings(&view),
        }
    }
}

fn forced_awareness(view: &SettingsView<'_>) -> BTreeMap<String, Vec<String>> {
    view.with_prefix(AWARENESS_FORCE_PREFIX)
        .into_iter()
        .filter_map(|(key, value)| {
            let attr = key[AWARENESS_FORCE_PREFIX.len()..].strip_suffix(".values")?;
            let values = split_list(&value);
            (!values.is_empty()).then(|| (attr.to_string(), values))
        })
        .collect()
}

fn awareness_value_counts(
    state: &ClusterState,
    attributes: &[String],
    forced: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, usize> {
    attributes
        .iter()
        .map(|attribute| {
            let mut values: std::collections::BTreeSet<&str> = state
                .nodes
                .values()
                .filter(|n| n.is_data())
                .filter_map(|n| n.attributes.get(attribute).map(String::as_str))
                .collect();
            if let Some(forced) = forced.get(attribute) {
                values.extend(forced.iter().map(String::as_str));
            }
            (attribute.clone(), values.len())
        })
        .collect()
}

fn cluster_filters(view: &SettingsView<'_>, kind: &str, op: FilterOp) -> Option<NodeFilters> {
    let prefix = format!("cluster.routing.allocation.{kind}.");
    let entries = view
        .with_prefix(&prefix)
        .into_iter()
        .map(|(key, value)| (key[prefix.len()..].to_string(), value));
    NodeFilters::build(op, entries)
}

fn balance_settings(view: &SettingsView<'_>) -> BalanceSettings {
    let shard = view.f64_or("cluster.routing.allocation.balance.shard", 0.45) as f32;
    let index = view.f64_or("cluster.routing.allocation.balance.index", 0.55) as f32;
    let sum = shard + index;
    // OpenSearch rejects a zero sum; fall back to the defaults rather than divide by zero.
    let (theta_shard, theta_index) = if sum > 0.0 {
        (shard / sum, index / sum)
    } else {
        (0.45, 0.55)
    };
    BalanceSettings {
        theta_shard,
        theta_index,
        threshold: view.f64_or("cluster.routing.allocation.balance.threshold", 1.0) as f32,
        prefer_primary: view.bool_or("cluster.routing.allocation.balance.prefer_primary", false),
        rebalance_primaries: view
            .bool_or("cluster.routing.allocation.rebalance.primary.enable", false),
        primary_buffer: view.f64_or("cluster.routing.allocation.rebalance.primary.buffer", 0.1)
            as f32,
    }
}

pub fn index_i64(meta: &IndexMetadata, key: &str, default: i64) -> i64 {
    meta.setting(key)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_accept_percentages_ratios_and_bytes() {
        let pct = Watermark::parse("85%");
        assert_eq!((pct.free_percent, pct.free_bytes), (15.0, 0));
        let ratio = Watermark::parse("0.9");
        assert!((ratio.free_percent - 10.0).abs() < 1e-9);
        let bytes = Watermark::parse("500mb");
        assert_eq!(
            (bytes.free_percent, bytes.free_bytes),
            (0.0, 500 * 1024 * 1024)
        );
        assert!(bytes.exceeded_by(100, 50.0));
        assert!(pct.exceeded_by(u64::MAX, 10.0));
        assert!(!pct.exceeded_by(0, 20.0));
    }

    #[test]
    fn defaults_are_opensearch_2_18() {
        let state = ClusterState::new("c");
        let s = AllocationSettings::from_state(&state);
        assert_eq!(s.incoming_recoveries, 2);
        assert_eq!(s.outgoing_recoveries, 2);
        assert_eq!(s.initial_primaries_recoveries, 4);
        assert_eq!(s.cluster_concurrent_rebalance, 2);
        assert_eq!(s.allow_rebalance, AllowRebalance::IndicesAllActive);
        assert!((s.balance.theta_shard - 0.45).abs() < 1e-6);
        assert!(s.disk.enabled);
        assert!(s.require.is_none() && s.exclude.is_none());
    }

    #[test]
    fn concurrent_recoveries_feed_incoming_and_outgoing() {
        let mut state = ClusterState::new("c");
        state
            .metadata
            .persistent_settings
            .insert(CONCURRENT_RECOVERIES.into(), "5".into());
        state
            .metadata
            .transient_settings
            .insert(OUTGOING_RECOVERIES.into(), "1".into());
        state.metadata.persistent_settings.insert(
            "cluster.routing.allocation.awareness.force.zone.values".into(),
            serde_json::json!(["a", "b"]),
        );
        let s = AllocationSettings::from_state(&state);
        assert_eq!((s.incoming_recoveries, s.outgoing_recoveries), (5, 1));
        assert_eq!(s.forced_awareness["zone"], vec!["a", "b"]);
    }
}
