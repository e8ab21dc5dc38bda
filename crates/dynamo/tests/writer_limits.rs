//! The writer's concurrency control, capacity cap and retry budget against a
//! scripted client, with paused time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{
    AdaptiveConcurrency, BatchWriteApi, BatchWriter, CallError, Failure, RetryPolicy,
    WriteCapacityLimiter,
};
use tokio::time::Instant;

/// How the scripted client answers call number `n` (from 0) carrying the
/// items of these partition keys.
type Script = Box<dyn Fn(usize, &[String]) -> Result<Vec<usize>, CallError> + Send + Sync>;

/// A client whose calls take 10 ms, answer from a script, and are logged
/// with the moment they were accepted and the items they stored.
struct Scripted {
    script: Script,
    calls: AtomicUsize,
    /// Each call's partition keys, in the order the calls were made.
    sent: Mutex<Vec<Vec<String>>>,
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
    accepted: Mutex<Vec<(Instant, Item)>>,
}

impl Scripted {
    fn new(
        script: impl Fn(usize, &[String]) -> Result<Vec<usize>, CallError> + Send + Sync + 'static,
    ) -> Self {
        Scripted {
            script: Box::new(script),
            calls: AtomicUsize::new(0),
            sent: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            accepted: Mutex::new(Vec::new()),
        }
    }

    fn stored_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .accepted
            .lock()
            .unwrap()
            .iter()
            .map(|(_, i)| pk_of(i))
            .collect();
        keys.sort();
        keys
    }
}

impl BatchWriteApi for &Scripted {
    async fn batch_put(
        &self,
        _table: &str,
        _keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let pks: Vec<String> = items.iter().map(|m| pk(m)).collect();
        self.sent.lock().unwrap().push(pks.clone());
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let unprocessed = (self.script)(n, &pks)?;
        let mut accepted = self.accepted.lock().unwrap();
        for (i, item) in items.iter().enumerate() {
            if !unprocessed.contains(&i) {
                accepted.push((Instant::now(), item.decode().unwrap()));
            }
        }
        Ok(unprocessed)
    }
}

fn pk(item: &EncodedItem) -> String {
    pk_of(&item.decode().unwrap())
}

fn pk_of(item: &Item) -> String {
    match &item["PK"] {
        AttrValue::S(s) => s.clone(),
        other => panic!("unexpected key {other:?}"),
    }
}

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr {
        name: "PK".into(),
        kind: sql2ddb_core::KeyType::S,
    }]
}

fn items(n: usize, size: usize) -> Vec<EncodedItem> {
    (0..n)
        .map(|i| {
            let mut item = Item::new();
            item.insert("PK".into(), AttrValue::S(format!("K{i:05}")));
            EncodedItem::new(&item, &keys(), serde_json::json!({ "id": i }), size)
        })
        .collect()
}

fn all_keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("K{i:05}")).collect()
}

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(20),
        cap: Duration::from_millis(500),
        max_attempts,
        throttle_budget: None,
    }
}

fn throttling() -> CallError {
    CallError {
        failure: Failure::Throttled,
        message: "ProvisionedThroughputExceededException: slow down".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn concurrency_holds_under_partial_answers_falls_under_throttles_and_recovers() {
    // The first 60 calls leave every other item unprocessed (a partition at
    // its limit), the next 60 are refused whole (the table at its limit),
    // then all is clean.
    let client = Scripted::new(|n, pks| match n {
        0..60 => Ok((0..pks.len()).step_by(2).collect()),
        60..120 => Err(throttling()),
        _ => Ok(vec![]),
    });
    let control = Arc::new(AdaptiveConcurrency::new(8));
    let writer =
        BatchWriter::new(&client, "t", keys(), policy(30)).with_concurrency(control.clone());
    let partial_only = async {
        while client.calls.load(Ordering::SeqCst) < 60 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        control.snapshot()
    };
    let (out, at_60) = tokio::join!(writer.write(items(2000, 100)), partial_only);

    assert_eq!(
        (at_60.current, at_60.decreases),
        (8, 0),
        "partial answers did not cut the limit: {at_60:?}"
    );
    assert!(at_60.partial > 0, "{at_60:?}");
    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_eq!(out.written, 2000);
    assert_eq!(client.stored_keys(), all_keys(2000));
    assert!(out.throttled >= 120, "{}", out.throttled);
    let s = control.snapshot();
    assert!(
        s.decreases >= 2 && s.min_reached <= 2,
        "whole refusals cut the limit: {s:?}"
    );
    assert!(
        s.increases >= 2 && s.current > s.min_reached,
        "and it came back: {s:?}"
    );
    assert!(client.peak_in_flight.load(Ordering::SeqCst) <= 8);
    assert_eq!(s.in_flight, 0, "every permit was given back");
}

#[tokio::test(start_paused = true)]
async fn a_fixed_concurrency_is_the_bound_on_calls_in_flight() {
    let client = Scripted::new(|_, _| Ok(vec![]));
    let control = Arc::new(AdaptiveConcurrency::fixed(3));
    let writer = BatchWriter::new(&client, "t", keys(), policy(3)).with_concurrency(control);
    let out = writer.write(items(500, 100)).await;
    assert_eq!(out.written, 500);
    // 20 chunks of one batch go out three at a time.
    assert_eq!(client.peak_in_flight.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn the_capacity_cap_counts_billed_units_times_indexes() {
    let client = Scripted::new(|_, _| Ok(vec![]));
    let limiter = Arc::new(WriteCapacityLimiter::new(100));
    // Items of 1.5 KB bill 2 units each, and one index doubles that: 4 units.
    let writer = BatchWriter::new(&client, "t", keys(), policy(3))
        .with_concurrency(Arc::new(AdaptiveConcurrency::new(4)))
        .with_capacity_limit(limiter.clone(), 2);
    let start = Instant::now();
    let out = writer.write(items(500, 1536)).await;

    assert_eq!(out.written, 500);
    assert_eq!(
        out.write_units, 1000,
        "the outcome counts the base table's units"
    );
    assert_eq!(limiter.snapshot().granted_units, 2000);
    // 2000 units at 100 per second, less the small initial bucket.
    assert!(
        start.elapsed() >= Duration::from_secs(19),
        "{:?}",
        start.elapsed()
    );
    let accepted = client.accepted.lock().unwrap();
    let busiest = accepted
        .iter()
        .map(|(from, _)| {
            accepted
                .iter()
                .filter(|(t, _)| *t >= *from && *t < *from + Duration::from_secs(5))
                .count() as u64
                * 4
        })
        .max()
        .unwrap();
    assert!(busiest <= 100 * 5 * 11 / 10, "{busiest} units in 5 s");
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_always_fails_stops_after_its_attempts_with_every_key() {
    // Throttled every time, with no time budget: throttling counts as
    // attempts. Every key comes back unwritten (not failed, not rejected).
    let client = Scripted::new(|_, _| Err(throttling()));
    let writer = BatchWriter::new(&client, "t", keys(), policy(5))
        .with_concurrency(Arc::new(AdaptiveConcurrency::new(4)));
    let out = writer.write(items(60, 100)).await;

    assert_eq!(out.written, 0);
    assert!(out.failed.is_empty() && out.rejected.is_empty());
    // Three chunks at once: one spends its five attempts; once it has, the
    // table is known to keep refusing and the others stop at their next
    // refusal.
    let calls = client.calls.load(Ordering::SeqCst) as u64;
    assert!((5..=3 * 5).contains(&calls), "{calls} calls");
    assert_eq!(out.retries, calls - 3, "every call but each chunk's first");
    let mut unwritten: Vec<String> = out.unwritten.iter().map(|(m, _)| pk(m)).collect();
    unwritten.sort();
    assert_eq!(unwritten, all_keys(60));
    assert!(
        out.unwritten
            .iter()
            .any(|(_, why)| why.contains("not written after 5 attempts")),
        "{:?}",
        out.unwritten[0].1
    );
    let (m, why) = &out.unwritten[0];
    assert!(
        why.contains("ProvisionedThroughputExceededException"),
        "{why}"
    );
    assert_eq!(
        m.source_key.to_json()["id"],
        serde_json::json!(pk(m)[1..].parse::<u64>().unwrap())
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_always_fails_stops_at_its_deadline() {
    let client = Scripted::new(|_, _| {
        Err(CallError {
            failure: Failure::Transient,
            message: "InternalServerError: try again".into(),
        })
    });
    let deadline = Duration::from_secs(10);
    let writer = BatchWriter::new(
        &client,
        "t",
        keys(),
        policy(1_000_000).with_throttle_budget(deadline),
    );
    let start = Instant::now();
    let out = writer.write(items(30, 100)).await;

    // Two chunks, one after the other. The first waits no later than its
    // budget's end, so its last call (10 ms here) ends just after it; then
    // the service is known to keep failing, and the second chunk gets one
    // attempt.
    let took = start.elapsed();
    assert!(
        took >= deadline && took <= deadline + Duration::from_millis(3 * 10),
        "{took:?}"
    );
    assert!(
        client.calls.load(Ordering::SeqCst) > 10,
        "it did retry before giving up"
    );
    assert!(out.unwritten.is_empty(), "a 5xx is no throttling");
    let mut failed: Vec<String> = out.failed.iter().map(|(m, _)| pk(m)).collect();
    failed.sort();
    assert_eq!(failed, all_keys(30));
    let within = |why: &str| why.contains("not written within the retry budget of 10s");
    assert_eq!(
        out.failed.iter().filter(|(_, why)| within(why)).count(),
        25,
        "{}",
        out.failed[0].1
    );
    assert!(out.failed.iter().all(
        |(_, why)| within(why) || why.contains("an earlier chunk spent its whole retry budget")
    ));
}

/// A client of a table with one partition at its limit: it returns the
/// items of every tenth key unprocessed the first `refusals` times each is
/// sent, and writes every other item.
fn one_hot_partition(refusals: u32) -> Scripted {
    let seen = Mutex::new(std::collections::HashMap::<String, u32>::new());
    Scripted::new(move |_, pks| {
        let mut seen = seen.lock().unwrap();
        Ok(pks
            .iter()
            .enumerate()
            .filter(|(_, pk)| pk.ends_with('0'))
            .filter(|(_, pk)| {
                let times = seen.entry(pk.to_string()).or_default();
                *times += 1;
                *times <= refusals
            })
            .map(|(i, _)| i)
            .collect())
    })
}

#[tokio::test(start_paused = true)]
async fn refused_items_go_back_among_fresh_ones_and_nothing_written_is_sent_again() {
    let client = one_hot_partition(3);
    let writer = BatchWriter::new(&client, "t", keys(), policy(10));
    let out = writer.write(items(300, 100)).await;
    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_eq!(out.written, 300);
    assert_eq!(
        client.stored_keys(),
        all_keys(300),
        "every item stored once"
    );

    let sent = client.sent.lock().unwrap().clone();
    let mut times = std::collections::BTreeMap::<&str, u32>::new();
    for pk in sent.iter().flatten() {
        *times.entry(pk).or_default() += 1;
    }
    for (pk, n) in &times {
        let expected = if pk.ends_with('0') { 4 } else { 1 };
        assert_eq!(*n, expected, "{pk} sent {n} times");
    }
    // Until the last fresh item is sent, every call is full: the refused
    // items never go back in a call of their own while others wait.
    let mut first_seen = std::collections::HashSet::new();
    let last_with_fresh = sent
        .iter()
        .enumerate()
        .filter(|(_, call)| {
            call.iter()
                .filter(|pk| first_seen.insert(pk.to_string()))
                .count()
                > 0
        })
        .map(|(i, _)| i)
        .last()
        .unwrap();
    let sizes: Vec<usize> = sent.iter().map(Vec::len).collect();
    assert!(
        sizes[..last_with_fresh].iter().all(|&n| n == 25),
        "{sizes:?}"
    );
    assert!(
        last_with_fresh > 300 / 25,
        "resends carried fresh items: {sizes:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hot_partition_does_not_cut_the_limit() {
    let client = one_hot_partition(5);
    let control = Arc::new(AdaptiveConcurrency::new(8));
    let writer =
        BatchWriter::new(&client, "t", keys(), policy(10)).with_concurrency(control.clone());
    let out = writer.write(items(2000, 100)).await;
    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_eq!(out.written, 2000);
    assert_eq!(client.stored_keys(), all_keys(2000));
    let s = control.snapshot();
    assert_eq!((s.decreases, s.current), (0, 8), "{s:?}");
    assert!(s.partial > 0 && s.partial == s.throttled, "{s:?}");
    assert_eq!(s.in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn refusals_of_a_hot_partition_do_not_spend_the_attempts() {
    // A partition that refuses each of its items 15 times, with 4 attempts
    // and a time budget: the hot items wait their turn instead of failing,
    // whether they are refused among other items or in calls of their own
    // once every other item is written.
    let client = one_hot_partition(15);
    let writer = BatchWriter::new(
        &client,
        "t",
        keys(),
        policy(4).with_throttle_budget(Duration::from_secs(600)),
    );
    let out = writer.write(items(2000, 100)).await;
    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
    assert_eq!(out.written, 2000);
    assert_eq!(client.stored_keys(), all_keys(2000));
}

fn server_error() -> CallError {
    CallError {
        failure: Failure::Transient,
        message: "InternalServerError: try again".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn throttling_is_retried_past_the_attempts_until_the_budget_then_left_unwritten() {
    let client = Scripted::new(|_, _| Err(throttling()));
    let budget = Duration::from_secs(60);
    let writer = BatchWriter::new(&client, "t", keys(), policy(3).with_throttle_budget(budget));
    let start = Instant::now();
    let out = writer.write(items(25, 100)).await;

    // Attempts do not end it: the budget does, with a last try at its end.
    let calls = client.calls.load(Ordering::SeqCst);
    assert!(calls > 3 * 5, "{calls} calls");
    assert!(start.elapsed() >= budget, "{:?}", start.elapsed());
    assert!(
        start.elapsed() <= budget + Duration::from_millis(10),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(out.written, 0);
    assert!(out.failed.is_empty() && out.rejected.is_empty());
    let mut unwritten: Vec<String> = out.unwritten.iter().map(|(m, _)| pk(m)).collect();
    unwritten.sort();
    assert_eq!(unwritten, all_keys(25));
    let why = &out.unwritten[0].1;
    assert!(
        why.contains("not written within the retry budget of 1m")
            && why.contains("ProvisionedThroughputExceededException"),
        "{why}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_table_that_throttles_for_a_while_is_written_within_the_budget() {
    // The first 200 calls are refused whole: far more than the attempts,
    // far less than the budget.
    let client = Scripted::new(|n, _| match n {
        0..200 => Err(throttling()),
        _ => Ok(vec![]),
    });
    let writer = BatchWriter::new(
        &client,
        "t",
        keys(),
        policy(3).with_throttle_budget(Duration::from_secs(600)),
    );
    let out = writer.write(items(100, 100)).await;
    assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
    assert!(out.failed.is_empty(), "{:?}", out.failed.first());
    assert_eq!(out.written, 100);
    assert_eq!(client.stored_keys(), all_keys(100));
    assert!(out.throttled >= 200, "{}", out.throttled);
}

#[tokio::test(start_paused = true)]
async fn failures_other_than_throttling_keep_their_attempts_under_a_budget() {
    let client = Scripted::new(|_, _| Err(server_error()));
    let writer = BatchWriter::new(
        &client,
        "t",
        keys(),
        policy(4).with_throttle_budget(Duration::from_secs(600)),
    );
    let out = writer.write(items(10, 100)).await;
    assert_eq!(client.calls.load(Ordering::SeqCst), 4);
    assert!(out.unwritten.is_empty());
    assert_eq!(out.failed.len(), 10);
    assert_eq!(out.failed_by, Some(Failure::Transient));
    assert!(
        out.failed[0].1.contains("not written after 4 attempts"),
        "{}",
        out.failed[0].1
    );
}

#[tokio::test(start_paused = true)]
async fn once_a_budget_ran_out_earlier_items_stop_at_their_next_refusal_and_later_ones_get_theirs()
{
    let client = Scripted::new(|_, _| Err(throttling()));
    let budget = Duration::from_secs(60);
    let writer = BatchWriter::new(&client, "t", keys(), policy(3).with_throttle_budget(budget));
    let start = Instant::now();
    // A second batch starts 30 s after the first: the first's budget ends
    // at 60 s, and the second's items, sent before then, stop at their
    // next refusal instead of waiting until 90 s.
    let first = async {
        let out = writer.write(items(10, 100)).await;
        (out, start.elapsed())
    };
    let second = async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        let out = writer.write(items(10, 100)).await;
        (out, start.elapsed())
    };
    let ((a, a_took), (b, b_took)) = tokio::join!(first, second);
    assert!(
        a_took >= budget && a_took < budget + Duration::from_secs(1),
        "{a_took:?}"
    );
    assert!(b_took < budget + Duration::from_secs(1), "{b_took:?}");
    assert_eq!((a.unwritten.len(), b.unwritten.len()), (10, 10));
    assert!(
        b.unwritten[0]
            .1
            .contains("past another item's retry budget"),
        "{}",
        b.unwritten[0].1
    );
    // A batch that starts afterwards (a process that writes on) gets a
    // whole budget of its own.
    let later = Instant::now();
    let c = writer.write(items(10, 100)).await;
    assert_eq!(c.unwritten.len(), 10);
    assert!(later.elapsed() >= budget, "{:?}", later.elapsed());
}

#[tokio::test(start_paused = true)]
async fn items_a_partition_keeps_refusing_travel_a_few_a_call_among_fresh_ones() {
    // Every tenth key is refused 30 times: left in their chunks, they
    // piled up there until the chunk was all refused items.
    let client = one_hot_partition(30);
    let writer = BatchWriter::new(
        &client,
        "t",
        keys(),
        policy(3).with_throttle_budget(Duration::from_secs(600)),
    );
    let out = writer.write(items(2000, 100)).await;
    assert!(out.unwritten.is_empty(), "{:?}", out.unwritten.first());
    assert_eq!(out.written, 2000);
    assert_eq!(client.stored_keys(), all_keys(2000));

    let sent = client.sent.lock().unwrap().clone();
    // The call that took the last fresh items may fill up with refused
    // ones: nothing is left to send them among.
    let mut seen = std::collections::HashSet::new();
    let last_fresh = sent
        .iter()
        .enumerate()
        .filter(|(_, call)| call.iter().filter(|pk| seen.insert(pk.to_string())).count() > 0)
        .map(|(i, _)| i)
        .last()
        .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut mixed = 0;
    for (i, call) in sent.iter().enumerate() {
        let fresh = call.iter().filter(|pk| !seen.contains(*pk)).count();
        let resent = call.len() - fresh;
        if fresh > 0 && i < last_fresh {
            mixed += usize::from(resent > 0);
            assert!(
                resent <= sql2ddb_dynamo::RESENDS_PER_CALL,
                "call {i} carried {resent} items refused before among {fresh} fresh ones"
            );
            assert_eq!(
                call.len(),
                25,
                "call {i}: every call is full while fresh items remain"
            );
        }
        seen.extend(call.iter().cloned());
    }
    // The refused items did go back among fresh ones.
    assert!(mixed > 10, "{mixed} calls mixed refused and fresh items");
}
