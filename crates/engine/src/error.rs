//! The engine's error type. Every message is free of secrets.

use std::path::PathBuf;

use sql2ddb_dynamo::{DynamoError, Failure};
use sql2ddb_queue::QueueError;
use sql2ddb_source::{SourceError, SourceErrorKind};
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
    /// A follower met a change it cannot carry (a statement-format event, a
    /// partial row image, a schema change, a truncate) and stopped with its
    /// position kept before that change.
    Unfollowable,
}

/// An error's [`ErrorKind`] with the kind the crate that raised it gave it:
/// enough to tell a source that cannot be reached from a URL that is wrong,
/// or a throttled DynamoDB from a table that differs from the mapping. A
/// report keeps the cause of the error it stopped on (the error itself is
/// text by then), so whoever reads the report can branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// The mapping is invalid.
    Mapping,
    /// The source database failed, as its crate tells.
    Source(SourceErrorKind),
    /// DynamoDB failed, and what the failed call means when it was one.
    Dynamo(sql2ddb_dynamo::ErrorKind, Option<Failure>),
    /// A local file could not be read or written.
    Io,
    /// An entity cannot be read as mapped.
    Entity,
    /// A queue operation failed, as its crate tells.
    Queue(sql2ddb_queue::ErrorKind),
    /// A run cannot be resumed as asked.
    Resume,
    /// A queue worker cannot write a batch, or cannot work as configured.
    Worker,
    /// The job's settings do not fit together.
    Config,
    /// A follower stopped before a change it cannot carry, position kept.
    Unfollowable,
}

impl Cause {
    /// The coarse kind.
    pub fn kind(self) -> ErrorKind {
        match self {
            Cause::Mapping => ErrorKind::Mapping,
            Cause::Source(_) => ErrorKind::Source,
            Cause::Dynamo(..) => ErrorKind::Dynamo,
            Cause::Io => ErrorKind::Io,
            Cause::Entity => ErrorKind::Entity,
            Cause::Queue(_) => ErrorKind::Queue,
            Cause::Resume => ErrorKind::Resume,
            Cause::Worker => ErrorKind::Worker,
            Cause::Config => ErrorKind::Config,
            Cause::Unfollowable => ErrorKind::Unfollowable,
        }
    }
}

impl From<&SourceError> for Cause {
    fn from(e: &SourceError) -> Cause {
        Cause::Source(e.kind())
    }
}

impl From<&DynamoError> for Cause {
    fn from(e: &DynamoError) -> Cause {
        Cause::Dynamo(e.kind(), e.failure())
    }
}

impl From<&QueueError> for Cause {
    fn from(e: &QueueError) -> Cause {
        Cause::Queue(e.kind())
    }
}

/// An error that stops a job.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The mapping is invalid.
    #[error(transparent)]
    Mapping(Box<sql2ddb_mapping::MappingError>),
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
        run_id: crate::RunId,
        /// Why not.
        message: String,
    },
    /// A queue worker cannot write a batch, or cannot work as configured.
    #[error("worker: {0}")]
    Worker(String),
    /// The job's settings do not fit together (endpoint, progress table…).
    #[error("{0}")]
    Config(String),
    /// A fresh load's destination (a run's table, an export's folder)
    /// already holds data, and the options do not say what to do with it
    /// (`--if-not-empty`); nothing was read or written.
    #[error("{}", .0.message(crate::if_not_empty::flag))]
    NotEmpty(Box<crate::if_not_empty::NotEmpty>),
    /// What a follower needs and lacks, every reason at once, found before
    /// a slot, a publication or an item was created (or a checkpoint moved).
    #[error("cannot follow this mapping; nothing was created on the source and nothing moved. Fix each of these, then run again:{}", list(reasons))]
    Refused {
        /// Each reason, naming the entity, table or setting and what to do.
        reasons: Vec<String>,
    },
    /// A follower met a change it cannot carry and stopped before it: the
    /// slot, or the binary log checkpoint, is still before its position, so
    /// after the fix `follow` goes on and loses nothing.
    #[error(
        "cannot follow {} on table {} at {}: {}; {}",
        .0.event, .0.table, .0.position, .0.reason, .0.remedy
    )]
    Unfollowable(Box<Unfollowable>),
}

/// A change a follower cannot carry, where it is, and what to do
/// ([`EngineError::Unfollowable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfollowable {
    /// The table the change is on, as the source names it.
    pub table: String,
    /// The change, as the source's stream names it (`TRUNCATE`, `ALTER
    /// TABLE`, `a statement-format event`, `a partial row image`…).
    pub event: String,
    /// Where it is in the stream (an LSN, or `file:pos`): the follower's
    /// checkpoint is before it.
    pub position: String,
    /// Why it cannot be carried.
    pub reason: String,
    /// The one thing to do, then `follow` again.
    pub remedy: String,
}

// Boxed: a mapping error is as large as the largest other kind, and every
// `Result` carrying the engine's error would grow by it.
impl From<sql2ddb_mapping::MappingError> for EngineError {
    fn from(e: sql2ddb_mapping::MappingError) -> Self {
        EngineError::Mapping(Box::new(e))
    }
}

impl From<sql2ddb_core::BadRunId> for EngineError {
    fn from(e: sql2ddb_core::BadRunId) -> Self {
        EngineError::Config(e.to_string())
    }
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
            EngineError::Config(_) | EngineError::Refused { .. } | EngineError::NotEmpty(_) => {
                ErrorKind::Config
            }
            EngineError::Unfollowable(_) => ErrorKind::Unfollowable,
        }
    }

    /// The kind, with the kind the crate that raised it gave it.
    pub fn cause(&self) -> Cause {
        match self {
            EngineError::Mapping(_) => Cause::Mapping,
            EngineError::Source(e) => e.into(),
            EngineError::Dynamo(e) => e.into(),
            EngineError::Io { .. } => Cause::Io,
            EngineError::Entity { .. } => Cause::Entity,
            EngineError::Queue(e) => e.into(),
            EngineError::Resume { .. } => Cause::Resume,
            EngineError::Worker(_) => Cause::Worker,
            EngineError::Config(_) | EngineError::Refused { .. } | EngineError::NotEmpty(_) => {
                Cause::Config
            }
            EngineError::Unfollowable(_) => Cause::Unfollowable,
        }
    }

    /// Whether DynamoDB refused the job's calls for throttling past the
    /// retry budget: nothing is at fault, the work stays to be done later.
    pub fn is_throttling(&self) -> bool {
        matches!(self.cause(), Cause::Dynamo(_, Some(Failure::Throttled)))
    }

    /// A follower's stop before a change it cannot carry (see
    /// [`Unfollowable`]'s fields).
    pub fn unfollowable(
        table: impl Into<String>,
        event: impl Into<String>,
        position: impl Into<String>,
        reason: impl Into<String>,
        remedy: impl Into<String>,
    ) -> Self {
        EngineError::Unfollowable(Box::new(Unfollowable {
            table: table.into(),
            event: event.into(),
            position: position.into(),
            reason: reason.into(),
            remedy: remedy.into(),
        }))
    }

    /// A file or directory at `path` that could not be read or written.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EngineError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Reasons as lines of a list, each on its own line.
fn list(reasons: &[String]) -> String {
    reasons.iter().map(|r| format!("\n  - {r}")).collect()
}
