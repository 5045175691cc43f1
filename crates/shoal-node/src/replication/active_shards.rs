//! `wait_for_active_shards`: before a primary applies a write, the shard must have that many
//! active copies (the request parameter, else `index.write.wait_for_active_shards`, default
//! 1). The primary waits for them up to the request `timeout` (1m), then fails the write with
//! OpenSearch's `UnavailableShardsException`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ReplicationService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;

/// A count of copies (0 waits for nothing) or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActiveShards {
    All,
    AtLeast(u32),
}

impl ActiveShards {
    pub fn parse(text: &str) -> ApiResult<ActiveShards> {
        if text.eq_ignore_ascii_case("all") {
            return Ok(ActiveShards::All);
        }
        let value: i64 = text
            .parse()
            .map_err(|_| ApiError::bad_request(format!("cannot parse ActiveShardCount[{text}]")))?;
        u32::try_from(value)
            .map(ActiveShards::AtLeast)
            .map_err(|_| ApiError::bad_request("shard count cannot be a negative value"))
    }

    /// How many active copies this asks for, for a shard with `copies` copies in all.
    pub fn required(self, copies: usize) -> usize {
        match self {
            ActiveShards::All => copies,
            ActiveShards::AtLeast(n) => n as usize,
        }
    }

    /// `wanted`, or the index's `index.write.wait_for_active_shards` when `None`, with the
    /// copies a shard of the index has.
    pub fn for_index(
        wanted: Option<ActiveShards>,
        settings: &crate::settings::IndexSettings<'_>,
    ) -> ApiResult<(ActiveShards, usize)> {
        let copies = settings.number_of_replicas() + 1;
        let wanted = match wanted {
            Some(wanted) => wanted,
            None => ActiveShards::parse(&settings.write_wait_for_active_shards())?,
        };
        Ok((wanted, copies))
    }

    /// As OpenSearch prints it in its error text.
    fn label(self) -> String {
        match self {
            ActiveShards::All => "ALL".to_string(),
            ActiveShards::AtLeast(n) => n.to_string(),
        }
    }
}

/// The write request's `timeout` when it sets none.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

impl ReplicationService {
    /// Waits until `shard` of `service` has the active copies a write of `requests` items
    /// asks for. Called on the primary, before it applies anything.
    pub(crate) fn wait_for_active_shards(
        &self,
        service: &IndexService,
        shard: usize,
        options: &crate::documents::WriteOptions,
        requests: usize,
    ) -> ApiResult<()> {
        let (wanted, copies) = service.with_meta(|m| {
            ActiveShards::for_index(options.wait_for_active_shards, &m.settings())
        })?;
        let needed = wanted.required(copies);
        if needed <= 1 {
            return Ok(());
        }
        let index = service.name();
        if needed > copies {
            return Err(ApiError::bad_request(format!(
                "the value of [wait_for_active_shards] ({needed}) must be less than or equal to the number of shard copies ({copies}) of [{index}]"
            )));
        }
        // The error names the request's timeout; the wait ends at the request's deadline.
        let timeout = options.timeout.unwrap_or(DEFAULT_WRITE_TIMEOUT);
        let active = |state: &shoal_state::ClusterState| {
            state
                .copies(&index, shard as u32)
                .iter()
                .filter(|c| c.is_active())
                .count()
        };
        if self
            .core
            .wait_until_applied(options.remaining_time(), |state, _| {
                (active(state) >= needed).then_some(())
            })
            .is_some()
        {
            return Ok(());
        }
        let have = active(&self.core.cluster_state());
        Err(ApiError::new(
            503,
            "unavailable_shards_exception",
            format!(
                "[{index}][{shard}] Not enough active copies to meet shard count of [{}] (have {have}, needed {needed}). Timeout: [{}], request: [BulkShardRequest [[{index}][{shard}]] containing [{requests}] requests]",
                wanted.label(),
                crate::settings::format_time(timeout),
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_parse_like_opensearch() {
        assert_eq!(ActiveShards::parse("all").unwrap(), ActiveShards::All);
        assert_eq!(ActiveShards::parse("2").unwrap(), ActiveShards::AtLeast(2));
        assert_eq!(ActiveShards::All.required(3), 3);
        assert_eq!(ActiveShards::AtLeast(0).required(3), 0);
        assert!(ActiveShards::parse("-1").is_err());
        assert_eq!(
            ActiveShards::parse("x").unwrap_err().reason,
            "cannot parse ActiveShardCount[x]"
        );
    }
}
