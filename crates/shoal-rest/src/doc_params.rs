//! The URL parameters of the document APIs, as OpenSearch's REST spec lists them: a parameter
//! outside its API's list is refused as unrecognized (a typo is not a silent no-op), and one
//! Shoal does not act on is refused by name.

use shoal_node::ApiResult;

use crate::request::Params;

/// One document API's parameters.
pub(crate) struct DocApi {
    known: &'static [&'static str],
    /// Among `known`: refused whatever their value.
    unsupported: &'static [&'static str],
}

pub(crate) const INDEX: DocApi = DocApi {
    known: &[
        "if_primary_term",
        "if_seq_no",
        "op_type",
        "pipeline",
        "refresh",
        "require_alias",
        "routing",
        "timeout",
        "version",
        "version_type",
        "wait_for_active_shards",
    ],
    unsupported: &[],
};

pub(crate) const DELETE: DocApi = DocApi {
    known: &[
        "if_primary_term",
        "if_seq_no",
        "refresh",
        "routing",
        "timeout",
        "version",
        "version_type",
        "wait_for_active_shards",
    ],
    unsupported: &[],
};

/// `GET|HEAD /{index}/_doc/{id}` and `/{index}/_source/{id}`. Reads compare `version` for
/// equality whatever its type, as OpenSearch's; no field is stored apart from `_source`, so
/// `stored_fields` returns none and leaves `_source` out unless asked for.
pub(crate) const GET: DocApi = DocApi {
    known: &[
        "_source",
        "_source_excludes",
        "_source_includes",
        "preference",
        "realtime",
        "refresh",
        "routing",
        "stored_fields",
        "version",
        "version_type",
    ],
    unsupported: &[],
};

/// `lang` names a script language; updates take no scripts yet.
pub(crate) const UPDATE: DocApi = DocApi {
    known: &[
        "_source",
        "_source_excludes",
        "_source_includes",
        "if_primary_term",
        "if_seq_no",
        "lang",
        "refresh",
        "require_alias",
        "retry_on_conflict",
        "routing",
        "timeout",
        "wait_for_active_shards",
    ],
    unsupported: &["lang"],
};

/// `_mget` reads every document in real time from its primary.
pub(crate) const MGET: DocApi = DocApi {
    known: &[
        "_source",
        "_source_excludes",
        "_source_includes",
        "preference",
        "realtime",
        "refresh",
        "routing",
        "stored_fields",
    ],
    unsupported: &["realtime", "refresh", "stored_fields"],
};

/// `_bulk`: the source filters apply to update items' answers, `batch_size` to ingest
/// pipelines, `type` to mapping types; Shoal has none of them.
pub(crate) const BULK: DocApi = DocApi {
    known: &[
        "_source",
        "_source_excludes",
        "_source_includes",
        "batch_size",
        "pipeline",
        "refresh",
        "require_alias",
        "routing",
        "timeout",
        "type",
        "wait_for_active_shards",
    ],
    unsupported: &["_source_excludes", "_source_includes", "batch_size", "type"],
};

impl DocApi {
    /// Refuses what `params` holds outside this API's parameters, then what Shoal ignores.
    pub(crate) fn check(&self, path: &str, params: &Params) -> ApiResult<()> {
        params.refuse_unknown(path, self.known)?;
        params.refuse_unsupported(path, self.unsupported)
    }
}
