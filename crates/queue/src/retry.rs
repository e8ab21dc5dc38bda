//! Who retries an SQS call. Every call keeps the SDK's standard retry
//! ([`crate::client::CALL_ATTEMPTS`]) but two things the retry engine
//! owns: `ReceiveMessage`, whose SDK retry is switched off for the call so
//! that a worker's receive is retried once, with backoff and jitter, and
//! not SDK attempts times ours; and the entries a successful
//! `SendMessageBatch` reports failed, re-sent as a retry of part of the call.

use std::time::Duration;

use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use sql2ddb_aws::{sdk_message, Attempt, GaveUp, RetryPolicy};

/// Re-sending the entries of a `SendMessageBatch` that failed inside a
/// successful call, unless replaced ([`crate::SqsQueue::with_entry_retry`]):
/// 8 sends of entries none of which went through, the delay before re-send
/// `n` (1-based) at most `min(10 s, 100 ms·2^(n-1))`, full jitter.
pub const DEFAULT_ENTRY_RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(100),
    cap: Duration::from_secs(10),
    max_attempts: 8,
    throttle_budget: None,
};

/// Retrying a `ReceiveMessage` that failed (throttling, 5xx, timeouts, a
/// dropped connection), unless replaced
/// ([`crate::SqsQueue::with_receive_retry`]): 5 attempts, the delay before
/// retry `n` at most `min(8 s, 1 s·2^(n-1))`, full jitter. The SDK makes
/// one attempt of each.
pub const RECEIVE_RETRY: RetryPolicy = RetryPolicy {
    base: Duration::from_secs(1),
    cap: Duration::from_secs(8),
    max_attempts: 5,
    throttle_budget: None,
};

/// Error codes that mean "too fast".
const THROTTLING_CODES: &[&str] = &[
    "RequestThrottled",
    "ThrottlingException",
    "Throttling",
    "KmsThrottled",
];

/// Error codes, besides throttling and 5xx, after which the same call may
/// succeed.
const TRANSIENT_CODES: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "RequestExpired",
];

/// The override that makes the SDK try a call once: for the calls the
/// engine retries.
pub(crate) fn sdk_once() -> aws_sdk_sqs::config::Builder {
    aws_sdk_sqs::config::Builder::default().retry_config(RetryConfig::disabled())
}

/// Whether a failed call may succeed when made again (`Some`), and then
/// whether SQS said to slow down.
fn retryable<E>(err: &SdkError<E, HttpResponse>) -> Option<bool>
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ServiceError(e) => {
            let code = e.err().code().unwrap_or("");
            let status = e.raw().status().as_u16();
            if status == 429 || THROTTLING_CODES.contains(&code) {
                Some(true)
            } else if status >= 500 || TRANSIENT_CODES.contains(&code) {
                Some(false)
            } else {
                None
            }
        }
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => Some(false),
        // A request that could not go out for want of what only the user can
        // give (a credential, a valid endpoint) fails the same every time.
        SdkError::DispatchFailure(d) => (!d.is_user()).then_some(false),
        _ => None,
    }
}

/// What one call of `operation`, which the engine retries, came to; the
/// error is what SQS or the transport said. A failure that may pass is
/// logged as a warning: a worker waiting out an outage says so.
pub(crate) fn attempt_of<T, E>(
    operation: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Attempt<T, String>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let err = match result {
        Ok(v) => return Attempt::Done(v),
        Err(err) => err,
    };
    match retryable(&err) {
        Some(throttled) => {
            let error = sdk_message(&err);
            tracing::warn!(operation, %error, "SQS call failed; it may be tried again");
            Attempt::Retry {
                work: (),
                throttled,
                error,
            }
        }
        None => Attempt::GiveUp(sdk_message(&err)),
    }
}

/// The message of a call given up, saying after how many attempts when
/// there were several.
pub(crate) fn gave_up_message(gave_up: GaveUp<String>) -> String {
    match gave_up.attempts {
        0 | 1 => gave_up.error,
        n => format!("not done after {n} attempts: {}", gave_up.error),
    }
}
