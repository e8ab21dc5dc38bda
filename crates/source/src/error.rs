//! The crate's one error type. Every message is redacted at construction, so a
//! password in a connection URL can never reach a log or a terminal.

use sql2ddb_core::redact_secrets;

/// What went wrong, coarsely, for callers that branch on it (exit codes, retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceErrorKind {
    /// The URL, entity or key given to the source is wrong; fix the configuration.
    Config,
    /// The server could not be reached or refused the login.
    Connect,
    /// A table (or SQLite file) does not exist.
    NotFound,
    /// The server rejected or failed a statement.
    Query,
    /// A value could not be decoded from what the server sent.
    Decode,
}

/// An error of the source readers. Messages never contain a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A malformed or unsupported connection URL, or a bad entity definition.
    #[error("{0}")]
    Config(String),
    /// Connecting failed.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The URL, redacted.
        url: String,
        /// The driver's message, redacted.
        message: String,
    },
    /// A table or a SQLite file is missing.
    #[error("{0}")]
    NotFound(String),
    /// A statement failed.
    #[error("{context}: {message}")]
    Query {
        /// What was being done (`describe orders`, `read page of orders`).
        context: String,
        /// The server's message, redacted.
        message: String,
    },
    /// A value could not be decoded.
    #[error("cannot decode column {column}: {message}")]
    Decode {
        /// Column name.
        column: String,
        /// Why.
        message: String,
    },
}

impl SourceError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> SourceErrorKind {
        match self {
            SourceError::Config(_) => SourceErrorKind::Config,
            SourceError::Connect { .. } => SourceErrorKind::Connect,
            SourceError::NotFound(_) => SourceErrorKind::NotFound,
            SourceError::Query { .. } => SourceErrorKind::Query,
            SourceError::Decode { .. } => SourceErrorKind::Decode,
        }
    }

    pub(crate) fn config(message: impl AsRef<str>) -> Self {
        SourceError::Config(redact_secrets(message.as_ref()))
    }

    pub(crate) fn not_found(message: impl AsRef<str>) -> Self {
        SourceError::NotFound(redact_secrets(message.as_ref()))
    }

    pub(crate) fn connect(url: &str, err: impl std::fmt::Display) -> Self {
        SourceError::Connect {
            url: redact_secrets(url),
            message: redact_secrets(&err.to_string()),
        }
    }

    pub(crate) fn query(context: impl AsRef<str>, err: impl std::fmt::Display) -> Self {
        SourceError::Query {
            context: redact_secrets(context.as_ref()),
            message: redact_secrets(&err.to_string()),
        }
    }

    pub(crate) fn decode(column: &str, err: impl std::fmt::Display) -> Self {
        SourceError::Decode {
            column: column.to_string(),
            message: redact_secrets(&err.to_string()),
        }
    }
}
