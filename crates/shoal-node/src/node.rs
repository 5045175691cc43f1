//! The node: configuration, startup, the indices it holds, and index lifecycle.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde_json::{json, Value};
use shoal_mapping::Mapping;
use tracing::info;

use crate::blocks::BlockLevel;
use crate::error::{ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::{AliasMetadata, IndexMetadata, IndexMetadataExt, IndexState, NodePaths};
use crate::routing::{validate_index_name, wildcard_match};
use crate::settings::{self, FlatSettings};

/// Node settings, from `config/shoal.yml` and `-E key=value`.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub cluster_name: String,
    pub node_name: String,
    pub data_path: PathBuf,
    pub http_host: String,
    pub http_port: u16,
    pub transport_port: u16,
    /// Every setting given, flat (for `_nodes` and index defaults such as `index.codec`).
    pub settings: FlatSettings,
}

impl NodeConfig {
    pub fn from_settings(settings: FlatSettings) -> ApiResult<NodeConfig> {
        settings::validate_node_settings(&settings)?;
        let get = |k: &str| settings.get(k).and_then(Value::as_str).map(str::to_string);
        let port = |k: &str, default: u16| -> ApiResult<u16> {
            match get(k) {
                Some(p) => p.parse().map_err(|_| {
                    ApiError::bad_request(format!("Failed to parse value [{p}] for setting [{k}]"))
                }),
                None => Ok(default),
            }
        };
        Ok(NodeConfig {
            cluster_name: get("cluster.name").unwrap_or_else(|| "shoal".to_string()),
            node_name: get("node.name").unwrap_or_else(|| hostname()),
            data_path: PathBuf::from(get("path.data").unwrap_or_else(|| "data".to_string())),
            http_host: get("http.host")
                .or_else(|| get("network.host"))
                .unwrap_or_else(|| "127.0.0.1".to_string()),
            http_port: port("http.port", 9200)?,
            transport_port: port("transport.port", 9300)?,
            settings,
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.settings.get(key).and_then(Value::as_str)
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "shoal-node".to_string())
}

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

pub struct Node {
    pub config: NodeConfig,
    pub node_id: String,
    pub paths: NodePaths,
    pub started: Instant,
    indices: RwLock<BTreeMap<String, Arc<IndexService>>>,
    /// Serializes index creation/deletion/rename so names stay unique.
    lifecycle_lock: Mutex<()>,
    pub scrolls: crate::search::ScrollRegistry,
    pub search_contexts: crate::shard_search::SearchContexts,
    pub(crate) recoveries: crate::replication::recovery::Recoveries,
    /// Spreads default-preference reads over the copies of each shard.
    pub(crate) read_rotation: std::sync::atomic::AtomicUsize,
    pub(crate) cluster: Arc<shoal_cluster::Cluster>,
    pub transport: Arc<shoal_transport::Transport>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Keeps a runtime alive when the node was started outside of one (tests).
    own_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    pub(crate) applied_version: Mutex<u64>,
    pub(crate) applied_cond: parking_lot::Condvar,
    /// Set by [`Node::kill_for_test`]: waits on the cluster state give up at once.
    pub(crate) killed: std::sync::atomic::AtomicBool,
    pub(crate) reported_started: Mutex<std::collections::HashSet<String>>,
    /// Copies reported failed and copies waiting to retry their open.
    pub(crate) failed_copies: crate::shard_failure::FailedCopies,
    /// The transport server; dropping the handle would stop it.
    transport_server: Mutex<Option<shoal_transport::ServerHandle>>,
    /// Thread pools and indexing pressure.
    pub pressure: Arc<crate::pressure::Pressure>,
    /// The applier's per-copy tasks (set when the applier starts).
    pub(crate) copy_tasks:
        std::sync::OnceLock<crate::pressure::shard_tasks::ShardTasks<crate::applier::CopyKey>>,
}

impl Node {
    /// Starts the node: loads its identity, starts the transport and the cluster member, and
    /// follows the cluster state (which opens the shards assigned here).
    pub fn start(config: NodeConfig) -> ApiResult<Arc<Node>> {
        let pressure = Arc::new(crate::pressure::Pressure::from_settings(
            &config.node_name,
            &config.settings,
        )?);
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
        let (runtime, own_runtime) = match tokio::runtime::Handle::try_current() {
            Ok(handle) => (handle, None),
            Err(_) => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()?;
                (rt.handle().clone(), Some(rt))
            }
        };
        let (transport, cluster, handler, server) =
            crate::cluster_bridge::start_cluster(&runtime, &config, &node_id)?;
        let node = Arc::new(Node {
            node_id,
            started: Instant::now(),
            indices: RwLock::new(BTreeMap::new()),
            lifecycle_lock: Mutex::new(()),
            scrolls: crate::search::ScrollRegistry::default(),
            search_contexts: Default::default(),
            recoveries: Default::default(),
            read_rotation: Default::default(),
            paths,
            config,
            cluster,
            transport,
            runtime,
            own_runtime: Mutex::new(own_runtime),
            applied_version: Mutex::new(0),
            applied_cond: parking_lot::Condvar::new(),
            killed: Default::default(),
            reported_started: Mutex::new(Default::default()),
            failed_copies: Default::default(),
            transport_server: Mutex::new(Some(server)),
            pressure,
            copy_tasks: Default::default(),
        });
        handler.attach(&node);
        node.cluster.set_promotion_advisor(Arc::new(
            crate::replication::promotion::CheckpointAdvisor(Arc::downgrade(&node)),
        ));
        crate::applier::spawn_applier(&node);
        crate::scheduler::spawn(Arc::downgrade(&node));
        crate::disk_usage::spawn_reporter(&node);
        node.wait_for_local_shards(std::time::Duration::from_secs(20));
        node.wait_for_single_node_join(std::time::Duration::from_secs(10));
        Ok(node)
    }

    /// The uuid of the cluster this node belongs to (empty until bootstrapped).
    pub fn cluster_uuid(&self) -> String {
        self.cluster.state().cluster_uuid.clone()
    }

    pub(crate) fn insert_index(&self, name: &str, service: Arc<IndexService>) {
        self.indices.write().insert(name.to_string(), service);
    }

    /// Drops an index from this node's map (if `service` is still the one under its name).
    pub(crate) fn forget_index(&self, service: &Arc<IndexService>) {
        let name = service.name();
        let mut indices = self.indices.write();
        if indices.get(&name).is_some_and(|s| Arc::ptr_eq(s, service)) {
            indices.remove(&name);
        }
    }

    /// Whether [`Node::kill_for_test`] stopped this node.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(std::sync::atomic::Ordering::Acquire)
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

    /// The runtime the node's tasks run on.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
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
        let indices = std::mem::take(&mut *self.indices.write());
        for index in indices.values() {
            for (shard, engine) in index.local_shards() {
                engine.fail_engine("node killed".into());
                index.discard_shard(shard);
            }
        }
        if let Some(runtime) = self.own_runtime.lock().take() {
            runtime.shutdown_background();
        }
        // Threads waiting on the cluster state (a write waiting for its primary) let go of
        // the node now rather than at their timeout.
        let _applied = self.applied_version.lock();
        self.killed
            .store(true, std::sync::atomic::Ordering::Release);
        self.applied_cond.notify_all();
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

    pub fn all_indices(&self) -> Vec<Arc<IndexService>> {
        self.indices.read().values().cloned().collect()
    }

    pub fn index(&self, name: &str) -> Option<Arc<IndexService>> {
        self.indices.read().get(name).cloned()
    }

    /// An index by exact name, or 404 `index_not_found_exception`.
    pub fn require_index(&self, name: &str) -> ApiResult<Arc<IndexService>> {
        self.index(name)
            .ok_or_else(|| ApiError::index_not_found(name))
    }

    /// The effective value of a cluster-level setting (transient > persistent > node > default).
    pub fn cluster_setting(&self, key: &str) -> Option<String> {
        self.cluster_state()
            .settings()
            .get(key)
            .or_else(|| self.config.get(key).map(str::to_string))
            .or_else(|| settings::registry().get(key).map(|d| d.default.clone()))
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
            crate::replication::throttle::validate(key, value)?;
            crate::search::validate_max_buckets(key, value)?;
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

    /// Resolves an index expression (`a,b`, `logs-*`, `-logs-old`, aliases, `_all`) to indices.
    /// Missing concrete names fail with 404 unless `ignore_unavailable`; wildcards that match
    /// nothing fail unless `allow_no_indices`.
    pub fn resolve(
        &self,
        expression: &str,
        options: ResolveOptions,
    ) -> ApiResult<Vec<Arc<IndexService>>> {
        let indices = self.indices.read();
        let mut out: Vec<String> = Vec::new();
        let parts: Vec<&str> = if expression.is_empty() {
            vec!["_all"]
        } else {
            expression.split(',').map(str::trim).collect()
        };
        // Hidden indices only match a wildcard that asks for them: expand_wildcards=hidden|all, or a
        // dot-prefixed pattern for a dot-prefixed index.
        let visible = |pattern: &str, name: &str, service: &IndexService| {
            options.expand_hidden
                || !service.with_meta(|m| m.settings().is_true("index.hidden"))
                || (pattern.starts_with('.') && name.starts_with('.'))
        };
        for part in parts {
            if part == "_all" || part == "*" {
                out.extend(
                    indices
                        .iter()
                        .filter(|(n, s)| {
                            (options.include_closed || s.is_open()) && visible(part, n, s)
                        })
                        .map(|(n, _)| n.clone()),
                );
                continue;
            }
            if let Some(excluded) = part.strip_prefix('-').filter(|_| !out.is_empty()) {
                out.retain(|n| !wildcard_match(excluded, n));
                continue;
            }
            if part.contains('*') {
                let before = out.len();
                for (name, service) in indices.iter() {
                    let aliases =
                        service.with_meta(|m| m.aliases.keys().cloned().collect::<Vec<_>>());
                    let matches = wildcard_match(part, name)
                        || aliases.iter().any(|a| wildcard_match(part, a));
                    if matches
                        && (options.include_closed || service.is_open())
                        && visible(part, name, service)
                    {
                        out.push(name.clone());
                    }
                }
                if out.len() == before && !options.allow_no_indices {
                    return Err(ApiError::index_not_found(part));
                }
                continue;
            }
            if indices.contains_key(part) {
                out.push(part.to_string());
                continue;
            }
            if part.starts_with('_') {
                return Err(ApiError::invalid_index_name(
                    part,
                    "must not start with '_'.",
                ));
            }
            let aliased: Vec<String> = indices
                .iter()
                .filter(|(_, s)| s.with_meta(|m| m.aliases.contains_key(part)))
                .map(|(n, _)| n.clone())
                .collect();
            if !aliased.is_empty() {
                out.extend(aliased);
                continue;
            }
            if !options.ignore_unavailable {
                return Err(ApiError::index_not_found(part));
            }
        }
        out.sort();
        out.dedup();
        let resolved: Vec<Arc<IndexService>> =
            out.iter().filter_map(|n| indices.get(n).cloned()).collect();
        if !options.include_closed && !options.ignore_unavailable {
            if let Some(closed) = resolved.iter().find(|s| !s.is_open()) {
                return Err(ApiError::index_closed(&closed.name(), &closed.uuid()));
            }
        }
        Ok(resolved
            .into_iter()
            .filter(|s| options.include_closed || s.is_open())
            .collect())
    }

    /// The index a write to `name` goes to: the index itself, or an alias's write index.
    pub fn resolve_write_index(&self, name: &str) -> ApiResult<Option<Arc<IndexService>>> {
        if let Some(index) = self.index(name) {
            return Ok(Some(index));
        }
        let indices = self.indices.read();
        let targets: Vec<(Arc<IndexService>, Option<bool>)> = indices
            .values()
            .filter_map(|s| {
                s.with_meta(|m| m.aliases.get(name).map(|a| a.is_write_index))
                    .map(|w| (s.clone(), w))
            })
            .collect();
        match targets.len() {
            0 => Ok(None),
            1 if targets[0].1 != Some(false) => Ok(Some(targets[0].0.clone())),
            _ => match targets.iter().find(|(_, w)| *w == Some(true)) {
                Some((s, _)) => Ok(Some(s.clone())),
                None => Err(ApiError::bad_request(format!(
                    "no write index is defined for alias [{name}]. The write index may be explicitly disabled using is_write_index=false or the alias points to multiple indices without one being designated as a write index"
                ))),
            },
        }
    }

    /// Whether `action.auto_create_index` allows creating `name` on first write.
    pub fn auto_create_allowed(&self, name: &str) -> bool {
        let value = self
            .cluster_setting("action.auto_create_index")
            .unwrap_or_else(|| "true".into());
        match value.as_str() {
            "true" => true,
            "false" => false,
            patterns => {
                for pattern in patterns.split(',').map(str::trim) {
                    if let Some(p) = pattern.strip_prefix('-') {
                        if wildcard_match(p, name) {
                            return false;
                        }
                    } else if wildcard_match(pattern.trim_start_matches('+'), name) {
                        return true;
                    }
                }
                false
            }
        }
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
        if self
            .indices
            .read()
            .values()
            .any(|s| s.with_meta(|m| m.aliases.contains_key(name)))
        {
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
        };
        self.publish_index(meta, true)?;
        // The wait for primaries can last the whole timeout (primaries that cannot be
        // allocated): other index creations and deletions on this node must not queue behind it.
        drop(_guard);
        info!(index = %name, shards, "index created");
        self.wait_for_primaries(name, crate::cluster_bridge::CLUSTER_MANAGER_TIMEOUT);
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
        self.free_index_scrolls(&service.uuid());
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
        self.wait_for_primaries(
            &service.name(),
            crate::cluster_bridge::CLUSTER_MANAGER_TIMEOUT,
        );
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

/// How an index expression resolves.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResolveOptions {
    pub ignore_unavailable: bool,
    pub allow_no_indices: bool,
    pub include_closed: bool,
    /// Wildcards also match `index.hidden` indices (`expand_wildcards=hidden|all`).
    pub expand_hidden: bool,
}

impl ResolveOptions {
    /// Searches: missing concrete indices fail, empty wildcards are fine.
    pub fn search() -> ResolveOptions {
        ResolveOptions {
            ignore_unavailable: false,
            allow_no_indices: true,
            include_closed: false,
            expand_hidden: false,
        }
    }

    /// Applies `expand_wildcards` (`open`, `closed`, `hidden`, `all`, `none`).
    pub fn with_expand_wildcards(mut self, value: Option<&str>) -> ResolveOptions {
        if let Some(value) = value {
            let parts: Vec<&str> = value.split(',').map(str::trim).collect();
            self.expand_hidden = parts.iter().any(|p| *p == "hidden" || *p == "all");
            if parts.iter().any(|p| *p == "closed" || *p == "all") {
                self.include_closed = true;
            }
        }
        self
    }

    /// Admin APIs on indices (get, delete, settings): closed indices included.
    pub fn admin() -> ResolveOptions {
        ResolveOptions {
            ignore_unavailable: false,
            allow_no_indices: true,
            include_closed: true,
            expand_hidden: false,
        }
    }
}

pub use shoal_cluster::{new_id, now_millis};
