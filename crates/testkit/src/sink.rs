//! A DynamoDB endpoint that accepts every write and keeps nothing: the
//! ceiling of what sql2ddb can push when DynamoDB is not the bottleneck.
//!
//! For `sql2ddb update`, its tables can also be scanned: each holds the same
//! [`SyntheticTable`] of a configured number of items (none by default), and
//! every `UpdateItem` and `DeleteItem` is counted and accepted. Filter and
//! condition expressions are not evaluated: every item matches.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sql2ddb_core::KeyAttr;

use crate::synthetic::SyntheticTable;
use crate::wire::{
    error_response, json_response, operation, request_units, text_response, write_requests, Body,
    Hangup, Server,
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
    /// `Scan` calls answered.
    pub scan_calls: u64,
    /// Items those calls returned.
    pub scanned_items: u64,
    /// `UpdateItem` calls.
    pub update_items: u64,
    /// `DeleteItem` calls.
    pub delete_items: u64,
}

struct Shared {
    keys: Vec<KeyAttr>,
    /// What a Scan reads; `None`: every table is empty.
    scanned: Option<SyntheticTable>,
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
        NullSink::start_scannable(port, keys, 0).await
    }

    /// Starts a sink on `port` (0: a free one) whose tables each hold
    /// `items` synthetic items to scan (see [`SyntheticTable`]); the keys
    /// must then be S or N.
    pub async fn start_scannable(
        port: u16,
        keys: Vec<KeyAttr>,
        items: u64,
    ) -> Result<NullSink, TestkitError> {
        let scanned = (items > 0)
            .then(|| SyntheticTable::new(items, keys.clone()))
            .transpose()?;
        let shared = Arc::new(Shared {
            keys,
            scanned,
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

    /// An ACTIVE on-demand table with the sink's key schema.
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
            "ItemCount": self.scanned.as_ref().map_or(0, |t| t.len()),
            "TableSizeBytes": self.scanned.as_ref().map_or(0, |t| t.len() * t.item_bytes(0)),
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
    // One call per item: read without building a JSON tree.
    if op == "UpdateItem" || op == "DeleteItem" {
        return Ok(single_write(&shared, &body, op == "DeleteItem"));
    }
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
        "BatchWriteItem" => batch_write(&shared, &body),
        "Scan" => scan(&shared, table, &body),
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

fn validation(message: &str) -> Response<Body> {
    error_response(
        StatusCode::BAD_REQUEST,
        "com.amazonaws.dynamodb.v20120810#ValidationException",
        message,
    )
}

/// Counts the write requests of a `BatchWriteItem` and their size.
fn batch_write(shared: &Shared, body: &Json) -> Response<Body> {
    let requests = write_requests(body);
    let mut sizes = Vec::with_capacity(requests.len());
    for (table, r) in &requests {
        shared.seen(table);
        match request_units(r) {
            Some(size) => sizes.push(size),
            None => return validation(&format!("malformed write request: {r}")),
        }
    }
    let mut stats = shared.stats();
    stats.batch_write_calls += 1;
    stats.items += sizes.len() as u64;
    stats.bytes += sizes.iter().map(|(b, _)| b).sum::<u64>();
    stats.write_units += sizes.iter().map(|(_, u)| u).sum::<u64>();
    json_response(StatusCode::OK, &json!({ "UnprocessedItems": {} }))
}

/// Whether the call asked for `ConsumedCapacity` (`TOTAL` or `INDEXES`).
fn wants_capacity(body: &Json) -> bool {
    matches!(
        body.get("ReturnConsumedCapacity").and_then(Json::as_str),
        Some("TOTAL" | "INDEXES")
    )
}

/// What the sink reads of an `UpdateItem` or `DeleteItem`; every other
/// field (the expressions, their placeholders) is skipped unread.
#[derive(Deserialize)]
struct SingleWrite<'a> {
    #[serde(rename = "TableName", borrow, default)]
    table: Cow<'a, str>,
    #[serde(rename = "Key")]
    key: Option<IgnoredAny>,
    #[serde(rename = "ReturnConsumedCapacity", borrow, default)]
    capacity: Option<Cow<'a, str>>,
}

/// Counts one `UpdateItem` or `DeleteItem` (it must name a key) and accepts
/// it: one write unit, as for any item under 1 KB.
fn single_write(shared: &Shared, body: &[u8], delete: bool) -> Response<Body> {
    let Ok(call) = serde_json::from_slice::<SingleWrite>(body) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "com.amazon.coral.service#SerializationException",
            "the request body is not a write call",
        );
    };
    if call.key.is_none() {
        return validation("the call names no Key");
    }
    {
        let mut stats = shared.stats();
        match delete {
            true => stats.delete_items += 1,
            false => stats.update_items += 1,
        }
    }
    match call.capacity.as_deref() {
        Some("TOTAL" | "INDEXES") => {
            let table = Json::String(call.table.into_owned());
            text_response(format!(
                "{{\"ConsumedCapacity\":{{\"TableName\":{table},\"CapacityUnits\":1.0}}}}"
            ))
        }
        _ => text_response("{}".to_string()),
    }
}

/// One page of the synthetic table's (`Segment`, `TotalSegments`) segment
/// after `ExclusiveStartKey`, at most `Limit` items, written straight as
/// DynamoDB JSON.
fn scan(shared: &Shared, table: &str, body: &Json) -> Response<Body> {
    let number = |field: &str| body.get(field).and_then(Json::as_u64);
    let (segment, total) = match (number("Segment"), number("TotalSegments")) {
        (None, None) => (0, 1),
        (Some(s), Some(t)) => (s, t),
        _ => return validation("Segment and TotalSegments go together"),
    };
    let Some(items) = &shared.scanned else {
        shared.stats().scan_calls += 1;
        return json_response(
            StatusCode::OK,
            &json!({ "Items": [], "Count": 0, "ScannedCount": 0 }),
        );
    };
    let start = body.get("ExclusiveStartKey");
    let page = match items.page(segment, total, start, number("Limit")) {
        Ok(page) => page,
        Err(e) => return validation(&e.to_string()),
    };
    let count = page.items.end - page.items.start;
    let mut out = String::with_capacity(count as usize * 400 + 256);
    out.push_str("{\"Items\":[");
    for n in page.items.clone() {
        if n > page.items.start {
            out.push(',');
        }
        items.write_item(n, &mut out);
    }
    let _ = write!(out, "],\"Count\":{count},\"ScannedCount\":{count}");
    if page.more {
        out.push_str(",\"LastEvaluatedKey\":");
        items.write_key(page.items.end - 1, &mut out);
    }
    if wants_capacity(body) {
        // Eventually consistent: half a unit per 4 KB read, rounded up.
        let bytes = count * items.item_bytes(page.items.start);
        let units = bytes.div_ceil(4096) as f64 / 2.0;
        let table = Json::String(table.to_string());
        let _ = write!(
            out,
            ",\"ConsumedCapacity\":{{\"TableName\":{table},\"CapacityUnits\":{units}}}"
        );
    }
    out.push('}');
    {
        let mut stats = shared.stats();
        stats.scan_calls += 1;
        stats.scanned_items += count;
    }
    text_response(out)
}
