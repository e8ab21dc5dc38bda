//! The writer's retry logic against a scripted client, with paused time.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{BatchWriteApi, BatchWriter, CallError, Failure, RetryPolicy};
use tokio::time::Instant;

/// What the scripted client answers to one call.
enum Answer {
    /// Leave the items at these indices unprocessed.
    Unprocessed(Vec<usize>),
    /// Fail the call.
    Fail { retryable: bool },
    /// Fail the call with a server error (a 500): retried, not a throttle.
    ServerError,
}

/// A client that answers from a script (then succeeds), failing any call that
/// contains a `bad` item with a validation error, and logs every call.
struct Scripted {
    script: Mutex<VecDeque<Answer>>,
    calls: Mutex<Vec<(Instant, Vec<String>)>>,
    stored: Mutex<Vec<Item>>,
}

impl Scripted {
    fn new(script: Vec<Answer>) -> Self {
        Scripted {
            script: Mutex::new(script.into()),
            calls: Mutex::new(Vec::new()),
            stored: Mutex::new(Vec::new()),
        }
    }
    fn calls(&self) -> Vec<(Instant, Vec<String>)> {
        self.calls.lock().unwrap().clone()
    }
    fn stored_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.stored.lock().unwrap().iter().map(id_of).collect();
        ids.sort();
        ids
    }
}

fn id_of(item: &Item) -> String {
    match &item["PK"] {
        AttrValue::S(s) => s.clone(),
        other => panic!("unexpected key {other:?}"),
    }
}

impl BatchWriteApi for &Scripted {
    async fn batch_put(
        &self,
        _table: &str,
        _keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        let items: Vec<Item> = items.iter().map(|i| i.decode().unwrap()).collect();
        let ids: Vec<String> = items.iter().map(id_of).collect();
        self.calls.lock().unwrap().push((Instant::now(), ids));
        if items.iter().any(|i| i.contains_key("bad")) {
            return Err(CallError {
                failure: Failure::ItemRejected,
                message: "ValidationException: bad item".into(),
            });
        }
        let answer = self.script.lock().unwrap().pop_front();
        let unprocessed = match answer {
            None => Vec::new(),
            Some(Answer::Unprocessed(idx)) => {
                idx.into_iter().filter(|&i| i < items.len()).collect()
            }
            Some(Answer::Fail { retryable }) => {
                return Err(CallError {
                    failure: if retryable {
                        Failure::Throttled
                    } else {
                        Failure::ItemRejected
                    },
                    message: "ThrottlingException: slow down".into(),
                })
            }
            Some(Answer::ServerError) => {
                return Err(CallError {
                    failure: Failure::Transient,
                    message: "InternalServerError: 500".into(),
                })
            }
        };
        let mut stored = self.stored.lock().unwrap();
        for (i, item) in items.iter().enumerate() {
            if !unprocessed.contains(&i) {
                stored.push(item.clone());
            }
        }
        Ok(unprocessed)
    }
}

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr {
        name: "PK".into(),
        kind: sql2ddb_core::KeyType::S,
    }]
}

fn raw_items(n: usize) -> Vec<Item> {
    (0..n)
        .map(|i| {
            let mut item = Item::new();
            item.insert("PK".into(), AttrValue::S(format!("K{i:03}")));
            item.insert("v".into(), AttrValue::N(i.to_string()));
            item
        })
        .collect()
}

/// The items as the reader hands them on: serialised, with their keys.
fn encoded(items: Vec<Item>) -> Vec<EncodedItem> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| EncodedItem::new(item, &keys(), serde_json::json!({ "id": i }), 100))
        .collect()
}

fn items(n: usize) -> Vec<EncodedItem> {
    encoded(raw_items(n))
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(2),
        max_attempts: 6,
        throttle_budget: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_server_error_is_retried_and_counted_as_a_retry_not_a_throttle() {
    let client = Scripted::new(vec![Answer::ServerError, Answer::Fail { retryable: true }]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let out = writer.write(items(10)).await;

    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(out.written, 10);
    assert_eq!(out.retries, 2);
    assert_eq!(out.throttled, 1, "only the throttled call is a throttle");
}

#[tokio::test(start_paused = true)]
async fn unprocessed_items_come_back_twice_then_all_are_written() {
    let client = Scripted::new(vec![
        Answer::Unprocessed(vec![1, 3, 5]),
        Answer::Unprocessed(vec![0]),
    ]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let out = writer.write(items(10)).await;

    assert!(out.failed.is_empty(), "{:?}", out.failed);
    assert_eq!(out.written, 10);
    assert_eq!(out.retries, 2);
    assert_eq!(out.throttled, 2);
    assert_eq!(out.bytes, 1000);
    assert_eq!(out.write_units, 10);
    let calls = client.calls();
    assert_eq!(calls.len(), 3);
    // Only the unprocessed items are sent again.
    assert_eq!(calls[1].1, vec!["K001", "K003", "K005"]);
    assert_eq!(calls[2].1, vec!["K001"]);
    assert_eq!(
        client.stored_ids(),
        (0..10).map(|i| format!("K{i:03}")).collect::<Vec<_>>()
    );
}

#[tokio::test(start_paused = true)]
async fn backoff_waits_grow_within_capped_ceilings() {
    // Always throttled, and no time budget: throttling counts as attempts
    // and the writer uses them all. The items are left unwritten, no fault
    // of theirs: neither failed nor rejected.
    let script = (0..6).map(|_| Answer::Fail { retryable: true }).collect();
    let client = Scripted::new(script);
    let p = policy();
    let writer = BatchWriter::new(&client, "t", keys(), p);
    let start = Instant::now();
    let out = writer.write(items(2)).await;

    let calls = client.calls();
    assert_eq!(calls.len(), 6, "exactly max_attempts calls");
    assert_eq!(out.retries, 5);
    assert_eq!(out.written, 0);
    assert!(out.failed.is_empty() && out.rejected.is_empty());
    assert_eq!(out.unwritten.len(), 2);
    assert!(
        out.unwritten[0].1.contains("not written after 6 attempts"),
        "{}",
        out.unwritten[0].1
    );
    assert!(out.unwritten[0].1.contains("ThrottlingException"));
    // Each wait is at most its ceiling: 100ms, 200ms, 400ms, 800ms, then capped at 2s.
    let mut prev = start;
    for (n, (at, _)) in calls.iter().enumerate().skip(1) {
        let waited = *at - calls[n - 1].0;
        assert!(waited <= p.ceiling(n as u32), "wait {n} was {waited:?}");
        prev = *at;
    }
    assert!(prev - start <= Duration::from_millis(100 + 200 + 400 + 800 + 1600));
}

/// The waits between the calls of a chunk failed `max_attempts` times by
/// the service (a 500: retried with backoff; a throttled item waits for
/// the pacer instead), with jitter seeded by `seed`.
async fn waits_with_seed(seed: u64) -> Vec<Duration> {
    let script = (0..6).map(|_| Answer::ServerError).collect();
    let client = Scripted::new(script);
    let writer = BatchWriter::new(&client, "t", keys(), policy())
        .with_jitter(std::sync::Arc::new(sql2ddb_aws::SeededJitter::new(seed)));
    writer.write(items(2)).await;
    let calls = client.calls();
    calls.windows(2).map(|w| w[1].0 - w[0].0).collect()
}

#[tokio::test(start_paused = true)]
async fn a_seeded_jitter_repeats_the_writers_waits() {
    let waits = waits_with_seed(11).await;
    assert_eq!(waits.len(), 5);
    assert_eq!(waits_with_seed(11).await, waits);
    assert_ne!(waits_with_seed(12).await, waits);
}

#[test]
fn ceilings_double_then_cap_and_delays_are_jittered() {
    let p = RetryPolicy {
        base: Duration::from_millis(50),
        cap: Duration::from_secs(1),
        max_attempts: 10,
        throttle_budget: None,
    };
    let ceilings: Vec<u128> = (1..=8).map(|n| p.ceiling(n).as_millis()).collect();
    assert_eq!(ceilings, vec![50, 100, 200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(
        p.ceiling(200),
        Duration::from_secs(1),
        "no overflow on huge attempt numbers"
    );

    let jitter = sql2ddb_aws::SeededJitter::new(7);
    let delays: Vec<Duration> = (0..50).map(|_| p.delay(6, &jitter)).collect();
    assert!(delays.iter().all(|d| *d <= Duration::from_secs(1)));
    let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
    assert!(
        distinct.len() > 40,
        "full jitter spreads the delays: {distinct:?}"
    );
    let mean = delays.iter().sum::<Duration>() / 50;
    assert!(
        mean > Duration::from_millis(300) && mean < Duration::from_millis(700),
        "mean {mean:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_validation_error_is_not_retried_and_fails_only_its_item() {
    let client = Scripted::new(vec![]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let mut batch = raw_items(5);
    batch[2].insert("bad".into(), AttrValue::Bool(true));
    let start = Instant::now();
    let out = writer.write(encoded(batch)).await;

    assert_eq!(out.written, 4);
    assert_eq!(out.retries, 0);
    assert!(out.failed.is_empty());
    assert_eq!(out.rejected.len(), 1);
    assert_eq!(id_of(&out.rejected[0].0.decode().unwrap()), "K002");
    assert!(out.rejected[0].1.message.contains("ValidationException"));
    // One call for the chunk, then one per item to isolate the bad one; no sleeping.
    assert_eq!(client.calls().len(), 1 + 5);
    assert_eq!(
        Instant::now(),
        start,
        "no backoff for a non-retryable error"
    );
    assert_eq!(client.stored_ids(), vec!["K000", "K001", "K003", "K004"]);
}

#[tokio::test(start_paused = true)]
async fn chunks_of_25_and_duplicate_keys_resolved_last_wins() {
    let client = Scripted::new(vec![]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let mut batch = raw_items(60);
    // Row 59 has the same key as row 10, with another value.
    batch[59].insert("PK".into(), AttrValue::S("K010".into()));
    let out = writer.write(encoded(batch)).await;

    assert_eq!(out.written, 60, "the superseded row counts as written");
    assert_eq!(out.superseded, 1);
    let calls = client.calls();
    let mut sizes: Vec<usize> = calls.iter().map(|c| c.1.len()).collect();
    sizes.sort();
    assert_eq!(sizes, vec![9, 25, 25]);
    assert!(
        calls.iter().all(|c| {
            let mut ids = c.1.clone();
            ids.sort();
            ids.dedup();
            ids.len() == c.1.len()
        }),
        "no call carries two requests for one key"
    );
    let stored = client.stored.lock().unwrap();
    let k10: Vec<_> = stored.iter().filter(|i| id_of(i) == "K010").collect();
    assert_eq!(k10.len(), 1);
    assert_eq!(k10[0]["v"], AttrValue::N("59".into()));
}

/// A client whose table cannot be written: every call fails the same way.
struct MissingTable(Mutex<u32>);

impl BatchWriteApi for &MissingTable {
    async fn batch_put(
        &self,
        _table: &str,
        _keys: &[KeyAttr],
        _items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        *self.0.lock().unwrap() += 1;
        Err(CallError {
            failure: Failure::TableFault,
            message: "ResourceNotFoundException: Requested resource not found".into(),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_table_that_cannot_be_written_fails_the_chunk_without_splitting_it() {
    let client = MissingTable(Mutex::new(0));
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let out = writer.write(items(30)).await;
    assert_eq!(out.rejected.len(), 30);
    assert!(out
        .rejected
        .iter()
        .all(|(_, why)| why.message.starts_with("ResourceNotFoundException")));
    assert_eq!(
        *client.0.lock().unwrap(),
        2,
        "one call per 25-item chunk, no item-by-item retries"
    );
}

#[tokio::test(start_paused = true)]
async fn items_queued_without_their_keys_get_them_from_their_text() {
    // A page queued by an older release carries no key values: the writer
    // reads them from each item, so duplicates are still resolved.
    let client = Scripted::new(vec![]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let mut raw = raw_items(4);
    raw[3].insert("PK".into(), AttrValue::S("K001".into()));
    let mut batch = encoded(raw);
    for m in &mut batch {
        m.key.clear();
    }
    let out = writer.write(batch).await;
    assert_eq!(out.written, 4);
    assert_eq!(out.superseded, 1);
    assert_eq!(client.stored_ids(), vec!["K000", "K001", "K002"]);
    let stored = client.stored.lock().unwrap();
    let k1 = stored.iter().find(|i| id_of(i) == "K001").unwrap();
    assert_eq!(k1["v"], AttrValue::N("3".into()), "the last row wins");
}

#[tokio::test(start_paused = true)]
async fn an_item_a_message_got_wrong_is_refused_alone_before_any_call() {
    let client = Scripted::new(vec![]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let mut raw = raw_items(4);
    raw[1].remove("PK");
    raw[2].insert("PK".into(), AttrValue::S(String::new()));
    let mut batch = encoded(raw);
    batch[3].size = 400 * 1024 + 1;
    let out = writer.write(batch).await;
    assert_eq!(out.written, 1);
    let mut why: Vec<(String, String)> = out
        .rejected
        .iter()
        .map(|(m, e)| (m.source_key.to_string(), e.message.clone()))
        .collect();
    why.sort();
    assert_eq!(
        why,
        vec![
            (r#"{"id":1}"#.into(), "key attribute PK is missing".into()),
            (r#"{"id":2}"#.into(), "key attribute PK is empty".into()),
            (
                r#"{"id":3}"#.into(),
                "item is 409601 bytes by DynamoDB's size rules, over the 400 KB (409600 bytes) limit"
                    .into()
            ),
        ]
    );
    assert!(out
        .rejected
        .iter()
        .all(|(_, e)| e.failure == Failure::ItemRejected));
    assert_eq!(client.calls().len(), 1, "one call, for the good item");
    assert_eq!(client.stored_ids(), vec!["K000"]);
}

#[tokio::test(start_paused = true)]
async fn a_call_never_carries_a_body_over_16_mb() {
    // Control characters are one byte by DynamoDB's rules and six in JSON
    // (`\u0001`): 25 such items of 130 KB would make a 19.5 MB body.
    let client = Scripted::new(vec![]);
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    let mut raw = raw_items(30);
    for item in &mut raw {
        item.insert("blob".into(), AttrValue::S("\u{1}".repeat(130_000)));
    }
    let batch = encoded(raw);
    let bodies: Vec<usize> = batch
        .chunks(25)
        .map(|c| sql2ddb_dynamo::body::batch_put_body("t", &c.iter().collect::<Vec<_>>()).len())
        .collect();
    assert!(bodies[0] > 16 * 1024 * 1024, "25 of them: {bodies:?}");
    let out = writer.write(batch.clone()).await;
    assert_eq!(out.written, 30);
    let calls = client.calls();
    let by_id: std::collections::BTreeMap<String, &EncodedItem> = batch
        .iter()
        .map(|m| (id_of(&m.decode().unwrap()), m))
        .collect();
    for (_, ids) in &calls {
        let items: Vec<&EncodedItem> = ids.iter().map(|id| by_id[id]).collect();
        let body = sql2ddb_dynamo::body::batch_put_body("t", &items).len();
        assert!(body <= 16 * 1024 * 1024, "a body of {body} bytes");
    }
    let mut sizes: Vec<usize> = calls.iter().map(|c| c.1.len()).collect();
    sizes.sort();
    assert_eq!(sizes, vec![9, 21]);
}

#[tokio::test(start_paused = true)]
async fn once_a_chunk_spent_its_budget_later_chunks_get_one_attempt_until_a_call_succeeds() {
    // A service that keeps failing (5xx), not throttling.
    let fail = || Answer::ServerError;
    let client = Scripted::new((0..9).map(|_| fail()).collect());
    let writer = BatchWriter::new(&client, "t", keys(), policy());
    // Four chunks, one after the other: the first spends its 6 attempts,
    // the three others one each.
    let out = writer.write(items(100)).await;
    assert_eq!(out.failed.len(), 100);
    assert_eq!(out.written, 0);
    assert_eq!(client.calls().len(), 6 + 3);
    assert!(
        out.failed[99]
            .1
            .contains("an earlier chunk spent its whole retry budget"),
        "{}",
        out.failed[99].1
    );
    // The service is back: a call succeeds, and the budget is whole again.
    let out = writer.write(items(30)).await;
    assert_eq!(out.written, 30);
    client.script.lock().unwrap().extend((0..5).map(|_| fail()));
    let before = client.calls().len();
    let out = writer.write(items(25)).await;
    assert_eq!(out.written, 25, "written at the 6th attempt");
    assert_eq!(client.calls().len() - before, 6);
}
