//! One owner per retry, counted at the server: DynamoDB's SDK client makes
//! one attempt of each call and the retry engine retries it, so an endpoint
//! that always fails sees exactly `max_attempts` requests of a call, not
//! `max_attempts` times the SDK's attempts.

use std::time::Duration;

use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::{connect, delete_item, Endpoint, Failure, RetryPolicy};
use sql2ddb_testkit::support::{answering_server, Answer, Requests};

const POLICY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(1),
    cap: Duration::from_millis(5),
    max_attempts: 5,
    throttle_budget: None,
};

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr {
        name: "PK".into(),
        kind: KeyType::S,
    }]
}

/// Deletes one item through `answer`ing server: the error, and how many
/// requests reached the server.
async fn delete_against(answer: Answer, policy: RetryPolicy) -> (String, Option<Failure>, usize) {
    let (url, mut requests): (String, Requests) = answering_server(move |_| answer.clone()).await;
    let dynamo = connect(&Endpoint::Url(url), Some("us-east-1"))
        .await
        .unwrap();
    let mut key = Item::new();
    key.insert("PK".into(), AttrValue::S("K1".into()));
    let err = delete_item(&dynamo, "t", &keys(), &key, &policy)
        .await
        .unwrap_err();
    let mut seen = 0;
    while requests.try_recv().is_some() {
        seen += 1;
    }
    (err.to_string(), err.failure(), seen)
}

#[tokio::test]
async fn a_call_failing_with_5xx_reaches_the_server_max_attempts_times() {
    let down = Answer::json(500, r#"{"__type":"InternalServerError","message":"down"}"#);
    let (message, failure, seen) = delete_against(down, POLICY).await;
    assert_eq!(seen, 5, "{message}");
    assert_eq!(failure, Some(Failure::Transient));
    assert!(message.contains("not done after 5 attempts"), "{message}");
}

#[tokio::test]
async fn a_throttled_call_reaches_the_server_max_attempts_times_and_under_a_budget_until_it() {
    let throttled = Answer::json(
        400,
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#,
    );
    let (message, failure, seen) = delete_against(throttled.clone(), POLICY).await;
    assert_eq!(seen, 5, "{message}");
    assert_eq!(failure, Some(Failure::Throttled));

    // Under a budget, throttling is retried past the attempts until the
    // budget ends: still one request per attempt of the engine.
    let budget = POLICY.with_throttle_budget(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (message, _, seen) = delete_against(throttled, budget).await;
    assert!(seen > 5, "{seen} requests: {message}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(
        message.contains(&format!("not done after {seen} attempts")),
        "{seen}: {message}"
    );
}

#[tokio::test]
async fn a_refused_call_reaches_the_server_once() {
    let refused = Answer::json(
        400,
        r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad key"}"#,
    );
    let (message, failure, seen) = delete_against(refused, POLICY).await;
    assert_eq!(
        (seen, failure),
        (1, Some(Failure::ItemRejected)),
        "{message}"
    );
}
