//! An update run's records in the progress table (`--progress-table`), the
//! same records a migration keeps, so `sql2ddb status` and `sql2ddb verify`
//! follow an update run from any machine: the run's description (the job as
//! its one entity, its read segments), one record per page read (its
//! matching items as rows; updated and skipped as written; failed), and each
//! segment's total once it reached its end. Page records have deterministic
//! keys (segment, page): a page read again after a crash rewrites its own.

use sql2ddb_dynamo::progress::{BatchRecord, EntityMeta, ProgressStore, RunMeta};

use super::checkpoint::{Counts, SegmentState};
use crate::error::EngineError;

/// Where an update run records its pages.
pub(crate) struct Tracking {
    store: ProgressStore,
    run: String,
    entity: String,
}

impl Tracking {
    /// Creates the progress table if needed and records the run.
    pub(crate) async fn open(
        store: ProgressStore,
        run: &str,
        job: &str,
        file: &str,
        table: &str,
        read: &str,
        segments: u32,
    ) -> Result<Tracking, EngineError> {
        store.ensure().await?;
        let meta = RunMeta {
            mapping: file.to_string(),
            source: format!("DynamoDB table {table} ({read})"),
            table: table.to_string(),
            entities: vec![EntityMeta {
                name: job.to_string(),
                segments,
                bounds: Vec::new(),
            }],
            started: chrono::Utc::now().to_rfc3339(),
            queue: None,
            snapshots: Vec::new(),
        };
        store.record_run(run, &meta).await?;
        Ok(Tracking {
            store,
            run: run.to_string(),
            entity: job.to_string(),
        })
    }

    /// The progress table's name.
    pub(crate) fn table(&self) -> &str {
        self.store.table()
    }

    /// Records page `page` (0-based) of `segment`, written with `counts`.
    pub(crate) async fn page(
        &self,
        segment: u32,
        page: u64,
        counts: &Counts,
    ) -> Result<(), String> {
        let record = BatchRecord {
            entity: self.entity.clone(),
            segment,
            page,
            part: 0,
            parts: 1,
            rows: counts.matched,
            items: counts.updated + counts.skipped,
            rejected: 0,
            failed: counts.failed,
        };
        self.store
            .record_batch(&self.run, &record)
            .await
            .map_err(|e| format!("progress table: {e}"))
    }

    /// Records that `segment` reached its end, with its totals.
    pub(crate) async fn finish(&self, segment: u32, state: &SegmentState) -> Result<(), String> {
        let c = &state.counts;
        self.store
            .finish_segment(&self.run, &self.entity, segment, c.matched, c.pages)
            .await
            .map_err(|e| format!("progress table: {e}"))
    }
}
