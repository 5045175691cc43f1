//! Refuses a URL parameter the API asked for does not take, as OpenSearch's REST layer does
//! (`request [/i/_doc/1] contains unrecognized parameter: [refrsh] -> did you mean [refresh]?`):
//! a typo or an option of another API is an error, never a silent no-op. The APIs' parameters
//! come from OpenSearch's REST spec (`spec_params_table.rs`, generated). Handlers then refuse
//! the known parameters Shoal does not act on, each in its own words.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::response::RestError;
use crate::spec_params_table::{COMMON, PATHS};

/// One path of one API of the spec.
pub(crate) struct SpecPath {
    pub path: &'static str,
    pub methods: &'static [&'static str],
    pub api: &'static str,
    pub params: &'static [&'static str],
}

/// Parameters handlers take that the REST spec does not list: OpenSearch's
/// (`restore_all_shards`, search's) and Shoal's (the clearing of voting exclusions waits up
/// to `timeout` for the cluster manager; `_cat/nodeattrs` shows full node ids as `_cat/nodes`).
const NOT_IN_SPEC: &[(&str, &[&str])] = &[
    ("remote_store.restore", &["restore_all_shards"]),
    ("cluster.delete_voting_config_exclusions", &["timeout"]),
    ("cat.nodeattrs", &["full_id"]),
    (
        "search",
        &[
            "cancel_after_time_interval",
            "phase_took",
            "verbose_pipeline",
        ],
    ),
];

/// Path parts that hold index (or alias) names, which never start with `_` apart from `_all`:
/// `/_stats` is not an index named `_stats`.
const INDEX_PARTS: &[&str] = &["{index}", "{target}", "{new_index}", "{alias}", "{name}"];

/// Middleware: refuses the request when a parameter is not one of its API's.
pub(crate) async fn refuse_unknown_params(req: Request, next: Next) -> Response {
    if let Some(query) = req.uri().query() {
        let path = req.uri().path();
        if let Some(error) = unknown_params(req.method().as_str(), path, query) {
            return RestError(error).into_response();
        }
    }
    next.run(req).await
}

/// The error for the parameters of `query` that no API the path matches takes; `None` when all
/// are known or the path is not one of the spec's (Shoal's own APIs check their own).
fn unknown_params(method: &str, path: &str, query: &str) -> Option<shoal_node::ApiError> {
    let apis = matching_paths(method, path);
    if apis.is_empty() {
        return None;
    }
    let known = |name: &str| {
        COMMON.contains(&name)
            || apis.iter().any(|api| {
                api.params.contains(&name)
                    || NOT_IN_SPEC
                        .iter()
                        .any(|(extra, params)| *extra == api.api && params.contains(&name))
            })
    };
    let mut unknown: Vec<String> = form_urlencoded::parse(query.as_bytes())
        .map(|(name, _)| name.into_owned())
        .filter(|name| !known(name))
        .collect();
    if unknown.is_empty() {
        return None;
    }
    unknown.sort();
    unknown.dedup();
    let names: Vec<&str> = unknown.iter().map(String::as_str).collect();
    let mut candidates: Vec<&str> = apis
        .iter()
        .flat_map(|api| api.params.iter().copied())
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    Some(crate::request::unrecognized(
        path,
        "parameter",
        &names,
        &candidates,
    ))
}

/// The spec paths `path` matches for `method`, those with the most literal segments in
/// common (`/{index}/_search` over `/{index}/{id}`-like patterns).
fn matching_paths(method: &str, path: &str) -> Vec<&'static SpecPath> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut best: Vec<&'static SpecPath> = Vec::new();
    let mut best_literals = 0;
    for spec in PATHS {
        if !spec.methods.contains(&method) {
            continue;
        }
        let Some(literals) = literal_matches(spec.path, &segments) else {
            continue;
        };
        if best.is_empty() || literals > best_literals {
            (best, best_literals) = (vec![spec], literals);
        } else if literals == best_literals {
            best.push(spec);
        }
    }
    best
}

/// How many literal segments of `pattern` equal those of the path, if the path matches it.
/// Runs for every pattern of every request with parameters: it allocates nothing.
fn literal_matches(pattern: &str, segments: &[&str]) -> Option<usize> {
    let mut parts = pattern.split('/').filter(|s| !s.is_empty());
    let mut literals = 0;
    for segment in segments {
        let part = parts.next()?;
        if part.starts_with('{') {
            let names_an_index = INDEX_PARTS.contains(&part);
            if names_an_index && segment.starts_with('_') && *segment != "_all" {
                return None;
            }
            continue;
        }
        if part != *segment {
            return None;
        }
        literals += 1;
    }
    parts.next().is_none().then_some(literals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(method: &str, path: &str, query: &str) -> Option<String> {
        unknown_params(method, path, query).map(|e| e.reason)
    }

    #[test]
    fn a_parameter_of_the_api_passes_and_another_is_refused_with_a_suggestion() {
        assert_eq!(
            refused("PUT", "/i/_doc/1", "refresh=true&routing=r&pretty"),
            None
        );
        assert_eq!(
            refused("PUT", "/i/_doc/1", "refrsh=true").as_deref(),
            Some("request [/i/_doc/1] contains unrecognized parameter: [refrsh] -> did you mean [refresh]?")
        );
        // A search option is not an index option.
        assert!(refused("GET", "/i", "q=x").is_some());
        assert_eq!(refused("GET", "/i/_search", "q=x&size=3"), None);
    }

    #[test]
    fn literal_segments_win_and_underscore_names_are_not_indices() {
        let apis: Vec<&str> = matching_paths("GET", "/_stats")
            .iter()
            .map(|a| a.api)
            .collect();
        assert_eq!(apis, ["indices.stats"]);
        let apis: Vec<&str> = matching_paths("GET", "/_all/_search")
            .iter()
            .map(|a| a.api)
            .collect();
        assert_eq!(apis, ["search"]);
        // Not a spec path: left to the handler (or the 404 for no handler).
        assert!(matching_paths("GET", "/_no_such_api").is_empty());
        assert_eq!(refused("GET", "/_no_such_api", "x=1"), None);
    }
}
