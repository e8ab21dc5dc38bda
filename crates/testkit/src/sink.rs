//! A DynamoDB endpoint that accepts every write and keeps nothing: the
//! ceiling of what sql2ddb can push when DynamoDB is not the bottleneck.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Value as Json};
use sql2ddb_core::KeyAttr;

use crate::wire::{
    error_response, json_response, operation, request_units, write_requests, Body, Hangup, Server,
};
use crate::TestkitError;

/// What the sink received.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SinkStats {
    /// Requests received, of any operation.
    pub requests: u64,
    /// `BatchWriteItem` calls.
    pub batch_write_calls: u64,
    /// Write requests in those calls.
    pub items: u64,
    /// Their size by DynamoDB's rules.
    pub bytes: u64,
    /// Their billed write units (1 KB rounding per item).
    pub write_units: u64,
}

struct Shared {
    keys: Vec<KeyAttr>,
    tables: Mutex<BTreeSet<String>>,
    stats: Mutex<SinkStats>,
}

/// A running sink on 127.0.0.1; stops when dropped.
pub struct NullSink {
    shared: Arc<Shared>,
    server: Server,
}

impl NullSink {
    /// Starts a sink on a free port whose tables all have the key schema
    /// `keys` (partition key first).
    pub async fn start(keys: Vec<KeyAttr>) -> Result<NullSink, TestkitError> {
        NullSink::start_on(0, keys).await
    }

    /// Starts a sink on `port` (0: a free one).
    pub async fn start_on(port: u16, keys: Vec<KeyAttr>) -> Result<NullSink, TestkitError> {
        let shared = Arc::new(Shared {
            keys,
            tables: Mutex::new(BTreeSet::new()),
            stats: Mutex::new(SinkStats::default()),
        });
        let state = shared.clone();
        let server = Server::start(port, move |req| answer(state.clone(), req))
            .await
            .map_err(TestkitError::Bind)?;
        Ok(NullSink { shared, server })
    }

    /// The sink's URL, to use as the DynamoDB endpoint.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// What it received so far.
    pub fn stats(&self) -> SinkStats {
        self.shared.stats().clone()
    }
}

impl Shared {
    // Plain values, consistent after every statement.
    fn stats(&self) -> MutexGuard<'_, SinkStats> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn seen(&self, table: &str) {
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(table.to_string());
    }

    /// An ACTIVE, empty, on-demand table with the sink's key schema.
    fn describe(&self, table: &str) -> Json {
        let schema: Vec<Json> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| json!({ "AttributeName": k.name, "KeyType": if i == 0 { "HASH" } else { "RANGE" } }))
            .collect();
        let attrs: Vec<Json> = self
            .keys
            .iter()
            .map(|k| json!({ "AttributeName": k.name, "AttributeType": k.kind }))
            .collect();
        json!({
            "TableName": table,
            "TableArn": format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}"),
            "TableStatus": "ACTIVE",
            "KeySchema": schema,
            "AttributeDefinitions": attrs,
            "ItemCount": 0,
            "TableSizeBytes": 0,
            "CreationDateTime": 0,
            "BillingModeSummary": { "BillingMode": "PAY_PER_REQUEST" },
        })
    }
}

async fn answer(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, Hangup> {
    let op = operation(&req);
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|_| Hangup)?
        .to_bytes();
    shared.stats().requests += 1;
    let Ok(body) = serde_json::from_slice::<Json>(&body) else {
        return Ok(error_response(
            StatusCode::BAD_REQUEST,
            "com.amazon.coral.service#SerializationException",
            "the request body is not JSON",
        ));
    };
    let table = body
        .get("TableName")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let resp = match op.as_str() {
        "BatchWriteItem" => {
            let requests = write_requests(&body);
            let mut sizes = Vec::with_capacity(requests.len());
            for (table, r) in &requests {
                shared.seen(table);
                match request_units(r) {
                    Some(size) => sizes.push(size),
                    None => {
                        return Ok(error_response(
                            StatusCode::BAD_REQUEST,
                            "com.amazonaws.dynamodb.v20120810#ValidationException",
                            &format!("malformed write request: {r}"),
                        ))
                    }
                }
            }
            let mut stats = shared.stats();
            stats.batch_write_calls += 1;
            stats.items += sizes.len() as u64;
            stats.bytes += sizes.iter().map(|(b, _)| b).sum::<u64>();
            stats.write_units += sizes.iter().map(|(_, u)| u).sum::<u64>();
            json_response(StatusCode::OK, &json!({ "UnprocessedItems": {} }))
        }
        "DescribeTable" => {
            shared.seen(table);
            json_response(StatusCode::OK, &json!({ "Table": shared.describe(table) }))
        }
        "CreateTable" => {
            shared.seen(table);
            json_response(
                StatusCode::OK,
                &json!({ "TableDescription": shared.describe(table) }),
            )
        }
        "ListTables" => {
            let names: Vec<String> = shared
                .tables
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned()
                .collect();
            json_response(StatusCode::OK, &json!({ "TableNames": names }))
        }
        other => error_response(
            StatusCode::BAD_REQUEST,
            "com.amazon.coral.service#UnknownOperationException",
            &format!("the null sink does not answer {other:?}"),
        ),
    };
    Ok(resp)
}
