//! The progress store's calls to DynamoDB.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use sql2ddb_core::{redact_secrets, KeyAttr, KeyType, RunId, SqlValue};

use super::{BatchCost, BatchRecord, RunMeta, RunProgress, SegmentCursor, SegmentTotal};
use crate::client::Dynamo;
use crate::error::{local_error, DynamoError};
use crate::retry::retried;
use crate::writer::RetryPolicy;

/// A store of run progress in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct ProgressStore {
    pub(super) client: Client,
    pub(super) table: String,
    pub(super) retry: RetryPolicy,
}

pub(super) fn pk(run: &RunId) -> AttributeValue {
    AttributeValue::S(format!("RUN#{run}"))
}

pub(super) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(super) fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A run's description as stored: JSON, its source redacted once more, in case.
fn meta_attr(meta: &RunMeta) -> AttributeValue {
    let meta = RunMeta {
        source: redact_secrets(&meta.source),
        ..meta.clone()
    };
    s(serde_json::to_string(&meta).expect("run meta serialises"))
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
    pub fn new(dynamo: Dynamo, table: impl Into<String>) -> Self {
        ProgressStore {
            client: dynamo.sdk().clone(),
            table: table.into(),
            retry: RetryPolicy::default(),
        }
    }

    /// The same store with another retry policy for its calls.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the table (on-demand, string `PK` and `SK`) unless it exists;
    /// returns whether it was created.
    pub async fn ensure(&self) -> Result<bool, DynamoError> {
        let keys = [
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::S),
        ];
        let spec = crate::admin::TableSpec::new(&self.table, keys.to_vec());
        crate::admin::ensure(&self.client, &spec, true, false).await
    }

    fn call_err(&self, operation: &'static str, message: String) -> DynamoError {
        local_error(operation, &self.table, message)
    }

    pub(super) async fn put(
        &self,
        run: &RunId,
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
        retried(&self.retry, "PutItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("PutItem", &self.table))?;
        Ok(())
    }

    /// Records the run's description (its source redacted once more, in case).
    pub async fn record_run(&self, run: &RunId, meta: &RunMeta) -> Result<(), DynamoError> {
        self.put(run, "RUN".into(), vec![("meta", meta_attr(meta))])
            .await
    }

    /// Records the run's description with the digest of its mapping's items
    /// (part name → hash), which a resume compares with its own mapping's.
    pub async fn record_run_with_digest(
        &self,
        run: &RunId,
        meta: &RunMeta,
        digest: &BTreeMap<String, String>,
    ) -> Result<(), DynamoError> {
        let digest = serde_json::to_string(digest).expect("a digest serialises");
        self.put(
            run,
            "RUN".into(),
            vec![("meta", meta_attr(meta)), ("digest", s(digest))],
        )
        .await
    }

    /// Whether the progress table exists (one `DescribeTable`).
    pub async fn exists(&self) -> Result<bool, DynamoError> {
        let described = retried(&self.retry, "DescribeTable", || {
            self.client.describe_table().table_name(&self.table).send()
        })
        .await;
        match described {
            Ok(_) => Ok(true),
            Err(e)
                if e.error
                    .as_service_error()
                    .is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(e.into_error("DescribeTable", &self.table)),
        }
    }

    /// Records a finished batch; a second record of the same batch replaces the first.
    pub async fn record_batch(&self, run: &RunId, record: &BatchRecord) -> Result<(), DynamoError> {
        self.put(run, record.sort_key(), batch_attrs(record)).await
    }

    /// Records a finished batch with what writing it cost; a second record
    /// of the same batch replaces the first, so a batch written twice is
    /// counted once.
    pub async fn record_batch_with_cost(
        &self,
        run: &RunId,
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
        run: &RunId,
        entity: &str,
        segment: u32,
        cursor: &[SqlValue],
        pages_sent: u64,
        rows_sent: u64,
    ) -> Result<(), DynamoError> {
        let json = serde_json::to_string(cursor).expect("SQL values serialise");
        let req = self
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
            .expression_attribute_values(":p", n(pages_sent));
        match retried(&self.retry, "PutItem", || req.clone().send()).await {
            Ok(_) => Ok(()),
            // A cursor as far along is there already (perhaps this very
            // write, whose first answer was lost).
            Err(e)
                if e.error
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into_error("PutItem", &self.table)),
        }
    }

    /// Records that a segment's reader reached its end after `total_rows` rows in `pages` pages.
    pub async fn finish_segment(
        &self,
        run: &RunId,
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
    pub async fn run_meta(&self, run: &RunId) -> Result<Option<RunMeta>, DynamoError> {
        let req = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", s("RUN"))
            .consistent_read(true);
        let out = retried(&self.retry, "GetItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("GetItem", &self.table))?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        let mut progress = RunProgress::default();
        self.read_record(&item, &mut progress)?;
        Ok(progress.meta)
    }

    /// Reads everything recorded for a run (a strongly consistent Query over
    /// its partition, page after page).
    pub async fn load(&self, run: &RunId) -> Result<RunProgress, DynamoError> {
        let mut progress = RunProgress::default();
        self.each_record(run, None, |item| self.read_record(item, &mut progress))
            .await?;
        Ok(progress)
    }

    /// Hands every record of run `run` (those whose sort key begins with
    /// `prefix`, when given) to `each`, page by page of one strongly
    /// consistent query; stops at `each`'s first error.
    pub(super) async fn each_record(
        &self,
        run: &RunId,
        prefix: Option<&str>,
        mut each: impl FnMut(&HashMap<String, AttributeValue>) -> Result<(), DynamoError>,
    ) -> Result<(), DynamoError> {
        let mut start = None;
        loop {
            let mut req = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_values(":pk", pk(run))
                .consistent_read(true)
                .set_exclusive_start_key(start);
            req = match prefix {
                Some(prefix) => req
                    .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                    .expression_attribute_values(":prefix", s(prefix)),
                None => req.key_condition_expression("PK = :pk"),
            };
            let out = retried(&self.retry, "Query", || req.clone().send())
                .await
                .map_err(|e| e.into_error("Query", &self.table))?;
            for item in out.items() {
                each(item)?;
            }
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok(());
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
        let r = Record {
            store: self,
            item,
            sk: &sk,
        };
        if sk == "RUN" {
            let meta = serde_json::from_str(&r.text("meta")?)
                .map_err(|e| r.bad(format!("meta is not a run description: {e}")))?;
            progress.meta = Some(meta);
            if item.contains_key("digest") {
                let digest = serde_json::from_str(&r.text("digest")?)
                    .map_err(|e| r.bad(format!("digest is not a map of part hashes: {e}")))?;
                progress.digest = Some(digest);
            }
        } else if sk.starts_with("BATCH#") {
            progress.batches.push(BatchRecord {
                entity: r.text("entity")?,
                segment: r.segment()?,
                page: r.number("page")?,
                part: r.small("part")?,
                parts: r.small("parts")?,
                rows: r.number("rows")?,
                items: r.number("items")?,
                rejected: r.number("rejected")?,
                failed: r.number("failed")?,
            });
            // Absent in records of an earlier release, and of queue workers that do not record it.
            if item.contains_key("write_units") {
                let cost = BatchCost {
                    bytes: r.number("bytes")?,
                    write_units: r.number("write_units")?,
                    retries: r.number("retries")?,
                };
                progress.costs.insert(sk.clone(), cost);
            }
        } else if sk.starts_with("CURSOR#") {
            let cursor = serde_json::from_str(&r.text("cursor")?)
                .map_err(|e| r.bad(format!("cursor is not a list of SQL values: {e}")))?;
            progress.cursors.push(SegmentCursor {
                entity: r.text("entity")?,
                segment: r.segment()?,
                cursor,
                pages_sent: r.number("pages_sent")?,
                // Absent in records of an earlier release: counted from zero.
                rows_sent: r.number("rows_sent").unwrap_or(0),
            });
        } else if sk.starts_with("TOTAL#") {
            progress.totals.push(SegmentTotal {
                entity: r.text("entity")?,
                segment: r.segment()?,
                rows: r.number("rows")?,
                pages: r.number("pages")?,
            });
        }
        // Other kinds of record (from a newer release) are not ours to count.
        Ok(())
    }
}

/// One record of a run as read back: its attributes, each named in the
/// error when it is missing or out of range.
struct Record<'a> {
    store: &'a ProgressStore,
    item: &'a HashMap<String, AttributeValue>,
    sk: &'a str,
}

impl Record<'_> {
    fn bad(&self, what: String) -> DynamoError {
        self.store
            .call_err("Query", format!("progress record {}: {what}", self.sk))
    }

    fn text(&self, name: &str) -> Result<String, DynamoError> {
        self.item
            .get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .ok_or_else(|| self.bad(format!("no string attribute {name}")))
    }

    fn number(&self, name: &str) -> Result<u64, DynamoError> {
        self.item
            .get(name)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| self.bad(format!("no whole-number attribute {name}")))
    }

    fn small(&self, name: &str) -> Result<u32, DynamoError> {
        u32::try_from(self.number(name)?).map_err(|_| self.bad(format!("{name} out of range")))
    }

    fn segment(&self) -> Result<u32, DynamoError> {
        u32::try_from(self.number("segment")?).map_err(|_| self.bad("segment out of range".into()))
    }
}
