//! One call's attempts: each failure classified once, and the loop that
//! retries what may be retried.

use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::concurrency::AdaptiveConcurrency;
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::writer::RetryPolicy;

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

/// Calls `call` until it succeeds, fails for good, or runs out of attempts.
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
    let mut attempt = 0u32;
    loop {
        attempt += 1;
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
        if attempt >= policy.max_attempts {
            return Err(fail(format!(
                "still failing after {attempt} attempts: {message}"
            )));
        }
        *retries += 1;
        let delay = policy.delay(attempt, &mut rand::rng());
        tracing::debug!(table, operation, attempt, ?delay, %message, "retrying");
        tokio::time::sleep(delay).await;
    }
}
