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
            QueryError::Internal(_) => "exception",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            QueryError::Internal(_) => 500,
            _ => 400,
        }
    }
}

impl From<tantivy::TantivyError> for QueryError {
    fn from(e: tantivy::TantivyError) -> Self {
        QueryError::Internal(e.to_string())
    }
}
