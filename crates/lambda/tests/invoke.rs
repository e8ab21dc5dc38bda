//! `LambdaInvoker`, the reader's request for its next invocation, over the
//! wire: the Lambda API's asynchronous `Invoke` of the function with
//! `{run_id, resume: true}`, and a failed `Invoke` naming the function.
//!
//! moto's Lambda without Docker (`use_docker: false`) answers 202 to any
//! `Invoke`, of an existing function or not, and keeps no record of the
//! payload; so the request is captured by a listener of the test that
//! answers as Lambda does (202, empty body), and the failure comes from
//! moto's Lambda (a function it does not have: 404).

mod support;

use sql2ddb_lambda::reader::{Invoker, LambdaInvoker, ReaderEvent};
use support::*;

/// A listener that answers as Lambda answers an `Event` invocation: 202,
/// an empty body.
async fn lambda_api() -> (String, sql2ddb_testkit::support::Requests) {
    use sql2ddb_testkit::support::{answering_server, Answer};
    answering_server(|_| {
        Answer::json(202, "")
            .header("x-amzn-requestid", "0f1e2d3c")
            .closing()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_invocation_is_an_event_invoke_of_the_function_with_run_id_and_resume() {
    let (url, mut requests) = lambda_api().await;
    let function = unique("sql2ddb-reader").replace('_', "-");
    let invoker = LambdaInvoker::new(
        aws_sdk_lambda::Client::new(&aws_config(&url).await),
        function.clone(),
    );
    let next = ReaderEvent {
        mapping: None,
        run_id: Some("shop-2024-05-01".parse().unwrap()),
        resume: true,
    };
    invoker.invoke(&next).await.unwrap();

    let request = requests.recv().await.unwrap();
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.path,
        format!("/2015-03-31/functions/{function}/invocations")
    );
    assert_eq!(request.headers["x-amz-invocation-type"], "Event");
    assert!(request.headers["authorization"].starts_with("AWS4-HMAC-SHA256"));
    let payload: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        payload,
        serde_json::json!({"run_id": "shop-2024-05-01", "resume": true})
    );
    // The function reads it back as the event it was sent.
    let received: ReaderEvent = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(received, next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_invoke_names_the_function() {
    let moto = Moto::start();
    let function = unique("sql2ddb-reader-gone").replace('_', "-");
    let invoker = LambdaInvoker::new(
        aws_sdk_lambda::Client::new(&aws_config(moto.url()).await),
        function.clone(),
    );
    let e = invoker
        .invoke(&ReaderEvent {
            mapping: None,
            run_id: Some("shop-2024-05-01".parse().unwrap()),
            resume: true,
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&function), "{e}");
    assert!(e.contains("ResourceNotFoundException"), "{e}");
}
