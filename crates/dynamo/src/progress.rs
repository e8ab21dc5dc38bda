//! The progress store: how a run proves it is complete by counting.
//!
//! One DynamoDB table of its own (default `<target>-sql2ddb-progress`), one
//! partition per run (`PK = RUN#<id>`), and in it:
//! - `RUN`: the run's description ([`RunMeta`]), written when it starts, with
//!   the digest of the mapping's items (so a resume can refuse a changed mapping);
//! - `BATCH#<entity>#<segment>#<page>#<part>`: one item per batch a writer
//!   finished, with its rows, items, rejects and failures, and what writing
//!   it cost ([`BatchCost`]);
//! - `CURSOR#<entity>#<segment>`: a segment's keyset cursor and how many pages
//!   it has handed on, updated as the segment advances;
//! - `TOTAL#<entity>#<segment>`: a segment's final row count, written when the
//!   reader reaches its end.
//!
//! There is no shared counter: racing writers would corrupt it. Every record
//! has a deterministic key, so a redelivered batch rewrites its own record
//! instead of counting twice, and [`summarize`] adds the records up.
//!
//! Each call is one attempt (the client's retries are off): a failed record
//! leaves its message unacknowledged, so the batch is delivered again, and a
//! failed cursor update stops the reader, which resumes from the last cursor.

use std::collections::{BTreeMap, HashMap, HashSet};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use sql2ddb_core::{redact_secrets, KeyAttr, SqlValue, WorkBatch};

use crate::error::{sdk_message, DynamoError};

/// The progress table of a target table, unless the user names another.
pub fn default_table(target: &str) -> String {
    format!("{target}-sql2ddb-progress")
}

/// What a run is, as `status` and `verify` need it from any machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// The mapping file's path, as given.
    pub mapping: String,
    /// The source connection string, secrets redacted.
    pub source: String,
    /// The target table.
    pub table: String,
    /// Every entity of the run, in the mapping's order.
    pub entities: Vec<EntityMeta>,
    /// When the run started (RFC 3339).
    pub started: String,
    /// The SQS queue the run's pages were sent to; `None` for a run written
    /// in one process. A resumed run sends to the same queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// One entity of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityMeta {
    /// Entity name.
    pub name: String,
    /// How many segments its key range was cut into.
    pub segments: u32,
    /// The bounds of each segment, in order, so a resumed run reads exactly
    /// the same ranges whatever the table holds by then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<SegmentBounds>,
}

/// The key range of one segment: keys `k` with `after < k <= until`, either
/// side open when `None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentBounds {
    /// Exclusive lower bound.
    pub after: Option<Vec<SqlValue>>,
    /// Inclusive upper bound.
    pub until: Option<Vec<SqlValue>>,
}

/// One finished batch: what a writer did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRecord {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page within the segment.
    pub page: u64,
    /// Part of the page (0 when it was not split).
    pub part: u32,
    /// How many parts the page was split into (1 when it was not).
    pub parts: u32,
    /// Source rows the batch accounts for.
    pub rows: u64,
    /// Items written.
    pub items: u64,
    /// Rows rejected, while mapping or by DynamoDB (in the rejects file).
    pub rejected: u64,
    /// Items that ran out of retries (in the rejects file too).
    pub failed: u64,
}

impl BatchRecord {
    /// The record of `batch` once written: `written` items stored,
    /// `write_rejected` refused by DynamoDB, `failed` out of retries. The rows
    /// rejected while mapping are the batch's rows without an item.
    pub fn for_batch(batch: &WorkBatch, written: u64, write_rejected: u64, failed: u64) -> Self {
        let rejected_at_read = batch.rows_read.saturating_sub(batch.items.len() as u64);
        BatchRecord {
            entity: batch.entity.clone(),
            segment: batch.segment,
            page: batch.page,
            part: batch.part.index,
            parts: batch.part.count,
            rows: batch.rows_read,
            items: written,
            rejected: rejected_at_read + write_rejected,
            failed,
        }
    }

    /// The record's sort key: `BATCH#<entity>#<segment:05>#<page:010>#<part:03>`.
    pub fn sort_key(&self) -> String {
        format!(
            "BATCH#{}#{:05}#{:010}#{:03}",
            self.entity, self.segment, self.page, self.part
        )
    }
}

/// What writing one batch cost: recorded with its [`BatchRecord`], so a
/// run's report can show the whole run's figures after a resume. Bytes and
/// write units follow from the items alone, so a batch written twice costs
/// the same; retries are those of its last recorded write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct BatchCost {
    /// Bytes written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed.
    pub write_units: u64,
    /// Calls retried.
    pub retries: u64,
}

impl BatchCost {
    fn add(&mut self, o: &BatchCost) {
        self.bytes += o.bytes;
        self.write_units += o.write_units;
        self.retries += o.retries;
    }
}

/// Where a segment's reader is.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentCursor {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// The key of the last row handed on (resume reads after it).
    pub cursor: Vec<SqlValue>,
    /// Pages handed on so far (pages `0..pages_sent`).
    pub pages_sent: u64,
    /// Rows in those pages, so a resumed reader's segment total counts them.
    pub rows_sent: u64,
}

/// A segment the reader finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentTotal {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Rows it read, in all.
    pub rows: u64,
    /// Pages it handed on, in all.
    pub pages: u64,
}

/// Everything recorded for one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunProgress {
    /// The run's description, once recorded.
    pub meta: Option<RunMeta>,
    /// Finished batches, in key order.
    pub batches: Vec<BatchRecord>,
    /// Segment cursors.
    pub cursors: Vec<SegmentCursor>,
    /// Finished segments.
    pub totals: Vec<SegmentTotal>,
    /// The digest of the mapping's items the run started with, part name →
    /// hash; `None` when the run was recorded without one (an earlier release).
    pub digest: Option<BTreeMap<String, String>>,
    /// What writing each batch cost, by the batch's sort key
    /// ([`BatchRecord::sort_key`]); batches recorded without a cost are absent.
    pub costs: BTreeMap<String, BatchCost>,
}

impl RunProgress {
    /// What writing `entity`'s recorded batches cost, in all.
    pub fn cost_of(&self, entity: &str) -> BatchCost {
        let mut total = BatchCost::default();
        for b in self.batches.iter().filter(|b| b.entity == entity) {
            if let Some(c) = self.costs.get(&b.sort_key()) {
                total.add(c);
            }
        }
        total
    }

    /// Pages `entity`'s segments handed on, in all: a finished segment's
    /// total, else its cursor's.
    pub fn pages_of(&self, entity: &str) -> u64 {
        let mut pages: BTreeMap<u32, u64> = BTreeMap::new();
        let sent = self
            .cursors
            .iter()
            .map(|c| (&c.entity, c.segment, c.pages_sent))
            .chain(self.totals.iter().map(|t| (&t.entity, t.segment, t.pages)));
        for (e, segment, n) in sent {
            if e == entity {
                let p = pages.entry(segment).or_default();
                *p = (*p).max(n);
            }
        }
        pages.values().sum()
    }
}

/// A store of run progress in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct ProgressStore {
    client: Client,
    table: String,
}

fn pk(run: &str) -> AttributeValue {
    AttributeValue::S(format!("RUN#{run}"))
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn batch_attrs(record: &BatchRecord) -> Vec<(&'static str, AttributeValue)> {
    vec![
        ("entity", s(&record.entity)),
        ("segment", n(record.segment)),
        ("page", n(record.page)),
        ("part", n(record.part)),
        ("parts", n(record.parts)),
        ("rows", n(record.rows)),
        ("items", n(record.items)),
        ("rejected", n(record.rejected)),
        ("failed", n(record.failed)),
    ]
}

impl ProgressStore {
    /// A store in `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        ProgressStore {
            client,
            table: table.into(),
        }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (on-demand, string `PK` and `SK`) unless it exists;
    /// returns whether it was created.
    pub async fn ensure(&self) -> Result<bool, DynamoError> {
        let keys = [
            KeyAttr {
                name: "PK".into(),
                kind: "S".into(),
            },
            KeyAttr {
                name: "SK".into(),
                kind: "S".into(),
            },
        ];
        crate::admin::ensure_table(&self.client, &self.table, &keys, true).await
    }

    fn call_err(&self, operation: &'static str, message: String) -> DynamoError {
        DynamoError::Call {
            operation,
            table: self.table.clone(),
            message,
        }
    }

    async fn put(
        &self,
        run: &str,
        sk: String,
        attrs: Vec<(&str, AttributeValue)>,
    ) -> Result<(), DynamoError> {
        let mut req = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("PK", pk(run))
            .item("SK", s(sk));
        for (name, value) in attrs {
            req = req.item(name, value);
        }
        req.send()
            .await
            .map_err(|e| self.call_err("PutItem", sdk_message(&e)))?;
        Ok(())
    }

    /// Records the run's description (its source redacted once more, in case).
    pub async fn record_run(&self, run: &str, meta: &RunMeta) -> Result<(), DynamoError> {
        let meta = RunMeta {
            source: redact_secrets(&meta.source),
            ..meta.clone()
        };
        let json = serde_json::to_string(&meta).expect("run meta serialises");
        self.put(run, "RUN".into(), vec![("meta", s(json))]).await
    }

    /// Records the run's description with the digest of its mapping's items
    /// (part name → hash), which a resume compares with its own mapping's.
    pub async fn record_run_with_digest(
        &self,
        run: &str,
        meta: &RunMeta,
        digest: &BTreeMap<String, String>,
    ) -> Result<(), DynamoError> {
        let meta = RunMeta {
            source: redact_secrets(&meta.source),
            ..meta.clone()
        };
        let json = serde_json::to_string(&meta).expect("run meta serialises");
        let digest = serde_json::to_string(digest).expect("a digest serialises");
        self.put(
            run,
            "RUN".into(),
            vec![("meta", s(json)), ("digest", s(digest))],
        )
        .await
    }

    /// Whether the progress table exists (one `DescribeTable`).
    pub async fn exists(&self) -> Result<bool, DynamoError> {
        match self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(self.call_err("DescribeTable", sdk_message(&e))),
        }
    }

    /// Records a finished batch; a second record of the same batch replaces the first.
    pub async fn record_batch(&self, run: &str, record: &BatchRecord) -> Result<(), DynamoError> {
        self.put(run, record.sort_key(), batch_attrs(record)).await
    }

    /// Records a finished batch with what writing it cost; a second record
    /// of the same batch replaces the first, so a batch written twice is
    /// counted once.
    pub async fn record_batch_with_cost(
        &self,
        run: &str,
        record: &BatchRecord,
        cost: &BatchCost,
    ) -> Result<(), DynamoError> {
        let mut attrs = batch_attrs(record);
        attrs.extend([
            ("bytes", n(cost.bytes)),
            ("write_units", n(cost.write_units)),
            ("retries", n(cost.retries)),
        ]);
        self.put(run, record.sort_key(), attrs).await
    }

    /// Moves a segment's cursor: `pages_sent` pages holding `rows_sent` rows
    /// are handed on, the last ending at key `cursor`. Only forward: an update
    /// with fewer pages than recorded (a reader that lost its place, or a
    /// slower writer of the same run) changes nothing and is not an error.
    pub async fn set_cursor(
        &self,
        run: &str,
        entity: &str,
        segment: u32,
        cursor: &[SqlValue],
        pages_sent: u64,
        rows_sent: u64,
    ) -> Result<(), DynamoError> {
        let json = serde_json::to_string(cursor).expect("SQL values serialise");
        let out = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("PK", pk(run))
            .item("SK", s(format!("CURSOR#{entity}#{segment:05}")))
            .item("entity", s(entity))
            .item("segment", n(segment))
            .item("cursor", s(json))
            .item("pages_sent", n(pages_sent))
            .item("rows_sent", n(rows_sent))
            .condition_expression("attribute_not_exists(pages_sent) OR pages_sent <= :p")
            .expression_attribute_values(":p", n(pages_sent))
            .send()
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(self.call_err("PutItem", sdk_message(&e))),
        }
    }

    /// Records that a segment's reader reached its end after `total_rows` rows in `pages` pages.
    pub async fn finish_segment(
        &self,
        run: &str,
        entity: &str,
        segment: u32,
        total_rows: u64,
        pages: u64,
    ) -> Result<(), DynamoError> {
        self.put(
            run,
            format!("TOTAL#{entity}#{segment:05}"),
            vec![
                ("entity", s(entity)),
                ("segment", n(segment)),
                ("rows", n(total_rows)),
                ("pages", n(pages)),
            ],
        )
        .await
    }

    /// The run's description alone (one strongly consistent `GetItem`);
    /// `None` when the run is not recorded in this table.
    pub async fn run_meta(&self, run: &str) -> Result<Option<RunMeta>, DynamoError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", s("RUN"))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.call_err("GetItem", sdk_message(&e)))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let mut progress = RunProgress::default();
        self.read_record(&item, &mut progress)?;
        Ok(progress.meta)
    }

    /// Reads everything recorded for a run (a strongly consistent Query over
    /// its partition, page after page).
    pub async fn load(&self, run: &str) -> Result<RunProgress, DynamoError> {
        let mut progress = RunProgress::default();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("PK = :pk")
                .expression_attribute_values(":pk", pk(run))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| self.call_err("Query", sdk_message(&e)))?;
            for item in out.items() {
                self.read_record(item, &mut progress)?;
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(progress);
            }
        }
    }

    fn read_record(
        &self,
        item: &HashMap<String, AttributeValue>,
        progress: &mut RunProgress,
    ) -> Result<(), DynamoError> {
        let sk = item
            .get("SK")
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default();
        let bad = |what: String| self.call_err("Query", format!("progress record {sk}: {what}"));
        let text = |name: &str| -> Result<String, DynamoError> {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .ok_or_else(|| bad(format!("no string attribute {name}")))
        };
        let number = |name: &str| -> Result<u64, DynamoError> {
            item.get(name)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(format!("no whole-number attribute {name}")))
        };
        let segment = || -> Result<u32, DynamoError> {
            u32::try_from(number("segment")?).map_err(|_| bad("segment out of range".into()))
        };
        if sk == "RUN" {
            let meta = serde_json::from_str(&text("meta")?)
                .map_err(|e| bad(format!("meta is not a run description: {e}")))?;
            progress.meta = Some(meta);
            if item.contains_key("digest") {
                let digest = serde_json::from_str(&text("digest")?)
                    .map_err(|e| bad(format!("digest is not a map of part hashes: {e}")))?;
                progress.digest = Some(digest);
            }
        } else if sk.starts_with("BATCH#") {
            let small = |name: &str| -> Result<u32, DynamoError> {
                u32::try_from(number(name)?).map_err(|_| bad(format!("{name} out of range")))
            };
            progress.batches.push(BatchRecord {
                entity: text("entity")?,
                segment: segment()?,
                page: number("page")?,
                part: small("part")?,
                parts: small("parts")?,
                rows: number("rows")?,
                items: number("items")?,
                rejected: number("rejected")?,
                failed: number("failed")?,
            });
            // Absent in records of an earlier release, and of queue workers that do not record it.
            if item.contains_key("write_units") {
                let cost = BatchCost {
                    bytes: number("bytes")?,
                    write_units: number("write_units")?,
                    retries: number("retries")?,
                };
                progress.costs.insert(sk.clone(), cost);
            }
        } else if sk.starts_with("CURSOR#") {
            let cursor = serde_json::from_str(&text("cursor")?)
                .map_err(|e| bad(format!("cursor is not a list of SQL values: {e}")))?;
            progress.cursors.push(SegmentCursor {
                entity: text("entity")?,
                segment: segment()?,
                cursor,
                pages_sent: number("pages_sent")?,
                // Absent in records of an earlier release: counted from zero.
                rows_sent: number("rows_sent").unwrap_or(0),
            });
        } else if sk.starts_with("TOTAL#") {
            progress.totals.push(SegmentTotal {
                entity: text("entity")?,
                segment: segment()?,
                rows: number("rows")?,
                pages: number("pages")?,
            });
        }
        // Other kinds of record (from a newer release) are not ours to count.
        Ok(())
    }
}

/// The counts of one entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityCount {
    /// Entity name.
    pub entity: String,
    /// Segments of the entity.
    pub segments: u32,
    /// Segments whose reader reached the end.
    pub segments_finished: u32,
    /// Rows read from the source: the sum of the segment totals, `None`
    /// while any segment is unfinished.
    pub rows_read: Option<u64>,
    /// Rows the batch records account for.
    pub rows_recorded: u64,
    /// Items written.
    pub written: u64,
    /// Rows rejected (mapping or DynamoDB).
    pub rejected: u64,
    /// Items that ran out of retries.
    pub failed: u64,
    /// Rows read but not yet in a batch record, once `rows_read` is known.
    pub pending: Option<u64>,
}

/// A page that was handed on but is not (wholly) recorded as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct MissingPage {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page.
    pub page: u64,
}

/// What [`summarize`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Per entity, in the run's order.
    pub entities: Vec<EntityCount>,
    /// Pages sent without a record for each of their parts, in order.
    pub missing: Vec<MissingPage>,
    /// Every row is accounted for: the run is described, every segment is
    /// finished, no page is missing, and for every entity the records add up
    /// to the rows read (`written + rejected + failed`). Rejected and failed
    /// rows count as accounted for: they are in the rejects file.
    pub complete: bool,
}

/// Adds a run's records up and compares them with the rows read.
pub fn summarize(progress: &RunProgress) -> Verification {
    // Entities in the run's order, then any only seen in records.
    let mut order: Vec<(String, u32)> = progress
        .meta
        .iter()
        .flat_map(|m| m.entities.iter().map(|e| (e.name.clone(), e.segments)))
        .collect();
    let seen: Vec<(&str, u32)> = progress
        .batches
        .iter()
        .map(|b| (b.entity.as_str(), b.segment))
        .chain(
            progress
                .cursors
                .iter()
                .map(|c| (c.entity.as_str(), c.segment)),
        )
        .chain(
            progress
                .totals
                .iter()
                .map(|t| (t.entity.as_str(), t.segment)),
        )
        .collect();
    let mut extra: BTreeMap<&str, u32> = BTreeMap::new();
    for (entity, segment) in seen {
        if !order.iter().any(|(name, _)| name == entity) {
            let segments = extra.entry(entity).or_default();
            *segments = (*segments).max(segment + 1);
        }
    }
    order.extend(extra.into_iter().map(|(e, s)| (e.to_string(), s)));

    // Parts recorded per page, and how many parts the page has.
    let mut recorded: HashMap<(&str, u32, u64), (u32, HashSet<u32>)> = HashMap::new();
    for b in &progress.batches {
        let entry = recorded
            .entry((b.entity.as_str(), b.segment, b.page))
            .or_default();
        entry.0 = entry.0.max(b.parts);
        entry.1.insert(b.part);
    }
    let mut sent: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    for c in &progress.cursors {
        let pages = sent.entry((c.entity.as_str(), c.segment)).or_default();
        *pages = (*pages).max(c.pages_sent);
    }
    for t in &progress.totals {
        let pages = sent.entry((t.entity.as_str(), t.segment)).or_default();
        *pages = (*pages).max(t.pages);
    }
    let mut missing = Vec::new();
    for ((entity, segment), pages) in sent {
        for page in 0..pages {
            let whole = recorded
                .get(&(entity, segment, page))
                .is_some_and(|(count, parts)| (0..*count).all(|p| parts.contains(&p)));
            if !whole {
                missing.push(MissingPage {
                    entity: entity.to_string(),
                    segment,
                    page,
                });
            }
        }
    }

    let mut complete = progress.meta.is_some() && missing.is_empty();
    let mut entities = Vec::with_capacity(order.len());
    for (entity, segments) in order {
        let totals: Vec<&SegmentTotal> = progress
            .totals
            .iter()
            .filter(|t| t.entity == entity && t.segment < segments)
            .collect();
        let finished: HashSet<u32> = totals.iter().map(|t| t.segment).collect();
        let segments_finished = finished.len() as u32;
        let rows_read =
            (segments_finished == segments).then(|| totals.iter().map(|t| t.rows).sum());
        let mut count = EntityCount {
            entity,
            segments,
            segments_finished,
            rows_read,
            rows_recorded: 0,
            written: 0,
            rejected: 0,
            failed: 0,
            pending: None,
        };
        for b in progress.batches.iter().filter(|b| b.entity == count.entity) {
            count.rows_recorded += b.rows;
            count.written += b.items;
            count.rejected += b.rejected;
            count.failed += b.failed;
        }
        count.pending = rows_read.map(|r| r.saturating_sub(count.rows_recorded));
        let accounted = count.written + count.rejected + count.failed;
        complete &= rows_read == Some(count.rows_recorded) && accounted == count.rows_recorded;
        entities.push(count);
    }
    Verification {
        entities,
        missing,
        complete,
    }
}
