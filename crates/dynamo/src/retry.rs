//! The retry loop of every DynamoDB call but the writers' chunks (whose
//! loop, in [`crate::writer`], also retries part of a call): one policy,
//! one classifier ([`Failure::of`]), the SDK's own retries off.

use std::future::Future;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use sql2ddb_aws::{Refusals, RetryPolicy, Spent};

use crate::error::DynamoError;
use crate::failure::Failure;

/// A call that failed for good: its last error, classified, and how many
/// attempts were made.
pub(crate) struct Failed<E> {
    pub error: SdkError<E, HttpResponse>,
    pub failure: Failure,
    pub attempts: u32,
}

impl<E> Failed<E>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    /// The service's error code, if it answered.
    pub fn code(&self) -> Option<&str> {
        self.error.code()
    }

    /// What the service or the transport said, and after how many attempts.
    pub fn message(&self) -> String {
        let said = sql2ddb_aws::sdk_message(&self.error);
        if self.attempts > 1 {
            format!("not done after {} attempts: {said}", self.attempts)
        } else {
            said
        }
    }

    /// The error of `operation` on `table`, saying how many attempts it took.
    pub fn into_error(self, operation: &'static str, table: &str) -> DynamoError {
        DynamoError::Call {
            operation,
            table: table.to_string(),
            message: self.message(),
            failure: Some(self.failure),
        }
    }
}

/// Makes `call` until it succeeds, fails in a way that trying again cannot
/// mend (see [`Failure::is_retryable`]), or its retries are spent (see
/// [`RetryPolicy::spent`]: `max_attempts` attempts, throttling not counted
/// when the policy has a throttle budget, which then ends its retries),
/// sleeping a full-jitter backoff between attempts. `what` names the call
/// in the log.
pub(crate) async fn retried<T, E, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    mut call: F,
) -> Result<T, Failed<E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, SdkError<E, HttpResponse>>>,
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let started = tokio::time::Instant::now();
    let mut refusals = Refusals::default();
    loop {
        let error = match call().await {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let failure = Failure::of(&error);
        let next = match failure.is_retryable() {
            true => policy.next(
                &mut refusals,
                failure == Failure::Throttled,
                started.elapsed(),
                &mut rand::rng(),
            ),
            false => {
                refusals.add(false);
                Err(Spent::Attempts(refusals.all))
            }
        };
        let attempts = refusals.all;
        let delay = match next {
            Ok(delay) => delay,
            Err(_) => {
                return Err(Failed {
                    error,
                    failure,
                    attempts,
                })
            }
        };
        tracing::debug!(
            what,
            attempts,
            ?delay,
            error = %sql2ddb_aws::sdk_message(&error),
            "retrying"
        );
        tokio::time::sleep(delay).await;
    }
}
