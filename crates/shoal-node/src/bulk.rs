//! `_bulk` request bodies: NDJSON action/metadata lines followed by sources.

use serde_json::{Map, Value};
use shoal_engine::{DocRequest, VersionType};

use crate::error::{ApiError, ApiResult};

/// One parsed bulk item.
#[derive(Debug, Clone)]
pub struct BulkItem {
    pub action: BulkAction,
    pub index: Option<String>,
    pub id: Option<String>,
    pub routing: Option<String>,
    pub request: DocRequest,
    pub require_alias: Option<bool>,
    pub retry_on_conflict: u32,
    /// The source line (index/create) or the update body, verbatim.
    pub body: Vec<u8>,
    /// `_source` option of update items.
    pub source_option: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Index,
    Create,
    Update,
    Delete,
}

impl BulkAction {
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Index => "index",
            BulkAction::Create => "create",
            BulkAction::Update => "update",
            BulkAction::Delete => "delete",
        }
    }
}

/// Parses a bulk body. Structural problems fail the whole request, as in OpenSearch;
/// bad documents only fail their item later.
pub fn parse_bulk(
    body: &[u8],
    default_index: Option<&str>,
    default_routing: Option<&str>,
) -> ApiResult<Vec<BulkItem>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::parse_exception("request body is required"));
    }
    if body.last() != Some(&b'\n') {
        return Err(ApiError::bad_request(
            "The bulk request must be terminated by a newline [\\n]",
        ));
    }
    let mut items = Vec::new();
    let mut lines = body.split(|b| *b == b'\n').enumerate().peekable();
    while let Some((line_no, line)) = lines.next() {
        let line = trim_cr(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (action, meta) = parse_action_line(line, line_no + 1)?;
        let mut item = parse_metadata(action, &meta, line_no + 1)?;
        if item.index.is_none() {
            item.index = default_index.map(str::to_string);
        }
        if item.routing.is_none() {
            item.routing = default_routing.map(str::to_string);
        }
        if action != BulkAction::Delete {
            let Some((_, source)) = lines.next() else {
                return Err(ApiError::bad_request(
                    "The bulk request must be terminated by a newline [\\n]",
                ));
            };
            item.body = trim_cr(source).to_vec();
        }
        if item.index.is_none() {
            return Err(ApiError::action_request_validation(&[
                "index is missing".to_string()
            ]));
        }
        items.push(item);
    }
    if items.is_empty() {
        return Err(ApiError::action_request_validation(&[
            "no requests added".to_string()
        ]));
    }
    Ok(items)
}

/// The action and metadata of one action line (`{"index": {...}}`), or why the whole bulk is
/// malformed.
fn parse_action_line(
    line: &[u8],
    line_number: usize,
) -> ApiResult<(BulkAction, Map<String, Value>)> {
    let action_line: Value =
        serde_json::from_slice(line).map_err(|e| json_error(&e, line, line_number))?;
    let Value::Object(action_map) = action_line else {
        return Err(ApiError::bad_request(format!(
            "Malformed action/metadata line [{}], expected START_OBJECT or END_OBJECT but found [{}]",
            line_number,
            token_name(line)
        )));
    };
    if action_map.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Malformed action/metadata line [{line_number}], expected FIELD_NAME but found [END_OBJECT]"
        )));
    }
    if action_map.len() != 1 {
        return Err(ApiError::bad_request(format!(
            "Malformed action/metadata line [{}], expected a simple value for field [{}] but found [START_OBJECT]",
            line_number,
            action_map.keys().nth(1).cloned().unwrap_or_default()
        )));
    }
    let (name, meta) = action_map.into_iter().next().expect("one entry");
    let action = match name.as_str() {
        "index" => BulkAction::Index,
        "create" => BulkAction::Create,
        "update" => BulkAction::Update,
        "delete" => BulkAction::Delete,
        other => {
            return Err(ApiError::bad_request(format!(
                "Malformed action/metadata line [{}], expected one of [create, delete, index, update] but found [{other}]",
                line_number
            )))
        }
    };
    let Value::Object(meta) = meta else {
        return Err(ApiError::bad_request(format!(
            "Malformed action/metadata line [{}], expected START_OBJECT but found [{}]",
            line_number,
            token_name(line)
        )));
    };
    Ok((action, meta))
}

fn parse_metadata(
    action: BulkAction,
    meta: &Map<String, Value>,
    line: usize,
) -> ApiResult<BulkItem> {
    let mut item = BulkItem {
        action,
        index: None,
        id: None,
        routing: None,
        request: DocRequest {
            create_only: action == BulkAction::Create,
            ..DocRequest::default()
        },
        require_alias: None,
        retry_on_conflict: 0,
        body: Vec::new(),
        source_option: None,
    };
    for (key, value) in meta {
        let text = || {
            value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string())
        };
        let int = || {
            value
                .as_i64()
                .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        };
        match key.as_str() {
            "_index" => item.index = Some(text()),
            "_id" => item.id = if value.is_null() { None } else { Some(text()) },
            "routing" | "_routing" => item.routing = Some(text()),
            "if_seq_no" => item.request.if_seq_no = int(),
            "if_primary_term" => item.request.if_primary_term = int(),
            "version" | "_version" => item.request.version = int(),
            "version_type" | "_version_type" => {
                item.request.version_type = parse_version_type(&text())?;
            }
            "op_type" => set_op_type(&mut item, &text())?,
            "require_alias" => item.require_alias = value.as_bool(),
            "retry_on_conflict" | "_retry_on_conflict" => item.retry_on_conflict = int().unwrap_or(0).max(0) as u32,
            "_source" => item.source_option = Some(value.clone()),
            "pipeline" => {
                return Err(ApiError::bad_request("ingest pipelines are not supported by Shoal yet: remove [pipeline] from the bulk request"))
            }
            "_type" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "Action/metadata line [{line}] contains an unknown parameter [{other}]"
                )))
            }
        }
    }
    Ok(item)
}

/// `op_type` in an `index` action's metadata: `create` makes it a create (answered as one).
fn set_op_type(item: &mut BulkItem, op_type: &str) -> ApiResult<()> {
    match op_type {
        "create" => {
            item.request.create_only = true;
            if item.action == BulkAction::Index {
                item.action = BulkAction::Create;
            }
        }
        "index" => item.request.create_only = item.action == BulkAction::Create,
        other => {
            return Err(ApiError::bad_request(format!(
                "opType must be 'create' or 'index', found: [{other}]"
            )))
        }
    }
    Ok(())
}

pub fn parse_version_type(text: &str) -> ApiResult<VersionType> {
    match text {
        "internal" => Ok(VersionType::Internal),
        "external" => Ok(VersionType::External),
        "external_gte" => Ok(VersionType::ExternalGte),
        other => Err(ApiError::bad_request(format!(
            "No version type match [{other}]"
        ))),
    }
}

/// A JSON syntax error in the bulk body, named like Jackson's errors with the position.
fn json_error(e: &serde_json::Error, text: &[u8], line: usize) -> ApiError {
    let error_type = if e.is_eof() {
        "json_e_o_f_exception"
    } else {
        "json_parse_exception"
    };
    // serde points at the first bad byte; Jackson reads a bare word to its end first.
    let at = e.column().saturating_sub(1).min(text.len());
    let word_start = text[..at]
        .iter()
        .rposition(|b| !b.is_ascii_alphanumeric())
        .map_or(0, |p| p + 1);
    let word_len = text[word_start..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    let column = if word_len > 1 {
        word_start + word_len + 2
    } else {
        e.column()
    };
    ApiError::new(
        400,
        error_type,
        format!("{e}: [line: {line}, column: {column}]"),
    )
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn token_name(line: &[u8]) -> &'static str {
    match line.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => "START_ARRAY",
        Some(b'"') => "VALUE_STRING",
        Some(b't') | Some(b'f') => "VALUE_BOOLEAN",
        Some(b'n') => "VALUE_NULL",
        Some(b'-' | b'0'..=b'9') => "VALUE_NUMBER",
        _ => "START_OBJECT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_action_and_keeps_sources_verbatim() {
        let body = b"{\"index\":{\"_index\":\"a\",\"_id\":\"1\"}}\n{\"x\": 1}\n{\"delete\":{\"_id\":\"2\"}}\n{\"create\":{}}\n{\"y\":2}\n{\"update\":{\"_id\":\"3\",\"retry_on_conflict\":3}}\n{\"doc\":{}}\n";
        let items = parse_bulk(body, Some("d"), None).unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].body, b"{\"x\": 1}");
        assert_eq!(items[1].index.as_deref(), Some("d"));
        assert!(items[2].request.create_only);
        assert_eq!(items[3].retry_on_conflict, 3);
    }

    #[test]
    fn unknown_action_fails_the_request() {
        let err = parse_bulk(b"{\"foo\":{}}\n", Some("d"), None).unwrap_err();
        assert!(
            err.reason
                .contains("expected one of [create, delete, index, update] but found [foo]"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn missing_index_is_a_validation_error() {
        let err = parse_bulk(b"{\"delete\":{\"_id\":\"1\"}}\n", None, None).unwrap_err();
        assert_eq!(err.error_type, "action_request_validation_exception");
    }
}
