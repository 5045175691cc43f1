//! The indices this node holds: lookups by name, index expressions (`a,b`, `logs-*`,
//! `-logs-old`, aliases, `_all`) and the write index of an alias.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::NodeCore;
use crate::error::{bool_param, ApiError, ApiResult};
use crate::index_service::IndexService;
use crate::metadata::IndexMetadataExt;
use crate::routing::wildcard_match;

type Registry = BTreeMap<String, Arc<IndexService>>;

impl NodeCore {
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

    /// An index by uuid (a renamed or recreated index has another), or 404.
    pub fn index_by_uuid(&self, uuid: &str) -> ApiResult<Arc<IndexService>> {
        self.indices
            .read()
            .values()
            .find(|s| s.uuid() == uuid)
            .cloned()
            .ok_or_else(|| ApiError::index_not_found(uuid))
    }

    /// Whether an index of this node has an alias called `name`.
    pub(crate) fn is_alias(&self, name: &str) -> bool {
        self.indices
            .read()
            .values()
            .any(|s| s.with_meta(|m| m.aliases.contains_key(name)))
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

    /// Empties the map, handing back what it held (a killed node drops its indices at once).
    pub(crate) fn take_indices(&self) -> Registry {
        std::mem::take(&mut *self.indices.write())
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
        let parts: Vec<&str> = if expression.is_empty() {
            vec!["_all"]
        } else {
            expression.split(',').map(str::trim).collect()
        };
        let mut out: Vec<String> = Vec::new();
        for part in parts {
            resolve_part(&indices, part, options, &mut out)?;
        }
        out.sort();
        out.dedup();
        // Names skipped as unavailable can leave nothing, which `allow_no_indices=false` refuses.
        if out.is_empty() && !options.allow_no_indices {
            return Err(ApiError::index_not_found(expression));
        }
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
}

/// Adds the names one part of an expression stands for to `out` (an exclusion removes them).
fn resolve_part(
    indices: &Registry,
    part: &str,
    options: ResolveOptions,
    out: &mut Vec<String>,
) -> ApiResult<()> {
    if part == "_all" || part == "*" {
        let before = out.len();
        out.extend(
            indices
                .iter()
                .filter(|(n, s)| options.wildcard_takes(s) && visible(options, part, n, s))
                .map(|(n, _)| n.clone()),
        );
        if out.len() == before && !options.allow_no_indices {
            return Err(ApiError::index_not_found(part));
        }
        return Ok(());
    }
    // `-name` excludes only after something was included (else it is a name starting with '-').
    if let Some(excluded) = part.strip_prefix('-').filter(|_| !out.is_empty()) {
        out.retain(|n| !wildcard_match(excluded, n));
        return Ok(());
    }
    if part.contains('*') {
        return resolve_wildcard(indices, part, options, out);
    }
    if indices.contains_key(part) {
        out.push(part.to_string());
        return Ok(());
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
    if !aliased.is_empty() && options.ignore_aliases && !options.ignore_unavailable {
        return Err(ApiError::bad_request(format!(
            "The provided expression [{part}] matches an alias, specify the corresponding concrete indices instead."
        )));
    }
    if !aliased.is_empty() && !options.ignore_aliases {
        out.extend(aliased);
        return Ok(());
    }
    if !options.ignore_unavailable {
        return Err(ApiError::index_not_found(part));
    }
    Ok(())
}

/// The indices a wildcard matches by name or by one of their aliases.
fn resolve_wildcard(
    indices: &Registry,
    part: &str,
    options: ResolveOptions,
    out: &mut Vec<String>,
) -> ApiResult<()> {
    let before = out.len();
    for (name, service) in indices.iter() {
        let by_alias = || {
            !options.ignore_aliases
                && service.with_meta(|m| m.aliases.keys().any(|a| wildcard_match(part, a)))
        };
        let matches = wildcard_match(part, name) || by_alias();
        if matches && options.wildcard_takes(service) && visible(options, part, name, service) {
            out.push(name.clone());
        }
    }
    if out.len() == before && !options.allow_no_indices {
        return Err(ApiError::index_not_found(part));
    }
    Ok(())
}

/// Hidden indices only match a wildcard that asks for them: expand_wildcards=hidden|all, or a
/// dot-prefixed pattern for a dot-prefixed index.
fn visible(options: ResolveOptions, pattern: &str, name: &str, service: &IndexService) -> bool {
    options.expand_hidden
        || !service.with_meta(|m| m.settings().is_true("index.hidden"))
        || (pattern.starts_with('.') && name.starts_with('.'))
}

/// How an index expression resolves.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResolveOptions {
    pub ignore_unavailable: bool,
    pub allow_no_indices: bool,
    pub include_closed: bool,
    /// Wildcards also match `index.hidden` indices (`expand_wildcards=hidden|all`).
    pub expand_hidden: bool,
    /// The index states a wildcard matches, as `expand_wildcards` asked; `None`: the API's
    /// default (open indices, and closed ones where `include_closed`).
    pub expand_states: Option<ExpandStates>,
    /// Names and wildcards stand for indices only (OpenSearch's `ignore_aliases`, which index
    /// deletion sets): a wildcard does not match an alias, and naming one is refused.
    pub ignore_aliases: bool,
}

/// Which indices a wildcard expands to by state (`expand_wildcards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpandStates {
    pub open: bool,
    pub closed: bool,
}

impl ResolveOptions {
    /// Whether a wildcard (or `_all`) takes `service`, by its state.
    fn wildcard_takes(&self, service: &IndexService) -> bool {
        match self.expand_states {
            Some(states) if service.is_open() => states.open,
            Some(states) => states.closed,
            None => self.include_closed || service.is_open(),
        }
    }

    /// These options as a request's `ignore_unavailable`, `allow_no_indices` and
    /// `expand_wildcards` change them (each absent one keeps the API's default here).
    pub fn from_request(self, params: &HashMap<String, String>) -> ApiResult<ResolveOptions> {
        ResolveOptions {
            ignore_unavailable: bool_param(params, "ignore_unavailable", self.ignore_unavailable)?,
            allow_no_indices: bool_param(params, "allow_no_indices", self.allow_no_indices)?,
            ..self
        }
        .with_expand_wildcards(params.get("expand_wildcards").map(String::as_str))
    }

    /// Searches: missing concrete indices fail, empty wildcards are fine.
    pub fn search() -> ResolveOptions {
        ResolveOptions {
            ignore_unavailable: false,
            allow_no_indices: true,
            include_closed: false,
            expand_hidden: false,
            expand_states: None,
            ignore_aliases: false,
        }
    }

    /// Applies `expand_wildcards` (`open`, `closed`, `hidden`, `all`, `none`, comma-separated):
    /// wildcards then match exactly the states asked for.
    fn with_expand_wildcards(mut self, value: Option<&str>) -> ApiResult<ResolveOptions> {
        let Some(value) = value else {
            return Ok(self);
        };
        let mut states = ExpandStates {
            open: false,
            closed: false,
        };
        let mut hidden = false;
        for part in value.split(',').map(str::trim) {
            match part {
                "open" => states.open = true,
                "closed" => states.closed = true,
                "hidden" => hidden = true,
                "all" => (states.open, states.closed, hidden) = (true, true, true),
                "none" | "" => {}
                other => {
                    return Err(ApiError::bad_request(format!(
                        "No enum constant org.opensearch.action.support.IndicesOptions.WildcardStates.{}",
                        other.to_ascii_uppercase()
                    )))
                }
            }
        }
        self.expand_hidden = hidden;
        self.expand_states = Some(states);
        self.include_closed |= states.closed;
        Ok(self)
    }

    /// Admin APIs on indices (get, delete, settings): closed indices included.
    pub fn admin() -> ResolveOptions {
        ResolveOptions {
            ignore_unavailable: false,
            allow_no_indices: true,
            include_closed: true,
            expand_hidden: false,
            expand_states: None,
            ignore_aliases: false,
        }
    }
}
