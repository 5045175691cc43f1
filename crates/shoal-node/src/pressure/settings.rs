//! The pools' shapes: OpenSearch 2.18's defaults (`ThreadPool`'s builders) and the static node
//! settings `thread_pool.<name>.size|queue_size` (fixed pools) and `.core|.max|.keep_alive`
//! (scaling pools) that change them.

use std::time::Duration;

use crate::error::{ApiError, ApiResult};
use crate::settings::FlatSettings;

use super::executor::{PoolConfig, PoolKind};

pub const WRITE: &str = "write";
pub const SEARCH: &str = "search";
pub const GET: &str = "get";
pub const MANAGEMENT: &str = "management";
pub const GENERIC: &str = "generic";
/// Node-to-node shard-level requests (forwarded bulks, shard searches and gets, broadcasts):
/// apart from the REST pools, so a coordinator holding a REST thread while it waits for other
/// nodes never waits behind other coordinators.
pub const TRANSPORT: &str = "transport_shard";
/// Replica writes, peer recovery and resync: their own budget, never rejected.
pub const REPLICATION: &str = "replication";
/// Shard snapshots and the coordinators of snapshots not waited for (OpenSearch's `snapshot`).
pub const SNAPSHOT: &str = "snapshot";
/// Periodic refreshes and scheduled translog fsyncs (OpenSearch's `refresh`): off the
/// scheduler's thread, so one slow refresh neither delays other copies' nor shifts the ticks.
pub const REFRESH: &str = "refresh";
/// Flushes past the translog's size threshold (OpenSearch's `flush`).
pub const FLUSH: &str = "flush";

const FIXED: &[&str] = &[WRITE, SEARCH, GET];
/// The scaling pools whose `core`, `max` and `keep_alive` a node setting may change.
const SCALING: &[&str] = &[MANAGEMENT, GENERIC, SNAPSHOT, REFRESH, FLUSH];

/// The node settings Shoal reads for its pools.
pub fn honoured_keys() -> Vec<String> {
    let fixed = FIXED
        .iter()
        .flat_map(|p| ["size", "queue_size"].map(|k| format!("thread_pool.{p}.{k}")));
    let scaling = SCALING
        .iter()
        .flat_map(|p| ["core", "max", "keep_alive"].map(|k| format!("thread_pool.{p}.{k}")));
    fixed.chain(scaling).collect()
}

/// `OpenSearchExecutors.allocatedProcessors`: the machine's, or `node.processors` if set.
pub fn allocated_processors() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn defaults(processors: usize) -> Vec<PoolConfig> {
    let fixed = |name: &str, size: usize, queue: usize| PoolConfig {
        name: name.into(),
        kind: PoolKind::Fixed,
        core: size,
        max: size,
        queue_size: Some(queue),
        keep_alive: None,
    };
    let scaling = |name: &str, core: usize, max: usize, keep_alive: Duration| PoolConfig {
        name: name.into(),
        kind: PoolKind::Scaling,
        core,
        max,
        queue_size: None,
        keep_alive: Some(keep_alive),
    };
    let generic_max = (4 * processors).clamp(128, 512);
    vec![
        fixed(WRITE, processors, 10_000),
        fixed(SEARCH, processors * 3 / 2 + 1, 1000),
        fixed(GET, processors, 1000),
        scaling(MANAGEMENT, 1, 5, Duration::from_secs(300)),
        scaling(GENERIC, 4, generic_max, Duration::from_secs(30)),
        scaling(TRANSPORT, 1, generic_max, Duration::from_secs(30)),
        scaling(REPLICATION, 1, generic_max, Duration::from_secs(30)),
        scaling(
            SNAPSHOT,
            1,
            (processors / 2).clamp(1, 5),
            Duration::from_secs(300),
        ),
        scaling(
            REFRESH,
            1,
            (processors / 2).clamp(1, 10),
            Duration::from_secs(300),
        ),
        scaling(
            FLUSH,
            1,
            (processors / 2).clamp(1, 5),
            Duration::from_secs(300),
        ),
    ]
}

/// Every pool of a node, its defaults changed by `thread_pool.*` node settings.
pub fn pool_configs(settings: &FlatSettings, processors: usize) -> ApiResult<Vec<PoolConfig>> {
    let mut pools = defaults(processors);
    for pool in &mut pools {
        apply_settings(pool, settings, processors)?;
    }
    Ok(pools)
}

fn text(settings: &FlatSettings, key: &str) -> Option<String> {
    settings.get(key).map(|v| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn apply_settings(
    pool: &mut PoolConfig,
    settings: &FlatSettings,
    processors: usize,
) -> ApiResult<()> {
    let key = |k: &str| format!("thread_pool.{}.{k}", pool.name);
    let int = |k: &str, min: i64, max: i64| -> ApiResult<Option<i64>> {
        let key = key(k);
        text(settings, &key)
            .map(|t| crate::settings::typed::parse_int(&key, &t, min, max))
            .transpose()
    };
    match pool.kind {
        PoolKind::Fixed if FIXED.contains(&pool.name.as_str()) => {
            // OpenSearch caps the write pool at one more than the processors.
            let max_size = if pool.name == WRITE {
                processors as i64 + 1
            } else {
                i32::MAX as i64
            };
            if let Some(size) = int("size", 1, max_size)? {
                pool.core = size as usize;
                pool.max = size as usize;
            }
            if let Some(queue) = int("queue_size", i32::MIN as i64, i32::MAX as i64)? {
                // A negative queue size means unbounded, as in OpenSearch.
                pool.queue_size = usize::try_from(queue).ok();
            }
        }
        PoolKind::Scaling if SCALING.contains(&pool.name.as_str()) => {
            if let Some(core) = int("core", 0, i32::MAX as i64)? {
                pool.core = core as usize;
            }
            if let Some(max) = int("max", 1, i32::MAX as i64)? {
                pool.max = max as usize;
            }
            let keep_alive_key = key("keep_alive");
            if let Some(t) = text(settings, &keep_alive_key) {
                pool.keep_alive = crate::settings::typed::parse_time(&keep_alive_key, &t)?;
            }
            if pool.core > pool.max {
                return Err(ApiError::bad_request(format!(
                    "[{}] must be <= [{}]: core [{}] is larger than max [{}]",
                    key("core"),
                    key("max"),
                    pool.core,
                    pool.max
                )));
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(pairs: &[(&str, &str)]) -> FlatSettings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect()
    }

    fn pool<'a>(pools: &'a [PoolConfig], name: &str) -> &'a PoolConfig {
        pools.iter().find(|p| p.name == name).unwrap()
    }

    #[test]
    fn defaults_follow_opensearch_for_four_processors() {
        let pools = pool_configs(&FlatSettings::new(), 4).unwrap();
        let shape = |n| {
            let p = pool(&pools, n);
            (p.core, p.max, p.queue_size)
        };
        assert_eq!(shape(WRITE), (4, 4, Some(10_000)));
        assert_eq!(shape(SEARCH), (7, 7, Some(1000)));
        assert_eq!(shape(GET), (4, 4, Some(1000)));
        assert_eq!(shape(MANAGEMENT), (1, 5, None));
        assert_eq!(shape(GENERIC), (4, 128, None));
        assert_eq!(shape(REFRESH), (1, 2, None));
        assert_eq!(shape(FLUSH), (1, 2, None));
    }

    #[test]
    fn node_settings_resize_pools() {
        let s = settings(&[
            ("thread_pool.write.size", "1"),
            ("thread_pool.write.queue_size", "4"),
            ("thread_pool.search.queue_size", "-1"),
            ("thread_pool.generic.max", "16"),
        ]);
        let pools = pool_configs(&s, 2).unwrap();
        assert_eq!(pool(&pools, WRITE).max, 1);
        assert_eq!(pool(&pools, WRITE).queue_size, Some(4));
        assert_eq!(pool(&pools, SEARCH).queue_size, None);
        assert_eq!(pool(&pools, GENERIC).max, 16);
    }

    #[test]
    fn every_pool_setting_read_here_is_accepted_at_start() {
        for key in honoured_keys() {
            assert!(crate::settings::typed::honoured_node_setting(&key), "{key}");
        }
        assert!(!crate::settings::typed::honoured_node_setting(
            "thread_pool.analyze.size"
        ));
    }

    #[test]
    fn invalid_values_name_the_setting() {
        let reason = |k: &str, v: &str| pool_configs(&settings(&[(k, v)]), 2).unwrap_err().reason;
        assert_eq!(
            reason("thread_pool.write.queue_size", "abc"),
            "Failed to parse value [abc] for setting [thread_pool.write.queue_size]"
        );
        assert_eq!(
            reason("thread_pool.write.size", "4"),
            "Failed to parse value [4] for setting [thread_pool.write.size] must be <= 3"
        );
        assert_eq!(
            reason("thread_pool.get.size", "0"),
            "Failed to parse value [0] for setting [thread_pool.get.size] must be >= 1"
        );
        assert!(
            reason("thread_pool.management.core", "9").contains("core [9] is larger than max [5]")
        );
    }
}
