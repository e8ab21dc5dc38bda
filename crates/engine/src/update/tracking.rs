//! An update run's records in the progress table (`--progress-table`), the
//! same records a migration keeps, so `sql2ddb status` and `sql2ddb verify`
//! follow an update run from any machine: the run's description (the job as
//! its one entity, its read segments), one record per page read (its
//! matching items as rows; updated and skipped as written; failed), and each
//! segment's total once it reached its end. Page records have deterministic
//! keys (segment, page): a page read again after a crash rewrites its own.
//!
//! Each segment's cursor record holds its whole state after its last
//! recorded page (the Scan's `LastEvaluatedKey` and the counts so far) as
//! one JSON string, so `--resume` continues from the progress table on any
//! machine, without the run directory.

use sql2ddb_core::SqlValue;
use sql2ddb_dynamo::progress::{BatchRecord, EntityMeta, ProgressStore, RunMeta};

use super::checkpoint::{Checkpoint, Counts, SegmentState};
use crate::error::EngineError;
use crate::ids::RunId;

/// Where an update run records its pages.
pub(crate) struct Tracking {
    store: ProgressStore,
    run: RunId,
    entity: String,
}

impl Tracking {
    /// Creates the progress table if needed and records the run.
    pub(crate) async fn open(
        store: ProgressStore,
        run: &RunId,
        job: &str,
        file: &str,
        table: &str,
        (read, segments, queue): (&str, u32, Option<String>),
    ) -> Result<Tracking, EngineError> {
        store.ensure().await?;
        let meta = RunMeta {
            mapping: file.to_string(),
            source: source(table, read),
            table: table.to_string(),
            entities: vec![EntityMeta {
                name: job.to_string(),
                segments,
                bounds: Vec::new(),
            }],
            started: chrono::Utc::now().to_rfc3339(),
            queue,
            snapshots: Vec::new(),
        };
        store.record_run(run, &meta).await?;
        Ok(Tracking {
            store,
            run: run.clone(),
            entity: job.to_string(),
        })
    }

    /// Run `run` as the progress table recorded it, to be resumed: each
    /// segment's state from its cursor (a segment without one starts from
    /// the beginning). `None` when the table does not know the run; an
    /// error when it was another job's run.
    pub(crate) async fn reopen(
        store: ProgressStore,
        run: &RunId,
        expect: &Checkpoint,
    ) -> Result<Option<(Tracking, Checkpoint)>, EngineError> {
        let refuse = |message: String| EngineError::Resume {
            run_id: run.clone(),
            message,
        };
        if !store.exists().await? {
            return Ok(None);
        }
        let progress = store.load(run).await?;
        let Some(meta) = progress.meta else {
            return Ok(None);
        };
        let mut found = expect.clone();
        found
            .segments
            .iter_mut()
            .for_each(|s| *s = SegmentState::default());
        let entity = meta.entities.first();
        let same = meta.table == expect.table
            && meta.source == source(&expect.table, &expect.read)
            && meta.entities.len() == 1
            && entity.is_some_and(|e| {
                e.name == expect.job && e.segments as usize == expect.segments.len()
            });
        if !same {
            let names: Vec<&str> = meta.entities.iter().map(|e| e.name.as_str()).collect();
            return Err(refuse(format!(
                "was {} on table {} ({}), not job {} on {} ({}): resume it with its own job file",
                names.join(", "),
                meta.table,
                meta.source,
                expect.job,
                expect.table,
                expect.read
            )));
        }
        for cursor in progress.cursors.iter().filter(|c| c.entity == expect.job) {
            let state = match cursor.cursor.as_slice() {
                [SqlValue::Text(json)] => serde_json::from_str::<SegmentState>(json).ok(),
                _ => None,
            };
            let (Some(state), Some(slot)) =
                (state, found.segments.get_mut(cursor.segment as usize))
            else {
                return Err(refuse(format!(
                    "{}: the cursor of segment {} is not an update segment's state",
                    store.table(),
                    cursor.segment
                )));
            };
            *slot = state;
        }
        let tracking = Tracking {
            store,
            run: run.clone(),
            entity: expect.job.clone(),
        };
        Ok(Some((tracking, found)))
    }

    /// Records where segment `segment` stands after a page.
    pub(crate) async fn cursor(
        &self,
        segment: u32,
        state: &SegmentState,
    ) -> Result<(), EngineError> {
        let json = serde_json::to_string(state).expect("a segment's state serialises");
        let (pages, matched) = (state.counts.pages, state.counts.matched);
        self.store
            .set_cursor(
                &self.run,
                &self.entity,
                segment,
                &[SqlValue::Text(json)],
                pages,
                matched,
            )
            .await
            .map_err(EngineError::Dynamo)
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
    ) -> Result<(), EngineError> {
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
            .map_err(EngineError::Dynamo)
    }

    /// Records that `segment` reached its end, with its totals.
    pub(crate) async fn finish(
        &self,
        segment: u32,
        state: &SegmentState,
    ) -> Result<(), EngineError> {
        let c = &state.counts;
        self.store
            .finish_segment(&self.run, &self.entity, segment, c.matched, c.pages)
            .await
            .map_err(EngineError::Dynamo)
    }
}

/// The run's source as its description says it.
fn source(table: &str, read: &str) -> String {
    format!("DynamoDB table {table} ({read})")
}
