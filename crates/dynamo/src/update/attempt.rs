//! One call's attempts: each failure classified once, and the loop that
//! retries what may be retried.

use std::future::Future;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::concurrency::{AdaptiveConcurrency, Permit};
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::pacer::Pacer;
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

/// What each attempt of a call waits for before it is sent.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Gate<'a> {
    /// A permit of the calls in flight, told whether it was throttled.
    pub concurrency: Option<&'a AdaptiveConcurrency>,
    /// Before each retry, the turn of the item's partition key (its
    /// value, its write units, whether its key has more items in its
    /// page) at the rates the pacer learned; the first attempt's turn is
    /// the caller's, taken before its budget starts.
    pub turn: Option<(&'a Pacer, &'a AttrValue, u64, bool)>,
}

/// Calls `call` until it succeeds, fails for good, or its retries are spent
/// (see [`RetryPolicy::spent`]: with a throttle budget, throttling is
/// retried until the budget ends, whatever the count), through the one
/// retry engine. Each attempt first waits at `gate`: a retry for its turn
/// (the wait counts against the budget), then for a permit of its
/// concurrency, which it tells whether it was throttled; the permit is
/// released before any backoff sleep.
pub(super) async fn retrying<T, F, Fut>(
    policy: &RetryPolicy,
    gate: Gate<'_>,
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
    let mut first = true;
    let (out, tally) = Retrier::new(*policy)
        .run_counted(operation, (), |()| {
            let call = call();
            let again = !std::mem::replace(&mut first, false);
            async move {
                if let (true, Some((pacer, key, units, shared))) = (again, gate.turn) {
                    pacer.turn(key, units, shared).await;
                }
                let permit = match gate.concurrency {
                    Some(c) => Some(c.acquire().await),
                    None => None,
                };
                let result = call.await;
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
