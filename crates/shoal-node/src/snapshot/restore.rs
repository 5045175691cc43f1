//! Restoring a snapshot (`POST _snapshot/{repo}/{snap}/_restore`): the chosen indices come
//! back as new indices (renamed if asked) whose primaries download the snapshot's files on
//! whichever node the cluster manager gives them; their replicas then recover from them. As
//! in OpenSearch, an index may be restored over a closed index of the same name and number of
//! shards: the closed index goes (Shoal gives the restored one a new uuid).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};
use shoal_state::{Command, IndexMetadata, IndexState, SnapshotRecoverySource};
use shoal_storage::Repository;

use super::layout::{ShardSnapshot, SnapshotDetails, SnapshotState};
use super::read::wildcard_match;
use super::SnapshotService;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::recovery::progress::{copied_totals, FileDetail};
use crate::remote::segments::open_object;
use crate::transfer::{ByteStream, FileMeta, FileSource};

/// How long `wait_for_completion=true` waits for the restored primaries.
const RESTORE_WAIT: Duration = Duration::from_secs(1800);

/// Settings a restore may not change: they describe the data in the snapshot.
const UNMODIFIABLE: &[&str] = &[
    "index.number_of_shards",
    "index.uuid",
    "index.version.created",
    "index.creation_date",
    "index.provided_name",
    "index.replication.type",
];

/// What `POST _snapshot/{repo}/{snap}/_restore` asks.
#[derive(Debug, Clone, Default)]
pub struct RestoreRequest {
    pub repository: String,
    pub snapshot: String,
    /// An index expression over the snapshot's indices; empty: all of them.
    pub indices: String,
    pub ignore_unavailable: bool,
    pub include_global_state: bool,
    pub rename_pattern: Option<String>,
    pub rename_replacement: Option<String>,
    pub index_settings: Option<Value>,
    pub ignore_index_settings: Vec<String>,
    pub include_aliases: bool,
    pub partial: bool,
    pub wait_for_completion: bool,
}

impl SnapshotService {
    pub fn restore_snapshot(&self, request: RestoreRequest) -> ApiResult<Value> {
        let repository = self.repository(&request.repository)?;
        let details = self.find_snapshot(&repository, &request.snapshot)?;
        let refuse = |why: String| {
            ApiError::new(
                400,
                "snapshot_restore_exception",
                format!(
                    "[{}:{}/{}] {why}",
                    request.repository, details.name, details.uuid
                ),
            )
        };
        if matches!(
            details.state,
            SnapshotState::Failed | SnapshotState::InProgress
        ) {
            return Err(refuse(format!(
                "unsupported snapshot state [{}]",
                details.state.as_str()
            )));
        }
        let chosen = choose_indices(&details, &request.indices, request.ignore_unavailable)?;
        let (targets, replacing) = self.restored_metadata(&request, &details, &chosen, &refuse)?;
        if request.include_global_state {
            self.restore_persistent_settings(&details)?;
        }
        let copies: i64 = targets
            .iter()
            .filter(|m| !replacing.contains_key(&m.name))
            .map(|m| (m.number_of_shards() * (1 + m.number_of_replicas())) as i64)
            .sum();
        let state = self.core.cluster_state();
        let per_node = crate::admin::shard_limit::max_shards_per_node(&self.core);
        crate::admin::shard_limit::check(&state, per_node, copies)?;
        let names: Vec<String> = targets.iter().map(|m| m.name.clone()).collect();
        self.propose(Command::RestoreSnapshot {
            indices: targets,
            replacing,
        })?;
        tracing::info!(repository = %request.repository, snapshot = %details.name, indices = ?names, "snapshot restore started");
        if !request.wait_for_completion {
            return Ok(json!({ "accepted": true }));
        }
        let (total, failed) = self.core.wait_for_restored(&names, RESTORE_WAIT);
        Ok(json!({
            "snapshot": {
                "snapshot": details.name,
                "indices": names,
                "shards": { "total": total, "failed": failed, "successful": total - failed }
            }
        }))
    }

    /// The metadata of each restored index (the snapshot's, under its new name and uuid, with
    /// the request's setting changes), and the closed indices they restore over (name → uuid).
    fn restored_metadata(
        &self,
        request: &RestoreRequest,
        details: &SnapshotDetails,
        chosen: &[String],
        refuse: &dyn Fn(String) -> ApiError,
    ) -> ApiResult<(Vec<IndexMetadata>, BTreeMap<String, String>)> {
        let rename = Rename::new(request)?;
        let overrides = setting_overrides(request)?;
        let state = self.core.cluster_state();
        let mut targets: BTreeMap<String, String> = BTreeMap::new();
        let mut out = Vec::new();
        let mut replacing = BTreeMap::new();
        for source in chosen {
            let snapshot = &details.indices[source];
            if snapshot.shards.iter().any(Option::is_none) && !request.partial {
                return Err(refuse(format!(
                    "index [{source}] wasn't fully snapshotted - cannot restore"
                )));
            }
            let name = rename.apply(source);
            crate::routing::validate_index_name(&name)?;
            if let Some(other) = targets.insert(name.clone(), source.clone()) {
                return Err(refuse(format!(
                    "indices [{other}] and [{source}] are renamed into the same index [{name}]"
                )));
            }
            if let Some(existing) = state.metadata.indices.get(&name) {
                check_restorable_over(existing, source, &snapshot.meta, refuse)?;
                replacing.insert(name.clone(), existing.uuid.clone());
            }
            out.push(restored_index(
                request,
                details,
                source,
                &name,
                &snapshot.meta,
                &overrides,
            ));
        }
        Ok((out, replacing))
    }

    /// The snapshot's persistent settings over the cluster's (`include_global_state`).
    fn restore_persistent_settings(&self, details: &SnapshotDetails) -> ApiResult<()> {
        if details.persistent_settings.is_empty() {
            return Ok(());
        }
        let state = self.core.cluster_state();
        let mut persistent = state.metadata.persistent_settings.clone();
        persistent.extend(details.persistent_settings.clone());
        self.propose(Command::PutClusterSettings {
            persistent,
            transient: state.metadata.transient_settings.clone(),
        })
    }

    /// Fills the (empty) store of a restored primary with the snapshot's files, before the
    /// engine opens it.
    pub(crate) fn restore_shard(
        &self,
        service: &IndexService,
        shard: usize,
        term: i64,
    ) -> ApiResult<(Vec<FileDetail>, SnapshotRecoverySource)> {
        let meta = service.meta();
        let source = meta.restored_from.clone().ok_or_else(|| {
            ApiError::internal(format!(
                "index [{}] is restoring but names no snapshot",
                meta.name
            ))
        })?;
        let (repository, throttles) = self.repository_and_throttles(&source.repository)?;
        let details = self.snapshot_details(&repository, &source.snapshot_uuid)?;
        let snapshot = details
            .indices
            .get(&source.index)
            .and_then(|i| i.shards.get(shard))
            .and_then(Option::as_ref)
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "snapshot_restore_exception",
                    format!(
                        "[{}:{}] holds no copy of shard [{}][{shard}]",
                        source.repository, source.snapshot, source.index
                    ),
                )
            })?;
        let config = service.shard_engine_config(shard);
        let _ = std::fs::remove_dir_all(&config.path);
        std::fs::create_dir_all(config.index_dir())?;
        let files = crate::segrep::target::file_metas(&snapshot.files);
        let blobs = BlobSource::new(repository, snapshot);
        // A restore is a recovery: the recovery rate paces it too.
        let rate = super::throttle::tighter(
            throttles.restore.bytes_per_sec,
            self.core.recovery_limits().bytes_per_sec,
        );
        let installed = crate::remote::restore::install_store(
            &self.core,
            &config,
            (&blobs, &files),
            &snapshot.meta_json,
            term,
            crate::remote::restore::InstallPace {
                limiter: throttles.restore.limiter(),
                rate,
            },
        )?;
        let (copied, bytes) = copied_totals(&installed);
        tracing::info!(index = %service.name(), shard, snapshot = %source.snapshot, files = copied, bytes, "shard restored from a snapshot");
        Ok((installed, source))
    }
}

/// The snapshot's indices an expression selects (empty, `_all` or `*`: all of them).
pub(super) fn choose_indices(
    details: &SnapshotDetails,
    expression: &str,
    ignore_unavailable: bool,
) -> ApiResult<Vec<String>> {
    let names: Vec<&String> = details.indices.keys().collect();
    let expression = expression.trim();
    if expression.is_empty() || expression == "_all" || expression == "*" {
        return Ok(names.into_iter().cloned().collect());
    }
    let mut chosen: Vec<String> = Vec::new();
    for part in expression
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        if let Some(excluded) = part.strip_prefix('-') {
            chosen.retain(|n| !wildcard_match(excluded, n));
            continue;
        }
        let matched: Vec<String> = names
            .iter()
            .filter(|n| wildcard_match(part, n))
            .map(|n| n.to_string())
            .collect();
        if matched.is_empty() && !part.contains('*') && !ignore_unavailable {
            return Err(ApiError::index_not_found(part));
        }
        chosen.extend(matched);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// `rename_pattern` / `rename_replacement` (`$1` refers to a group, as in OpenSearch).
struct Rename {
    pattern: Option<regex::Regex>,
    replacement: String,
}

impl Rename {
    fn new(request: &RestoreRequest) -> ApiResult<Rename> {
        let pattern = match &request.rename_pattern {
            Some(p) => Some(regex::Regex::new(p).map_err(|e| {
                ApiError::bad_request(format!(
                    "[rename_pattern] is not a valid regular expression: {e}"
                ))
            })?),
            None => None,
        };
        if pattern.is_some() && request.rename_replacement.is_none() {
            return Err(ApiError::bad_request(
                "[rename_replacement] is required with [rename_pattern]",
            ));
        }
        Ok(Rename {
            pattern,
            replacement: request.rename_replacement.clone().unwrap_or_default(),
        })
    }

    fn apply(&self, name: &str) -> String {
        match &self.pattern {
            Some(pattern) => pattern
                .replace_all(name, self.replacement.as_str())
                .into_owned(),
            None => name.to_string(),
        }
    }
}

/// `index_settings` flattened (with the `index.` prefix), after checking none of them is one
/// a restore may not change.
fn setting_overrides(request: &RestoreRequest) -> ApiResult<BTreeMap<String, Value>> {
    let overrides = match &request.index_settings {
        Some(body) => crate::settings::flatten_settings(body, true)?,
        None => BTreeMap::new(),
    };
    let ignored = request
        .ignore_index_settings
        .iter()
        .map(|k| match k.starts_with("index.") {
            true => k.clone(),
            false => format!("index.{k}"),
        });
    for key in overrides.keys().cloned().chain(ignored) {
        if UNMODIFIABLE.contains(&key.as_str()) {
            return Err(ApiError::new(
                400,
                "snapshot_restore_exception",
                format!("cannot remove setting [{key}] on restore: it describes the data in the snapshot"),
            ));
        }
    }
    crate::settings::validate_new_index_settings(&overrides)?;
    Ok(overrides)
}

fn restored_index(
    request: &RestoreRequest,
    details: &SnapshotDetails,
    source: &str,
    name: &str,
    snapshot_meta: &IndexMetadata,
    overrides: &BTreeMap<String, Value>,
) -> IndexMetadata {
    let mut meta = snapshot_meta.clone();
    let uuid = shoal_cluster::new_id();
    meta.name = name.to_string();
    meta.uuid = uuid.clone();
    meta.state = IndexState::Open;
    for key in &request.ignore_index_settings {
        let key = match key.starts_with("index.") {
            true => key.clone(),
            false => format!("index.{key}"),
        };
        meta.settings.remove(&key);
    }
    meta.settings.extend(overrides.clone());
    meta.settings.insert("index.uuid".into(), json!(uuid));
    meta.settings
        .insert("index.provided_name".into(), json!(name));
    if !request.include_aliases {
        meta.aliases.clear();
    }
    meta.in_sync_allocations = Vec::new();
    meta.version = 1;
    meta.settings_version = 1;
    meta.restored_from = Some(SnapshotRecoverySource {
        repository: request.repository.clone(),
        snapshot: details.name.clone(),
        snapshot_uuid: details.uuid.clone(),
        index: source.to_string(),
    });
    meta
}

/// An existing index a restore may replace: closed, with the snapshot's number of shards
/// (OpenSearch's refusals otherwise).
fn check_restorable_over(
    existing: &IndexMetadata,
    source: &str,
    snapshot_meta: &IndexMetadata,
    refuse: &dyn Fn(String) -> ApiError,
) -> ApiResult<()> {
    let name = &existing.name;
    if existing.state == IndexState::Open {
        return Err(refuse(format!(
            "cannot restore index [{name}] because an open index with same name already exists in the cluster. Either close or delete the existing index or restore the index under a different name by providing a rename pattern and replacement name"
        )));
    }
    let (have, snapshotted) = (
        existing.number_of_shards(),
        snapshot_meta.number_of_shards(),
    );
    if have != snapshotted {
        return Err(refuse(format!(
            "cannot restore index [{name}] with [{have}] shards from a snapshot of index [{source}] with [{snapshotted}] shards"
        )));
    }
    Ok(())
}

/// A snapshot's blobs as the files of a shard: by file name, the blobs holding it in order,
/// each with the bytes of the file it holds.
struct BlobSource {
    repository: Repository,
    pieces: HashMap<String, Vec<(String, Range<u64>)>>,
}

impl BlobSource {
    fn new(repository: Repository, snapshot: &ShardSnapshot) -> BlobSource {
        let pieces = snapshot
            .files
            .iter()
            .map(|f| (f.name.clone(), snapshot.layout_of(f).pieces(f)))
            .collect();
        BlobSource { repository, pieces }
    }
}

impl FileSource for BlobSource {
    fn open(&self, file: &FileMeta, offset: u64) -> BoxFuture<'static, ApiResult<ByteStream>> {
        let pieces = self.pieces.get(&file.name).cloned();
        let (repository, name) = (self.repository.clone(), file.name.clone());
        Box::pin(async move {
            let pieces = pieces.ok_or_else(|| {
                ApiError::internal(format!("the snapshot lists no file [{name}]"))
            })?;
            let mut from = pieces
                .into_iter()
                .filter(move |(_, range)| range.end > offset || range.is_empty());
            let Some((first, range)) = from.next() else {
                return Ok(futures::stream::empty().boxed());
            };
            // The first blob opens now, so a missing one fails the open; the next ones as
            // the stream reaches them.
            let opened =
                open_object(&repository, &first, offset.saturating_sub(range.start)).await?;
            let rest = futures::stream::iter(from)
                .then(move |(key, _)| {
                    let repository = repository.clone();
                    async move { open_object(&repository, &key, 0).await }
                })
                .try_flatten();
            Ok(opened.chain(rest).boxed())
        })
    }

    fn describe(&self) -> String {
        self.repository.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_pattern_rewrites_names_with_groups() {
        let request = RestoreRequest {
            rename_pattern: Some("logs-(.+)".into()),
            rename_replacement: Some("restored-logs-$1".into()),
            ..RestoreRequest::default()
        };
        let rename = Rename::new(&request).unwrap();
        assert_eq!(rename.apply("logs-2026"), "restored-logs-2026");
        assert_eq!(rename.apply("other"), "other");
        let bad = RestoreRequest {
            rename_pattern: Some("(".into()),
            rename_replacement: Some("x".into()),
            ..RestoreRequest::default()
        };
        assert_eq!(Rename::new(&bad).err().unwrap().status, 400);
    }

    #[test]
    fn a_restore_may_not_change_the_number_of_shards() {
        let request = RestoreRequest {
            index_settings: Some(json!({"index.number_of_shards": 3})),
            ..RestoreRequest::default()
        };
        let error = setting_overrides(&request).unwrap_err();
        assert_eq!(error.error_type, "snapshot_restore_exception");
        let replicas = RestoreRequest {
            index_settings: Some(json!({"number_of_replicas": 0})),
            ..RestoreRequest::default()
        };
        let overrides = setting_overrides(&replicas).unwrap();
        assert_eq!(overrides["index.number_of_replicas"], json!("0"));
    }
}
