//! The source side of `verify --deep`: every entity prepared, read and
//! mapped by the run's own stages (the same bindings, key rules, segments,
//! keyset pages, embeds and pointer candidates), its pages handed to the
//! verifier instead of the writers. Nothing is written to DynamoDB.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sql2ddb_core::WorkBatch;
use sql2ddb_dynamo::Dynamo;
use sql2ddb_mapping::Plan;
use sql2ddb_queue::MemoryQueue;

use super::handoff::{Handoff, PageOut};
use super::{read, Context, Prepared, Purpose, RunOptions};
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::rejects::RejectsFile;
use crate::stop::StopSignal;

/// Pages waiting between the readers and the verifier.
const PAGES_WAITING: usize = 4;

/// A source opened and every entity prepared, ready to be read as a run
/// would read it.
pub struct SourceItems {
    ctx: Context,
    prepared: Vec<Arc<Prepared>>,
    opts: RunOptions,
}

impl SourceItems {
    /// Opens the source (one snapshot, as a run does), the DynamoDB endpoint
    /// (`local` included, whose data file is in the run directory named by
    /// `opts.run_id`) and prepares every entity of `plan`. The table is
    /// neither created nor checked here. Rows the mapping rejects go to
    /// `verify-rejects.jsonl` in the run directory, not to the run's file.
    pub async fn open(
        plan: &Plan,
        opts: &RunOptions,
        progress: &RunProgress,
    ) -> Result<SourceItems, EngineError> {
        let ctx = Context::open(plan, opts, Purpose::Read).await?;
        SourceItems::prepare(ctx, plan, opts, progress, "verify-rejects.jsonl").await
    }

    /// Like [`SourceItems::open`], but reads only the row of `entity` whose
    /// key columns hold `key` (`sql2ddb get`), by key as `--only-rejects`
    /// reads its rows; a key naming other columns than the entity's key is
    /// a configuration error naming them. Rejected rows go to
    /// `get-rejects.jsonl` in the run directory.
    pub async fn open_row(
        plan: &Plan,
        opts: &RunOptions,
        progress: &RunProgress,
        (entity, key): (&str, &[(String, String)]),
    ) -> Result<SourceItems, EngineError> {
        let mut only = plan.clone();
        only.entities.retain(|e| e.name == entity);
        let mut ctx = Context::open(&only, opts, Purpose::Read).await?;
        ctx.rejected = Some(super::replay::Rejected::asked(entity, key));
        SourceItems::prepare(ctx, &only, opts, progress, "get-rejects.jsonl").await
    }

    async fn prepare(
        mut ctx: Context,
        plan: &Plan,
        opts: &RunOptions,
        progress: &RunProgress,
        rejects: &str,
    ) -> Result<SourceItems, EngineError> {
        let rejects = ctx.run_dir.join(rejects);
        // The rows this verification rejects, not an earlier one's too.
        let _ = std::fs::remove_file(&rejects);
        ctx.rejects = Arc::new(RejectsFile::new(rejects));
        // Prepared like a dry run: no table creation.
        let reading = RunOptions {
            dry_run: true,
            ..opts.clone()
        };
        match ctx.prepare(plan, &reading, progress).await {
            Ok((prepared, _)) => Ok(SourceItems {
                ctx,
                prepared,
                opts: opts.clone(),
            }),
            Err(e) => {
                ctx.source.close().await;
                ctx.resources.close().await;
                Err(e)
            }
        }
    }

    /// The DynamoDB client of the job.
    pub fn client(&self) -> &Dynamo {
        self.ctx.resources.client()
    }

    /// The endpoint as reports show it.
    pub fn endpoint(&self) -> &str {
        self.ctx.resources.endpoint()
    }

    /// The rows the mapping rejected in the last read go to this file.
    pub fn rejects_file(&self) -> &Path {
        self.ctx.rejects.path()
    }

    /// The reasons of the rows rejected so far, with their counts.
    pub fn reject_reasons(&self) -> Vec<crate::rejects::RejectCount> {
        self.ctx.rejects.reasons()
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        &self.ctx.run_dir
    }

    /// Rows the source held when the entities were prepared.
    pub fn rows(&self) -> u64 {
        self.prepared.iter().map(|p| p.counted).sum()
    }

    /// Reads every segment of every entity and hands each mapped page to
    /// `take`, one at a time, as the pages come. When `take` fails, the
    /// readers stop after their page and its error is returned.
    pub async fn read(
        &self,
        mut take: impl FnMut(WorkBatch) -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        let stop = StopSignal::new();
        let outer = self.opts.stop.clone();
        let queue = MemoryQueue::new(PAGES_WAITING);
        let consumer = queue.consumer();
        let readers = read::Readers {
            source: self.ctx.source.clone(),
            rejects: self.ctx.rejects.clone(),
            run_id: self.ctx.run_id.clone(),
            out: PageOut {
                handoff: Handoff::Memory(queue.producer()),
                checkpoints: None,
            },
            slots: Arc::new(tokio::sync::Semaphore::new(
                self.opts.source_connections.max(1) as usize,
            )),
            stop: Some(stop.clone()),
        };
        drop(queue);
        let taking = async {
            let mut result = Ok(());
            while let Some(batch) = consumer.pop().await {
                if outer.as_ref().is_some_and(|s| s.is_stopped()) {
                    stop.stop();
                }
                // After a failure, pages are drained (not taken) until the readers stop.
                if result.is_ok() {
                    result = take(batch);
                    if result.is_err() {
                        stop.stop();
                    }
                }
            }
            result
        };
        let (read, taken) = tokio::join!(readers.read_all(&self.prepared), taking);
        for p in &self.prepared {
            p.counters.done.store(true, Ordering::Relaxed);
        }
        self.ctx.rejects.flush().await?;
        read.and(taken)
    }

    /// Per entity, the child rows of its embeds found without a parent by
    /// the last read (each in the rejects file as "no parent").
    pub fn orphans(&self) -> Vec<(String, u64)> {
        self.prepared
            .iter()
            .map(|p| {
                let mut embeds = Vec::new();
                for c in &p.children {
                    c.reports(&mut embeds);
                }
                let n = embeds.iter().map(|e| e.no_parent).sum();
                (p.bound.name().to_string(), n)
            })
            .collect()
    }

    /// Sends the rows the mapping rejects to `path` from now on (a second
    /// read lists them elsewhere than the first).
    pub fn rejects_to(&mut self, path: &Path) {
        self.ctx.rejects = Arc::new(RejectsFile::new(path));
    }

    /// Closes the source and the endpoint.
    pub async fn close(self) {
        self.ctx.source.close().await;
        self.ctx.resources.close().await;
    }
}
