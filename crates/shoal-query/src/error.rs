/// Errors raised while parsing or running a search. Each maps to an OpenSearch
/// exception type and HTTP status (400 unless said otherwise).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum QueryError {
    /// Malformed or unknown query construct (`parsing_exception`).
    #[error("{0}")]
    Parsing(String),
    /// A valid construct used wrongly, or not supported (`illegal_argument_exception`).
    #[error("{0}")]
    IllegalArgument(String),
    /// `search_phase_execution_exception` wrapping a shard failure (e.g. too large a window).
    #[error("{reason}")]
    SearchPhase {
        reason: String,
        cause_type: String,
        cause_reason: String,
    },
    /// More buckets than `search.max_buckets` (`too_many_buckets_exception`).
    #[error("Trying to create too many buckets. Must be less than or equal to: [{max}] but was [{count}]. This limit can be set by changing the [search.max_buckets] cluster level setting.")]
    TooManyBuckets { count: usize, max: usize },
    /// An aggregation needed more memory than its limit (`circuit_breaking_exception`, 429),
    /// as OpenSearch's request circuit breaker answers.
    #[error("[request] Data too large, data for [<aggregations>] would be [{wanted}], which is larger than the limit of [{limit}]")]
    CircuitBreaking { wanted: u64, limit: u64 },
    /// An error from tantivy while executing (500).
    #[error("{0}")]
    Internal(String),
}

impl QueryError {
    pub fn error_type(&self) -> &'static str {
        match self {
            QueryError::Parsing(_) => "parsing_exception",
            QueryError::IllegalArgument(_) => "illegal_argument_exception",
            QueryError::SearchPhase { .. } => "search_phase_execution_exception",
            QueryError::TooManyBuckets { .. } => "too_many_buckets_exception",
            QueryError::CircuitBreaking { .. } => "circuit_breaking_exception",
            QueryError::Internal(_) => "exception",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            QueryError::Internal(_) => 500,
            QueryError::CircuitBreaking { .. } => 429,
            _ => 400,
        }
    }
}

impl From<tantivy::TantivyError> for QueryError {
    fn from(e: tantivy::TantivyError) -> Self {
        use tantivy::aggregation::AggregationError;
        match e {
            tantivy::TantivyError::AggregationError(AggregationError::MemoryExceeded {
                limit,
                current,
            }) => QueryError::CircuitBreaking {
                wanted: current.get_bytes(),
                limit: limit.get_bytes(),
            },
            e => QueryError::Internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::aggregation::AggregationError;

    #[test]
    fn an_aggregation_over_its_memory_limit_is_a_circuit_breaker_429() {
        let e: QueryError =
            tantivy::TantivyError::AggregationError(AggregationError::MemoryExceeded {
                limit: 1000u64.into(),
                current: 2000u64.into(),
            })
            .into();
        assert_eq!(e.status(), 429);
        assert_eq!(e.error_type(), "circuit_breaking_exception");
        assert!(e.to_string().starts_with("[request] Data too large"));
    }
}
