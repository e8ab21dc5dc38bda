//! The policy's arithmetic, and the engine's loop with paused time and
//! seeded jitter.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;

#[test]
fn ceilings_double_from_base_up_to_cap() {
    let p = RetryPolicy {
        base: Duration::from_millis(100),
        cap: Duration::from_millis(700),
        max_attempts: 5,
        throttle_budget: None,
    };
    let ms = |n| p.ceiling(n).as_millis();
    assert_eq!(
        [ms(1), ms(2), ms(3), ms(4), ms(40)],
        [100, 200, 400, 700, 700]
    );
    let rng = SeededJitter::new(1);
    for _ in 0..200 {
        assert!(p.delay(3, &rng) <= Duration::from_millis(400));
    }
}

#[test]
fn with_a_budget_throttling_is_retried_until_the_budget_whatever_the_count() {
    let p = RetryPolicy {
        max_attempts: 3,
        ..RetryPolicy::default()
    }
    .with_throttle_budget(Duration::from_secs(60));
    let rng = SeededJitter::new(1);
    let mut r = Refusals::default();
    // A thousand throttled refusals within the minute: still retried,
    // the last wait ending no later than the budget.
    for i in 0..1000 {
        let elapsed = Duration::from_millis(59 * i);
        let wait = p.next(&mut r, true, elapsed, &rng).expect("within budget");
        assert!(elapsed + wait <= Duration::from_secs(60));
    }
    assert_eq!(
        p.next(&mut r, true, Duration::from_secs(60), &rng),
        Err(Spent::Budget(Duration::from_secs(60)))
    );
    // Other failures keep their count: the third ends it, throttling
    // in between not counted.
    let mut r = Refusals::default();
    let zero = Duration::ZERO;
    assert!(p.next(&mut r, false, zero, &rng).is_ok());
    assert!(p.next(&mut r, true, zero, &rng).is_ok());
    assert!(p.next(&mut r, false, zero, &rng).is_ok());
    assert_eq!(p.next(&mut r, false, zero, &rng), Err(Spent::Attempts(4)));
}

#[test]
fn without_a_budget_throttling_counts_as_an_attempt() {
    let p = RetryPolicy {
        max_attempts: 2,
        ..RetryPolicy::default()
    };
    let rng = SeededJitter::new(1);
    let mut r = Refusals::default();
    let zero = Duration::ZERO;
    assert!(p.next(&mut r, true, zero, &rng).is_ok());
    assert_eq!(p.next(&mut r, true, zero, &rng), Err(Spent::Attempts(2)));
    assert_eq!(
        p.within_budget(Duration::from_secs(9), zero),
        Duration::from_secs(9)
    );
}

/// A clock that waits for nothing and notes every wait asked of it; its
/// time moves by those waits alone.
struct NotingClock {
    start: tokio::time::Instant,
    waits: Mutex<Vec<Duration>>,
}

impl NotingClock {
    fn new() -> NotingClock {
        NotingClock {
            start: tokio::time::Instant::now(),
            waits: Mutex::default(),
        }
    }
}

impl Clock for NotingClock {
    fn now(&self) -> tokio::time::Instant {
        self.start + self.waits.lock().unwrap().iter().sum::<Duration>()
    }

    fn sleep(&self, delay: Duration) -> Sleep {
        self.waits.lock().unwrap().push(delay);
        Box::pin(std::future::ready(()))
    }
}

const POLICY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(100),
    cap: Duration::from_secs(1),
    max_attempts: 8,
    throttle_budget: None,
};

/// An attempt that fails as `throttled` says, every time.
fn failing(throttled: bool) -> impl FnMut(()) -> std::future::Ready<Attempt<(), &'static str>> {
    move |()| {
        std::future::ready(Attempt::Retry {
            work: (),
            throttled,
            error: "refused",
        })
    }
}

/// The waits of a call refused until its attempts run out, with jitter
/// seeded by `seed`.
async fn waits_of(seed: u64) -> Vec<Duration> {
    let clock = Arc::new(NotingClock::new());
    let retrier = Retrier::new(POLICY)
        .with_clock(clock.clone())
        .with_jitter(Arc::new(SeededJitter::new(seed)));
    let (out, tally) = retrier.run_counted("call", (), failing(false)).await;
    assert_eq!(out.unwrap_err().attempts, 8);
    let waits = clock.waits.lock().unwrap().clone();
    assert_eq!(tally.waited, waits.iter().sum::<Duration>());
    waits
}

#[tokio::test]
async fn each_wait_is_within_its_ceiling_and_a_seed_repeats_them() {
    let waits = waits_of(42).await;
    // Seven waits between eight attempts, each under its own ceiling.
    assert_eq!(waits.len(), 7);
    for (i, wait) in waits.iter().enumerate() {
        assert!(*wait <= POLICY.ceiling(i as u32 + 1), "wait {i}: {wait:?}");
    }
    assert_eq!(waits_of(42).await, waits, "the same seed, the same waits");
    assert_ne!(waits_of(43).await, waits, "another seed, other waits");
}

#[tokio::test(start_paused = true)]
async fn on_tokio_paused_clock_the_attempts_are_as_far_apart_as_the_waits() {
    let times = Mutex::new(Vec::new());
    let retrier = Retrier::new(POLICY).with_jitter(Arc::new(SeededJitter::new(7)));
    let (out, tally) = retrier
        .run_counted("call", (), |()| {
            times.lock().unwrap().push(tokio::time::Instant::now());
            std::future::ready(Attempt::<(), _>::Retry {
                work: (),
                throttled: false,
                error: "refused",
            })
        })
        .await;
    let gave_up = out.unwrap_err();
    assert_eq!(gave_up.spent, Some(Spent::Attempts(8)));
    let times = times.into_inner().unwrap();
    assert_eq!((times.len(), tally.attempts, tally.retries()), (8, 8, 7));
    for (i, pair) in times.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        // tokio's timer rounds a wait up to the millisecond; ceilings are whole.
        assert!(gap <= POLICY.ceiling(i as u32 + 1), "gap {i}: {gap:?}");
    }
    let span = *times.last().unwrap() - times[0];
    assert!(span >= tally.waited && span <= tally.waited + Duration::from_millis(7));
}

#[tokio::test(start_paused = true)]
async fn it_gives_up_after_max_attempts_and_at_once_when_refused() {
    let calls = AtomicU32::new(0);
    let policy = RetryPolicy {
        max_attempts: 4,
        ..POLICY
    };
    let out = Retrier::new(policy)
        .run("call", (), |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Attempt::<(), _>::Retry {
                work: (),
                throttled: true,
                error: "throttled",
            })
        })
        .await;
    let gave_up = out.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(
        (gave_up.error, gave_up.spent, gave_up.attempts),
        ("throttled", Some(Spent::Attempts(4)), 4)
    );

    // Refused as it is: one attempt, no wait.
    let start = tokio::time::Instant::now();
    let calls = AtomicU32::new(0);
    let out = Retrier::new(policy)
        .run("call", (), |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Attempt::<(), _, ()>::GiveUp("invalid"))
        })
        .await;
    assert_eq!(
        out.unwrap_err(),
        GaveUp {
            error: "invalid",
            spent: None,
            attempts: 1
        }
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn with_a_budget_throttling_ends_at_the_budget_and_other_failures_at_the_count() {
    let budget = Duration::from_secs(60);
    let policy = RetryPolicy {
        max_attempts: 3,
        ..POLICY
    }
    .with_throttle_budget(budget);
    let retrier = Retrier::new(policy).with_jitter(Arc::new(SeededJitter::new(3)));
    let start = tokio::time::Instant::now();
    let (out, tally) = retrier.run_counted("call", (), failing(true)).await;
    let gave_up = out.unwrap_err();
    assert_eq!(gave_up.spent, Some(Spent::Budget(budget)));
    // Far past three attempts, the last one made when the budget ended.
    assert!(tally.attempts > 60, "{tally:?}");
    assert_eq!(tally.throttled, tally.attempts);
    let elapsed = start.elapsed();
    assert!(elapsed >= budget && elapsed <= budget + Duration::from_millis(1));

    // Transient failures keep their count, throttling in between not counted.
    let answers = Mutex::new(vec![false, true, true, false, true, false].into_iter());
    let out = retrier
        .run("call", (), |()| {
            let throttled = answers.lock().unwrap().next().expect("an answer");
            std::future::ready(Attempt::<(), _>::Retry {
                work: (),
                throttled,
                error: "refused",
            })
        })
        .await;
    let gave_up = out.unwrap_err();
    assert_eq!(
        (gave_up.spent, gave_up.attempts),
        (Some(Spent::Attempts(6)), 6)
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_of_part_is_given_only_the_rest_and_progress_spends_no_attempt() {
    let policy = RetryPolicy {
        max_attempts: 2,
        ..POLICY
    };
    let given = Mutex::new(Vec::new());
    // Each call takes the first two items of what it is given, refuses
    // the rest; the first call is refused whole.
    let (out, tally) = Retrier::new(policy)
        .run_counted("call", (1..=7).collect::<Vec<u32>>(), |work| {
            let mut given = given.lock().unwrap();
            given.push(work.clone());
            let answer = match (given.len(), work.len()) {
                (1, _) => Attempt::Retry {
                    work,
                    throttled: true,
                    error: "throttled",
                },
                (_, 0..=2) => Attempt::Done(work.len()),
                _ => Attempt::RetryPart {
                    rest: work[2..].to_vec(),
                    throttled: true,
                    error: "unprocessed",
                },
            };
            std::future::ready(answer)
        })
        .await;
    assert_eq!(out.unwrap(), 1, "the last call had one item left");
    let given = given.into_inner().unwrap();
    let expected: Vec<Vec<u32>> = vec![
        vec![1, 2, 3, 4, 5, 6, 7],
        vec![1, 2, 3, 4, 5, 6, 7],
        vec![3, 4, 5, 6, 7],
        vec![5, 6, 7],
        vec![7],
    ];
    assert_eq!(given, expected);
    // Five attempts with a limit of two: only the first did nothing.
    assert_eq!((tally.attempts, tally.throttled), (5, 4));
}

#[tokio::test]
async fn paced_work_sets_its_own_step_and_latest_wait_and_spends_no_attempt() {
    let clock = Arc::new(NotingClock::new());
    let policy = RetryPolicy {
        max_attempts: 2,
        ..POLICY
    };
    let retrier = Retrier::new(policy)
        .with_clock(clock.clone())
        .with_jitter(Arc::new(SeededJitter::new(5)));
    // The work is the step the next wait should follow; the fourth wait is
    // held to 30 ms by the work's own budget; done after five calls (two
    // attempts would have been the policy's limit).
    let steps = [1u32, 4, 2, 10];
    let (out, tally) = retrier
        .run_counted("chunk", 0usize, |call| {
            let answer = match steps.get(call) {
                Some(&step) => Attempt::<usize, &str, usize>::Paced {
                    work: call + 1,
                    step,
                    within: (step == 10).then_some(Duration::from_millis(30)),
                    throttled: call % 2 == 0,
                },
                None => Attempt::Done(call),
            };
            std::future::ready(answer)
        })
        .await;
    assert_eq!(out.unwrap(), 4);
    assert_eq!(
        (tally.attempts, tally.retries(), tally.throttled),
        (5, 4, 2)
    );
    let waits = clock.waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 4);
    for (wait, step) in waits.iter().zip(steps) {
        assert!(*wait <= POLICY.ceiling(step), "{wait:?} at step {step}");
    }
    assert!(waits[3] <= Duration::from_millis(30), "{:?}", waits[3]);
    // The same seed draws the same fractions: the step, not a count of
    // attempts, set each ceiling.
    let rng = SeededJitter::new(5);
    let expected: Vec<Duration> = steps.iter().map(|&step| policy.delay(step, &rng)).collect();
    assert_eq!(waits[..3], expected[..3]);
    assert_eq!(waits[3], expected[3].min(Duration::from_millis(30)));
    assert_eq!(tally.waited, waits.iter().sum::<Duration>());
}
