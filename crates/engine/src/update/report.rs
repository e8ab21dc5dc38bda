//! The live counters and the report of an update job. The numbers add up:
//! `scanned = not_matched + matched` and, once the job finished,
//! `matched = updated + skipped + failed` (`+ pending` when interrupted; a
//! dry run writes nothing and counts every match as `pending`).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::ids::RunId;

/// How an update job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateStatus {
    /// Every matching item updated or skipped (dry run: counted).
    Ok,
    /// Items not written, or the job stopped on an error.
    Failed,
    /// Stopped on request (Ctrl-C, SIGTERM): `--resume` continues it.
    Interrupted,
    /// Stopped at its `--max-seconds` limit: `--resume` continues it.
    TimeUp,
    /// Stopped because DynamoDB kept refusing writes (throttling) past the
    /// retry budget: the items not written are pending, nothing failed;
    /// `--resume` continues it.
    Throttled,
}

/// Counters of a running update job, read by whoever shows progress.
#[derive(Debug, Default)]
pub struct UpdateProgress {
    /// Items the reads evaluated (`ScannedCount`).
    pub scanned: AtomicU64,
    /// Items that met `where`, as read.
    pub matched: AtomicU64,
    /// Items changed (or deleted).
    pub updated: AtomicU64,
    /// Items that no longer met `where` (or were gone) when written.
    pub skipped: AtomicU64,
    /// Items not written: refused, or out of retries (in `failed.jsonl`).
    pub failed: AtomicU64,
    /// Pages read.
    pub pages: AtomicU64,
    /// Calls retried (throttling, 5xx, timeouts, dropped connections).
    pub retries: AtomicU64,
    /// Calls throttled.
    pub throttled: AtomicU64,
    /// Read units consumed, in thousandths.
    pub read_milli_units: AtomicU64,
    /// Write units consumed, in thousandths.
    pub write_milli_units: AtomicU64,
    /// Segments whose reads reached the end.
    pub segments_done: AtomicU64,
}

impl UpdateProgress {
    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What a dry run says the job would cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostEstimate {
    /// Read units of the reads (as DynamoDB reported them consumed; from
    /// the table's size when it did not).
    pub read_units: f64,
    /// Write units of the table's writes: each matching item rounded up to 1 KB.
    pub write_units: u64,
    /// Write units of each secondary index the changes touch, by index.
    pub index_write_units: Vec<IndexUnits>,
    /// Table and index write units together.
    pub total_write_units: u64,
    /// Seconds the writes take at `--max-wcu` (when given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_at_max_wcu: Option<f64>,
    /// Seconds the reads take at `--max-rcu` (when given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds_at_max_rcu: Option<f64>,
}

/// Write units of one index.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IndexUnits {
    /// Index name.
    pub index: String,
    /// Items whose change writes the index.
    pub items: u64,
    /// Its write units (a changed index key costs a delete and a put).
    pub write_units: u64,
}

/// The report of one update job, printed as a table or as one JSON object
/// (and saved as `report.json` in the run directory).
#[derive(Debug, Clone, Serialize)]
pub struct UpdateReport {
    /// Run id (also the marker value of a job that is not idempotent).
    pub run_id: RunId,
    /// Whether this was a resumed run (the counts are every attempt's together).
    pub resumed: bool,
    /// The job's `name`.
    pub job: String,
    /// How it ended (`ok`, `failed`, `interrupted`, `time_up`).
    pub status: UpdateStatus,
    /// `update` or `delete`.
    pub action: String,
    /// `update-item` (conditional writes) or `batch-put` (whole items rewritten).
    pub mode: String,
    /// Whether it was a dry run (nothing written).
    pub dry_run: bool,
    /// Whether the update gives the same item however often it is applied
    /// (true for a delete). When false it reads the item's current value
    /// and is applied at most once per item per run, by the run's marker
    /// (the notes say why).
    pub idempotent: bool,
    /// The table.
    pub table: String,
    /// DynamoDB endpoint as shown (`aws`, a URL with any password masked).
    pub endpoint: String,
    /// `scan` (with its segments) or `query` (with its index).
    pub read: String,
    /// The run directory.
    pub run_dir: String,
    /// The file listing each failed item's key and reason (exists only when one failed).
    pub failures_file: String,
    /// The progress table the run keeps its records in, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_table: Option<String>,
    /// The queue the matching keys were sent to (`--queue`): workers apply
    /// them, and `pending` counts them until `verify` says they are done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Items evaluated.
    pub scanned: u64,
    /// Items evaluated that did not meet `where`.
    pub not_matched: u64,
    /// Items that met `where` when read.
    pub matched: u64,
    /// Items changed (deleted, for a delete job).
    pub updated: u64,
    /// Items that no longer met `where` when written: left as they were.
    pub skipped: u64,
    /// Items not written (see the failures file).
    pub failed: u64,
    /// Items matched but not written: a dry run's matches, or those in
    /// flight when an interrupted job stopped (a rerun handles them).
    pub pending: u64,
    /// Pages read.
    pub pages: u64,
    /// Calls retried.
    pub retries: u64,
    /// Calls throttled.
    pub throttled: u64,
    /// Read units consumed.
    pub read_units: f64,
    /// Write units consumed (table and indexes), as DynamoDB reported them.
    pub write_units: f64,
    /// Wall-clock seconds of this attempt.
    pub seconds: f64,
    /// What the job would cost (dry run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<CostEstimate>,
    /// Things worth knowing (e.g. the run marker a non-idempotent job writes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The error that stopped the job, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The cause of `error`, when it is an error of a kind (a table that
    /// failed, a file not written).
    #[serde(skip)]
    pub cause: Option<crate::Cause>,
    /// Items changed, calls throttled and the concurrency limit, second by
    /// second (empty for a job that sent its keys to a queue: its workers
    /// change them).
    pub timeline: crate::timeline::Timeline,
    /// What the pacer learned from the table's refusals and held back
    /// (nothing for a job that sent its keys to a queue: its workers pace
    /// their own writes).
    pub pacing: crate::report::PacingReport,
}

impl UpdateReport {
    /// Takes the counters' final values and sets the status.
    pub(crate) fn finish(
        &mut self,
        p: &UpdateProgress,
        interrupted: bool,
        time_up: bool,
        seconds: f64,
    ) {
        let get = UpdateProgress::get;
        self.scanned = get(&p.scanned);
        self.matched = get(&p.matched);
        self.not_matched = self.scanned.saturating_sub(self.matched);
        self.updated = get(&p.updated);
        self.skipped = get(&p.skipped);
        self.failed = get(&p.failed);
        self.pending = self
            .matched
            .saturating_sub(self.updated + self.skipped + self.failed);
        self.pages = get(&p.pages);
        self.retries = get(&p.retries);
        self.throttled = get(&p.throttled);
        self.read_units = get(&p.read_milli_units) as f64 / 1000.0;
        self.write_units = get(&p.write_milli_units) as f64 / 1000.0;
        self.seconds = seconds;
        let throttled = matches!(
            self.cause,
            Some(crate::Cause::Dynamo(
                _,
                Some(sql2ddb_dynamo::Failure::Throttled)
            ))
        );
        self.status = if throttled && self.failed == 0 {
            UpdateStatus::Throttled
        } else if self.error.is_some() || self.failed > 0 {
            UpdateStatus::Failed
        } else if interrupted {
            UpdateStatus::Interrupted
        } else if time_up {
            UpdateStatus::TimeUp
        } else {
            UpdateStatus::Ok
        };
    }
}
