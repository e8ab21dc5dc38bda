//! Stage 3 of a run: the report. Each entity's figures (the whole run's,
//! from the progress store, when the run is tracked), the read = counted
//! check, the status, and `report.json` in the run directory (the commands
//! render it).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::context::Context;
use super::counts::check_counts;
use super::keys;
use super::options::{RunOptions, REPORT_WAIT};
use super::prepared::Prepared;
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
        self.rejects.flush().await?;
        self.report.entities = prepared.iter().map(|p| entity_report(p)).collect();
        self.report.rejects_by_reason = self.rejects.reasons();
        let interrupted = opts.stop.as_ref().is_some_and(|s| s.is_stopped());
        // Throttled past the budget: nothing failed, what is not written is
        // pending, as in an interrupted run.
        let throttled = self.report.stopped_by_throttling();
        let failed = self.report.error.is_some() && !throttled;
        // A run that ended early may have lost its endpoint: its own
        // figures do then, not a report that is never written.
        self.whole_run(interrupted || failed || throttled).await;
        if self.queue_url.is_none() {
            // Rows read that no writer confirmed: a stopped or throttled
            // run's are pending (a rerun or --resume writes them), a failed
            // run's were not written, and say so.
            for e in &mut self.report.entities {
                let unconfirmed = e
                    .rows_read
                    .saturating_sub(e.items_written + e.overwritten + e.rejected + e.failed);
                if failed && !opts.dry_run {
                    e.failed += unconfirmed;
                } else if interrupted || throttled {
                    e.pending = unconfirmed;
                }
            }
        }
        if self.report.error.is_none() && !interrupted {
            check_counts(&self.source, prepared, &mut self.report).await;
        }
        let report = &mut self.report;
        report.finish(started.elapsed().as_secs_f64());
        // Named only when there is one to open.
        if report
            .rejects_file
            .as_ref()
            .is_some_and(|f| !std::path::Path::new(f).exists())
        {
            report.rejects_file = None;
        }
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

    /// A tracked run's figures: the whole run's, from its progress table.
    /// A run that ended `early` waits at most [`REPORT_WAIT`] for them, and
    /// keeps its own figures, with a warning, when they cannot be read.
    async fn whole_run(&mut self, early: bool) {
        let Some(t) = &self.tracking else {
            return;
        };
        self.report.progress_table = Some(t.table().to_string());
        let in_process = self.queue_url.is_none();
        let whole_run = t.settle_report(&self.run_id, &mut self.report.entities, in_process);
        let settled = match early {
            true => match tokio::time::timeout(REPORT_WAIT, whole_run).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(format!(
                    "the progress table {} did not answer within {} s",
                    t.table(),
                    REPORT_WAIT.as_secs()
                )),
            },
            false => match whole_run.await {
                Ok(()) => Ok(()),
                Err(e) => {
                    self.fail(&e);
                    Ok(())
                }
            },
        };
        if let Err(e) = settled {
            self.report.warnings.push(format!(
                "{e}: the report shows this attempt's own figures, not the whole run's"
            ));
        }
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
    let mut embeds = Vec::new();
    for child in &p.children {
        child.reports(&mut embeds);
    }
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
        embeds,
        ..EntityReport::default()
    }
}
