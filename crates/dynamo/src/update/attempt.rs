//! One call's attempts: each failure classified once, and the loop that
//! retries what may be retried.

use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::concurrency::AdaptiveConcurrency;
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::writer::RetryPolicy;
use sql2ddb_aws::{Refusals, Spent};

/// A failed attempt, classified once.
pub(super) enum Attempt {
    ConditionFailed,
    /// The condition failed on an item this run's earlier attempt changed.
    OwnWrite,
    Failed(Failure, String),
}

impl Attempt {
    pub(super) fn of<E>(e: SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> Attempt
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        if e.code() == Some("ConditionalCheckFailedException") {
            return Attempt::ConditionFailed;
        }
        Attempt::Failed(Failure::of(&e), sql2ddb_aws::sdk_message(&e))
    }
}

/// Calls `call` until it succeeds, fails for good, or its retries are spent
/// (see [`RetryPolicy::spent`]: with a throttle budget, throttling is
/// retried until the budget ends, whatever the count).
pub(super) async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    concurrency: Option<&AdaptiveConcurrency>,
    table: &str,
    operation: &'static str,
    retries: &mut u64,
    throttled: &mut u64,
    mut call: F,
) -> Result<T, DynamoError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    let started = tokio::time::Instant::now();
    let mut refusals = Refusals::default();
    loop {
        let permit = match concurrency {
            Some(c) => Some(c.acquire().await),
            None => None,
        };
        let (failure, message) = match call().await {
            Ok(v) => {
                if let Some(p) = permit {
                    p.success();
                }
                return Ok(v);
            }
            Err(Attempt::ConditionFailed | Attempt::OwnWrite) => {
                (Failure::ItemRejected, "the condition failed".to_string())
            }
            Err(Attempt::Failed(f, m)) => (f, m),
        };
        // The permit is released before any backoff sleep.
        match (failure == Failure::Throttled, permit) {
            (true, permit) => {
                *throttled += 1;
                if let Some(p) = permit {
                    p.throttled();
                }
            }
            (false, permit) => drop(permit),
        }
        let fail = |message: String| DynamoError::Call {
            operation,
            table: table.to_string(),
            message,
            failure: Some(failure),
        };
        if !failure.is_retryable() {
            return Err(fail(message));
        }
        let throttling = failure == Failure::Throttled;
        let next = policy.next(
            &mut refusals,
            throttling,
            started.elapsed(),
            &mut rand::rng(),
        );
        let attempt = refusals.all;
        let delay = match next {
            Ok(delay) => delay,
            Err(Spent::Budget(b)) => {
                return Err(fail(format!(
                    "the table kept refusing it (throttled) for the whole retry budget of {} ({attempt} attempts): {message}",
                    sql2ddb_core::duration_text(b)
                )))
            }
            Err(Spent::Attempts(_)) => {
                return Err(fail(format!(
                    "still failing after {attempt} attempts: {message}"
                )))
            }
        };
        *retries += 1;
        tracing::debug!(table, operation, attempt, ?delay, %message, "retrying");
        tokio::time::sleep(delay).await;
    }
}
