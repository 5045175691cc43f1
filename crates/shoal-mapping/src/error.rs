/// Errors raised while parsing mappings or documents. Each maps to one OpenSearch
/// exception type, which the REST layer renders with status 400.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum MapperError {
    /// A document could not be parsed against the mapping (`mapper_parsing_exception`).
    #[error("{0}")]
    Parsing(String),
    /// A field value does not fit its type; `cause` is the low-level reason, shown by
    /// OpenSearch as a `caused_by` `illegal_argument_exception`.
    #[error("{reason}")]
    FieldValue { reason: String, cause: String },
    /// A mapping definition is invalid (`mapper_parsing_exception`).
    #[error("{0}")]
    InvalidMapping(String),
    /// Strict dynamic mapping refused a new field (`strict_dynamic_mapping_exception`).
    #[error(
        "mapping set to strict, dynamic introduction of [{field}] within [{parent}] is not allowed"
    )]
    StrictDynamic { field: String, parent: String },
    /// A mapping update conflicts with the existing mapping (`illegal_argument_exception`).
    #[error("{0}")]
    Conflict(String),
    /// A mapping definition OpenSearch refuses with `illegal_argument_exception` rather than
    /// as unparsable (a field with an empty name).
    #[error("{0}")]
    IllegalArgument(String),
    /// The document is not a JSON object or not valid JSON (`mapper_parsing_exception`
    /// caused by a `json_parse_exception`).
    #[error("failed to parse")]
    NotJson(String),
}

impl MapperError {
    /// The OpenSearch exception type name for this error.
    pub fn error_type(&self) -> &'static str {
        match self {
            MapperError::Parsing(_)
            | MapperError::InvalidMapping(_)
            | MapperError::NotJson(_)
            | MapperError::FieldValue { .. } => "mapper_parsing_exception",
            MapperError::StrictDynamic { .. } => "strict_dynamic_mapping_exception",
            MapperError::Conflict(_) | MapperError::IllegalArgument(_) => {
                "illegal_argument_exception"
            }
        }
    }
}
