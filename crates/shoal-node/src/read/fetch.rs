//! The fetch phase of a search: the sources of the documents a page shows, read from the
//! search contexts of the copies that ranked them, and the freeing of those contexts.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;
use tantivy::DocAddress;

use super::actions::{FetchAction, FetchRequest, FreeContextAction, FreeContexts};
use super::coordinator::{Reader, SHARD_READ_TIMEOUT};
use super::ReadService;
use crate::error::ApiError;

/// How long a search context waits for the fetch phase.
pub const FETCH_KEEP_ALIVE: Duration = Duration::from_secs(60);

impl ReadService {
    /// Reads the sources of the documents a page shows, from the copies that ranked them.
    /// Contexts are freed after reading unless `keep` (scrolls), then also when a fetch fails.
    pub fn fetch_phase(
        &self,
        readers: &[Option<Reader>],
        docs: &[(usize, DocAddress)],
        keep: bool,
    ) -> Result<HashMap<(usize, DocAddress), Option<Bytes>>, PhaseError> {
        let fetched = self.fetch_from_readers(readers, docs, keep);
        if fetched.is_err() {
            // A scroll's contexts stay until the scroll is cleared or expires.
            if !keep {
                self.free_readers(readers);
            }
            return fetched;
        }
        if !keep {
            let fetched_shards: std::collections::BTreeSet<usize> =
                docs.iter().map(|(s, _)| *s).collect();
            let unfetched: Vec<Option<Reader>> = readers
                .iter()
                .enumerate()
                .map(|(i, r)| r.clone().filter(|_| !fetched_shards.contains(&i)))
                .collect();
            self.free_readers(&unfetched);
        }
        fetched
    }

    fn fetch_from_readers(
        &self,
        readers: &[Option<Reader>],
        docs: &[(usize, DocAddress)],
        keep: bool,
    ) -> Result<HashMap<(usize, DocAddress), Option<Bytes>>, PhaseError> {
        let mut by_shard: BTreeMap<usize, Vec<DocAddress>> = BTreeMap::new();
        for (shard, address) in docs {
            by_shard.entry(*shard).or_default().push(*address);
        }
        let mut fetched = HashMap::new();
        let mut remote = Vec::new();
        for (shard, addresses) in by_shard {
            let Some(Reader {
                copy,
                context: Some(context),
            }) = readers.get(shard).cloned().flatten()
            else {
                return Err(ApiError::internal("no search context for the fetch phase").into());
            };
            let request = FetchRequest {
                context,
                docs: addresses
                    .iter()
                    .map(|a| (a.segment_ord, a.doc_id))
                    .collect(),
                release: !keep,
            };
            match &copy.address {
                None => {
                    let sources = self.shard_fetch(&request)?;
                    for (address, source) in addresses.into_iter().zip(sources) {
                        fetched.insert((shard, address), source.map(Bytes::from));
                    }
                }
                Some(address) => {
                    let pending =
                        self.core
                            .send::<FetchAction>(address, &request, SHARD_READ_TIMEOUT);
                    remote.push((shard, addresses, copy, pending));
                }
            }
        }
        for (shard, addresses, copy, pending) in remote {
            let address = copy.address.as_deref().unwrap_or_default();
            let sources = self
                .core
                .wait_unless_gone(address, pending)
                .map_err(|error| PhaseError::Fetch {
                    node_id: copy.node_id.clone(),
                    error,
                })?;
            for (address, source) in addresses.into_iter().zip(sources) {
                fetched.insert((shard, address), source);
            }
        }
        Ok(fetched)
    }

    /// Frees the contexts of these readers (without waiting for remote nodes).
    pub fn free_readers(&self, readers: &[Option<Reader>]) {
        let mut by_node: BTreeMap<Option<String>, Vec<u64>> = BTreeMap::new();
        for reader in readers.iter().flatten() {
            if let Some(context) = reader.context {
                by_node
                    .entry(reader.copy.address.clone())
                    .or_default()
                    .push(context);
            }
        }
        for (address, contexts) in by_node {
            match address {
                None => self.free_search_contexts(&contexts),
                Some(address) => {
                    // Not waited for: the contexts expire anyway if the call is lost.
                    let request = FreeContexts { contexts };
                    let timeout = Duration::from_secs(10);
                    drop(
                        self.core
                            .send::<FreeContextAction>(&address, &request, timeout),
                    );
                }
            }
        }
    }
}

/// Why a search's fetch-and-render step failed: a remote fetch (the copy that holds the search
/// context did not answer), or anything else.
#[derive(Debug)]
pub enum PhaseError {
    Fetch { node_id: String, error: ApiError },
    Other(ApiError),
}

impl From<ApiError> for PhaseError {
    fn from(error: ApiError) -> PhaseError {
        PhaseError::Other(error)
    }
}

impl From<PhaseError> for ApiError {
    fn from(error: PhaseError) -> ApiError {
        match error {
            PhaseError::Fetch { error, .. } => fetch_failed(error),
            PhaseError::Other(error) => error,
        }
    }
}
fn fetch_failed(error: ApiError) -> ApiError {
    ApiError::new(
        503,
        "search_phase_execution_exception",
        "fetch phase failed",
    )
    .with("phase", json!("fetch"))
    .with("grouped", json!(true))
    .caused_by(error)
}
