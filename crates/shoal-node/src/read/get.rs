//! Gets by id: one copy of the document's shard answers (local first by default), the next
//! copy when one cannot.

use std::sync::Arc;

use super::actions::{GetAction, GetRequest};
use super::coordinator::{is_copy_error, SHARD_READ_TIMEOUT};
use super::copies::{ordered_copies, Preference};
use super::ReadService;
use crate::blocks::BlockLevel;
use crate::documents::GetOptions;
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

impl ReadService {
    /// Get by id: realtime (sees unrefreshed writes), from a local copy if there is one.
    pub fn get_document(
        &self,
        index: &str,
        id: &str,
        routing: Option<&str>,
    ) -> ApiResult<(Arc<IndexService>, Option<shoal_engine::GetResult>)> {
        self.get_document_with(index, id, &GetOptions::realtime(routing))
    }

    /// Get by id with OpenSearch's get parameters; reads one copy of the shard and moves on
    /// to another if that copy cannot answer.
    pub fn get_document_with(
        &self,
        index: &str,
        id: &str,
        options: &GetOptions,
    ) -> ApiResult<(Arc<IndexService>, Option<shoal_engine::GetResult>)> {
        let service = self.resolve_single_for_read(index)?;
        self.core
            .blocks()
            .check_global_then_indices(BlockLevel::Read, &[service.name()])?;
        self.read_document(service, id, options)
    }

    /// Reads a document for a write that depends on it (an update): read blocks do not apply.
    pub(crate) fn read_document(
        &self,
        service: Arc<IndexService>,
        id: &str,
        options: &GetOptions,
    ) -> ApiResult<(Arc<IndexService>, Option<shoal_engine::GetResult>)> {
        let shard = service.route(options.routing.as_deref().unwrap_or(id));
        let request = crate::read::actions::GetRequest {
            index: service.name(),
            index_uuid: service.uuid(),
            shard,
            id: id.to_string(),
            realtime: options.realtime,
            refresh: options.refresh,
        };
        let doc = self.get_from_copies(&service, shard, request, &options.preference)?;
        Ok((service, doc))
    }

    /// Resolves a read target that must be exactly one index (an alias to one index works).
    pub fn resolve_single_for_read(&self, name: &str) -> ApiResult<Arc<IndexService>> {
        if let Some(service) = self.core.index(name) {
            if !service.is_open() {
                return Err(ApiError::index_closed(&service.name(), &service.uuid()));
            }
            return Ok(service);
        }
        let resolved = self
            .core
            .resolve(name, crate::core::ResolveOptions::admin())?;
        match resolved.len() {
            1 => {
                let service = resolved.into_iter().next().expect("one");
                if !service.is_open() {
                    return Err(ApiError::index_closed(&service.name(), &service.uuid()));
                }
                Ok(service)
            }
            0 => Err(ApiError::index_not_found(name)),
            _ => Err(ApiError::bad_request(format!(
                "alias [{name}] has more than one index associated with it [{}], can't execute a single index op",
                resolved.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}
