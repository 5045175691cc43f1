//! Index lifecycle: create (from a create-index body, or auto-created by a first write),
//! delete, open, close, and the atomic alias actions of `POST /_aliases`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use shoal_mapping::Mapping;
use tracing::info;

use super::AdminService;
use crate::blocks::BlockLevel;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::{AliasMetadata, IndexMetadata, IndexMetadataExt, IndexState};
use crate::replication::active_shards::ActiveShards;
use crate::routing::{validate_index_name, wildcard_match};
use crate::settings::{self, FlatSettings};
use crate::write::IndexCreation;
use shoal_cluster::{new_id, now_millis};

/// One action of `POST /_aliases`, expanded to a concrete index.
#[derive(Debug, Clone)]
pub enum AliasAction {
    Add {
        index: String,
        alias: String,
        spec: AliasMetadata,
    },
    Remove {
        index: String,
        alias: String,
        must_exist: Option<bool>,
    },
    RemoveIndex {
        index: String,
    },
}

/// What a create-index body asks for, checked before any lock is taken.
struct CreateBody {
    settings: FlatSettings,
    mapping: Mapping,
    aliases: BTreeMap<String, AliasMetadata>,
}

/// What index creation and open wait for before they answer: OpenSearch's
/// `wait_for_active_shards` (`None`: the index's `index.write.wait_for_active_shards`) and
/// `timeout`.
#[derive(Debug, Clone, Copy)]
pub struct ActiveShardsWait {
    pub wanted: Option<ActiveShards>,
    pub timeout: Duration,
}

impl ActiveShardsWait {
    /// The primaries, for as long as the cluster manager may take (a first write's index).
    pub fn primaries() -> ActiveShardsWait {
        ActiveShardsWait {
            wanted: Some(ActiveShards::AtLeast(1)),
            timeout: crate::config::CLUSTER_MANAGER_TIMEOUT,
        }
    }
}

impl AdminService {
    /// Creates an index from a create-index body (`settings`, `mappings`, `aliases`), then
    /// waits as `wait` asks; answers whether the copies it waited for started in time. A wait
    /// for more copies than a shard will have is refused before anything is created.
    pub fn create_index(
        &self,
        name: &str,
        body: &Value,
        wait: ActiveShardsWait,
    ) -> ApiResult<(Arc<IndexService>, bool)> {
        validate_index_name(name)?;
        self.core.blocks().check_create_index(name)?;
        let CreateBody {
            settings: mut flat,
            mapping,
            aliases,
        } = self.parse_create_body(name, body)?;
        let _guard = self.core.lifecycle_lock.lock();
        if let Some(existing) = self.core.index(name) {
            return Err(ApiError::resource_already_exists(name, &existing.uuid()));
        }
        if self.core.is_alias(name) {
            return Err(ApiError::invalid_index_name(
                name,
                "already exists as alias",
            ));
        }
        let uuid = new_id();
        fill_created_settings(&mut flat, name, &uuid);
        let shards = settings::IndexSettings(&flat).number_of_shards();
        let copies = shards * (1 + settings::IndexSettings(&flat).number_of_replicas());
        let needed = needed_copies(name, wait.wanted, &settings::IndexSettings(&flat))?;
        self.check_shard_limit(copies as i64)?;
        let meta = IndexMetadata {
            name: name.to_string(),
            uuid,
            state: IndexState::Open,
            settings: flat,
            mappings: mapping.to_json(),
            aliases,
            primary_terms: vec![1; shards],
            // The cluster manager's to fill as copies start.
            in_sync_allocations: Vec::new(),
            version: 1,
            mapping_version: 1,
            settings_version: 1,
            aliases_version: 1,
            restored_from: None,
        };
        self.core.publish_index(meta, true)?;
        // The wait can last the whole timeout (copies that cannot be allocated): other index
        // creations and deletions on this node must not queue behind it.
        drop(_guard);
        info!(index = %name, shards, "index created");
        let started = self.wait_for_copies(name, needed, wait.timeout);
        Ok((self.core.require_index(name)?, started))
    }

    /// The settings (with the node's `index.*` defaults and the remote store's), mapping and
    /// aliases of a create-index body, each validated.
    fn parse_create_body(&self, name: &str, body: &Value) -> ApiResult<CreateBody> {
        if let Some(other) = body.as_object().and_then(|m| {
            m.keys()
                .find(|k| !matches!(k.as_str(), "settings" | "mappings" | "aliases"))
        }) {
            return Err(ApiError::parsing(format!(
                "unknown key [{other}] for create index"
            )));
        }
        let mut flat =
            settings::flatten_settings(body.get("settings").unwrap_or(&Value::Null), true)?;
        flat.retain(|_, v| !v.is_null());
        settings::validate_new_index_settings(&flat)?;
        for (key, value) in &self.core.config.settings {
            if key.starts_with("index.") && !flat.contains_key(key) {
                flat.insert(key.clone(), value.clone());
            }
        }
        self.remote.apply_index_defaults(&mut flat)?;
        settings::apply_replication_strategy(&self.core.config.settings, &mut flat)?;
        let mapping =
            Mapping::from_json(body.get("mappings").unwrap_or(&Value::Null)).map_err(|e| {
                ApiError::mapper_parsing(format!("Failed to parse mapping [_doc]: {e}"))
                    .caused_by(ApiError::from(e))
            })?;
        mapping.check_limits(&settings::IndexSettings(&flat).mapping_limits())?;
        let mut aliases = BTreeMap::new();
        if let Some(map) = body.get("aliases").and_then(Value::as_object) {
            for (alias, spec) in map {
                validate_alias_name(alias, name)?;
                aliases.insert(alias.clone(), crate::metadata::parse_alias(spec)?);
            }
        }
        Ok(CreateBody {
            settings: flat,
            mapping,
            aliases,
        })
    }

    /// Deletes indices: metadata first (so a crash never resurrects them), then files.
    pub fn delete_indices(&self, services: &[Arc<IndexService>]) -> ApiResult<()> {
        let _guard = self.core.lifecycle_lock.lock();
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        self.core.blocks().check_delete_indices(&names)?;
        self.core
            .propose(shoal_state::Command::DeleteIndices { names })?;
        for service in services {
            self.remove_local_index(service);
        }
        Ok(())
    }

    /// Drops an index this node no longer holds and deletes its files.
    fn remove_local_index(&self, service: &Arc<IndexService>) {
        let name = service.name();
        self.core.forget_index(service);
        let _ = service.close_shards();
        let dir = self.core.paths.index_dir(&service.uuid());
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => info!(index = %name, "index deleted"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(index = %name, error = %e, "could not delete index files"),
        }
    }

    pub fn close_index(&self, service: &IndexService) -> ApiResult<()> {
        self.core
            .blocks()
            .check_index(BlockLevel::MetadataWrite, &service.name())?;
        let _guard = service.update_lock.lock();
        if !service.is_open() {
            return Ok(());
        }
        self.reads.free_index_scrolls(&service.uuid());
        // The applier closes the local copies once the closed state is agreed, as on every
        // other node: closing them here first let the applier, still seeing the index open,
        // reopen a second engine on the same store while the first one flushed.
        service.update_meta(|m| {
            m.state = IndexState::Close;
            Ok(())
        })?;
        Ok(())
    }

    /// Opens an index (nothing to change when it is open), then waits as `wait` asks; answers
    /// whether the copies it waited for started in time.
    pub fn open_index(&self, service: &IndexService, wait: ActiveShardsWait) -> ApiResult<bool> {
        let name = service.name();
        self.core
            .blocks()
            .check_index(BlockLevel::MetadataWrite, &name)?;
        let needed = service.with_meta(|m| needed_copies(&name, wait.wanted, &m.settings()))?;
        let guard = service.update_lock.lock();
        if !service.is_open() {
            self.check_shard_limit_for_open(&name)?;
            service.update_meta(|m| {
                m.state = IndexState::Open;
                Ok(())
            })?;
        }
        drop(guard);
        Ok(self.wait_for_copies(&name, needed, wait.timeout))
    }

    /// Waits until every shard of `index` has `needed` active copies, at most `timeout`
    /// (OpenSearch's `shards_acknowledged`); whether they did.
    fn wait_for_copies(&self, index: &str, needed: usize, timeout: Duration) -> bool {
        self.core
            .wait_until_applied(timeout, |state, _| {
                copies_active(state, index, needed).then_some(())
            })
            .is_some()
    }

    /// Whether every shard of `index` has the active copies `wanted` asks for (`None`: the
    /// index's `index.write.wait_for_active_shards`) in the applied state: what a REST wait
    /// re-checks after each state without holding a thread.
    pub fn copies_started(&self, index: &str, wanted: Option<ActiveShards>) -> ApiResult<bool> {
        // Deleted meanwhile: its copies never start.
        let Ok(service) = self.core.require_index(index) else {
            return Ok(false);
        };
        let needed = service.with_meta(|m| needed_copies(index, wanted, &m.settings()))?;
        Ok(copies_active(&self.core.cluster_state(), index, needed))
    }

    /// Applies `POST /_aliases` actions atomically: every action is checked before any
    /// is applied.
    pub fn update_aliases(&self, actions: &[AliasAction]) -> ApiResult<()> {
        let indices: Vec<&str> = actions
            .iter()
            .map(|a| match a {
                AliasAction::Add { index, .. }
                | AliasAction::Remove { index, .. }
                | AliasAction::RemoveIndex { index } => index.as_str(),
            })
            .collect();
        self.core
            .blocks()
            .check_indices(BlockLevel::MetadataWrite, &indices)?;
        let _guard = self.core.lifecycle_lock.lock();
        for action in actions {
            self.check_alias_action(action)?;
        }
        for action in actions {
            match action {
                AliasAction::Add { index, alias, spec } => {
                    let service = self.core.require_index(index)?;
                    service.update_meta(|m| {
                        m.aliases.insert(alias.clone(), spec.clone());
                        m.aliases_version += 1;
                        Ok(())
                    })?;
                }
                AliasAction::Remove { index, alias, .. } => {
                    let service = self.core.require_index(index)?;
                    service.update_meta(|m| {
                        m.aliases.retain(|a, _| !wildcard_match(alias, a));
                        m.aliases_version += 1;
                        Ok(())
                    })?;
                }
                AliasAction::RemoveIndex { index } => {
                    if let Some(service) = self.core.index(index) {
                        drop(_guard);
                        return self.delete_indices(&[service]);
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses an alias action that cannot apply: an alias named like an index, a missing
    /// index, or removing an alias that is not there (unless `must_exist: false`).
    fn check_alias_action(&self, action: &AliasAction) -> ApiResult<()> {
        match action {
            AliasAction::Add { index, alias, .. } => {
                validate_alias_name(alias, index)?;
                if self.core.index(alias).is_some() {
                    return Err(ApiError::new(400, "invalid_alias_name_exception", format!("Invalid alias name [{alias}], an index exists with the same name as the alias"))
                        .with("index", json!(alias)));
                }
                self.core.require_index(index)?;
            }
            AliasAction::Remove {
                index,
                alias,
                must_exist,
            } => {
                let service = self.core.require_index(index)?;
                let exists =
                    service.with_meta(|m| m.aliases.keys().any(|a| wildcard_match(alias, a)));
                if !exists && *must_exist != Some(false) {
                    return Err(ApiError::new(
                        404,
                        "aliases_not_found_exception",
                        format!("aliases [{alias}] missing"),
                    )
                    .with("resource.type", json!("aliases"))
                    .with("resource.id", json!(alias)));
                }
            }
            AliasAction::RemoveIndex { .. } => {}
        }
        Ok(())
    }
}

/// The write service creates the index a first write names through the admin service,
/// weakly (a node that is stopping creates nothing more).
impl IndexCreation for AdminService {
    fn create_index(&self, name: &str) -> ApiResult<Arc<IndexService>> {
        let created =
            AdminService::create_index(self, name, &Value::Null, ActiveShardsWait::primaries());
        created.map(|(service, _)| service)
    }
}

/// The settings every new index gets: shard and replica counts and replication type when
/// unset, and its identity (uuid, creation date, provided name, version).
fn fill_created_settings(flat: &mut FlatSettings, name: &str, uuid: &str) {
    flat.entry("index.number_of_shards".into())
        .or_insert(json!("1"));
    flat.entry("index.number_of_replicas".into())
        .or_insert(json!("1"));
    flat.entry("index.replication.type".into())
        .or_insert(json!("DOCUMENT"));
    flat.insert("index.uuid".into(), json!(uuid));
    flat.insert(
        "index.creation_date".into(),
        json!(now_millis().to_string()),
    );
    flat.insert("index.provided_name".into(), json!(name));
    flat.insert("index.version.created".into(), json!("136387927"));
    if let Some(t) = flat.get_mut("index.replication.type") {
        *t = json!(t.as_str().unwrap_or("DOCUMENT").to_uppercase());
    }
}

fn validate_alias_name(alias: &str, index: &str) -> ApiResult<()> {
    if alias == index {
        return Err(ApiError::invalid_index_name(
            alias,
            "an index or data stream exists with the same name as the alias",
        ));
    }
    validate_index_name(alias).map_err(|e| {
        ApiError::new(
            400,
            "invalid_alias_name_exception",
            e.reason.replace("Invalid index name", "Invalid alias name"),
        )
    })
}

/// Every shard of `index` has at least `needed` active copies in `state`.
fn copies_active(state: &shoal_state::ClusterState, index: &str, needed: usize) -> bool {
    let Some(table) = state.routing.get(index) else {
        return false;
    };
    table
        .shards
        .iter()
        .all(|copies| copies.iter().filter(|c| c.is_active()).count() >= needed)
}

/// The active copies per shard `wanted` asks of index `index` with these settings, refused as
/// OpenSearch refuses more than a shard has.
fn needed_copies(
    index: &str,
    wanted: Option<ActiveShards>,
    settings: &settings::IndexSettings<'_>,
) -> ApiResult<usize> {
    let (wanted, copies) = ActiveShards::for_index(wanted, settings)?;
    let needed = wanted.required(copies);
    if needed <= copies {
        return Ok(needed);
    }
    Err(ApiError::bad_request(format!(
        "invalid wait_for_active_shards[{needed}]: cannot be greater than number of shard copies [{copies}] for index [{index}]"
    )))
}
