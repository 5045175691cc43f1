//! What a query needs to know about the index it runs on.

use shoal_mapping::{Mapping, ShardSchema};

/// The mapping and schema of the index being searched, and the request's clock.
pub struct QueryContext<'a> {
    pub mapping: &'a Mapping,
    pub schema: &'a ShardSchema,
    /// `now` for date math, in epoch milliseconds, fixed for the whole request.
    pub now_millis: i64,
    /// Index name, for error messages.
    pub index: &'a str,
    /// `index.query.default_field`: the fields (with boosts) of `query_string`,
    /// `simple_query_string` and `multi_match` queries that name none.
    pub default_fields: Vec<(String, f32)>,
}

/// OpenSearch's default `index.query.default_field`: every field.
pub fn all_fields() -> Vec<(String, f32)> {
    vec![("*".to_string(), 1.0)]
}

/// Parses `index.query.default_field` (a field or a list of them, each with an optional
/// `^boost`) as queries parse their `fields`.
pub fn parse_default_fields(
    value: &serde_json::Value,
) -> Result<Vec<(String, f32)>, crate::QueryError> {
    let fields = crate::dsl::read_query_fields("index.query.default_field", value)?;
    Ok(if fields.is_empty() {
        all_fields()
    } else {
        fields
    })
}
