//! What the handler tests run against: the local PostgreSQL (a schema of
//! the test's own), an in-process DynamoDB-compatible server (dynoxide),
//! moto's SQS and SNS, and the test playing the Lambda service: contexts
//! with real deadlines, SQS events built from received messages.
#![allow(dead_code)]

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use lambda_runtime::{Context, LambdaEvent};
use sql2ddb_dynamo::{connect, Endpoint};
use sql2ddb_testkit::sdk::AttributeValue;
use sql2ddb_testkit::sdk::{self, Client};

#[path = "../../../queue/tests/moto_server/mod.rs"]
pub mod moto_server;

/// A name unique to this test and process.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos:x}", std::process::id())
}

/// PostgreSQL as the tests reach it.
pub fn pg_url() -> String {
    std::env::var("SQL2DDB_TEST_PG_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".into())
}

/// A PostgreSQL schema of the test's own, dropped at the end.
pub struct PgSchema {
    pub pool: sqlx::PgPool,
    pub name: String,
}

impl PgSchema {
    pub async fn create(prefix: &str, sql: &str) -> PgSchema {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&pg_url())
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL ({e}); scripts/services.sh starts it"));
        let name = unique(prefix);
        let sql = format!("CREATE SCHEMA {name}; {}", sql.replace("{schema}", &name));
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap();
        PgSchema { pool, name }
    }

    pub async fn drop_schema(self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&self.pool)
            .await;
        self.pool.close().await;
    }
}

/// A dynoxide server in this process, on a loopback port.
pub struct Dynamo {
    pub url: String,
    /// A bare SDK client, to look at tables directly.
    pub client: Client,
    /// sql2ddb's handle.
    pub handle: sql2ddb_dynamo::Dynamo,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl Dynamo {
    pub async fn start() -> Dynamo {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let db = dynoxide::Database::memory().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = rx.await;
        }));
        let handle = connect(&Endpoint::Url(url.clone()), Some("us-east-1"))
            .await
            .unwrap();
        Dynamo {
            client: sdk::client(&url),
            url,
            handle,
            _shutdown: tx,
        }
    }

    /// Every item of `table`, by its `PK`.
    pub async fn items(&self, table: &str) -> HashMap<String, HashMap<String, AttributeValue>> {
        let all = scan_all(self, table).await;
        all.into_iter()
            .map(|item| (item["PK"].as_s().unwrap().clone(), item))
            .collect()
    }
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
    format!(
        r#"
version = 1
[source]
url = "{pg}"
page_size = {page}
read_parallelism = 2
[target]
table = "{table}"
endpoint = "{dynamo}"
region = "us-east-1"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "item"
from = "{schema}.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
[entity.attributes]
entity = "item"
"#,
        pg = pg_url()
    )
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
    let response = sql2ddb_lambda::worker::handle(
        writer,
        event(sqs_event(&messages), Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let failed: Vec<String> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect();
    assert!(failed.is_empty(), "no write fails here: {failed:?}");
    settle(sqs, queue, &messages, &failed).await;
    messages.len() as u64
}

/// Asserts that `items` holds exactly the items of rows `1..=rows`.
pub fn assert_items(items: &HashMap<String, HashMap<String, AttributeValue>>, rows: u64) {
    assert_eq!(items.len() as u64, rows);
    for i in 1..=rows {
        let item = &items[&format!("ITEM#{i}")];
        assert_eq!(item["SK"].as_s().unwrap(), "ITEM");
        assert_eq!(item["entity"].as_s().unwrap(), "item");
        assert_eq!(item["id"].as_n().unwrap(), &i.to_string());
        assert_eq!(item["name"].as_s().unwrap(), &format!("Name {i}"));
        assert_eq!(item["qty"].as_n().unwrap(), &(i % 100).to_string());
        assert_eq!(item.len(), 6, "{item:?}");
    }
}

/// The SQL of `schema.items` with rows `1..=rows` (for [`PgSchema::create`]).
pub fn items_sql(rows: u64) -> String {
    format!(
        "CREATE TABLE {{schema}}.items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
         INSERT INTO {{schema}}.items SELECT i, 'Name ' || i, i % 100 FROM generate_series(1, {rows}) AS i;"
    )
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

/// Every item of `table`, in scan order ([`Dynamo::items`] keys them by
/// `PK`, which a table with a sort key repeats).
pub async fn scan_all(dynamo: &Dynamo, table: &str) -> Vec<HashMap<String, AttributeValue>> {
    let mut all = Vec::new();
    let mut start = None;
    loop {
        let out = dynamo
            .client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        all.extend(out.items().iter().cloned());
        start = out.last_evaluated_key;
        if start.is_none() {
            return all;
        }
    }
}
