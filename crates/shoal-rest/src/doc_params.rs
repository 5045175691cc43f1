//! The document APIs' URL parameters that OpenSearch takes and Shoal does not act on: refused
//! by name. Parameters no document API takes are refused before, by the spec check
//! (`spec_params.rs`).

/// `lang` names a script language; updates take no scripts yet.
pub(crate) const UPDATE: &[&str] = &["lang"];

/// `_bulk`: the source filters apply to update items' answers, `batch_size` to ingest
/// pipelines, `type` to mapping types; Shoal has none of them.
pub(crate) const BULK: &[&str] = &["_source_excludes", "_source_includes", "batch_size", "type"];
