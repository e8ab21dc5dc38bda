//! One owner per retry, counted where it shows: at the server. Against an
//! endpoint that always fails, a receive reaches it exactly as many times as
//! the queue's receive retry says (the SDK tries each attempt once), and
//! another call exactly as many times as the SDK's standard retry says (our
//! loop does not wrap it): never one times the other.

use std::time::Duration;

use sql2ddb_queue::client::CALL_ATTEMPTS;
use sql2ddb_queue::{connect, RetryPolicy, SqsQueue, WorkQueue};
use sql2ddb_testkit::support::{answering_server, Answer, Captured, Requests};

const DOWN: &str = r#"{"__type":"InternalError","message":"the service is down"}"#;

fn target(req: &Captured) -> &str {
    req.headers.get("x-amz-target").map_or("", String::as_str)
}

/// A server that answers the queue's opening `GetQueueAttributes`
/// (`VisibilityTimeout`) and fails every other call with a 500.
async fn failing_sqs() -> (String, Requests) {
    answering_server(|req| {
        let body = String::from_utf8_lossy(&req.body);
        match target(req) {
            "AmazonSQS.GetQueueAttributes" if !body.contains("ApproximateNumberOfMessages") => {
                Answer::json(200, r#"{"Attributes":{"VisibilityTimeout":"30"}}"#)
            }
            _ => Answer::json(500, DOWN),
        }
    })
    .await
}

/// How many of the requests received so far were `operation`.
fn count(requests: &mut Requests, operation: &str) -> usize {
    let mut n = 0;
    while let Some(req) = requests.try_recv() {
        n += usize::from(target(&req) == format!("AmazonSQS.{operation}"));
    }
    n
}

#[tokio::test]
async fn a_failing_receive_reaches_sqs_max_attempts_times_and_other_calls_the_sdks_attempts() {
    let (url, mut requests) = failing_sqs().await;
    let client = connect(Some(&url), Some("us-east-1"), None).await.unwrap();
    let retry = RetryPolicy {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(5),
        max_attempts: 4,
        throttle_budget: None,
    };
    let queue = SqsQueue::open(client, format!("{url}/123456789012/jobs"))
        .await
        .unwrap()
        .with_receive_retry(retry);
    assert_eq!(count(&mut requests, "GetQueueAttributes"), 1);

    let err = queue.receive(10, Duration::ZERO).await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("not done after 4 attempts"), "{message}");
    assert!(message.contains("the service is down"), "{message}");
    // Four requests: the engine's attempts, each tried once by the SDK
    // (with the SDK's three on top, twelve would have come).
    assert_eq!(count(&mut requests, "ReceiveMessage"), 4);

    // A call the SDK owns: its three attempts, no loop of ours around them.
    let err = queue.depth().await.unwrap_err();
    assert!(err.to_string().contains("GetQueueAttributes"), "{err}");
    assert_eq!(
        count(&mut requests, "GetQueueAttributes"),
        CALL_ATTEMPTS as usize
    );
}

#[tokio::test]
async fn a_receive_refused_as_it_is_is_not_retried() {
    let (url, mut requests) = answering_server(|req| match target(req) {
        "AmazonSQS.GetQueueAttributes" => {
            Answer::json(200, r#"{"Attributes":{"VisibilityTimeout":"30"}}"#)
        }
        _ => Answer::json(
            400,
            r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no such queue"}"#,
        ),
    })
    .await;
    let client = connect(Some(&url), Some("us-east-1"), None).await.unwrap();
    let queue = SqsQueue::open(client, format!("{url}/123456789012/jobs"))
        .await
        .unwrap();
    let err = queue.receive(10, Duration::ZERO).await.unwrap_err();
    assert!(!err.to_string().contains("attempts"), "{err}");
    assert_eq!(count(&mut requests, "ReceiveMessage"), 1);
}
