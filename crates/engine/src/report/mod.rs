//! The run report: what was read, written, rejected, per entity and in total.
//! The numbers add up: `rows_read = items_written + overwritten + rejected +
//! failed`. A typed outcome: the commands render it (text, JSON, HTML) and
//! choose the exit code of its status.

use serde::Serialize;
use sql2ddb_dynamo::progress::SnapshotMark;

use crate::ids::RunId;
use crate::rejects::RejectCount;
use crate::timeline::Timeline;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every row written.
    Ok,
    /// Finished, but some rows were rejected (see the rejects file).
    Rejected,
    /// Some rows could not be written, or the run stopped on an error.
    Failed,
    /// Every row was read and sent to the queue; workers write them
    /// (`sql2ddb verify` says when they are done).
    Enqueued,
    /// Stopped on request (Ctrl-C, SIGTERM) before every row was read: the
    /// counts are exact for what was done; `pending` rows were read but not
    /// confirmed written.
    Interrupted,
    /// Stopped because DynamoDB kept refusing writes (throttling) past the
    /// retry budget: no row is at fault; `pending` rows were read but not
    /// confirmed written, and `--resume` writes them.
    Throttled,
}

/// Figures of one entity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EntityReport {
    /// Entity name.
    pub name: String,
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows the source held when the run started (`SELECT count(*)`): a run
    /// whose `rows_read` differs fails, unless the source changed under it.
    pub rows_counted: u64,
    /// Distinct items written: rows whose item is in the table, less the
    /// rows counted in `overwritten`.
    pub items_written: u64,
    /// Rows of an `overwrite = true` entity that landed on the item of an
    /// earlier row (last write wins): written, but not a distinct item.
    pub overwritten: u64,
    /// Rows rejected, each in the rejects file with its reason.
    pub rejected: u64,
    /// Rows not written when their attempts ran out on a service that kept
    /// failing (also in the rejects file); in a run that failed while
    /// writing, also the rows read and not confirmed written (not in the
    /// rejects file: a resume writes them). Never rows the table only
    /// throttled: those are `pending`.
    pub failed: u64,
    /// Rows read but not confirmed written when an interrupted or throttled
    /// run stopped (a rerun or `--resume` writes them); 0 for a run that
    /// finished.
    pub pending: u64,
    /// Bytes of the items written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed (each item rounded up to 1 KB).
    pub write_units: u64,
    /// Calls retried (throttling, unprocessed items, transient errors).
    pub retries: u64,
    /// Key-range segments read.
    pub segments: u32,
    /// Pages read.
    pub pages: u64,
    /// Wall-clock seconds from the entity's first read to its last write.
    pub seconds: f64,
    /// Child rows of each embed (nested embeds too):
    /// `rows_read = nested + rejected_with_parent + no_parent`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub embeds: Vec<EmbedReport>,
}

/// Child rows of one embed: each one read is nested in its parent's item,
/// rejected with its parent row, or rejected for having no parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EmbedReport {
    /// `entity.embed` (`entity.embed.nested` for a nested embed).
    pub name: String,
    /// Child rows read: with their parents, and those without one.
    pub rows_read: u64,
    /// Nested in the item of a parent row that was mapped.
    pub nested: u64,
    /// Children of parent rows the mapping rejected (the parent's reject
    /// carries them).
    pub rejected_with_parent: u64,
    /// Rows whose parent key matches no parent row, or holds NULL: each in
    /// the rejects file with the reason "no parent".
    pub no_parent: u64,
}

impl EntityReport {
    fn add(&mut self, o: &EntityReport) {
        self.rows_read += o.rows_read;
        self.rows_counted += o.rows_counted;
        self.items_written += o.items_written;
        self.overwritten += o.overwritten;
        self.rejected += o.rejected;
        self.failed += o.failed;
        self.pending += o.pending;
        self.bytes += o.bytes;
        self.write_units += o.write_units;
        self.retries += o.retries;
        self.segments += o.segments;
        self.pages += o.pages;
    }
}

/// How the writers behaved: concurrency and capacity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WriterReport {
    /// Whether concurrency adapted to throttling (AIMD) or stayed fixed.
    pub adaptive: bool,
    /// Most calls in flight allowed.
    pub max_concurrency: usize,
    /// Calls in flight allowed at the end.
    pub final_concurrency: usize,
    /// Lowest limit reached (it falls on throttling).
    pub min_concurrency: usize,
    /// Times the limit was halved.
    pub decreases: u64,
    /// Times the limit grew by one.
    pub increases: u64,
    /// Calls that were throttled or returned unprocessed items.
    pub throttled: u64,
    /// The write-unit cap per second, if any.
    pub max_wcu: Option<u64>,
    /// Seconds writers waited for capacity under the cap (summed over writers).
    pub capacity_wait_seconds: f64,
    /// What the pacer learned from the table's refusals.
    pub pacing: PacingReport,
}

/// What the pacer learned from the table's refusals and held back for
/// them (items wait their turn instead of being sent and refused).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PacingReport {
    /// The table's write rate at the end, write units per second, as
    /// learned from batches refused at its limit; `None` when the table
    /// never refused at its limit (nothing waited for the table's rate).
    pub table_rate: Option<f64>,
    /// Times the table's rate was set from a refusal.
    pub rate_cuts: u64,
    /// Items that waited for their partition key's turn (a hot partition
    /// key, paced on its own so that the others go on).
    pub items_held: u64,
    /// Partition keys paced on their own at the end.
    pub keys_paced: usize,
    /// Seconds writers waited for the table's rate (summed over writers).
    pub wait_seconds: f64,
}

impl PacingReport {
    /// The figures of a pacer.
    pub fn of(pacer: &sql2ddb_dynamo::Pacer) -> PacingReport {
        let s = pacer.snapshot();
        PacingReport {
            table_rate: s.rate,
            rate_cuts: s.cuts,
            items_held: s.held,
            keys_paced: s.keys,
            wait_seconds: s.waited.as_secs_f64(),
        }
    }

    /// Whether the pacer held anything back: a report shows it only then.
    pub fn paced(&self) -> bool {
        self.table_rate.is_some() || self.items_held > 0 || self.keys_paced > 0
    }
}

/// What a pointer did in this run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PointerReport {
    /// The pointer's label (`LAST_ORDER`).
    pub name: String,
    /// Distinct pointer items it touched (one for a fixed key).
    pub keys: u64,
    /// `keys` is a lower bound: past a bound of distinct items (a pointer
    /// per customer on a long run), they are no longer told apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keys_at_least: bool,
    /// Conditional writes that moved it.
    pub moved: u64,
    /// Conditional writes that found a newer value already there (expected
    /// under concurrency and replays; never an error).
    pub already_newer: u64,
    /// The value the pointer item holds at the end, as DynamoDB JSON, read
    /// back from the table (for a fixed key; `null` when it has several keys
    /// or was never written).
    pub value: serde_json::Value,
}

/// The report of one run, printed as a table or as one JSON object.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Run id.
    pub run_id: RunId,
    /// The mapping file the run was given, as given (`sql2ddb runs` and
    /// `--run latest` find a mapping's runs by it).
    pub mapping: String,
    /// How the run ended.
    pub status: RunStatus,
    /// The source, password redacted.
    pub source: String,
    /// Target table.
    pub table: String,
    /// DynamoDB endpoint (`aws` for the default chain).
    pub endpoint: String,
    /// Data file of the embedded local endpoint, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_data_file: Option<String>,
    /// Whether the run created the table.
    pub table_created: bool,
    /// The SQS queue the pages were sent to, for a run cut at the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The progress table, when the run keeps its progress (resumable, verifiable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_table: Option<String>,
    /// The run directory.
    pub run_dir: String,
    /// The rejects file; null when nothing was rejected or failed (there is
    /// no such file then).
    pub rejects_file: Option<String>,
    /// Per entity.
    pub entities: Vec<EntityReport>,
    /// Sums over all entities (seconds: the whole run).
    pub totals: EntityReport,
    /// Concurrency and capacity of the writers.
    pub writer: WriterReport,
    /// Each pointer, what it did and its final value.
    pub pointers: Vec<PointerReport>,
    /// This attempt's rejected (and failed) rows by entity, column and
    /// reason, as in the rejects file.
    pub rejects_by_reason: Vec<RejectCount>,
    /// Items written, calls throttled and the concurrency limit, second by
    /// second (empty for a run cut at a queue: its workers write).
    pub timeline: Timeline,
    /// Things worth knowing that did not stop the run (e.g. a key template
    /// that does not include the source's unique key).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Items deleted from the table before the load, when it held some and
    /// the run was told to empty it first (`--if-not-empty truncate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_emptied: Option<u64>,
    /// The error that stopped the run, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The cause of `error`, when it is an error of a kind (a source or a
    /// table that failed, a file not written); none for rows not read.
    #[serde(skip)]
    pub cause: Option<crate::Cause>,
    /// The moment of the source the copy is consistent with, if any.
    pub snapshot: SnapshotReport,
}

/// The point-in-time snapshot a run read, for the report and for handing
/// over to change data capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SnapshotReport {
    /// `postgres` (an exported snapshot), `mysql` (a consistent snapshot per
    /// connection, started under one global read lock) or `none`.
    pub kind: String,
    /// The snapshot's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// PostgreSQL: the WAL position of the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsn: Option<String>,
    /// MySQL/MariaDB: the binary log's `file:position` at the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binlog: Option<String>,
    /// MySQL/MariaDB: the executed GTID set at the snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gtid: Option<String>,
    /// When it was taken (the server's clock, UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<String>,
    /// What the copy is consistent with, in words.
    pub note: String,
    /// A resumed run: the snapshots its earlier attempts read, oldest
    /// first. Each attempt's rows are consistent with its own snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub earlier: Vec<SnapshotMark>,
}

impl SnapshotReport {
    /// Where this snapshot stood, as the progress store records it.
    pub fn mark(&self) -> SnapshotMark {
        SnapshotMark {
            kind: self.kind.clone(),
            id: self.id.clone(),
            lsn: self.lsn.clone(),
            binlog: self.binlog.clone(),
            gtid: self.gtid.clone(),
            taken_at: self.taken_at.clone(),
        }
    }
}

impl RunReport {
    /// Child rows of every embed that have no parent row (rejected).
    pub fn orphans(&self) -> u64 {
        self.entities
            .iter()
            .flat_map(|e| &e.embeds)
            .map(|e| e.no_parent)
            .sum()
    }

    /// Whether the run stopped because DynamoDB kept refusing writes
    /// (throttling) past the retry budget.
    pub fn stopped_by_throttling(&self) -> bool {
        matches!(
            self.cause,
            Some(crate::Cause::Dynamo(
                _,
                Some(sql2ddb_dynamo::Failure::Throttled)
            ))
        )
    }

    /// Recomputes the totals and the status from the entities.
    pub fn finish(&mut self, seconds: f64) {
        let mut totals = EntityReport {
            name: "total".into(),
            ..EntityReport::default()
        };
        for e in &self.entities {
            totals.add(e);
        }
        totals.seconds = seconds;
        self.status = if self.stopped_by_throttling() && totals.failed == 0 {
            RunStatus::Throttled
        } else if self.error.is_some() || totals.failed > 0 {
            RunStatus::Failed
        } else if totals.rejected > 0 || self.orphans() > 0 {
            RunStatus::Rejected
        } else {
            RunStatus::Ok
        };
        self.totals = totals;
    }
}
