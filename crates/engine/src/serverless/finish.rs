//! Learning that a run is complete without polling: whoever is told that a
//! batch record or segment total landed (the progress table's stream) asks
//! [`Finisher::check`], which adds the run's records up as `verify` does and,
//! when every row is accounted for, writes the run's `DONE` record once.
//!
//! The `DONE` record is written with a conditional put (`attribute_not_exists`),
//! so of any number of checks only one sees [`Completion::NewlyDone`]: the
//! one that announces. Once it is there a check costs one `GetItem`, no
//! Query. Its `announced` attribute says whether the announcement went out.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_dynamo::Client;

use crate::error::EngineError;
use crate::verify::summarize;

/// The sort key of a run's completion record.
const DONE: &str = "DONE";

/// What a completed run's `DONE` record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoneRecord {
    /// The run.
    pub run_id: String,
    /// Rows read from the source.
    pub rows: u64,
    /// Items written.
    pub written: u64,
    /// Rows rejected (in the rejects files).
    pub rejected: u64,
    /// Rows not written within their retry budget.
    pub failed: u64,
    /// When the record was written (RFC 3339).
    pub done_at: String,
}

/// Where a run stands after a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Completion {
    /// Rows are still unaccounted for (or the run is not recorded).
    Incomplete,
    /// This check wrote the `DONE` record: announce it.
    NewlyDone(DoneRecord),
    /// The `DONE` record was there already; `announced` is false when the
    /// announcement has not been confirmed sent (see [`Finisher::announced`]).
    AlreadyDone {
        /// Whether the announcement was confirmed sent.
        announced: bool,
    },
}

/// Checks runs of one progress table for completion.
pub struct Finisher {
    client: Client,
    store: ProgressStore,
}

fn pk(run: &str) -> AttributeValue {
    // The progress store's partition key of a run.
    AttributeValue::S(format!("RUN#{run}"))
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

impl Finisher {
    /// A finisher of the progress table `table`.
    pub fn new(client: Client, table: impl Into<String>) -> Finisher {
        let table = table.into();
        Finisher {
            store: ProgressStore::new(client.clone(), table),
            client,
        }
    }

    /// Connects to the progress table `table` at `endpoint` (a URL; default AWS).
    pub async fn connect(
        endpoint: Option<&str>,
        region: Option<&str>,
        table: &str,
    ) -> Result<Finisher, EngineError> {
        let endpoint = match endpoint {
            Some(url) => sql2ddb_dynamo::Endpoint::parse(url)?,
            None => sql2ddb_dynamo::Endpoint::Aws,
        };
        let client = sql2ddb_dynamo::connect(&endpoint, region).await?;
        Ok(Finisher::new(client, table))
    }

    /// The progress table.
    pub fn table(&self) -> &str {
        self.store.table()
    }

    /// The run's `DONE` record's `announced` flag, if the record exists.
    async fn done_state(&self, run: &str) -> Result<Option<bool>, EngineError> {
        let out = self
            .client
            .get_item()
            .table_name(self.table())
            .key("PK", pk(run))
            .key("SK", AttributeValue::S(DONE.into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error("GetItem", &e))?;
        Ok(out.item.map(|item| {
            item.get("announced")
                .and_then(|v| v.as_bool().ok())
                .copied()
                .unwrap_or(false)
        }))
    }

    fn error<E: std::error::Error>(&self, operation: &str, e: &E) -> EngineError {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        EngineError::Config(format!(
            "DynamoDB: {operation} on the progress table {}: {}",
            self.table(),
            sql2ddb_core::redact_secrets(&text)
        ))
    }

    /// Checks run `run`: when its `DONE` record exists, says so (one
    /// `GetItem`); else adds its records up (one Query of its partition)
    /// and, when every row is accounted for, writes the record unless
    /// another check just did.
    pub async fn check(&self, run: &str) -> Result<Completion, EngineError> {
        if let Some(announced) = self.done_state(run).await? {
            return Ok(Completion::AlreadyDone { announced });
        }
        let summary = summarize(&self.store.load(run).await?);
        if !summary.complete {
            return Ok(Completion::Incomplete);
        }
        let mut record = DoneRecord {
            run_id: run.to_string(),
            rows: 0,
            written: 0,
            rejected: 0,
            failed: 0,
            done_at: chrono::Utc::now().to_rfc3339(),
        };
        for e in &summary.entities {
            record.rows += e.rows_read.unwrap_or(0);
            record.written += e.written;
            record.rejected += e.rejected;
            record.failed += e.failed;
        }
        let put = self
            .client
            .put_item()
            .table_name(self.table())
            .item("PK", pk(run))
            .item("SK", AttributeValue::S(DONE.into()))
            .item("rows", n(record.rows))
            .item("written", n(record.written))
            .item("rejected", n(record.rejected))
            .item("failed", n(record.failed))
            .item("done_at", AttributeValue::S(record.done_at.clone()))
            .item("announced", AttributeValue::Bool(false))
            .condition_expression("attribute_not_exists(SK)")
            .send()
            .await;
        match put {
            Ok(_) => Ok(Completion::NewlyDone(record)),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                Ok(Completion::AlreadyDone { announced: false })
            }
            Err(e) => Err(self.error("PutItem", &e)),
        }
    }

    /// Marks run `run`'s completion as announced (once the announcement is sent).
    pub async fn announced(&self, run: &str) -> Result<(), EngineError> {
        self.client
            .update_item()
            .table_name(self.table())
            .key("PK", pk(run))
            .key("SK", AttributeValue::S(DONE.into()))
            .update_expression("SET announced = :t")
            .condition_expression("attribute_exists(SK)")
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .send()
            .await
            .map_err(|e| self.error("UpdateItem", &e))?;
        Ok(())
    }
}
