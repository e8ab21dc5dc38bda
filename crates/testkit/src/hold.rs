//! Part of a batch answered as unprocessed, as DynamoDB may: the proxy
//! forwards the rest and merges the part it held back into the upstream's
//! answer (`UnprocessedItems` of a `BatchWriteItem`, `UnprocessedKeys` of a
//! `BatchGetItem`), re-encoded when the configuration says so.

use bytes::Bytes;
use hyper::http::request::Parts;
use hyper::{Response, StatusCode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value as Json};

use crate::reencode::{identity, item_text};
use crate::upstream::{relay, Upstream};
use crate::wire::{text_response, Body};

/// What to hold back of one batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hold {
    /// Hold back a random part (at least one request).
    pub random: bool,
    /// Hold back every write request the proxy has not seen before.
    pub first_sight: bool,
    /// Answer the held part re-encoded.
    pub reencode: bool,
    /// Seed of the random part and of the re-encoding.
    pub seed: u64,
}

/// The held-back part of a batch, per table, in the order of the request.
type Held = Vec<(String, Vec<Json>)>;

fn push(side: &mut Held, table: &str, value: Json) {
    match side.iter_mut().find(|(t, _)| t == table) {
        Some((_, values)) => values.push(value),
        None => side.push((table.to_string(), vec![value])),
    }
}

/// A `BatchWriteItem`: holds back what `hold` says, forwards the rest and
/// answers the held part in `UnprocessedItems`. Nothing to hold: the
/// request is forwarded as it came.
pub(crate) async fn hold_back_writes(
    upstream: &Upstream,
    op: &str,
    parts: &Parts,
    body: Bytes,
    hold: Hold,
) -> Response<Body> {
    let Some(tables) = request_items(&body) else {
        return relay(upstream.forward(op, parts, body).await, false);
    };
    let total: usize = tables
        .values()
        .filter_map(Json::as_array)
        .map(Vec::len)
        .sum();
    let mut rng = StdRng::seed_from_u64(hold.seed);
    let must_hold = hold.random.then(|| rng.random_range(0..total.max(1)));
    let (mut sent, mut held): (Held, Held) = (Vec::new(), Vec::new());
    let mut first_sights = 0u64;
    for (index, (table, req)) in tables
        .iter()
        .flat_map(|(t, reqs)| reqs.as_array().into_iter().flatten().map(move |r| (t, r)))
        .enumerate()
    {
        // The same draws whatever is held at first sight.
        let by_chance = hold.random && (must_hold == Some(index) || rng.random_bool(0.5));
        let first =
            hold.first_sight && upstream.first_sight(&format!("{table}\n{}", identity(req)));
        first_sights += u64::from(first);
        let side = if by_chance || first {
            &mut held
        } else {
            &mut sent
        };
        push(side, table, req.clone());
    }
    if held.is_empty() {
        return relay(upstream.forward(op, parts, body).await, false);
    }
    {
        let mut stats = upstream.stats();
        stats.unprocessed += 1;
        stats.unprocessed_items += held.iter().map(|(_, r)| r.len() as u64).sum::<u64>();
        stats.first_sight_items += first_sights;
    }
    let answer = if sent.is_empty() {
        Map::new()
    } else {
        let mut json: Json = serde_json::from_slice(&body).expect("parsed above");
        json["RequestItems"] = Json::Object(
            sent.into_iter()
                .map(|(t, reqs)| (t, Json::Array(reqs)))
                .collect(),
        );
        match upstream_answer(upstream, op, parts, &json).await {
            Ok(answer) => answer,
            Err(resp) => return resp,
        }
    };
    let text = merged_answer(answer, "UnprocessedItems", |rest, out| {
        write_unprocessed_writes(rest, &held, hold, &mut rng, out)
    });
    upstream.count_reencoded(hold.reencode, &held);
    written(text)
}

/// A `BatchGetItem`: holds back a random part of its keys (at least one),
/// forwards the rest and answers the held keys in `UnprocessedKeys`.
pub(crate) async fn hold_back_keys(
    upstream: &Upstream,
    op: &str,
    parts: &Parts,
    body: Bytes,
    hold: Hold,
) -> Response<Body> {
    let Some(tables) = request_items(&body) else {
        return relay(upstream.forward(op, parts, body).await, false);
    };
    let total: usize = tables
        .values()
        .filter_map(|t| t.get("Keys").and_then(Json::as_array))
        .map(Vec::len)
        .sum();
    let mut rng = StdRng::seed_from_u64(hold.seed);
    let must_hold = rng.random_range(0..total.max(1));
    let (mut sent, mut held) = (Map::new(), Vec::new());
    let mut index = 0;
    for (table, request) in &tables {
        let keys = request.get("Keys").and_then(Json::as_array).cloned();
        let mut kept = Vec::new();
        for key in keys.unwrap_or_default() {
            if index == must_hold || rng.random_bool(0.5) {
                push(&mut held, table, key);
            } else {
                kept.push(key);
            }
            index += 1;
        }
        if !kept.is_empty() {
            let mut request = request.clone();
            request["Keys"] = Json::Array(kept);
            sent.insert(table.clone(), request);
        }
    }
    if held.is_empty() {
        return relay(upstream.forward(op, parts, body).await, false);
    }
    {
        let mut stats = upstream.stats();
        stats.unprocessed += 1;
        stats.unprocessed_items += held.iter().map(|(_, k)| k.len() as u64).sum::<u64>();
    }
    let answer = if sent.is_empty() {
        Map::new()
    } else {
        let mut json: Json = serde_json::from_slice(&body).expect("parsed above");
        json["RequestItems"] = Json::Object(sent);
        match upstream_answer(upstream, op, parts, &json).await {
            Ok(answer) => answer,
            Err(resp) => return resp,
        }
    };
    let text = merged_answer(answer, "UnprocessedKeys", |rest, out| {
        write_unprocessed_keys(rest, &held, &tables, hold.reencode, &mut rng, out)
    });
    upstream.count_reencoded(hold.reencode, &held);
    written(text)
}

/// The `RequestItems` of a batch request.
fn request_items(body: &[u8]) -> Option<Map<String, Json>> {
    let mut json = serde_json::from_slice::<Json>(body).ok()?;
    match json.get_mut("RequestItems").map(Json::take) {
        Some(Json::Object(tables)) => Some(tables),
        _ => None,
    }
}

/// Forwards the rewritten request; its answer as JSON when it is a 200,
/// else the answer to relay as it is.
async fn upstream_answer(
    upstream: &Upstream,
    op: &str,
    parts: &Parts,
    json: &Json,
) -> Result<Map<String, Json>, Response<Body>> {
    let Some(resp) = upstream
        .forward(op, parts, Bytes::from(json.to_string()))
        .await
    else {
        return Err(relay(None, false));
    };
    if resp.status() != StatusCode::OK {
        return Err(relay(Some(resp), false));
    }
    match serde_json::from_slice::<Json>(resp.body()) {
        Ok(Json::Object(answer)) => Ok(answer),
        _ => Err(relay(Some(resp), false)),
    }
}

/// The upstream's answer with its `field` written by `write` (which gets
/// the upstream's own value of it).
fn merged_answer(
    mut answer: Map<String, Json>,
    field: &str,
    write: impl FnOnce(Map<String, Json>, &mut String),
) -> String {
    let rest = match answer.shift_remove(field) {
        Some(Json::Object(rest)) => rest,
        _ => Map::new(),
    };
    let mut out = String::from("{");
    for (name, value) in &answer {
        out.push_str(&Json::String(name.clone()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
        out.push(',');
    }
    out.push_str(&Json::String(field.to_string()).to_string());
    out.push(':');
    write(rest, &mut out);
    out.push('}');
    out
}

/// `{"T": [requests…], …}`: the upstream's unprocessed requests as they
/// came, then the held ones.
fn write_unprocessed_writes(
    mut rest: Map<String, Json>,
    held: &Held,
    hold: Hold,
    rng: &mut StdRng,
    out: &mut String,
) {
    let mut tables: Vec<String> = rest.keys().cloned().collect();
    tables.extend(
        held.iter()
            .map(|(t, _)| t.clone())
            .filter(|t| !rest.contains_key(t)),
    );
    out.push('{');
    for (i, table) in tables.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Json::String(table.clone()).to_string());
        out.push_str(":[");
        let mut texts: Vec<String> = match rest.shift_remove(table) {
            Some(Json::Array(reqs)) => reqs.iter().map(Json::to_string).collect(),
            _ => Vec::new(),
        };
        let ours = held.iter().filter(|(t, _)| t == table).flat_map(|(_, r)| r);
        texts.extend(ours.map(|req| write_request_text(req, hold.reencode, rng)));
        out.push_str(&texts.join(","));
        out.push(']');
    }
    out.push('}');
}

/// A `PutRequest`/`DeleteRequest`, its item or key re-encoded if asked.
fn write_request_text(req: &Json, reencode: bool, rng: &mut StdRng) -> String {
    if !reencode {
        return req.to_string();
    }
    for (kind, field) in [("PutRequest", "Item"), ("DeleteRequest", "Key")] {
        if let Some(value) = req.get(kind).and_then(|r| r.get(field)) {
            return format!("{{\"{kind}\":{{\"{field}\":{}}}}}", item_text(value, rng));
        }
    }
    req.to_string()
}

/// `{"T": {"Keys": [keys…], other fields of the request}, …}`.
fn write_unprocessed_keys(
    mut rest: Map<String, Json>,
    held: &Held,
    requests: &Map<String, Json>,
    reencode: bool,
    rng: &mut StdRng,
    out: &mut String,
) {
    out.push('{');
    let mut first = true;
    for (table, keys) in held {
        // The upstream's own unprocessed keys of the table stay; else the
        // request's other fields (projection, consistency) come along.
        let (mut texts, request): (Vec<String>, Map<String, Json>) = match rest.shift_remove(table)
        {
            Some(Json::Object(mut upstream)) => {
                let keys = match upstream.shift_remove("Keys") {
                    Some(Json::Array(k)) => k.iter().map(Json::to_string).collect(),
                    _ => Vec::new(),
                };
                (keys, upstream)
            }
            _ => {
                let mut request = requests
                    .get(table)
                    .and_then(Json::as_object)
                    .cloned()
                    .unwrap_or_default();
                request.shift_remove("Keys");
                (Vec::new(), request)
            }
        };
        texts.extend(keys.iter().map(|k| match reencode {
            true => item_text(k, rng),
            false => k.to_string(),
        }));
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&Json::String(table.clone()).to_string());
        out.push_str(":{\"Keys\":[");
        out.push_str(&texts.join(","));
        out.push(']');
        for (name, value) in &request {
            out.push(',');
            out.push_str(&Json::String(name.clone()).to_string());
            out.push(':');
            out.push_str(&value.to_string());
        }
        out.push('}');
    }
    for (table, request) in rest {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&Json::String(table).to_string());
        out.push(':');
        out.push_str(&request.to_string());
    }
    out.push('}');
}

/// A 200 whose body the proxy wrote.
fn written(text: String) -> Response<Body> {
    text_response(text)
}
