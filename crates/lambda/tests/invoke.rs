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

use std::collections::HashMap;

use sql2ddb_lambda::reader::{Invoker, LambdaInvoker, ReaderEvent};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// One HTTP request as received: method, path, headers (lower-case
/// names) and body.
struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// Accepts one connection on `listener`, reads one request and answers
/// 202 with an empty body, as Lambda answers an `Event` invocation.
async fn accept_one(listener: tokio::net::TcpListener) -> Request {
    let (stream, _) = listener.accept().await.unwrap();
    let mut stream = BufReader::new(stream);
    let mut line = String::new();
    stream.read_line(&mut line).await.unwrap();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap().to_string();
    let path = parts.next().unwrap().to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let length: usize = headers["content-length"].parse().unwrap();
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.unwrap();
    let answer = "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nx-amzn-requestid: 0f1e2d3c\r\nconnection: close\r\n\r\n";
    stream.get_mut().write_all(answer.as_bytes()).await.unwrap();
    stream.get_mut().shutdown().await.unwrap();
    Request {
        method,
        path,
        headers,
        body,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_invocation_is_an_event_invoke_of_the_function_with_run_id_and_resume() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let captured = tokio::spawn(accept_one(listener));
    let function = unique("sql2ddb-reader").replace('_', "-");
    let invoker = LambdaInvoker::new(
        aws_sdk_lambda::Client::new(&aws_config(&url).await),
        function.clone(),
    );
    let next = ReaderEvent {
        mapping: None,
        run_id: Some("shop-2024-05-01".into()),
        resume: true,
    };
    invoker.invoke(&next).await.unwrap();

    let request = captured.await.unwrap();
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
            run_id: Some("shop-2024-05-01".into()),
            resume: true,
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&function), "{e}");
    assert!(e.contains("ResourceNotFoundException"), "{e}");
}
