//! The benchmark's yardstick: a bare `aws-sdk-dynamodb` loop that sends
//! prebuilt items with `BatchWriteItem`, 25 at a time, N calls in flight —
//! what a user would write by hand. The items are read from the files of a
//! `sql2ddb export --compression none` (so they are exactly the items `run`
//! writes) and built into the SDK's `AttributeValue` maps and write requests
//! before the clock starts; the clock then measures only the sending.
//!
//! [`load_synthetic`] fills a table with the items a null sink scans, for
//! benchmarking `sql2ddb update` on a real table.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use crate::sdk::item_to_sdk;
use crate::sdk::types::{AttributeValue, PutRequest, WriteRequest};
use anyhow::{bail, Context};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sql2ddb_core::{Item, KeyAttr};

use crate::synthetic::SyntheticTable;

/// What a load did.
#[derive(Debug, Clone, Serialize)]
pub struct LoadStats {
    /// Items sent (and accepted).
    pub items: u64,
    /// `BatchWriteItem` calls made.
    pub calls: u64,
    /// Wall seconds of the sending.
    pub seconds: f64,
    /// CPU seconds (user + system) of this process during the sending.
    pub cpu_seconds: f64,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "Item")]
    item: Item,
}

/// Every item of the export files under `dir` (uncompressed `.json` files,
/// one `{"Item": …}` per line), as the SDK's maps.
pub fn read_items(dir: &Path) -> anyhow::Result<Vec<HashMap<String, AttributeValue>>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!(
            "no .json files in {} (export with --compression none)",
            dir.display()
        );
    }
    let mut items = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
            let line: Line = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not an export line", file.display(), n + 1))?;
            items.push(item_to_sdk(&line.item));
        }
    }
    Ok(items)
}

/// Builds the write requests of `items`, 25 to a call.
pub fn batches(items: Vec<HashMap<String, AttributeValue>>) -> Vec<Vec<WriteRequest>> {
    let mut out = Vec::with_capacity(items.len().div_ceil(25));
    let mut current = Vec::with_capacity(25);
    for item in items {
        let put = PutRequest::builder()
            .set_item(Some(item))
            .build()
            .expect("the item is set");
        current.push(WriteRequest::builder().put_request(put).build());
        if current.len() == 25 {
            out.push(std::mem::replace(&mut current, Vec::with_capacity(25)));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Sends `batches` to `table`, `concurrency` calls in flight; unprocessed
/// items are sent again.
pub async fn send(
    client: &crate::sdk::Client,
    table: &str,
    batches: Vec<Vec<WriteRequest>>,
    concurrency: usize,
) -> anyhow::Result<LoadStats> {
    let cpu = cpu_seconds();
    let started = Instant::now();
    let mut items = 0u64;
    let mut calls = 0u64;
    let mut pending = batches;
    while !pending.is_empty() {
        let mut again = Vec::new();
        let mut results = futures::stream::iter(pending.into_iter().map(|batch| {
            let n = batch.len() as u64;
            async move {
                let out = client
                    .batch_write_item()
                    .request_items(table, batch)
                    .send()
                    .await;
                (n, out)
            }
        }))
        .buffer_unordered(concurrency.max(1));
        while let Some((n, out)) = results.next().await {
            calls += 1;
            let out = out.context("BatchWriteItem failed")?;
            let left = out
                .unprocessed_items
                .and_then(|mut m| m.remove(table))
                .unwrap_or_default();
            items += n - left.len() as u64;
            if !left.is_empty() {
                again.push(left);
            }
        }
        pending = again;
    }
    Ok(LoadStats {
        items,
        calls,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: cpu_seconds() - cpu,
    })
}

/// Items of a synthetic load built (as SDK maps) at a time.
const LOAD_CHUNK: u64 = 10_000;

/// Writes the `len` items of a [`SyntheticTable`] keyed by `keys` into
/// `table` (created, on demand, when missing): the very items a null sink
/// started with as many scans. `concurrency` calls in flight.
pub async fn load_synthetic(
    client: &crate::sdk::Client,
    dynamo: &sql2ddb_dynamo::Dynamo,
    table: &str,
    keys: Vec<KeyAttr>,
    len: u64,
    concurrency: usize,
) -> anyhow::Result<LoadStats> {
    let items = SyntheticTable::new(len, keys.clone())?;
    sql2ddb_dynamo::ensure_table(dynamo, table, &keys, true).await?;
    let mut total = LoadStats {
        items: 0,
        calls: 0,
        seconds: 0.0,
        cpu_seconds: 0.0,
    };
    let mut first = 0;
    while first < len {
        let end = (first + LOAD_CHUNK).min(len);
        let chunk = (first..end).map(|n| item_to_sdk(&items.item(n))).collect();
        let done = send(client, table, batches(chunk), concurrency).await?;
        total.items += done.items;
        total.calls += done.calls;
        total.seconds += done.seconds;
        total.cpu_seconds += done.cpu_seconds;
        first = end;
    }
    Ok(total)
}

/// This process's CPU seconds so far (user + system), from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ") ".
    (ticks(11) + ticks(12)) / USER_HZ
}

/// The unit of those fields: the kernel's USER_HZ, 100 on Linux.
const USER_HZ: f64 = 100.0;
