//! The engine's error type. Every message is free of secrets.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong, for callers that match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The mapping is invalid.
    Mapping,
    /// The source database failed.
    Source,
    /// DynamoDB failed.
    Dynamo,
    /// A local file could not be read or written.
    Io,
    /// An entity cannot be read as mapped.
    Entity,
    /// A queue operation failed.
    Queue,
    /// A run cannot be resumed as asked.
    Resume,
    /// A queue worker cannot write a batch, or cannot work as configured.
    Worker,
    /// The job's settings do not fit together (endpoint, progress table…).
    Config,
}

/// An error that stops a job.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The mapping is invalid.
    #[error(transparent)]
    Mapping(#[from] sql2ddb_mapping::MappingError),
    /// The source database failed.
    #[error("source: {0}")]
    Source(#[from] sql2ddb_source::SourceError),
    /// DynamoDB failed.
    #[error("DynamoDB: {0}")]
    Dynamo(#[from] sql2ddb_dynamo::DynamoError),
    /// A local file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An entity cannot be read as mapped.
    #[error("entity {entity}: {message}")]
    Entity {
        /// Entity name.
        entity: String,
        /// What is wrong.
        message: String,
    },
    /// A queue operation failed.
    #[error("queue: {0}")]
    Queue(#[from] sql2ddb_queue::QueueError),
    /// A run cannot be resumed as asked.
    #[error("run {run_id} {message}")]
    Resume {
        /// The run.
        run_id: String,
        /// Why not.
        message: String,
    },
    /// A queue worker cannot write a batch, or cannot work as configured.
    #[error("worker: {0}")]
    Worker(String),
    /// The job's settings do not fit together (endpoint, progress table…).
    #[error("{0}")]
    Config(String),
}

impl EngineError {
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::Mapping(_) => ErrorKind::Mapping,
            EngineError::Source(_) => ErrorKind::Source,
            EngineError::Dynamo(_) => ErrorKind::Dynamo,
            EngineError::Io { .. } => ErrorKind::Io,
            EngineError::Entity { .. } => ErrorKind::Entity,
            EngineError::Queue(_) => ErrorKind::Queue,
            EngineError::Resume { .. } => ErrorKind::Resume,
            EngineError::Worker(_) => ErrorKind::Worker,
            EngineError::Config(_) => ErrorKind::Config,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EngineError::Io {
            path: path.into(),
            source,
        }
    }
}
