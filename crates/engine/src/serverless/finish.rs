//! Learning that a run is complete without polling: whoever is told that a
//! batch record or segment total landed (the progress table's stream) asks
//! [`Finisher::check`], which adds the run's records up as `verify` does and,
//! when every row is accounted for, writes the run's `DONE` record once.
//!
//! The `DONE` record is written with a conditional put (`attribute_not_exists`),
//! so of any number of checks only one sees [`Completion::NewlyDone`]: the
//! one that announces. Once it is there a check costs one `GetItem`, no
//! Query. Its `announced` attribute says whether the announcement went out.

use serde::Serialize;
use sql2ddb_aws::AwsContext;
use sql2ddb_dynamo::progress::{DoneCounts, DoneState, ProgressStore};
use sql2ddb_dynamo::Dynamo;

use crate::error::EngineError;
use crate::ids::RunId;
use crate::verify::summarize;

/// What a completed run's `DONE` record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoneRecord {
    /// The run.
    pub run_id: RunId,
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
    store: ProgressStore,
}

impl Finisher {
    /// A finisher of the progress table `table`.
    pub fn new(client: Dynamo, table: impl Into<String>) -> Finisher {
        Finisher {
            store: ProgressStore::new(client, table),
        }
    }

    /// Connects to the progress table `table` at `endpoint` (a URL; default
    /// AWS), with the process's AWS context `aws`.
    pub fn connect(
        aws: &AwsContext,
        endpoint: Option<&str>,
        table: &str,
    ) -> Result<Finisher, EngineError> {
        let endpoint = match endpoint {
            Some(url) => sql2ddb_dynamo::Endpoint::parse(url)?,
            None => sql2ddb_dynamo::Endpoint::Aws,
        };
        Ok(Finisher::new(Dynamo::new(aws, &endpoint)?, table))
    }

    /// The progress table.
    pub fn table(&self) -> &str {
        self.store.table()
    }

    /// Checks run `run`: when its `DONE` record exists, says so (one
    /// `GetItem`); else adds its records up (one Query of its partition)
    /// and, when every row is accounted for, writes the record unless
    /// another check just did.
    pub async fn check(&self, run: &RunId) -> Result<Completion, EngineError> {
        if let DoneState::Present { announced } = self.store.done_state(run).await? {
            return Ok(Completion::AlreadyDone { announced });
        }
        let summary = summarize(&self.store.load(run).await?);
        if !summary.complete {
            return Ok(Completion::Incomplete);
        }
        let mut counts = DoneCounts {
            rows: 0,
            written: 0,
            rejected: 0,
            failed: 0,
            done_at: chrono::Utc::now().to_rfc3339(),
        };
        for e in &summary.entities {
            counts.rows += e.rows_read.unwrap_or(0);
            counts.written += e.written;
            counts.rejected += e.rejected;
            counts.failed += e.failed;
        }
        let token = uuid::Uuid::new_v4().to_string();
        if !self.store.record_done(run, &counts, &token).await? {
            return Ok(Completion::AlreadyDone { announced: false });
        }
        Ok(Completion::NewlyDone(DoneRecord {
            run_id: run.clone(),
            rows: counts.rows,
            written: counts.written,
            rejected: counts.rejected,
            failed: counts.failed,
            done_at: counts.done_at,
        }))
    }

    /// Marks run `run`'s completion as announced (once the announcement is sent).
    pub async fn announced(&self, run: &RunId) -> Result<(), EngineError> {
        Ok(self.store.mark_announced(run).await?)
    }
}
