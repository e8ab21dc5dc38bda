//! The capacity model in the proxy: write calls metered and admitted by
//! the model, the refused part answered as DynamoDB does.
//!
//! - `BatchWriteItem`: the requests of over-limit partitions (or of a table
//!   over its limit) come back in `UnprocessedItems`, the others are
//!   forwarded; when none is admitted, the call is answered HTTP 400
//!   `ProvisionedThroughputExceededException` (`ThrottlingException` when an
//!   on-demand table is over its warm throughput).
//! - `PutItem`, `UpdateItem`, `DeleteItem`: over the limit, the same errors.
//! - `Scan`, `Query`, `GetItem`: the answer's items metered in read units
//!   (4 KB rounding per call, half for an eventually consistent read) from
//!   the partition of the items read; over the limit, the same errors;
//!   `BatchGetItem`: the keys of over-limit partitions come back in
//!   `UnprocessedKeys` (see `reads.rs`).
//! - `ReturnConsumedCapacity` (`TOTAL` or `INDEXES`) is answered with the
//!   model's units, in place of the upstream server's.
//!
//! The partition key is the configuration's, else learnt from the
//! `DescribeTable` and `CreateTable` answers that pass through, else asked
//! for with a `DescribeTable` of the proxy's own.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Map, Value as Json};

use super::config::{CapacityConfig, GsiConfig, Projection};
use super::model::{TableModel, TableUsage, WriteDemand};
use super::table::Refusal;
use crate::upstream::{relay, Upstream};
use crate::wire::{error_response, text_response, Body};
use sql2ddb_core::capacity::{key_hash, TableSchema, WriteCost};

/// What the capacity model did in the proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CapacityStats {
    /// Model seconds since the proxy started.
    pub model_seconds: f64,
    /// Write calls metered.
    pub calls: u64,
    /// Calls answered `ProvisionedThroughputExceededException` by the model.
    pub provisioned_throughput_exceeded: u64,
    /// Calls answered `ThrottlingException` by the model.
    pub throttling: u64,
    /// `BatchWriteItem` calls answered with part of their items unprocessed.
    pub partial_calls: u64,
    /// Write requests the model refused: returned unprocessed or in a call
    /// answered with an error; each must be sent again.
    pub refused_items: u64,
    /// Of those, returned in `UnprocessedItems`.
    pub unprocessed_items: u64,
    /// Read calls metered (`Scan`, `Query`, `GetItem`, `BatchGetItem`).
    pub read_calls: u64,
    /// Read calls answered with an error, or keys of a `BatchGetItem`
    /// returned unprocessed, because a read bucket was empty.
    pub refused_reads: u64,
    /// What each table's model admitted, refused and consumed.
    pub tables: BTreeMap<String, TableUsage>,
}

impl CapacityStats {
    /// Calls answered with an error.
    pub fn throttled_calls(&self) -> u64 {
        self.provisioned_throughput_exceeded + self.throttling
    }
}

pub(super) struct TableState {
    pub(super) schema: Option<TableSchema>,
    pub(super) model: TableModel,
}

pub(super) struct State {
    tables: HashMap<String, TableState>,
    pub(super) stats: CapacityStats,
}

/// The model of every table the proxy sees, on the proxy's clock.
pub(crate) struct Capacity {
    config: CapacityConfig,
    started: Instant,
    state: Mutex<State>,
}

/// One write request of a call, as the model sees it.
struct Metered {
    table: String,
    request: Json,
    demand: WriteDemand,
    cost: WriteCost,
}

impl Capacity {
    pub(crate) fn new(config: CapacityConfig) -> Capacity {
        Capacity {
            config,
            started: Instant::now(),
            state: Mutex::new(State {
                tables: HashMap::new(),
                stats: CapacityStats::default(),
            }),
        }
    }

    /// Model seconds since the proxy started.
    pub(super) fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * self.config.time_scale
    }

    // Plain values, consistent after every statement.
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn stats(&self) -> CapacityStats {
        let state = self.state();
        let mut stats = state.stats.clone();
        stats.model_seconds = self.now();
        stats.tables = state
            .tables
            .iter()
            .map(|(name, t)| (name.clone(), t.model.usage()))
            .collect();
        stats
    }

    pub(super) fn table<'s>(&self, state: &'s mut State, table: &str) -> &'s mut TableState {
        state
            .tables
            .entry(table.to_string())
            .or_insert_with(|| TableState {
                schema: self.config.partition_key.as_ref().map(|pk| TableSchema {
                    partition_key: pk.clone(),
                    sort_key: None,
                    indexes: self.config.gsi.clone().unwrap_or_default(),
                }),
                model: TableModel::new(&self.config),
            })
    }

    /// Learns a table's schema from a `DescribeTable` or `CreateTable`
    /// answer, unless the configuration names the partition key.
    pub(super) fn learn(&self, answer: &[u8]) {
        let Ok(json) = serde_json::from_slice::<Json>(answer) else {
            return;
        };
        let Some(description) = json.get("Table").or_else(|| json.get("TableDescription")) else {
            return;
        };
        let (Some(name), Some(schema)) = (
            description.get("TableName").and_then(Json::as_str),
            schema_of(description, self.config.gsi.as_deref()),
        ) else {
            return;
        };
        let mut state = self.state();
        let table = self.table(&mut state, name);
        if self.config.partition_key.is_none() {
            table.schema = Some(schema);
        }
    }

    fn schema(&self, table: &str) -> Option<TableSchema> {
        let mut state = self.state();
        self.table(&mut state, table).schema.clone()
    }
}

/// The key schema and indexes of a table description.
fn schema_of(description: &Json, configured: Option<&[GsiConfig]>) -> Option<TableSchema> {
    let key = |schema: &Json, kind: &str| {
        schema.as_array()?.iter().find_map(|k| {
            (k.get("KeyType")?.as_str()? == kind)
                .then(|| k.get("AttributeName")?.as_str().map(str::to_string))
                .flatten()
        })
    };
    let schema = description.get("KeySchema")?;
    let indexes = match configured {
        Some(indexes) => indexes.to_vec(),
        None => description
            .get("GlobalSecondaryIndexes")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let projection = i.get("Projection");
                let kind = projection.and_then(|p| p.get("ProjectionType")?.as_str());
                let projection = match kind {
                    Some("KEYS_ONLY") => Projection::KeysOnly,
                    Some("INCLUDE") => Projection::Include(
                        projection?
                            .get("NonKeyAttributes")
                            .and_then(Json::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str().map(str::to_string))
                            .collect(),
                    ),
                    _ => Projection::All,
                };
                Some(GsiConfig {
                    name: i.get("IndexName")?.as_str()?.to_string(),
                    partition_key: key(i.get("KeySchema")?, "HASH")?,
                    sort_key: key(i.get("KeySchema")?, "RANGE"),
                    projection,
                })
            })
            .collect(),
    };
    Some(TableSchema {
        partition_key: key(schema, "HASH")?,
        sort_key: key(schema, "RANGE"),
        indexes,
    })
}

/// The table's schema: known, or asked for with a `DescribeTable`.
pub(super) async fn schema(
    upstream: &Upstream,
    capacity: &Capacity,
    parts: &Parts,
    table: &str,
) -> Option<TableSchema> {
    if let Some(schema) = capacity.schema(table) {
        return Some(schema);
    }
    let mut req = Request::builder()
        .method(hyper::Method::POST)
        .uri(parts.uri.clone());
    for (name, value) in &parts.headers {
        if name != "x-amz-target" {
            req = req.header(name, value);
        }
    }
    let (describe, ()) = req
        .header("x-amz-target", "DynamoDB_20120810.DescribeTable")
        .body(())
        .ok()?
        .into_parts();
    let body = Bytes::from(json!({ "TableName": table }).to_string());
    let resp = upstream.forward("DescribeTable", &describe, body).await?;
    if resp.status() == StatusCode::OK {
        capacity.learn(resp.body());
    }
    capacity.schema(table)
}

/// Meters one write request of `table` (a put's item, or what a delete or
/// update carries).
fn meter(
    schema: &TableSchema,
    key: &Json,
    put: Option<&Json>,
    carried: &[&Json],
) -> Option<(WriteDemand, WriteCost)> {
    let hash = key_hash(key.get(&schema.partition_key)?)?;
    let cost = match put {
        Some(item) => schema.put_cost(item)?,
        None => TableSchema::carried_cost(carried),
    };
    let demand = WriteDemand {
        key_hash: hash,
        units: cost.table,
        total_units: cost.total(),
    };
    Some((demand, cost))
}

/// The error a call whose every request was refused gets.
fn refused_answer(capacity: &Capacity, refusals: &[Refusal]) -> Response<Body> {
    capacity.state().stats.refused_items += refusals.len() as u64;
    throttled(capacity, refusals.contains(&Refusal::OnDemandTable))
}

/// The error of a call the model refused: `ThrottlingException` for an
/// on-demand table over its warm throughput, else
/// `ProvisionedThroughputExceededException`.
pub(super) fn throttled(capacity: &Capacity, on_demand: bool) -> Response<Body> {
    let mut state = capacity.state();
    let (type_name, message) = if on_demand {
        state.stats.throttling += 1;
        (
            "com.amazon.coral.availability#ThrottlingException",
            "Throughput exceeds the current capacity for one or more global secondary indexes or the table (capacity model).",
        )
    } else {
        state.stats.provisioned_throughput_exceeded += 1;
        (
            "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "The level of configured provisioned throughput for the table was exceeded (capacity model).",
        )
    };
    error_response(StatusCode::BAD_REQUEST, type_name, message)
}

/// `ConsumedCapacity` of one table: the total, and with `INDEXES` the
/// table's part and each index's.
fn consumed(table: &str, costs: &[&WriteCost], indexes: bool) -> Json {
    let total: u64 = costs.iter().map(|c| c.total()).sum();
    let mut out = json!({ "TableName": table, "CapacityUnits": total as f64 });
    if indexes {
        let own: u64 = costs.iter().map(|c| c.table).sum();
        out["Table"] = json!({ "CapacityUnits": own as f64 });
        let mut by_index: BTreeMap<&str, u64> = BTreeMap::new();
        for (name, units) in costs.iter().flat_map(|c| &c.indexes) {
            *by_index.entry(name).or_default() += units;
        }
        if !by_index.is_empty() {
            out["GlobalSecondaryIndexes"] = by_index
                .into_iter()
                .map(|(name, u)| (name.to_string(), json!({ "CapacityUnits": u as f64 })))
                .collect::<Map<String, Json>>()
                .into();
        }
    }
    out
}

/// `Some(indexes?)` when the call asked for its consumed capacity.
pub(super) fn wants_capacity(body: &Json) -> Option<bool> {
    match body.get("ReturnConsumedCapacity").and_then(Json::as_str) {
        Some("TOTAL") => Some(false),
        Some("INDEXES") => Some(true),
        _ => None,
    }
}

/// `BatchWriteItem` through the model: the admitted requests forwarded,
/// the refused ones returned in `UnprocessedItems` (or, when none is
/// admitted, the call answered with the model's error). `None` when the
/// call is not one the model reads: it is relayed as it is.
pub(super) async fn batch_write(
    upstream: &Upstream,
    capacity: &Capacity,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response<Body>> {
    let mut json: Json = serde_json::from_slice(body).ok()?;
    let tables = json.get("RequestItems")?.as_object()?.clone();
    let metered = meter_batch(upstream, capacity, parts, &tables).await?;
    let refusals = admit_batch(capacity, &tables, &metered);
    let refused: Vec<Refusal> = refusals.iter().flatten().copied().collect();
    if !refused.is_empty() && refused.len() == metered.len() {
        return Some(refused_answer(capacity, &refused));
    }
    let wants = wants_capacity(&json);
    let (sent, held) = split_by_refusal(&metered, &refusals);
    let forwarded = if held.is_empty() {
        body.clone()
    } else {
        json["RequestItems"] = Json::Object(sent);
        Bytes::from(json.to_string())
    };
    let resp = upstream.forward("BatchWriteItem", parts, forwarded).await;
    let resp = match resp {
        Some(resp) if resp.status() == StatusCode::OK => resp,
        other => return Some(relay(other, false)),
    };
    if held.is_empty() && wants.is_none() {
        return Some(relay(Some(resp), false));
    }
    let mut answer = match serde_json::from_slice::<Json>(resp.body()) {
        Ok(Json::Object(answer)) => answer,
        _ => return Some(relay(Some(resp), false)),
    };
    if !held.is_empty() {
        let mut stats = capacity.state();
        stats.stats.partial_calls += 1;
        stats.stats.refused_items += refused.len() as u64;
        stats.stats.unprocessed_items += refused.len() as u64;
    }
    add_unprocessed(&mut answer, held);
    if let Some(indexes) = wants {
        let per_table = consumed_per_table(&tables, &metered, &refusals, indexes);
        answer.insert("ConsumedCapacity".into(), per_table);
    }
    Some(text_response(Json::Object(answer).to_string()))
}

/// Every put and delete request of a batch's `RequestItems` (`tables`),
/// with what it asks of the model and what it costs; `None` when one is
/// not a request the model reads.
async fn meter_batch(
    upstream: &Upstream,
    capacity: &Capacity,
    parts: &Parts,
    tables: &Map<String, Json>,
) -> Option<Vec<Metered>> {
    let mut metered = Vec::new();
    for (table, requests) in tables {
        let schema = schema(upstream, capacity, parts, table).await?;
        for request in requests.as_array()? {
            let (demand, cost) = if let Some(item) = request.pointer("/PutRequest/Item") {
                meter(&schema, item, Some(item), &[])?
            } else {
                let key = request.pointer("/DeleteRequest/Key")?;
                meter(&schema, key, None, &[key])?
            };
            metered.push(Metered {
                table: table.clone(),
                request: request.clone(),
                demand,
                cost,
            });
        }
    }
    Some(metered)
}

/// The model's answer to each metered request of a call (`None`:
/// admitted), each table's requests admitted together by its model; the
/// call is counted.
fn admit_batch(
    capacity: &Capacity,
    tables: &Map<String, Json>,
    metered: &[Metered],
) -> Vec<Option<Refusal>> {
    let now = capacity.now();
    let mut state = capacity.state();
    state.stats.calls += 1;
    let mut refusals = vec![None; metered.len()];
    for table in tables.keys() {
        let of_table: Vec<usize> = (0..metered.len())
            .filter(|&i| &metered[i].table == table)
            .collect();
        let demands: Vec<WriteDemand> = of_table.iter().map(|&i| metered[i].demand).collect();
        let answer = capacity
            .table(&mut state, table)
            .model
            .admit_writes(now, &demands);
        for (i, r) in of_table.into_iter().zip(answer) {
            refusals[i] = r;
        }
    }
    refusals
}

/// The requests to send and those held back (refused), each as a
/// `RequestItems` map by table.
fn split_by_refusal(
    metered: &[Metered],
    refusals: &[Option<Refusal>],
) -> (Map<String, Json>, Map<String, Json>) {
    let (mut sent, mut held) = (Map::new(), Map::new());
    for (m, r) in metered.iter().zip(refusals) {
        let side = if r.is_some() { &mut held } else { &mut sent };
        let list = side
            .entry(m.table.clone())
            .or_insert_with(|| Json::Array(Vec::new()));
        if let Json::Array(list) = list {
            list.push(m.request.clone());
        }
    }
    (sent, held)
}

/// Adds the requests the model `held` back to the upstream answer's own
/// `UnprocessedItems`, so the caller sends both again.
fn add_unprocessed(answer: &mut Map<String, Json>, held: Map<String, Json>) {
    let mut unprocessed = match answer.shift_remove("UnprocessedItems") {
        Some(Json::Object(theirs)) => theirs,
        _ => Map::new(),
    };
    for (table, requests) in held {
        let list = unprocessed
            .entry(table)
            .or_insert_with(|| Json::Array(Vec::new()));
        if let (Json::Array(list), Json::Array(requests)) = (list, requests) {
            list.extend(requests);
        }
    }
    answer.insert("UnprocessedItems".into(), Json::Object(unprocessed));
}

/// `ConsumedCapacity` of a batch: per table, the model's units of the
/// requests it admitted.
fn consumed_per_table(
    tables: &Map<String, Json>,
    metered: &[Metered],
    refusals: &[Option<Refusal>],
    indexes: bool,
) -> Json {
    let per_table: Vec<Json> = tables
        .keys()
        .map(|table| {
            let costs: Vec<&WriteCost> = metered
                .iter()
                .zip(refusals)
                .filter(|(m, r)| &m.table == table && r.is_none())
                .map(|(m, _)| &m.cost)
                .collect();
            consumed(table, &costs, indexes)
        })
        .collect();
    Json::Array(per_table)
}

pub(super) async fn single_write(
    upstream: &Upstream,
    capacity: &Capacity,
    op: &str,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response<Body>> {
    let json: Json = serde_json::from_slice(body).ok()?;
    let table = json.get("TableName")?.as_str()?;
    let schema = schema(upstream, capacity, parts, table).await?;
    let (demand, cost) = match op {
        "PutItem" => {
            let item = json.get("Item")?;
            meter(&schema, item, Some(item), &[])?
        }
        _ => {
            let key = json.get("Key")?;
            let mut carried = vec![key];
            carried.extend(json.get("ExpressionAttributeValues"));
            meter(&schema, key, None, &carried)?
        }
    };
    let refusal = {
        let now = capacity.now();
        let mut state = capacity.state();
        state.stats.calls += 1;
        capacity
            .table(&mut state, table)
            .model
            .admit_writes(now, &[demand])[0]
    };
    if let Some(refusal) = refusal {
        return Some(refused_answer(capacity, &[refusal]));
    }
    let resp = upstream.forward(op, parts, body.clone()).await;
    let wants = wants_capacity(&json);
    let (Some(indexes), Some(ok)) = (
        wants,
        resp.as_ref().filter(|r| r.status() == StatusCode::OK),
    ) else {
        return Some(relay(resp, false));
    };
    let mut answer = match serde_json::from_slice::<Json>(ok.body()) {
        Ok(Json::Object(answer)) => answer,
        _ => return Some(relay(resp, false)),
    };
    answer.insert(
        "ConsumedCapacity".into(),
        consumed(table, &[&cost], indexes),
    );
    Some(text_response(Json::Object(answer).to_string()))
}
