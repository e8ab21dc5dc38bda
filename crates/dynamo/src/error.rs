//! The crate's error type.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use thiserror::Error;

use crate::failure::Failure;

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
    /// The client cannot be set up as asked (endpoint, region); nothing was called.
    Config,
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
        /// What the failure means, when DynamoDB (or the way to it) answered.
        failure: Option<Failure>,
    },
    /// The table kept refusing writes (throttling, items returned
    /// unprocessed) until the items' retry budget ran out. Nothing is wrong
    /// with the items: they stay to be written later.
    #[error("table {table} kept refusing writes (throttled) past the retry budget: {items} item(s) not written; first: {first}")]
    KeptRefusing {
        /// Table name.
        table: String,
        /// Items not written.
        items: u64,
        /// What became of the first of them, and what the service said.
        first: String,
    },
    /// The embedded endpoint failed.
    #[error("embedded DynamoDB: {0}")]
    Local(String),
    /// The client cannot be set up as asked: an endpoint that is not a URL,
    /// or no region for AWS. The message says what to write instead.
    #[error("{0}")]
    Config(String),
}

impl DynamoError {
    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            DynamoError::TableMissing { .. }
            | DynamoError::KeySchemaMismatch { .. }
            | DynamoError::IndexMismatch { .. } => ErrorKind::Table,
            DynamoError::Call { .. } | DynamoError::KeptRefusing { .. } => ErrorKind::Call,
            DynamoError::Local(_) => ErrorKind::Local,
            DynamoError::Config(_) => ErrorKind::Config,
        }
    }

    /// What a failed call means (throttled, transient, a fault of the table,
    /// a refused request); `None` for errors that are not a call's answer.
    pub fn failure(&self) -> Option<Failure> {
        match self {
            DynamoError::Call { failure, .. } => *failure,
            DynamoError::KeptRefusing { .. } => Some(Failure::Throttled),
            _ => None,
        }
    }
}

/// The error of a failed call to DynamoDB: its text, and what it means.
pub(crate) fn call_error<E>(
    operation: &'static str,
    table: &str,
    err: &SdkError<E, HttpResponse>,
) -> DynamoError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    DynamoError::Call {
        operation,
        table: table.to_string(),
        message: sql2ddb_aws::sdk_message(err),
        failure: Some(Failure::of(err)),
    }
}

/// An error of a DynamoDB operation that is not a service's answer (a
/// timeout of our own, a request that cannot be built).
pub(crate) fn local_error(operation: &'static str, table: &str, message: String) -> DynamoError {
    DynamoError::Call {
        operation,
        table: table.to_string(),
        message,
        failure: None,
    }
}
