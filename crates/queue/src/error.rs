//! The crate's error type.

use crate::codec::CodecError;

/// What went wrong, for callers that match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The in-memory queue is closed and drained.
    Closed,
    /// A message could not be encoded (too large) or decoded.
    Codec,
    /// A call to SQS failed (after the SDK's retries), or SQS refused a message.
    Call,
    /// A handle that the queue does not know (already acknowledged).
    UnknownHandle,
    /// The queue's configuration is not usable (e.g. no dead-letter queue).
    Config,
}

/// An error of a queue operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The in-memory queue is closed and nothing is left in it.
    #[error("the work queue is closed")]
    Closed,
    /// A message could not be encoded or decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A call to SQS failed.
    #[error("{operation} on {queue} failed: {message}")]
    Call {
        /// The API operation.
        operation: &'static str,
        /// Queue URL.
        queue: String,
        /// The service's code and message.
        message: String,
    },
    /// The handle is not (or no longer) in flight.
    #[error("no batch in flight with handle {0}")]
    UnknownHandle(String),
    /// The queue cannot be used as asked.
    #[error("queue {queue}: {message}")]
    Config {
        /// Queue URL or name.
        queue: String,
        /// What is wrong.
        message: String,
    },
}

impl QueueError {
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            QueueError::Closed => ErrorKind::Closed,
            QueueError::Codec(_) => ErrorKind::Codec,
            QueueError::Call { .. } => ErrorKind::Call,
            QueueError::UnknownHandle(_) => ErrorKind::UnknownHandle,
            QueueError::Config { .. } => ErrorKind::Config,
        }
    }
}

/// The error of a failed SQS call on `queue`.
pub(crate) fn call_err(operation: &'static str, queue: &str, message: String) -> QueueError {
    QueueError::Call {
        operation,
        queue: queue.to_string(),
        message,
    }
}
