//! A repository's settings, as OpenSearch spells them: `type` (`fs` or `s3`) and the type's
//! `settings.*`. They come from node attributes
//! (`node.attr.remote_store.repository.<name>.type`, `….settings.location`) for the remote
//! store, and from a `PUT _snapshot/<name>` body for snapshots. A setting Shoal does not act
//! on is refused, never stored and ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::{StorageError, StorageResult};

/// Where a repository keeps its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepositoryKind {
    /// A directory (a shared file system in production, any directory in a test).
    Fs { location: PathBuf },
    /// An S3 bucket, or any S3-compatible server.
    S3(S3Settings),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct S3Settings {
    pub bucket: String,
    pub region: Option<String>,
    /// `http(s)://host:port` of an S3-compatible server; unset: AWS.
    pub endpoint: Option<String>,
    pub path_style_access: bool,
    /// Credentials given in the settings; unset: the `AWS_*` environment variables.
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    pub session_token: Option<String>,
}

/// A named repository's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositorySettings {
    pub name: String,
    pub kind: RepositoryKind,
    /// A prefix inside the location or bucket for every object of the repository.
    pub base_path: String,
}

const FS_SETTINGS: &[&str] = &["location", "base_path"];
const S3_SETTINGS: &[&str] = &[
    "bucket",
    "base_path",
    "region",
    "endpoint",
    "path_style_access",
    "access_key",
    "secret_key",
    "session_token",
];

impl RepositorySettings {
    /// Settings from a type and its flat `settings` map (keys without the `settings.` prefix).
    pub fn new(
        name: &str,
        kind: &str,
        settings: &BTreeMap<String, String>,
    ) -> StorageResult<RepositorySettings> {
        check_name(name)?;
        let known = match kind {
            "fs" => FS_SETTINGS,
            "s3" => S3_SETTINGS,
            other => {
                return Err(StorageError::Settings(format!(
                    "[{name}] repository type [{other}] does not exist: Shoal has [fs] and [s3]"
                )))
            }
        };
        if let Some(unknown) = settings.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(StorageError::Settings(format!(
                "[{name}] setting [{unknown}] is not supported by Shoal for a repository of type [{kind}]: it is refused rather than stored and ignored (known: {})",
                known.join(", ")
            )));
        }
        let get = |key: &str| {
            settings
                .get(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let kind = match kind {
            "fs" => RepositoryKind::Fs {
                location: PathBuf::from(get("location").ok_or_else(|| {
                    StorageError::Settings(format!(
                        "[{name}] missing location: an [fs] repository needs [settings.location]"
                    ))
                })?),
            },
            _ => RepositoryKind::S3(S3Settings {
                bucket: get("bucket").ok_or_else(|| {
                    StorageError::Settings(format!(
                        "[{name}] No bucket defined for s3 repository: set [settings.bucket]"
                    ))
                })?,
                region: get("region"),
                endpoint: get("endpoint"),
                path_style_access: parse_bool(name, "path_style_access", get("path_style_access"))?,
                access_key: get("access_key"),
                secret_key: get("secret_key"),
                session_token: get("session_token"),
            }),
        };
        Ok(RepositorySettings {
            name: name.to_string(),
            kind,
            base_path: get("base_path")
                .unwrap_or_default()
                .trim_matches('/')
                .to_string(),
        })
    }

    /// The repository `name` described by node attributes: `<prefix><name>.type` and
    /// `<prefix><name>.settings.<key>`, every other key under `<prefix><name>.` refused.
    pub fn from_attributes(
        prefix: &str,
        name: &str,
        attributes: &BTreeMap<String, String>,
    ) -> StorageResult<RepositorySettings> {
        let own = format!("{prefix}{name}.");
        let kind = attributes.get(&format!("{own}type")).ok_or_else(|| {
            StorageError::Settings(format!(
                "repository [{name}] is named but not described: set [{own}type] (fs or s3) and its [{own}settings.*]"
            ))
        })?;
        let mut settings = BTreeMap::new();
        for (key, value) in attributes.range(own.clone()..) {
            let Some(rest) = key.strip_prefix(&own) else {
                break;
            };
            match rest.strip_prefix("settings.") {
                Some(setting) => {
                    settings.insert(setting.to_string(), value.clone());
                }
                None if rest == "type" => {}
                None => {
                    return Err(StorageError::Settings(format!(
                        "unknown setting [{key}]: a repository has [type] and [settings.*]"
                    )))
                }
            }
        }
        RepositorySettings::new(name, kind, &settings)
    }

    pub fn type_name(&self) -> &'static str {
        match self.kind {
            RepositoryKind::Fs { .. } => "fs",
            RepositoryKind::S3(_) => "s3",
        }
    }
}

fn check_name(name: &str) -> StorageResult<()> {
    let bad = name.is_empty()
        || name.starts_with('_')
        || name
            .chars()
            .any(|c| c.is_whitespace() || "\\/*?\"<>|,#".contains(c));
    match bad {
        true => Err(StorageError::Settings(format!(
            "Invalid repository name [{name}]: must not be empty, start with '_', or contain whitespace or any of \\/*?\"<>|,#"
        ))),
        false => Ok(()),
    }
}

fn parse_bool(name: &str, key: &str, value: Option<String>) -> StorageResult<bool> {
    match value.as_deref() {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(StorageError::Settings(format!(
            "[{name}] Failed to parse value [{other}] as only [true] or [false] are allowed for [{key}]"
        ))),
    }
}
