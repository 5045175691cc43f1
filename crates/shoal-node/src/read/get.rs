//! Gets by id: one copy of the document's shard answers (local first by default), the next
//! copy when one cannot.

use std::sync::Arc;

use super::actions::{GetAction, GetRequest};
use super::coordinator::{is_copy_error, SHARD_READ_TIMEOUT};
use super::copies::{ordered_copies, Preference};
use super::ReadService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;

impl ReadService {
    /// Gets a document from a copy of its shard (local first by default), moving on to the
    /// next copy when one cannot answer.
    pub fn get_from_copies(
        &self,
        service: &Arc<IndexService>,
        shard: usize,
        request: GetRequest,
        preference: &Preference,
    ) -> ApiResult<Option<shoal_engine::GetResult>> {
        let state = self.core.cluster_state();
        let mut copies = ordered_copies(
            &state,
            &service.name(),
            shard,
            preference,
            &self.core.node_id,
            0,
        )?;
        let segment_replicated = service.is_segment_replicated();
        if *preference == Preference::Default && request.realtime && segment_replicated {
            // A segment replica sees what it copied, not its latest operations: a realtime
            // get asks the primary (a replica answers only while the primary cannot).
            copies.sort_by_key(|c| !c.primary);
        } else if *preference == Preference::Default {
            copies.sort_by_key(|c| (!c.is_local(), !c.primary));
        }
        let mut last_error = None;
        for copy in copies {
            let outcome = match &copy.address {
                None => self.shard_get(&request),
                Some(address) => self
                    .core
                    .call::<GetAction>(address, &request, SHARD_READ_TIMEOUT),
            };
            match outcome {
                Err(error) if is_copy_error(&error) => last_error = Some(error),
                other => return other,
            }
        }
        Err(last_error.unwrap_or_else(|| {
            ApiError::new(
                503,
                "no_shard_available_action_exception",
                format!(
                    "No shard available for [get [{}][{}]: routing [null]]",
                    request.index, request.id
                ),
            )
        }))
    }
}
