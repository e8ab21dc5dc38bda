//! The retry loop of the update calls, with paused time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::*;

const POLICY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(50),
    cap: Duration::from_secs(5),
    max_attempts: 4,
    throttle_budget: None,
};

/// A call that answers `answers` in turn, then succeeds.
async fn run(answers: Vec<Attempt>) -> (Result<u32, DynamoError>, u64, u64, u32) {
    run_with(&POLICY, answers).await
}

/// [`run`] with `policy`.
async fn run_with(
    policy: &RetryPolicy,
    answers: Vec<Attempt>,
) -> (Result<u32, DynamoError>, u64, u64, u32) {
    let calls = AtomicU32::new(0);
    let answers = std::sync::Mutex::new(answers.into_iter());
    let (mut retries, mut throttled) = (0, 0);
    let concurrency = AdaptiveConcurrency::new(4);
    let gate = Gate {
        concurrency: Some(&concurrency),
        turn: None,
    };
    let out = retrying(
        policy,
        gate,
        "t",
        "UpdateItem",
        &mut retries,
        &mut throttled,
        || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let next = answers.lock().unwrap().next();
            async move {
                match next {
                    Some(a) => Err(a),
                    None => Ok(n),
                }
            }
        },
    )
    .await;
    (
        out,
        retries,
        throttled,
        concurrency.snapshot().current as u32,
    )
}

fn failed(f: Failure) -> Attempt {
    Attempt::Failed(f, format!("{f:?}"))
}

#[tokio::test(start_paused = true)]
async fn throttling_and_transient_failures_are_retried_and_counted() {
    let (out, retries, throttled, limit) =
        run(vec![failed(Failure::Throttled), failed(Failure::Transient)]).await;
    assert_eq!(out.unwrap(), 2, "the third attempt succeeded");
    assert_eq!((retries, throttled), (2, 1));
    assert!(limit < 4, "a throttle lowers the concurrency");
}

#[tokio::test(start_paused = true)]
async fn refused_calls_are_not_retried_and_attempts_run_out() {
    let (out, retries, _, _) = run(vec![failed(Failure::ItemRejected)]).await;
    let e = out.unwrap_err();
    assert_eq!((e.failure(), retries), (Some(Failure::ItemRejected), 0));
    let (out, retries, _, _) = run((0..4).map(|_| failed(Failure::Transient)).collect()).await;
    assert!(out
        .unwrap_err()
        .to_string()
        .contains("still failing after 4 attempts"));
    assert_eq!(retries, 3);
}

#[tokio::test(start_paused = true)]
async fn under_a_budget_throttling_is_retried_past_the_attempts_until_the_budget() {
    let budget = Duration::from_secs(60);
    let policy = POLICY.with_throttle_budget(budget);
    // Ten throttles (at most 22 s of backoff), past the four attempts:
    // still written.
    let (out, retries, throttled, _) = run_with(
        &policy,
        (0..10).map(|_| failed(Failure::Throttled)).collect(),
    )
    .await;
    assert_eq!(out.unwrap(), 10);
    assert_eq!((retries, throttled), (10, 10));
    // Throttled for ever: given up at the budget, as throttled, saying so.
    let start = tokio::time::Instant::now();
    let forever = (0..100_000).map(|_| failed(Failure::Throttled)).collect();
    let (out, _, _, _) = run_with(&policy, forever).await;
    let e = out.unwrap_err();
    assert_eq!(e.failure(), Some(Failure::Throttled));
    assert!(
        e.to_string().contains("for the whole retry budget of 1m"),
        "{e}"
    );
    assert!(start.elapsed() >= budget, "{:?}", start.elapsed());
    // Other failures still stop at the attempts.
    let (out, _, _, _) = run_with(
        &policy,
        (0..4).map(|_| failed(Failure::Transient)).collect(),
    )
    .await;
    assert!(out
        .unwrap_err()
        .to_string()
        .contains("still failing after 4 attempts"));
}
