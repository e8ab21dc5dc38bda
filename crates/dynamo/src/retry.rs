//! Every DynamoDB call made once and retried by the one retry engine
//! ([`Retrier`]): one policy, one classifier ([`Failure::of`]), the SDK's
//! own retries off.

use std::future::Future;

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use sql2ddb_aws::{Attempt, Retrier, RetryPolicy};

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
/// mend (see [`Failure::is_retryable`]), or its retries are spent, through
/// the one retry engine ([`Retrier::run`]: `max_attempts` attempts,
/// throttling not counted when the policy has a throttle budget, which then
/// ends its retries). `what` names the call in the log.
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
    let out = Retrier::new(*policy)
        .run(what, (), |()| {
            let call = call();
            async move { attempt_of(what, call.await) }
        })
        .await;
    out.map_err(|gave_up| {
        let (error, failure) = gave_up.error;
        Failed {
            error,
            failure,
            attempts: gave_up.attempts,
        }
    })
}

/// What one call came to, its error classified once.
fn attempt_of<T, E>(
    what: &str,
    result: Result<T, SdkError<E, HttpResponse>>,
) -> Attempt<T, (SdkError<E, HttpResponse>, Failure)>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let error = match result {
        Ok(v) => return Attempt::Done(v),
        Err(e) => e,
    };
    let failure = Failure::of(&error);
    if !failure.is_retryable() {
        return Attempt::GiveUp((error, failure));
    }
    tracing::debug!(what, error = %sql2ddb_aws::sdk_message(&error), "refused");
    Attempt::Retry {
        work: (),
        throttled: failure == Failure::Throttled,
        error: (error, failure),
    }
}

/// A failed call, its error made already: tried again with `work` when
/// trying again may help, given up otherwise.
pub(crate) fn again<T, W>(work: W, err: DynamoError) -> Attempt<T, DynamoError, W> {
    match err.failure() {
        Some(f) if f.is_retryable() => Attempt::Retry {
            work,
            throttled: f == Failure::Throttled,
            error: err,
        },
        _ => Attempt::GiveUp(err),
    }
}

/// `err`, saying after how many attempts it was given up when there were
/// several.
pub(crate) fn after_attempts(err: DynamoError, attempts: u32) -> DynamoError {
    match err {
        DynamoError::Call {
            operation,
            table,
            message,
            failure,
        } if attempts > 1 => DynamoError::Call {
            operation,
            table,
            message: format!("not done after {attempts} attempts: {message}"),
            failure,
        },
        other => other,
    }
}
