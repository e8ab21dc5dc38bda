//! Reads in the capacity model: what `Scan`, `Query`, `GetItem` and
//! `BatchGetItem` read is metered in read units and admitted by the read
//! buckets of the table's model.
//!
//! A call is forwarded first and metered by what it read, as DynamoDB
//! charges: the items' sizes summed and rounded up to 4 KB per call (per
//! item for `GetItem` and `BatchGetItem`), a unit per 4 KB for a strongly
//! consistent read and half a unit otherwise. The partition charged is the
//! partition key's of the first item read (a `Scan` or `Query` page lies in
//! one partition at a time), or of the key asked for. Over the limit, the
//! answer is dropped and the call answered
//! `ProvisionedThroughputExceededException`; a `BatchGetItem` keeps the
//! items of partitions within their limit and returns the others' keys in
//! `UnprocessedKeys`, failing whole only when it read nothing it may keep.

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Map, Value as Json};

use super::serve::{schema, throttled, wants_capacity, Capacity};
use super::table::Refusal;
use crate::upstream::{relay, Upstream};
use crate::wire::{text_response, Body};
use sql2ddb_core::capacity::{key_hash, read_half_units, TableSchema};
use sql2ddb_core::limits::item_size;
use sql2ddb_core::Item;

/// The size of an item in DynamoDB JSON by DynamoDB's rules (0 when it
/// cannot be read).
fn size_of(item: &Json) -> usize {
    Item::deserialize(item).map(|i| item_size(&i)).unwrap_or(0)
}

/// The answer's body as an object, when the call succeeded.
fn ok_answer(resp: &Option<Response<Bytes>>) -> Option<Map<String, Json>> {
    let resp = resp.as_ref().filter(|r| r.status() == StatusCode::OK)?;
    match serde_json::from_slice(resp.body()) {
        Ok(Json::Object(answer)) => Some(answer),
        _ => None,
    }
}

/// Half read units of the model, admitted or refused at the proxy's now.
fn admit(
    capacity: &Capacity,
    table: &str,
    key_hash: Option<u64>,
    half_units: u64,
) -> Result<(), Refusal> {
    let now = capacity.now();
    let mut state = capacity.state();
    let admitted = capacity
        .table(&mut state, table)
        .model
        .admit_read(now, key_hash, half_units);
    if admitted.is_err() {
        state.stats.refused_reads += 1;
    }
    admitted
}

/// `Scan`, `Query` or `GetItem` through the model.
pub(super) async fn read(
    upstream: &Upstream,
    capacity: &Capacity,
    op: &str,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response<Body>> {
    let request: Json = serde_json::from_slice(body).ok()?;
    let table = request.get("TableName")?.as_str()?.to_string();
    let schema = schema(upstream, capacity, parts, &table).await?;
    let consistent = request
        .get("ConsistentRead")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    let resp = upstream.forward(op, parts, body.clone()).await;
    let Some(mut answer) = ok_answer(&resp) else {
        return Some(relay(resp, false));
    };
    let (bytes, hash) = if op == "GetItem" {
        let hash = request
            .get("Key")
            .and_then(|k| k.get(&schema.partition_key))
            .and_then(key_hash);
        (answer.get("Item").map_or(0, size_of), hash)
    } else {
        let items = answer.get("Items").and_then(Json::as_array);
        let items = items.map(Vec::as_slice).unwrap_or_default();
        let hash = items
            .first()
            .and_then(|i| i.get(&schema.partition_key))
            .and_then(key_hash);
        (items.iter().map(size_of).sum(), hash)
    };
    let half = read_half_units(bytes, consistent);
    capacity.state().stats.read_calls += 1;
    if let Err(refusal) = admit(capacity, &table, hash, half) {
        return Some(throttled(capacity, refusal == Refusal::OnDemandTable));
    }
    if wants_capacity(&request).is_some() {
        answer.insert(
            "ConsumedCapacity".into(),
            json!({ "TableName": table, "CapacityUnits": half as f64 / 2.0 }),
        );
    }
    Some(text_response(Json::Object(answer).to_string()))
}

/// The primary key of an item read (`None` when a projection left part of
/// it out).
fn key_of(schema: &TableSchema, item: &Json) -> Option<Json> {
    let mut key = Map::new();
    for name in [Some(&schema.partition_key), schema.sort_key.as_ref()]
        .into_iter()
        .flatten()
    {
        key.insert(name.clone(), item.get(name)?.clone());
    }
    Some(Json::Object(key))
}

/// `BatchGetItem` through the model: each item read is admitted by its
/// partition; the keys of refused items come back unprocessed.
pub(super) async fn batch_get(
    upstream: &Upstream,
    capacity: &Capacity,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response<Body>> {
    let request: Json = serde_json::from_slice(body).ok()?;
    let asked = request.get("RequestItems")?.as_object()?.clone();
    let mut schemas = Vec::new();
    for table in asked.keys() {
        schemas.push((
            table.clone(),
            schema(upstream, capacity, parts, table).await?,
        ));
    }
    let resp = upstream.forward("BatchGetItem", parts, body.clone()).await;
    let Some(mut answer) = ok_answer(&resp) else {
        return Some(relay(resp, false));
    };
    let Some(Json::Object(responses)) = answer.shift_remove("Responses") else {
        return Some(relay(resp, false));
    };
    let mut unprocessed = match answer.shift_remove("UnprocessedKeys") {
        Some(Json::Object(theirs)) => theirs,
        _ => Map::new(),
    };
    capacity.state().stats.read_calls += 1;
    let (mut kept, mut consumed) = (Map::new(), Vec::new());
    let (mut read, mut refused) = (0usize, 0usize);
    for (table, schema) in &schemas {
        let spec = &asked[table];
        let consistent = spec
            .get("ConsistentRead")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let (mut items, mut held, mut half_units) = (Vec::new(), Vec::new(), 0);
        let got = responses.get(table).and_then(Json::as_array);
        for item in got.into_iter().flatten() {
            read += 1;
            let half = read_half_units(size_of(item), consistent);
            let hash = item.get(&schema.partition_key).and_then(key_hash);
            match (admit(capacity, table, hash, half), key_of(schema, item)) {
                (Err(_), Some(key)) => held.push(key),
                _ => {
                    items.push(item.clone());
                    half_units += half;
                }
            }
        }
        refused += held.len();
        if !held.is_empty() {
            let entry = unprocessed.entry(table.clone()).or_insert_with(|| {
                let mut spec = spec.clone();
                spec["Keys"] = Json::Array(Vec::new());
                spec
            });
            if let Some(Json::Array(keys)) = entry.get_mut("Keys") {
                keys.extend(held);
            }
        }
        kept.insert(table.clone(), Json::Array(items));
        consumed.push(json!({ "TableName": table, "CapacityUnits": half_units as f64 / 2.0 }));
    }
    if read > 0 && refused == read {
        return Some(throttled(capacity, false));
    }
    answer.insert("Responses".into(), Json::Object(kept));
    answer.insert("UnprocessedKeys".into(), Json::Object(unprocessed));
    if wants_capacity(&request).is_some() {
        answer.insert("ConsumedCapacity".into(), Json::Array(consumed));
    }
    Some(text_response(Json::Object(answer).to_string()))
}
