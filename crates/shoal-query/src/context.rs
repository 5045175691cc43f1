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
}
