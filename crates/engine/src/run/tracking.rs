//! What a run keeps in its progress store, and how a run resumes from it.
//!
//! A tracked run records its description first ([`RunMeta`]: entities, the
//! bounds of every segment, the queue), then checkpoints as it goes. A
//! resumed run (`--resume RUN_ID`) reads that back: it reuses the recorded
//! segment bounds (so it cuts the key ranges exactly as before, whatever the
//! table holds now), skips finished segments, and restarts the others from
//! their cursors with page numbers continuing where they stopped, so the
//! batch records of re-read pages keep their keys and are not counted twice.
//!
//! A run records the digest of its mapping's items too, and a resume with a
//! mapping whose items would differ (another key template, attribute, type
//! rule…) is refused before anything is written: the table would otherwise
//! hold items of two shapes. Settings that do not change items (concurrency,
//! capacity cap, page size) may change between attempts.

use std::collections::HashMap;
use std::sync::Arc;

use sql2ddb_core::redact_url;
use sql2ddb_dynamo::progress::{
    EntityMeta, ProgressStore, RunMeta, RunProgress as Recorded, SegmentBounds, SnapshotMark,
};
use sql2ddb_mapping::{ItemDigest, Plan};
use sql2ddb_source::Segment;

use super::options::RunOptions;
use crate::checkpoint::{Checkpoints, SegmentStart};
use crate::error::EngineError;
use crate::ids::RunId;
use crate::report::{EntityReport, SnapshotReport};

/// A run that keeps its progress in a progress store.
pub(super) struct Tracking {
    store: ProgressStore,
    /// What the run recorded before, when it is resumed.
    resumed: Option<Recorded>,
    /// The run's entities as prepared, in order.
    entities: Vec<EntityMeta>,
}

/// Whether the options ask for the progress store.
pub(super) fn wanted(opts: &RunOptions) -> bool {
    !opts.dry_run
        && (opts.track_progress
            || opts.progress_table.is_some()
            || opts.queue.is_some()
            || opts.resume)
}

fn resume_error(run_id: &RunId, message: String) -> EngineError {
    EngineError::Resume {
        run_id: run_id.clone(),
        message,
    }
}

/// Refuses a resume whose mapping makes other items than the run's did.
fn same_items(
    run_id: &RunId,
    plan: &Plan,
    recorded: &Recorded,
    started: &str,
) -> Result<(), EngineError> {
    match &recorded.digest {
        Some(parts) => {
            let changes = plan
                .item_digest()
                .changes_since(&ItemDigest::from_parts(parts.clone()));
            if !changes.is_empty() {
                return Err(resume_error(
                        run_id,
                        format!(
                            "cannot be resumed: the mapping changed since the run started ({started}): {list}. \
                             Its items would not match those already written. Resume with the run's own \
                             mapping, or start a new run (without --resume) to write every item the new way.",
                            started = started,
                            list = changes.join("; ")
                        ),
                    ));
            }
        }
        None => tracing::warn!(
            run = %run_id,
            "the run was recorded without a mapping digest: whether its mapping changed cannot be checked"
        ),
    }
    Ok(())
}

/// Refuses a resume whose mapping reads other entities than the run's did.
fn same_entities(run_id: &RunId, plan: &Plan, meta: &RunMeta) -> Result<(), EngineError> {
    let recorded_names: Vec<&str> = meta.entities.iter().map(|e| e.name.as_str()).collect();
    let names: Vec<&str> = plan.entities.iter().map(|e| e.name.as_str()).collect();
    if recorded_names != names {
        return Err(resume_error(
                run_id,
                format!(
                    "has entities {recorded_names:?}, but the mapping has {names:?}; resume with the run's own mapping"
                ),
            ));
    }
    for e in &meta.entities {
        if e.bounds.len() != e.segments as usize {
            return Err(resume_error(
                run_id,
                format!("entity {} was recorded without its segment bounds", e.name),
            ));
        }
    }
    Ok(())
}

impl Tracking {
    /// Opens the progress store of the run; on resume, reads what the run
    /// recorded and checks that it is a run of this mapping.
    pub async fn open(
        plan: &Plan,
        opts: &RunOptions,
        store: ProgressStore,
        run_id: &RunId,
    ) -> Result<Tracking, EngineError> {
        let resumed = if opts.resume {
            Some(Self::recorded(&store, plan, run_id).await?)
        } else {
            None
        };
        Ok(Tracking {
            store,
            resumed,
            entities: Vec::new(),
        })
    }

    /// What run `run_id` recorded, checked against this mapping: the table
    /// exists, the run is in it, it wrote this mapping's table, and its
    /// mapping made the same items as this one.
    async fn recorded(
        store: &ProgressStore,
        plan: &Plan,
        run_id: &RunId,
    ) -> Result<Recorded, EngineError> {
        let unreadable = |e: sql2ddb_dynamo::DynamoError| {
            resume_error(
                run_id,
                format!("cannot read the progress table {}: {e}", store.table()),
            )
        };
        if !store.exists().await.map_err(unreadable)? {
            return Err(resume_error(
                run_id,
                format!(
                    "cannot be resumed: there is no progress table {table}. Either the run was not \
                     started with --progress-table or --queue, so where it stopped was never recorded, \
                     or it used a progress table of another name (give it with --progress-table NAME). \
                     To finish the copy, run again without --resume and with --if-not-empty append: \
                     items already written are overwritten with the same values. To be able to resume \
                     next time, pass --progress-table.",
                    table = store.table()
                ),
            ));
        }
        let recorded = store.load(run_id).await.map_err(unreadable)?;
        let Some(meta) = &recorded.meta else {
            return Err(resume_error(
                run_id,
                format!(
                    "cannot be resumed: it is not recorded in the progress table {table}. Check the \
                     run id (each run prints it first, `run <id>`, and its directory is named after it), \
                     or give the run's own --progress-table. To copy everything anyway, run again \
                     without --resume and with --if-not-empty append: items already written are \
                     overwritten with the same values.",
                    table = store.table()
                ),
            ));
        };
        if meta.table != plan.target.table {
            return Err(resume_error(
                run_id,
                format!(
                    "wrote table {}, but the mapping targets {}",
                    meta.table, plan.target.table
                ),
            ));
        }
        same_items(run_id, plan, &recorded, &meta.started)?;
        same_entities(run_id, plan, meta)?;
        Ok(recorded)
    }

    /// The progress table.
    pub fn table(&self) -> &str {
        self.store.table()
    }

    /// The queue a resumed run sent its pages to.
    pub fn recorded_queue(&self) -> Option<&str> {
        self.resumed.as_ref()?.meta.as_ref()?.queue.as_deref()
    }

    /// The segments a resumed run cut `entity` into; `None` for a new run.
    pub fn recorded_segments(&self, entity: &str) -> Option<Vec<Segment>> {
        let meta = self.resumed.as_ref()?.meta.as_ref()?;
        let e = meta.entities.iter().find(|e| e.name == entity)?;
        Some(
            e.bounds
                .iter()
                .enumerate()
                .map(|(i, b)| Segment {
                    index: i as u32,
                    after: b.after.clone(),
                    until: b.until.clone(),
                })
                .collect(),
        )
    }

    /// Notes the segments of an entity, for the run's description.
    pub fn describe(&mut self, entity: &str, segments: &[Segment]) {
        self.entities.push(EntityMeta {
            name: entity.to_string(),
            segments: segments.len() as u32,
            bounds: segments
                .iter()
                .map(|s| SegmentBounds {
                    after: s.after.clone(),
                    until: s.until.clone(),
                })
                .collect(),
        });
    }

    /// The segments still to read: all of them for a new run; for a resumed
    /// one, the unfinished ones, each from its cursor.
    pub fn remaining(&self, entity: &str, segments: Vec<Segment>) -> Vec<Segment> {
        let Some(recorded) = &self.resumed else {
            return segments;
        };
        segments
            .into_iter()
            .filter(|s| {
                !recorded
                    .totals
                    .iter()
                    .any(|t| t.entity == entity && t.segment == s.index)
            })
            .map(|mut s| {
                if let Some(c) = recorded
                    .cursors
                    .iter()
                    .find(|c| c.entity == entity && c.segment == s.index)
                {
                    s.after = Some(c.cursor.clone());
                }
                s
            })
            .collect()
    }

    /// The snapshots the run's earlier attempts read (a resumed run's).
    pub fn recorded_snapshots(&self) -> Vec<SnapshotMark> {
        self.resumed
            .as_ref()
            .and_then(|r| r.meta.as_ref())
            .map(|m| m.snapshots.clone())
            .unwrap_or_default()
    }

    /// Records the run's description (a new run's, or a resumed one's with
    /// its queue now) and returns its checkpoints.
    pub async fn start(
        &self,
        plan: &Plan,
        run_id: &RunId,
        source_url: &str,
        queue: Option<&str>,
        snapshot: &SnapshotReport,
    ) -> Result<Arc<Checkpoints>, EngineError> {
        self.store.ensure().await?;
        let mut snapshots = snapshot.earlier.clone();
        snapshots.push(snapshot.mark());
        let meta = match self.resumed.as_ref().and_then(|r| r.meta.clone()) {
            Some(meta) => RunMeta {
                queue: queue.map(str::to_string),
                snapshots,
                ..meta
            },
            None => RunMeta {
                mapping: plan.file().to_string(),
                source: redact_url(source_url),
                table: plan.target.table.clone(),
                entities: self.entities.clone(),
                started: chrono::Utc::now().to_rfc3339(),
                queue: queue.map(str::to_string),
                snapshots,
            },
        };
        self.store
            .record_run_with_digest(run_id, &meta, plan.item_digest().parts())
            .await?;
        let mut starts = HashMap::new();
        if let Some(recorded) = &self.resumed {
            for c in &recorded.cursors {
                starts.insert(
                    (c.entity.clone(), c.segment),
                    SegmentStart {
                        page: c.pages_sent,
                        rows: c.rows_sent,
                    },
                );
            }
        }
        Ok(Arc::new(Checkpoints::new(
            self.store.clone(),
            run_id.clone(),
            starts,
        )))
    }

    /// Replaces the report's figures by the store's, which cover the whole
    /// run (earlier attempts included) and count a page written twice once:
    /// segments and pages handed on; rows read once every segment is
    /// finished; and for an in-process run the rows written, rejected and
    /// failed, the bytes, write units and retries of the recorded batches.
    pub async fn settle_report(
        &self,
        run_id: &RunId,
        entities: &mut [EntityReport],
        in_process: bool,
    ) -> Result<(), EngineError> {
        let recorded = self.store.load(run_id).await?;
        let summary = crate::verify::summarize(&recorded);
        for e in entities.iter_mut() {
            let Some(count) = summary.entities.iter().find(|c| c.entity == e.name) else {
                continue;
            };
            e.segments = count.segments;
            e.pages = recorded.pages_of(&e.name);
            if let Some(rows) = count.rows_read {
                e.rows_read = rows;
            }
            if in_process {
                // Rows that landed on an earlier row's item (`overwrite =
                // true`) are not distinct items; counted by this attempt.
                e.items_written = count.written.saturating_sub(e.overwritten);
                e.rejected = count.rejected;
                e.failed = count.failed;
                let cost = recorded.cost_of(&e.name);
                e.bytes = cost.bytes;
                e.write_units = cost.write_units;
                e.retries = cost.retries;
            }
        }
        Ok(())
    }
}
