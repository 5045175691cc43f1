//! Registering snapshot repositories: `PUT|GET|DELETE _snapshot/{name}`,
//! `POST _snapshot/{name}/_verify`, `_cat/repositories`.
//!
//! As in OpenSearch, an `fs` repository must lie under one of the node's `path.repo`
//! directories (a relative `location` is taken under the first), so a REST client cannot make
//! the node write anywhere it can.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde_json::{json, Map, Value};
use shoal_state::{Command, RepositoryMetadata};
use shoal_storage::{RepositoryKind, RepositorySettings};

use super::options::RepositoryOptions;
use super::throttle::Throttles;
use super::{repository_missing, SnapshotService};
use crate::core::NodeCore;
use crate::error::{ApiError, ApiResult};
use crate::remote::storage_error;

pub const PATH_REPO: &str = "path.repo";

impl SnapshotService {
    /// `PUT _snapshot/{name}` with `{"type": …, "settings": {…}}`; with `verify` (the
    /// default) the repository is written to and read back before it is registered.
    pub fn put_repository(&self, name: &str, body: &Value, verify: bool) -> ApiResult<Value> {
        let meta = parse_repository_body(name, body)?;
        let registration = registration_of(&self.core, name, &meta)?;
        if verify {
            self.verify_registration(registration)?;
        }
        self.propose(Command::PutRepository {
            name: name.to_string(),
            repository: meta,
        })?;
        tracing::info!(repository = name, "repository registered");
        Ok(json!({ "acknowledged": true }))
    }

    /// `GET _snapshot[/{names}]`: `names` is a comma list with wildcards, `_all` or empty.
    pub fn get_repositories(&self, names: &str) -> ApiResult<Value> {
        let state = self.core.cluster_state();
        let selected = select_names(&state.metadata.repositories, names)?;
        let mut out = Map::new();
        for name in selected {
            let meta = &state.metadata.repositories[&name];
            out.insert(
                name,
                json!({ "type": meta.kind, "settings": meta.settings }),
            );
        }
        Ok(Value::Object(out))
    }

    /// `DELETE _snapshot/{names}`: unregisters; the repository's contents stay where they are.
    pub fn delete_repositories(&self, names: &str) -> ApiResult<Value> {
        let state = self.core.cluster_state();
        let names = select_names(&state.metadata.repositories, names)?;
        self.propose(Command::DeleteRepositories { names })?;
        Ok(json!({ "acknowledged": true }))
    }

    /// `POST _snapshot/{name}/_verify`: writes, reads back and removes an object.
    pub fn verify_repository(&self, name: &str) -> ApiResult<Value> {
        let meta = self.registered(name)?;
        self.verify_registration(registration_of(&self.core, name, &meta)?)?;
        let node = &self.core.config.node_name;
        Ok(json!({ "nodes": { self.core.node_id.clone(): { "name": node } } }))
    }

    /// `_cat/repositories` rows: id and type.
    pub fn repository_rows(&self) -> Vec<(String, String)> {
        let state = self.core.cluster_state();
        state
            .metadata
            .repositories
            .iter()
            .map(|(name, meta)| (name.clone(), meta.kind.clone()))
            .collect()
    }

    /// Writes, reads back and removes an object; a `readonly` repository is only listed
    /// (this cluster must not write to it).
    fn verify_registration(&self, registration: Registration) -> ApiResult<()> {
        let name = registration.storage.name.clone();
        let repository =
            shoal_storage::Repository::open(registration.storage).map_err(storage_error)?;
        if registration.options.readonly {
            let listed = self
                .core
                .runtime
                .block_on(repository.list(super::layout::GENERATIONS_FOLDER));
            return listed
                .map(drop)
                .map_err(|e| verification_failed(&name, &e.to_string()));
        }
        let key = format!("tests-{}", uuid::Uuid::new_v4().simple());
        let written = bytes::Bytes::from_static(b"shoal repository verification");
        let checked = self.core.runtime.block_on(async {
            repository.put(&key, written.clone()).await?;
            let read = repository.get(&key).await?;
            repository.delete(&key).await?;
            Ok::<_, shoal_storage::StorageError>(read == written)
        });
        match checked {
            Ok(true) => Ok(()),
            Ok(false) => Err(verification_failed(&name, "an object read back differs")),
            Err(e) => Err(verification_failed(&name, &e.to_string())),
        }
    }

    pub(crate) fn propose(&self, command: Command) -> ApiResult<()> {
        self.core.propose(command).map(drop)
    }
}

fn verification_failed(name: &str, reason: &str) -> ApiError {
    ApiError::new(
        400,
        "repository_verification_exception",
        format!("[{name}] path is not accessible on this node: {reason}"),
    )
}

/// The `type` and `settings` of a `PUT _snapshot/{name}` body; every value kept as text.
fn parse_repository_body(name: &str, body: &Value) -> ApiResult<RepositoryMetadata> {
    let map = body
        .as_object()
        .ok_or_else(|| ApiError::parsing("a repository body must be an object"))?;
    if let Some(other) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "type" | "settings"))
    {
        return Err(ApiError::parsing(format!(
            "Unknown key for repository [{name}]: [{other}] (a repository has [type] and [settings])"
        )));
    }
    let kind = map
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ApiError::new(
                400,
                "repository_exception",
                format!("[{name}] repository type is missing: set [type] to [fs] or [s3]"),
            )
        })?
        .to_string();
    let mut settings = BTreeMap::new();
    let flat =
        crate::settings::flatten_settings(map.get("settings").unwrap_or(&Value::Null), false)?;
    for (key, value) in flat {
        let text = match value {
            Value::String(s) => s,
            Value::Null => continue,
            other => other.to_string(),
        };
        settings.insert(key, text);
    }
    Ok(RepositoryMetadata { kind, settings })
}

/// What a repository's registration asks for, each setting read by the part that acts on it.
pub(crate) struct Registration {
    /// Where its objects are, the `fs` location resolved against and checked under `path.repo`.
    pub storage: RepositorySettings,
    pub throttles: Throttles,
    pub options: RepositoryOptions,
}

pub(crate) fn registration_of(
    core: &NodeCore,
    name: &str,
    meta: &RepositoryMetadata,
) -> ApiResult<Registration> {
    let (throttles, mut storage) = Throttles::split(name, &meta.settings)?;
    let options = RepositoryOptions::take(name, &mut storage)?;
    let mut settings =
        RepositorySettings::new(name, &meta.kind, &storage).map_err(storage_error)?;
    if let RepositoryKind::Fs { location } = &settings.kind {
        let roots: Vec<PathBuf> = core
            .config
            .settings
            .get(PATH_REPO)
            .map(shoal_state::list_value)
            .unwrap_or_default()
            .into_iter()
            .map(PathBuf::from)
            .collect();
        let resolved = resolve_location(name, location, &roots)?;
        settings.kind = RepositoryKind::Fs { location: resolved };
    }
    Ok(Registration {
        storage: settings,
        throttles,
        options,
    })
}

/// `location` as an absolute path under one of `roots`, or OpenSearch's refusal.
fn resolve_location(name: &str, location: &Path, roots: &[PathBuf]) -> ApiResult<PathBuf> {
    let refuse = |why: &str| {
        ApiError::new(
            400,
            "repository_exception",
            format!(
                "[{name}] location [{}] doesn't match any of the locations specified by path.repo{why}",
                location.display()
            ),
        )
    };
    if roots.is_empty() {
        return Err(refuse(
            " because this setting is empty: start the node with -E path.repo=<directory>",
        ));
    }
    if location.components().any(|c| c == Component::ParentDir) {
        return Err(refuse(" ([..] is not allowed in a location)"));
    }
    let resolved = match location.is_absolute() {
        true => location.to_path_buf(),
        false => roots[0].join(location),
    };
    match roots.iter().any(|root| resolved.starts_with(root)) {
        true => Ok(resolved),
        false => Err(refuse("")),
    }
}

/// The registered names an expression selects (`a,b`, `re*`, `_all`, `*` or empty); a
/// concrete name that is not registered is `repository_missing_exception`.
fn select_names<T>(registered: &BTreeMap<String, T>, expression: &str) -> ApiResult<Vec<String>> {
    let expression = expression.trim();
    if expression.is_empty() || expression == "_all" || expression == "*" {
        return Ok(registered.keys().cloned().collect());
    }
    let mut out = Vec::new();
    for part in expression
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        if part.contains('*') {
            out.extend(
                registered
                    .keys()
                    .filter(|name| crate::snapshot::read::wildcard_match(part, name))
                    .cloned(),
            );
        } else if registered.contains_key(part) {
            out.push(part.to_string());
        } else {
            return Err(repository_missing(part));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fs_location_must_lie_under_path_repo() {
        let roots = vec![PathBuf::from("/srv/backups")];
        assert_eq!(
            resolve_location("r", Path::new("nightly"), &roots).unwrap(),
            PathBuf::from("/srv/backups/nightly")
        );
        assert!(resolve_location("r", Path::new("/srv/backups/x"), &roots).is_ok());
        let outside = resolve_location("r", Path::new("/etc"), &roots).unwrap_err();
        assert_eq!(outside.status, 400);
        assert!(outside.reason.contains("path.repo"), "{}", outside.reason);
        assert!(resolve_location("r", Path::new("../../etc"), &roots).is_err());
        let unset = resolve_location("r", Path::new("/srv/backups"), &[]).unwrap_err();
        assert!(
            unset.reason.contains("this setting is empty"),
            "{}",
            unset.reason
        );
    }

    #[test]
    fn a_repository_body_keeps_its_settings_as_text_and_refuses_other_keys() {
        let meta = parse_repository_body(
            "r",
            &json!({"type": "fs", "settings": {"location": "x", "compress": true}}),
        )
        .unwrap();
        assert_eq!(meta.kind, "fs");
        assert_eq!(meta.settings["compress"], "true");
        assert!(parse_repository_body("r", &json!({"type": "fs", "verify": 1})).is_err());
        let missing = parse_repository_body("r", &json!({"settings": {}})).unwrap_err();
        assert_eq!(missing.error_type, "repository_exception");
    }

    #[test]
    fn repository_names_select_with_wildcards_and_a_missing_name_is_404() {
        let registered: BTreeMap<String, ()> = [("a1", ()), ("a2", ()), ("b", ())]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        assert_eq!(select_names(&registered, "a*").unwrap(), vec!["a1", "a2"]);
        assert_eq!(select_names(&registered, "").unwrap().len(), 3);
        assert_eq!(select_names(&registered, "zz").unwrap_err().status, 404);
    }
}
