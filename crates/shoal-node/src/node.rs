//! The node: startup and shutdown, the services it wires, and index lifecycle.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use shoal_mapping::Mapping;
use tracing::info;

use crate::blocks::BlockLevel;
use crate::core::{CoreParts, NodeCore};
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::{AliasMetadata, IndexMetadata, IndexState, NodePaths};
use crate::read::ReadService;
use crate::routing::{validate_index_name, wildcard_match};
use crate::settings::{self, FlatSettings};
use crate::write::{IndexCreation, PrimaryParts, WriteService};

pub use crate::config::NodeConfig;
pub use crate::core::ResolveOptions;

/// Persistent and transient cluster settings.
#[derive(Debug, Default, Clone)]
pub struct ClusterSettings {
    pub persistent: FlatSettings,
    pub transient: FlatSettings,
    /// From the bootstrapping node's configuration: shown among the defaults.
    pub node: FlatSettings,
}

/// How long a graceful shutdown waits to be removed from the cluster before it stops anyway.
const LEAVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The node: wires its services to the shared [`NodeCore`].
///
/// `Node` dereferences to its core so the `impl Node` blocks not yet moved into a service keep
/// compiling unchanged; that is a transition. Services take `Arc<NodeCore>`, never `Node`, so
/// they reach only what is generic (see [`crate::core`]).
pub struct Node {
    pub core: Arc<NodeCore>,
    /// Searches, counts, scrolls and gets.
    pub reads: Arc<ReadService>,
    /// Writes this node coordinates, and the shard bulks forwarded to it.
    pub writes: Arc<WriteService>,
    /// Segment replication (`index.replication.type: SEGMENT`).
    pub segrep: Arc<crate::segrep::SegrepService>,
    /// Remote-backed storage (`node.attr.remote_store.*`).
    pub remote: Arc<crate::remote::RemoteStoreService>,
    pub snapshots: Arc<crate::snapshot::SnapshotService>,
    /// Document replication: the primary's and the replica's side, resync, promotion.
    pub replication: Arc<crate::replication::ReplicationService>,
    /// Peer recoveries, as the source and as the target.
    pub recoveries: Arc<crate::recovery::RecoveryService>,
    /// Started and failed reports of this node's copies to the cluster manager, and the
    /// copies it failed.
    pub(crate) reports: Arc<crate::copy_reports::CopyReports>,
    /// Keeps a runtime alive when the node was started outside of one (tests).
    own_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// The transport server; dropping the handle would stop it.
    transport_server: Mutex<Option<shoal_transport::ServerHandle>>,
}

/// The registry of every data-layer action of `node`, filled by the modules and services
/// that own them.
fn data_layer_actions(node: &Arc<Node>) -> shoal_transport::ActionRegistry {
    let mut actions = crate::rpc::NodeActions::new(Arc::downgrade(node), node.pressure.clone());
    crate::write::register_actions(&mut actions, &node.writes);
    crate::broadcast::register_actions(&mut actions);
    crate::replication::replica::register_actions(&mut actions, &node.replication);
    crate::replication::promotion::register_actions(&mut actions, &node.replication);
    crate::recovery::register_actions(&mut actions, &node.recoveries);
    crate::segrep::register_actions(&mut actions, &node.segrep);
    crate::remote::stats::register_actions(&mut actions, &node.remote);
    crate::snapshot::shard::register_actions(&mut actions, &node.snapshots);
    actions.register_stream::<crate::segrep::FileStreamAction>(|node, request| {
        node.segrep.serve_file_stream(request)
    });
    crate::cluster_api::register_actions(&mut actions);
    crate::read::register_actions(&mut actions, &node.reads);
    actions.into_registry()
}

impl std::ops::Deref for Node {
    type Target = NodeCore;

    fn deref(&self) -> &NodeCore {
        &self.core
    }
}

impl Node {
    /// Starts the node: loads its identity, starts the transport and the cluster member, and
    /// follows the cluster state (which opens the shards assigned here).
    pub fn start(config: NodeConfig) -> ApiResult<Arc<Node>> {
        let pressure = Arc::new(crate::pressure::Pressure::from_settings(
            &config.node_name,
            &config.settings,
        )?);
        let repositories = crate::remote::RemoteRepositories::from_node_settings(&config.settings)?;
        let paths = NodePaths {
            data: config.data_path.clone(),
        };
        std::fs::create_dir_all(&paths.data)?;
        let state = paths.load_node_state()?;
        let known_id = state
            .as_ref()
            .and_then(|s| s["node_id"].as_str().map(str::to_string));
        let node_id = known_id.clone().unwrap_or_else(new_id);
        // Written once: a node restarting on a full disk must not need space to start.
        if known_id.is_none() {
            paths.persist_node_state(&json!({ "node_id": node_id }))?;
        }
        let (runtime, own_runtime) = node_runtime()?;
        let (transport, cluster, handler, server) =
            crate::cluster_bridge::start_cluster(&runtime, &config, &node_id)?;
        let core = Arc::new(NodeCore::new(CoreParts {
            config,
            node_id,
            paths,
            cluster,
            transport,
            runtime,
            pressure,
        }));
        let remote = Arc::new(crate::remote::RemoteStoreService::new(
            core.clone(),
            repositories,
        ));
        let segrep = crate::segrep::SegrepService::new(core.clone(), remote.clone());
        let reports = Arc::new(crate::copy_reports::CopyReports::new(core.clone()));
        let recoveries = Arc::new(crate::recovery::RecoveryService::new(
            core.clone(),
            segrep.clone(),
            reports.clone(),
        ));
        let replication = Arc::new(crate::replication::ReplicationService::new(
            core.clone(),
            segrep.clone(),
        ));
        let primary_parts = PrimaryParts {
            replication: replication.clone(),
            segrep: segrep.clone(),
            remote: remote.clone(),
        };
        let node = Arc::new_cyclic(|node| Node {
            reads: Arc::new(ReadService::new(core.clone())),
            replication,
            segrep,
            remote,
            snapshots: Arc::new(crate::snapshot::SnapshotService::new(core.clone())),
            writes: Arc::new(WriteService::new(
                core.clone(),
                primary_parts,
                node.clone() as std::sync::Weak<dyn IndexCreation>,
            )),
            core,
            recoveries,
            reports,
            own_runtime: Mutex::new(own_runtime),
            transport_server: Mutex::new(Some(server)),
        });
        handler.attach(data_layer_actions(&node));
        node.cluster.set_promotion_advisor(Arc::new(
            crate::replication::promotion::CheckpointAdvisor(Arc::downgrade(&node.replication)),
        ));
        crate::applier::spawn_applier(&node);
        crate::scheduler::spawn(Arc::downgrade(&node));
        crate::disk_usage::spawn_reporter(&node);
        node.wait_for_local_shards(std::time::Duration::from_secs(20));
        node.wait_for_single_node_join(std::time::Duration::from_secs(10));
        Ok(node)
    }

    /// Drops an index this node no longer holds and deletes its files.
    pub(crate) fn remove_local_index(&self, service: &Arc<IndexService>) {
        let name = service.name();
        self.forget_index(service);
        let _ = service.close_shards();
        let dir = self.paths.index_dir(&service.uuid());
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => info!(index = %name, "index deleted"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(index = %name, error = %e, "could not delete index files"),
        }
    }

    /// Stops the node like a crash, for in-process tests (call it outside a runtime): the
    /// transport and the Raft member stop at once, every local engine fails without a flush
    /// (nothing more reaches its files) and is dropped, and a runtime of the node's own stops
    /// with all its tasks. A new node can open the same data directory once the threads
    /// still holding the node or an engine let go.
    pub fn kill_for_test(&self) {
        if let Some(server) = self.transport_server.lock().take() {
            self.runtime.block_on(server.kill());
        }
        self.runtime.block_on(self.cluster.shutdown());
        let indices = self.take_indices();
        for index in indices.values() {
            for (shard, engine) in index.local_shards() {
                engine.fail_engine("node killed".into());
                index.discard_shard(shard);
            }
        }
        if let Some(runtime) = self.own_runtime.lock().take() {
            runtime.shutdown_background();
        }
        self.mark_killed();
    }

    /// A graceful shutdown: leaves the cluster (its primaries move to in-sync copies on other
    /// nodes while this one still answers the writes in flight to it), stops the transport
    /// and flushes every shard.
    pub fn shutdown(&self) {
        self.runtime.block_on(self.cluster.leave(LEAVE_TIMEOUT));
        if let Some(server) = self.transport_server.lock().take() {
            self.runtime
                .block_on(server.shutdown(std::time::Duration::from_millis(200)));
        }
        for index in self.all_indices() {
            if let Err(e) = index.close_shards() {
                tracing::warn!(index = %index.name(), error = %e, "flush at shutdown failed");
            }
        }
    }

    /// Persistent and transient cluster settings, as the cluster state holds them.
    pub fn cluster_settings(&self) -> ClusterSettings {
        let state = self.cluster_state();
        ClusterSettings {
            persistent: state.metadata.persistent_settings.clone(),
            transient: state.metadata.transient_settings.clone(),
            node: state.metadata.node_settings.clone(),
        }
    }

    /// `PUT /_cluster/settings`: null values reset a setting.
    pub fn update_cluster_settings(
        &self,
        persistent: FlatSettings,
        transient: FlatSettings,
    ) -> ApiResult<ClusterSettings> {
        let keys: Vec<&str> = persistent
            .keys()
            .chain(transient.keys())
            .map(String::as_str)
            .collect();
        self.blocks().check_cluster_settings_update(&keys)?;
        settings::validate_cluster_update(&persistent, &transient, |key| {
            self.cluster_setting(key)
        })?;
        for (key, value) in persistent.iter().chain(transient.iter()) {
            crate::recovery::throttle::validate(key, value)?;
            crate::read::search::validate_max_buckets(key, value)?;
        }
        let mut settings = self.cluster_settings();
        apply_update(&mut settings.persistent, persistent);
        apply_update(&mut settings.transient, transient);
        self.propose(shoal_state::Command::PutClusterSettings {
            persistent: settings.persistent.clone(),
            transient: settings.transient.clone(),
        })?;
        Ok(self.cluster_settings())
    }

    /// Creates an index from a create-index body (`settings`, `mappings`, `aliases`).
    pub fn create_index(&self, name: &str, body: &Value) -> ApiResult<Arc<IndexService>> {
        validate_index_name(name)?;
        self.blocks().check_create_index(name)?;
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
        for (key, value) in &self.config.settings {
            if key.starts_with("index.") && !flat.contains_key(key) {
                flat.insert(key.clone(), value.clone());
            }
        }
        self.remote.apply_index_defaults(&mut flat)?;
        settings::apply_replication_strategy(&self.config.settings, &mut flat)?;
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
        let _guard = self.lifecycle_lock.lock();
        if let Some(existing) = self.index(name) {
            return Err(ApiError::resource_already_exists(name, &existing.uuid()));
        }
        if self.is_alias(name) {
            return Err(ApiError::invalid_index_name(
                name,
                "already exists as alias",
            ));
        }
        let uuid = new_id();
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
        let shards = settings::IndexSettings(&flat).number_of_shards();
        let copies = shards * (1 + settings::IndexSettings(&flat).number_of_replicas());
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
        self.publish_index(meta, true)?;
        // The wait for primaries can last the whole timeout (primaries that cannot be
        // allocated): other index creations and deletions on this node must not queue behind it.
        drop(_guard);
        info!(index = %name, shards, "index created");
        self.wait_for_primaries(name, crate::config::CLUSTER_MANAGER_TIMEOUT);
        self.require_index(name)
    }

    /// Deletes indices: metadata first (so a crash never resurrects them), then files.
    pub fn delete_indices(&self, services: &[Arc<IndexService>]) -> ApiResult<()> {
        let _guard = self.lifecycle_lock.lock();
        let names: Vec<String> = services.iter().map(|s| s.name()).collect();
        self.blocks().check_delete_indices(&names)?;
        self.propose(shoal_state::Command::DeleteIndices { names })?;
        for service in services {
            self.remove_local_index(service);
        }
        Ok(())
    }

    pub fn close_index(&self, service: &IndexService) -> ApiResult<()> {
        self.blocks()
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

    pub fn open_index(&self, service: &IndexService) -> ApiResult<()> {
        self.blocks()
            .check_index(BlockLevel::MetadataWrite, &service.name())?;
        let _guard = service.update_lock.lock();
        if service.is_open() {
            return Ok(());
        }
        self.check_shard_limit_for_open(&service.name())?;
        service.update_meta(|m| {
            m.state = IndexState::Open;
            Ok(())
        })?;
        drop(_guard);
        self.wait_for_primaries(&service.name(), crate::config::CLUSTER_MANAGER_TIMEOUT);
        Ok(())
    }

    /// Applies `POST /_aliases` actions atomically.
    pub fn update_aliases(&self, actions: &[AliasAction]) -> ApiResult<()> {
        let indices: Vec<&str> = actions
            .iter()
            .map(|a| match a {
                AliasAction::Add { index, .. }
                | AliasAction::Remove { index, .. }
                | AliasAction::RemoveIndex { index } => index.as_str(),
            })
            .collect();
        self.blocks()
            .check_indices(BlockLevel::MetadataWrite, &indices)?;
        let _guard = self.lifecycle_lock.lock();
        for action in actions {
            match action {
                AliasAction::Add { index, alias, .. } => {
                    validate_alias_name(alias, index)?;
                    if self.index(alias).is_some() {
                        return Err(ApiError::new(400, "invalid_alias_name_exception", format!("Invalid alias name [{alias}], an index exists with the same name as the alias"))
                            .with("index", json!(alias)));
                    }
                    self.require_index(index)?;
                }
                AliasAction::Remove {
                    index,
                    alias,
                    must_exist,
                } => {
                    let service = self.require_index(index)?;
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
        }
        for action in actions {
            match action {
                AliasAction::Add { index, alias, spec } => {
                    let service = self.require_index(index)?;
                    service.update_meta(|m| {
                        m.aliases.insert(alias.clone(), spec.clone());
                        m.aliases_version += 1;
                        Ok(())
                    })?;
                }
                AliasAction::Remove { index, alias, .. } => {
                    let service = self.require_index(index)?;
                    service.update_meta(|m| {
                        m.aliases.retain(|a, _| !wildcard_match(alias, a));
                        m.aliases_version += 1;
                        Ok(())
                    })?;
                }
                AliasAction::RemoveIndex { index } => {
                    if let Some(service) = self.index(index) {
                        drop(_guard);
                        return self.delete_indices(&[service]);
                    }
                }
            }
        }
        Ok(())
    }
}

/// The write service creates the index a first write names through the node, weakly (no
/// reference cycle).
impl IndexCreation for Node {
    fn create_index(&self, name: &str) -> ApiResult<Arc<IndexService>> {
        Node::create_index(self, name, &Value::Null)
    }
}

/// The runtime the node runs on: the caller's, or one of its own when started outside of one
/// (tests), which the node then keeps alive.
fn node_runtime() -> ApiResult<(tokio::runtime::Handle, Option<tokio::runtime::Runtime>)> {
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        return Ok((handle, None));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    Ok((runtime.handle().clone(), Some(runtime)))
}

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

fn apply_update(target: &mut FlatSettings, update: FlatSettings) {
    for (key, value) in update {
        if value.is_null() {
            // `"cluster.routing.*": null` resets a whole group.
            if let Some(prefix) = key.strip_suffix('*') {
                target.retain(|k, _| !k.starts_with(prefix));
            } else {
                target.remove(&key);
            }
        } else {
            target.insert(key, value);
        }
    }
}

pub use shoal_cluster::{new_id, now_millis};
