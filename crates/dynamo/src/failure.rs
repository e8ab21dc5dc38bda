//! Failed DynamoDB calls, classified once from the error code and the HTTP
//! status (never from the text of a message). The table of codes is
//! docs/operations.md's "What a failed call means"; a test holds the two to
//! the same rows.

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

/// What a failed call means for the one who made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The service said to slow down: retry later, and slow down.
    Throttled,
    /// The same call may succeed later (5xx, timeouts, dropped connections,
    /// transaction conflicts, expired or skewed signatures, a credentials
    /// provider's hiccup): retry.
    Transient,
    /// The table cannot be written at all (missing, no permission, bad
    /// credentials), whatever the item: retrying or splitting cannot help.
    TableFault,
    /// The service said the request's items are invalid (a validation
    /// error): the items of the call are at fault, never retried as they are.
    ItemRejected,
}

/// Error codes that mean "too fast".
const THROTTLING_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "TooManyRequestsException",
];

/// Error codes, besides throttling, after which the same call may succeed:
/// the service's own trouble, and refusals of a request's signature for its
/// time (the SDK follows the service's clock, and its identity cache fetches
/// credentials again before they expire).
const TRANSIENT_CODES: &[&str] = &[
    "InternalServerError",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "TransactionInProgressException",
    "TransactionConflictException",
    "RequestTimeout",
    "RequestTimeoutException",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "ExpiredTokenException",
    "ExpiredToken",
    "IDPCommunicationError",
];

/// Error codes that say the table cannot be written at all, whatever the item.
pub const TABLE_FAULTS: &[&str] = &[
    "ResourceNotFoundException",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "MissingAuthenticationToken",
    "IncompleteSignature",
    "ResourceInUseException",
    "LimitExceededException",
];

/// Error codes that say the items of the request are at fault: the only
/// answers that reject a row.
const ITEM_CODES: &[&str] = &[
    "ValidationException",
    "ItemCollectionSizeLimitExceededException",
    "ConditionalCheckFailedException",
    "TransactionCanceledException",
];

impl Failure {
    /// Classifies a failed call: a service's answer by its code and HTTP
    /// status ([`Failure::of_service`]); timeouts, transport and response
    /// failures are transient; a credentials provider that timed out or
    /// failed may answer next time; no credentials at all, or a request the
    /// SDK could not build, is a fault of every call alike.
    pub fn of<E>(err: &SdkError<E, HttpResponse>) -> Failure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        if let SdkError::ServiceError(e) = err {
            return Failure::of_service(e.err().code().unwrap_or(""), e.raw().status().as_u16());
        }
        // A call that never went out for want of credentials: the SDK says
        // so as a dispatch failure, so this comes first.
        match credentials_error(err) {
            Some(
                CredentialsError::ProviderTimedOut(_)
                | CredentialsError::ProviderError(_)
                | CredentialsError::Unhandled(_),
            ) => return Failure::Transient,
            Some(_) => return Failure::TableFault,
            None => {}
        }
        match err {
            SdkError::TimeoutError(_)
            | SdkError::DispatchFailure(_)
            | SdkError::ResponseError(_) => Failure::Transient,
            _ => Failure::TableFault,
        }
    }

    /// Classifies a service's answer by its error code (without namespace)
    /// and its HTTP status. Known codes first; then an unknown code with a
    /// 5xx status (or 429) may pass later, and an unknown 4xx is the
    /// table's: a row is rejected only when the service says so of its
    /// items, never for a fault of the service.
    pub fn of_service(code: &str, status: u16) -> Failure {
        if THROTTLING_CODES.contains(&code) || status == 429 {
            Failure::Throttled
        } else if TRANSIENT_CODES.contains(&code) {
            Failure::Transient
        } else if TABLE_FAULTS.contains(&code) {
            Failure::TableFault
        } else if ITEM_CODES.contains(&code) {
            Failure::ItemRejected
        } else if status >= 500 {
            Failure::Transient
        } else {
            Failure::TableFault
        }
    }

    /// Whether trying the same call again may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, Failure::Throttled | Failure::Transient)
    }

    /// The name docs/operations.md gives this class.
    pub fn name(self) -> &'static str {
        match self {
            Failure::Throttled => "throttled",
            Failure::Transient => "transient",
            Failure::TableFault => "table fault",
            Failure::ItemRejected => "item rejected",
        }
    }
}

/// The credentials provider's error behind a call that never went out.
fn credentials_error<E, R>(err: &SdkError<E, R>) -> Option<&CredentialsError>
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        if let Some(c) = e.downcast_ref::<CredentialsError>() {
            return Some(c);
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests;
