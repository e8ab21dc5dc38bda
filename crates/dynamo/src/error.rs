//! The crate's error type.

use thiserror::Error;

/// What went wrong, for callers that match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The table is missing, or differs from the mapping.
    Table,
    /// A DynamoDB call failed.
    Call,
    /// The embedded local endpoint could not start.
    Local,
}

/// An error of a DynamoDB operation other than a batch write (those are
/// reported per item in [`crate::WriteOutcome`]).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DynamoError {
    /// The target table does not exist and the mapping does not ask to create it.
    #[error("table {table} does not exist; set `create = true` under [target] to create it")]
    TableMissing {
        /// Table name.
        table: String,
    },
    /// The existing table's key schema differs from the mapping.
    #[error("table {table} exists with key schema {found}, but the mapping declares {expected}")]
    KeySchemaMismatch {
        /// Table name.
        table: String,
        /// What the mapping declares.
        expected: String,
        /// What the table has.
        found: String,
    },
    /// An existing table's global secondary index differs from the mapping
    /// (missing, other keys or projection, or not declared).
    #[error("table {table}, index {index}: {message}")]
    IndexMismatch {
        /// Table name.
        table: String,
        /// Index name.
        index: String,
        /// What differs.
        message: String,
    },
    /// A call to DynamoDB failed.
    #[error("{operation} on {table} failed: {message}")]
    Call {
        /// The API operation.
        operation: &'static str,
        /// Table name.
        table: String,
        /// The service's message.
        message: String,
    },
    /// The embedded endpoint failed.
    #[error("embedded DynamoDB: {0}")]
    Local(String),
}

impl DynamoError {
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DynamoError::TableMissing { .. }
            | DynamoError::KeySchemaMismatch { .. }
            | DynamoError::IndexMismatch { .. } => ErrorKind::Table,
            DynamoError::Call { .. } => ErrorKind::Call,
            DynamoError::Local(_) => ErrorKind::Local,
        }
    }
}

/// Renders an SDK error with its code and message (the SDK's Display is terse).
pub(crate) fn sdk_message<E, R>(err: &aws_sdk_dynamodb::error::SdkError<E, R>) -> String
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_dynamodb::error::SdkError;
    match err {
        SdkError::ServiceError(e) => {
            let e = e.err();
            format!(
                "{}: {}",
                e.code().unwrap_or("error"),
                e.message().unwrap_or("no message")
            )
        }
        other => {
            let mut msg = other.to_string();
            let mut source = std::error::Error::source(other);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            msg
        }
    }
}
