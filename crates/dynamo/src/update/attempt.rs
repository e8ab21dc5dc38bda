//! One call's attempts: each failure classified once, and the loop that
//! retries what may be retried.

use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::concurrency::{AdaptiveConcurrency, Permit};
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::pacer::{Pacer, Sent};
use crate::writer::RetryPolicy;
use sql2ddb_aws::{Attempt as RetryAttempt, Retrier, Spent};
use sql2ddb_core::AttrValue;

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
/// retried until the budget ends, whatever the count), through the one
/// retry engine. Each attempt first takes a permit of `concurrency` and
/// tells it whether it was throttled; the permit is released before any
/// backoff sleep.
pub(super) async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    concurrency: Option<&AdaptiveConcurrency>,
    pace: Option<Pace<'_>>,
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
    let (out, tally) = Retrier::new(*policy)
        .run_counted(operation, (), |()| {
            let call = call();
            async move {
                let permit = match concurrency {
                    Some(c) => Some(c.acquire().await),
                    None => None,
                };
                if let Some(p) = &pace {
                    p.pacer.admit(p.units).await;
                }
                let sent = tokio::time::Instant::now();
                let result = call.await;
                if let Some(p) = &pace {
                    p.learn(sent, &result);
                }
                outcome(result, permit)
            }
        })
        .await;
    *retries += u64::from(tally.retries());
    *throttled += u64::from(tally.throttled);
    let gave_up = match out {
        Ok(v) => return Ok(v),
        Err(gave_up) => gave_up,
    };
    let (failure, message) = gave_up.error;
    let attempts = gave_up.attempts;
    let message = match gave_up.spent {
        None => message,
        Some(Spent::Budget(b)) => format!(
            "the table kept refusing it (throttled) for the whole retry budget of {} ({attempts} attempts): {message}",
            sql2ddb_core::duration_text(b)
        ),
        Some(Spent::Attempts(_)) => {
            format!("still failing after {attempts} attempts: {message}")
        }
    };
    tracing::debug!(table, operation, attempts, %message, "given up");
    Err(DynamoError::Call {
        operation,
        table: table.to_string(),
        message,
        failure: Some(failure),
    })
}

/// The write of one item paced by a [`Pacer`]: each attempt waits for the
/// table's rate and tells the pacer what became of it.
#[derive(Clone, Copy)]
pub struct Pace<'a> {
    /// The process's pacer.
    pub pacer: &'a Pacer,
    /// The item's partition key value.
    pub key: &'a AttrValue,
    /// Its write units (an estimate: the item as read).
    pub units: u64,
}

impl Pace<'_> {
    fn learn<T>(&self, sent: tokio::time::Instant, result: &Result<T, Attempt>) {
        let me = [Sent {
            key: self.key,
            units: self.units,
            alone: true,
        }];
        match result {
            // A failed condition is a write the table admitted (and billed).
            Ok(_) | Err(Attempt::ConditionFailed | Attempt::OwnWrite) => {
                self.pacer.answered(sent, &me, &[], false)
            }
            Err(Attempt::Failed(Failure::Throttled, _)) => {
                self.pacer.answered(sent, &[], &me, true)
            }
            Err(Attempt::Failed(..)) => {}
        }
    }
}

/// What one attempt came to, told to its permit.
fn outcome<T>(
    result: Result<T, Attempt>,
    permit: Option<Permit<'_>>,
) -> RetryAttempt<T, (Failure, String)> {
    let (failure, message) = match result {
        Ok(v) => {
            if let Some(p) = permit {
                p.success();
            }
            return RetryAttempt::Done(v);
        }
        Err(Attempt::ConditionFailed | Attempt::OwnWrite) => {
            (Failure::ItemRejected, "the condition failed".to_string())
        }
        Err(Attempt::Failed(f, m)) => (f, m),
    };
    let throttled = failure == Failure::Throttled;
    match (throttled, permit) {
        (true, Some(p)) => p.throttled(),
        // Other failures say nothing about our pace.
        (_, permit) => drop(permit),
    }
    if !failure.is_retryable() {
        return RetryAttempt::GiveUp((failure, message));
    }
    RetryAttempt::Retry {
        work: (),
        throttled,
        error: (failure, message),
    }
}
