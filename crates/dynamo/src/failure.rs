//! Failed DynamoDB calls, classified once from the error code and the HTTP
//! status (never from the text of a message).

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

/// What a failed call means for the one who made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failure {
    /// The service said to slow down: retry later, and slow down.
    Throttled,
    /// The same call may succeed later (5xx, timeouts, dropped connections,
    /// transaction conflicts): retry.
    Transient,
    /// The table cannot be written at all (missing, no permission, bad
    /// credentials), whatever the item: retrying or splitting cannot help.
    TableFault,
    /// The request itself was refused (a validation error): the items of
    /// the call are at fault, never retried as they are.
    ItemRejected,
}

/// Error codes that mean "too fast".
const THROTTLING_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
];

/// Error codes, besides throttling, after which the same call may succeed.
const TRANSIENT_CODES: &[&str] = &[
    "InternalServerError",
    "InternalFailure",
    "ServiceUnavailable",
    "TransactionInProgressException",
    "TransactionConflictException",
];

/// Error codes that say the table cannot be written at all, whatever the item.
pub const TABLE_FAULTS: &[&str] = &[
    "ResourceNotFoundException",
    "AccessDeniedException",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "MissingAuthenticationToken",
    "ExpiredTokenException",
];

impl Failure {
    /// Classifies a failed call: throttling and transient codes, any 5xx,
    /// timeouts and transport failures may succeed when tried again; the
    /// table-fault codes are the table's; anything else is the request's.
    pub fn of<E>(err: &SdkError<E, HttpResponse>) -> Failure
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        match err {
            SdkError::ServiceError(e) => {
                let code = e.err().code().unwrap_or("");
                Failure::of_service(code, e.raw().status().is_server_error())
            }
            SdkError::TimeoutError(_)
            | SdkError::DispatchFailure(_)
            | SdkError::ResponseError(_) => Failure::Transient,
            _ => Failure::ItemRejected,
        }
    }

    /// Classifies a service's answer by its error code and whether its HTTP
    /// status was a 5xx.
    pub fn of_service(code: &str, server_error: bool) -> Failure {
        if THROTTLING_CODES.contains(&code) {
            Failure::Throttled
        } else if TRANSIENT_CODES.contains(&code) || server_error {
            Failure::Transient
        } else if TABLE_FAULTS.contains(&code) {
            Failure::TableFault
        } else {
            Failure::ItemRejected
        }
    }

    /// Whether trying the same call again may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, Failure::Throttled | Failure::Transient)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_classify() {
        let of = Failure::of_service;
        assert_eq!(of("ThrottlingException", false), Failure::Throttled);
        assert_eq!(
            of("ProvisionedThroughputExceededException", false),
            Failure::Throttled
        );
        assert_eq!(of("InternalServerError", false), Failure::Transient);
        assert_eq!(of("", true), Failure::Transient);
        assert_eq!(of("ResourceNotFoundException", false), Failure::TableFault);
        assert_eq!(of("ValidationException", false), Failure::ItemRejected);
        assert!(Failure::Throttled.is_retryable() && Failure::Transient.is_retryable());
        assert!(!Failure::TableFault.is_retryable() && !Failure::ItemRejected.is_retryable());
    }
}
