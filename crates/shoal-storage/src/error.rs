//! What can go wrong with a repository, each kind mapped to the HTTP status a client sees.

/// A repository failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The repository's settings are wrong (a 400: the user fixes the configuration).
    #[error("{0}")]
    Settings(String),
    /// The object does not exist.
    #[error("[{repository}] no object [{key}]")]
    NotFound { repository: String, key: String },
    /// The store failed or could not be reached; a retry may succeed.
    #[error("[{repository}] {reason}")]
    Unavailable { repository: String, reason: String },
    /// The caller stopped an upload (its snapshot was aborted); nothing was stored.
    #[error("[{repository}] the upload of [{key}] was cancelled")]
    Cancelled { repository: String, key: String },
}

impl StorageError {
    /// The HTTP status a REST answer carries for this error.
    pub fn status(&self) -> u16 {
        match self {
            StorageError::Settings(_) => 400,
            StorageError::NotFound { .. } => 404,
            StorageError::Unavailable { .. } => 503,
            StorageError::Cancelled { .. } => 409,
        }
    }

    /// OpenSearch's error type for this error.
    pub fn error_type(&self) -> &'static str {
        match self {
            StorageError::Settings(_) => "repository_verification_exception",
            StorageError::NotFound { .. } => "no_such_file_exception",
            StorageError::Unavailable { .. } => "repository_exception",
            StorageError::Cancelled { .. } => "task_cancelled_exception",
        }
    }

    pub(crate) fn from_store(repository: &str, key: &str, error: object_store::Error) -> Self {
        match error {
            object_store::Error::NotFound { .. } => StorageError::NotFound {
                repository: repository.to_string(),
                key: key.to_string(),
            },
            other => StorageError::Unavailable {
                repository: repository.to_string(),
                reason: other.to_string(),
            },
        }
    }
}

pub type StorageResult<T> = Result<T, StorageError>;
