//! Stage 3 of a run: the report. Each entity's figures (the whole run's,
//! from the progress store, when the run is tracked), the read = counted
//! check, the status, and `report.json` in the run directory.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::{keys, Context, Prepared, RunOptions};
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::report::{EntityReport, RunReport, RunStatus};

impl Context {
    /// Fills in the report, closes the source and the local endpoint, and
    /// writes `report.json`.
    pub(super) async fn settle(
        mut self,
        opts: &RunOptions,
        prepared: &[Arc<Prepared>],
        started: Instant,
    ) -> Result<RunReport, EngineError> {
        self.rejects.flush()?;
        self.report.entities = prepared.iter().map(|p| entity_report(p)).collect();
        if let Some(t) = &self.tracking {
            self.report.progress_table = Some(t.table().to_string());
            let in_process = self.queue_url.is_none();
            if let Err(e) = t
                .settle_report(&self.run_id, &mut self.report.entities, in_process)
                .await
            {
                self.report.error.get_or_insert_with(|| e.to_string());
            }
        }
        let interrupted = opts.stop.as_ref().is_some_and(|s| s.is_stopped());
        if interrupted && self.queue_url.is_none() {
            for e in &mut self.report.entities {
                e.pending = e
                    .rows_read
                    .saturating_sub(e.items_written + e.overwritten + e.rejected + e.failed);
            }
        }
        if self.report.error.is_none() && !interrupted {
            keys::check_counts(&self.source, prepared, &mut self.report).await;
        }
        let report = &mut self.report;
        report.finish(started.elapsed().as_secs_f64());
        if report.error.is_none() {
            if interrupted {
                report.status = RunStatus::Interrupted;
            } else if self.queue_url.is_some() {
                report.status = RunStatus::Enqueued;
            }
        }
        self.source.close().await;
        self.resources.close().await;
        let path = self.run_dir.join("report.json");
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(&self.report).expect("report serialises"),
        )
        .map_err(|e| EngineError::io(&path, e))?;
        Ok(self.report)
    }
}

/// This process's figures of one entity.
fn entity_report(p: &Prepared) -> EntityReport {
    let (c, s) = (&p.counters, &p.stats);
    let seconds = match (
        *s.started.lock().expect("lock"),
        *s.finished.lock().expect("lock"),
    ) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    let overwritten = p.overwrites.as_ref().map_or(0, keys::Overwrites::count);
    EntityReport {
        name: p.bound.name().to_string(),
        rows_read: EntityProgress::get(&c.read),
        rows_counted: p.counted,
        items_written: EntityProgress::get(&c.written).saturating_sub(overwritten),
        overwritten,
        rejected: EntityProgress::get(&c.rejected),
        failed: EntityProgress::get(&c.failed),
        bytes: s.bytes.load(Ordering::Relaxed),
        write_units: s.write_units.load(Ordering::Relaxed),
        retries: s.retries.load(Ordering::Relaxed),
        segments: p.segments.len() as u32,
        pages: s.pages.load(Ordering::Relaxed),
        seconds,
        ..EntityReport::default()
    }
}
