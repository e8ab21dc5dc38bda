//! What the handler tests run against: the local PostgreSQL (a schema of
//! the test's own), an in-process DynamoDB-compatible server (dynoxide),
//! moto's SQS and SNS, and the test playing the Lambda service: contexts
//! with real deadlines, SQS events built from received messages.
#![allow(dead_code, unused_imports)] // each test binary uses part of it

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use lambda_runtime::{Context, LambdaEvent};
use sql2ddb_core::{AttrValue, Item};
pub use sql2ddb_testkit::support::{
    aws_config, items_sql, mapping_head, pg_url, unique_name as unique, Dynamo, Moto, PgSchema,
};

/// Every item of `table`, by its `PK`.
pub async fn items(dynamo: &Dynamo, table: &str) -> HashMap<String, Item> {
    dynamo
        .scan_all(table)
        .await
        .into_iter()
        .map(|item| match &item["PK"] {
            AttrValue::S(pk) => (pk.clone(), item),
            other => panic!("PK is not a string: {other:?}"),
        })
        .collect()
}

/// `S` value.
pub fn s(v: impl Into<String>) -> AttrValue {
    AttrValue::S(v.into())
}

/// `N` value.
pub fn n(v: impl ToString) -> AttrValue {
    AttrValue::N(v.to_string())
}

/// A Lambda context whose deadline is `left` from now.
pub fn context(left: Duration) -> Context {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let mut c = Context::default();
    c.request_id = unique("request");
    c.deadline = (now + left).as_millis() as u64;
    c
}

/// An event with a context of `left` time.
pub fn event<T>(payload: T, left: Duration) -> LambdaEvent<T> {
    LambdaEvent::new(payload, context(left))
}

/// An SQS client of moto.
pub async fn sqs(moto: &str) -> aws_sdk_sqs::Client {
    sql2ddb_queue::connect(Some(moto), Some("us-east-1"), None)
        .await
        .unwrap()
}

/// A work queue (and its dead-letter queue) named after `table`, whose
/// messages come back after `visibility` and go to the dead letters after
/// five receives.
pub async fn work_queue(
    sqs: &aws_sdk_sqs::Client,
    table: &str,
    visibility: Duration,
) -> sql2ddb_queue::QueueUrls {
    sql2ddb_queue::create_queue(sqs, &table.replace('_', "-"), visibility, 5)
        .await
        .unwrap_or_else(|e| panic!("the queue of {table}: {e}"))
}

/// Receives up to 10 messages (waiting up to `wait` for the first), as the
/// event source mapping does.
pub async fn receive(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    wait: i32,
) -> Vec<aws_sdk_sqs::types::Message> {
    sqs.receive_message()
        .queue_url(queue)
        .max_number_of_messages(10)
        .wait_time_seconds(wait)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

/// The SQS event Lambda would deliver for `messages`.
pub fn sqs_event(messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for m in messages {
        let mut record = SqsMessage::default();
        record.message_id = m.message_id.clone();
        record.receipt_handle = m.receipt_handle.clone();
        record.body = m.body.clone();
        record.event_source = Some("aws:sqs".into());
        event.records.push(record);
    }
    event
}

/// Deletes the messages the worker did not report failed, as the event
/// source mapping does with a partial batch response; returns the failed ids.
pub async fn settle(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    messages: &[aws_sdk_sqs::types::Message],
    failed: &[String],
) {
    for m in messages {
        let id = m.message_id.clone().unwrap_or_default();
        if !failed.contains(&id) {
            sqs.delete_message()
                .queue_url(queue)
                .receipt_handle(m.receipt_handle.clone().unwrap())
                .send()
                .await
                .unwrap();
        }
    }
}

/// A mapping of `schema.items (id, name, qty)` to items `ITEM#{id}` of
/// `table`, read in pages of `page` rows by two readers.
pub fn items_mapping(schema: &str, table: &str, dynamo: &str, page: u64) -> String {
    let head = mapping_head(
        &format!("page_size = {page}\nread_parallelism = 2"),
        table,
        dynamo,
    );
    format!(
        r#"{head}
[[entity]]
name = "item"
from = "{schema}.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
[entity.attributes]
entity = "item"
"#
    )
}

/// Invokes the worker handler with `messages` (a minute to go) and returns
/// the ids of the messages it reported failed.
pub async fn invoke_worker(
    writer: &sql2ddb_engine::serverless::MessageWriter,
    messages: &[aws_sdk_sqs::types::Message],
) -> Vec<String> {
    let response =
        sql2ddb_lambda::worker::handle(writer, event(sqs_event(messages), Duration::from_secs(60)))
            .await
            .unwrap();
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// The event source mapping: receives, invokes the worker, deletes what it
/// did not report failed; returns how many messages it received.
pub async fn drain(
    writer: &sql2ddb_engine::serverless::MessageWriter,
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
) -> u64 {
    let messages = receive(sqs, queue, 1).await;
    if messages.is_empty() {
        return 0;
    }
    let failed = invoke_worker(writer, &messages).await;
    assert!(failed.is_empty(), "no write fails here: {failed:?}");
    settle(sqs, queue, &messages, &failed).await;
    messages.len() as u64
}

/// Asserts that `items` holds exactly the items of rows `1..=rows`.
pub fn assert_items(items: &HashMap<String, Item>, rows: u64) {
    assert_eq!(items.len() as u64, rows);
    for i in 1..=rows {
        let item = &items[&format!("ITEM#{i}")];
        assert_eq!(item["SK"], s("ITEM"));
        assert_eq!(item["entity"], s("item"));
        assert_eq!(item["id"], n(i));
        assert_eq!(item["name"], s(format!("Name {i}")));
        assert_eq!(item["qty"], n(i % 100));
        assert_eq!(item.len(), 6, "{item:?}");
    }
}

/// The Lambda service's side of `Invoke`: the invocations the reader asked
/// for, kept for the test to deliver (or to check that none was asked).
#[derive(Default)]
pub struct RecordedInvocations(pub std::sync::Mutex<Vec<sql2ddb_lambda::reader::ReaderEvent>>);

impl sql2ddb_lambda::reader::Invoker for RecordedInvocations {
    fn invoke(
        &self,
        event: &sql2ddb_lambda::reader::ReaderEvent,
    ) -> sql2ddb_lambda::reader::InvokeFuture<'_> {
        self.0.lock().unwrap().push(event.clone());
        Box::pin(async { Ok(()) })
    }
}
