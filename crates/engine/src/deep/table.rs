//! The table side of `verify --deep`: a parallel Scan whose items are
//! attributed to entities by key shape and put in buckets, or (with
//! `--sample`) exactly the expected keys fetched with BatchGetItem.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sql2ddb_core::{Item, KeyAttr};
use sql2ddb_dynamo::{
    batch_get, scan_segment, Dynamo, RetryPolicy, ScanSegment, WriteCapacityLimiter,
};

use super::canon::{key_item, key_text, stable_hash};
use super::digest::Sink;
use super::options::DeepProgress;
use super::shape::{KeySpace, Owner};
use super::spill::Record;
use crate::error::EngineError;

/// What the table side reads with, shared by the scan's segments.
pub struct TableSide {
    /// The client.
    pub client: Dynamo,
    /// The target table.
    pub table: String,
    /// The table's key attributes.
    pub keys: Vec<KeyAttr>,
    /// The key shapes of the whole mapping (every entity and pointer).
    pub space: KeySpace,
    /// The names of the whole mapping's entities, in its order.
    pub names: Vec<String>,
    /// With `--entity`: the only entity whose items are kept.
    pub wanted: Option<String>,
    /// The read units per second cap.
    pub limiter: Option<WriteCapacityLimiter>,
    /// Retries of a throttled or failing call.
    pub retry: RetryPolicy,
    /// Items of the table outside the mapping's key space.
    pub outside: AtomicU64,
    /// Counters for the progress bars.
    pub progress: Arc<DeepProgress>,
}

impl TableSide {
    /// Scans the table in `segments` parallel segments into `buckets`.
    pub async fn scan<S: Sink>(
        self: &Arc<Self>,
        segments: u32,
        buckets: &Arc<Mutex<S>>,
    ) -> Result<(), EngineError> {
        let total = segments.clamp(1, 1_000_000) as i32;
        let mut tasks = tokio::task::JoinSet::new();
        for segment in 0..total {
            let (this, buckets) = (self.clone(), buckets.clone());
            tasks.spawn(async move { this.scan_segment(segment, total, &buckets).await });
        }
        crate::tasks::first_error(tasks).await
    }

    async fn scan_segment<S: Sink>(
        &self,
        segment: i32,
        total: i32,
        buckets: &Mutex<S>,
    ) -> Result<(), EngineError> {
        let at = ScanSegment {
            table: &self.table,
            segment,
            total,
            limiter: self.limiter.as_ref(),
            retry: self.retry,
        };
        let mut failed = None;
        scan_segment(&self.client, at, |items| {
            let mut buckets = buckets.lock().expect("buckets lock");
            for item in items {
                if let Err(e) = self.keep(item, &mut *buckets) {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
        .await?;
        failed.map_or(Ok(()), Err)
    }

    /// Puts a scanned item in its bucket, unless it is a pointer item (those
    /// are checked on their own), outside the key space, or another entity's
    /// item than the one asked for.
    fn keep<S: Sink>(&self, item: Item, buckets: &mut S) -> Result<(), EngineError> {
        self.progress.scanned.fetch_add(1, Ordering::Relaxed);
        let entity = match self.space.owner(&item) {
            Owner::Entity(i) => &self.names[i],
            Owner::Pointer => return Ok(()),
            Owner::Outside => {
                self.outside.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        };
        if self.wanted.as_ref().is_some_and(|w| w != entity) {
            return Ok(());
        }
        let Some(key) = key_text(&item, &self.keys) else {
            return Ok(());
        };
        let record = Record {
            key,
            entity: entity.clone(),
            item,
            source_key: None,
        };
        buckets.push(stable_hash(&record.key), record)
    }

    /// The table's items at the keys of `expected` (with `--sample`).
    pub async fn fetch(&self, expected: &[Record]) -> Result<Vec<Record>, EngineError> {
        let mut seen = HashSet::new();
        let keys: Vec<Item> = expected
            .iter()
            .filter(|r| seen.insert(r.key.as_str()))
            .map(|r| key_item(&r.item, &self.keys))
            .collect();
        let items = batch_get(
            &self.client,
            &self.table,
            &keys,
            self.limiter.as_ref(),
            self.retry,
        )
        .await?;
        self.progress
            .scanned
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        Ok(items
            .into_iter()
            .filter_map(|item| {
                Some(Record {
                    key: key_text(&item, &self.keys)?,
                    // Only expected keys are fetched: nothing is ever extra.
                    entity: String::new(),
                    item,
                    source_key: None,
                })
            })
            .collect())
    }
}
