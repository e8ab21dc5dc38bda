//! Stage 2 of a run: read and write. In process, segment readers feed a
//! bounded queue that writer tasks drain through the one write path; cut at
//! an SQS queue, the readers alone send pages on and workers write them.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sql2ddb_dynamo::read_pointer;
use sql2ddb_mapping::Plan;
use sql2ddb_queue::MemoryQueue;
use tokio::task::JoinSet;

use super::context::Context;
use super::ending::Ending;
use super::handoff::{Handoff, PageOut};
use super::options::{RunOptions, REPORT_WAIT};
use super::prepared::Prepared;
use super::{drain, read};
use crate::checkpoint::Checkpoints;
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::report::{PacingReport, PointerReport, WriterReport};
use crate::sink::{build_sink, BatchSink, SinkSetup};
use crate::timeline::Recorder;

impl Context {
    /// Reads every prepared entity and writes (or enqueues) its pages.
    pub(super) async fn execute(
        &mut self,
        plan: &Plan,
        opts: &RunOptions,
        prepared: &[Arc<Prepared>],
        checkpoints: Option<Arc<Checkpoints>>,
        ending: &Ending,
    ) -> Result<(), EngineError> {
        let result = match self.queue_url.clone() {
            Some(url) => {
                let handoff = Handoff::Sqs {
                    queue: self.resources.queue(&url).await?,
                    max_queued: opts.max_queued,
                };
                let reading = self
                    .readers(opts, handoff, checkpoints, ending)
                    .spawn(prepared);
                ending.wait(reading, JoinSet::new()).await.0
            }
            None => {
                self.pipeline(plan, opts, prepared, checkpoints, ending)
                    .await
            }
        };
        for p in prepared {
            p.counters.done.store(true, Ordering::Relaxed);
        }
        result
    }

    /// The run's segment readers, handing pages to `handoff`; they end
    /// after their page once `ending` halts them.
    fn readers(
        &self,
        opts: &RunOptions,
        handoff: Handoff,
        checkpoints: Option<Arc<Checkpoints>>,
        ending: &Ending,
    ) -> read::Readers {
        read::Readers {
            source: self.source.clone(),
            rejects: self.rejects.clone(),
            run_id: self.run_id.clone(),
            out: PageOut {
                handoff,
                checkpoints,
            },
            slots: Arc::new(tokio::sync::Semaphore::new(
                opts.source_connections.max(1) as usize
            )),
            stop: Some(ending.halt.clone()),
        }
    }

    /// `read_parallelism` segment readers per entity, all entities at once
    /// (at most `source_connections` reading at a time), feed a bounded
    /// queue that a few writer tasks drain, keeping up to `concurrency`
    /// calls in flight. Readers and writers run together until both end
    /// (see [`Ending`]): a reader waiting for room in the queue never
    /// outlives the writers that would make it.
    async fn pipeline(
        &mut self,
        plan: &Plan,
        opts: &RunOptions,
        prepared: &[Arc<Prepared>],
        checkpoints: Option<Arc<Checkpoints>>,
        ending: &Ending,
    ) -> Result<(), EngineError> {
        let setup = build_sink(
            plan,
            &opts.sink_options(),
            self.resources.client(),
            self.resources.calls(),
            self.rejects.clone(),
        );
        let counters: Vec<_> = prepared.iter().map(|p| p.counters.clone()).collect();
        let timeline = Recorder::start(setup.controller.clone(), move || {
            counters
                .iter()
                .map(|c| EntityProgress::get(&c.written))
                .sum()
        });
        let tasks = writer_tasks(prepared, setup.settings.concurrency);
        let queue = MemoryQueue::new(tasks);
        let entities: Arc<Vec<Arc<Prepared>>> = Arc::new(prepared.to_vec());
        let mut writers = JoinSet::new();
        for _ in 0..tasks {
            writers.spawn(drain::drain(
                queue.consumer(),
                setup.sink.clone(),
                entities.clone(),
                checkpoints.clone(),
                ending.failed.clone(),
            ));
        }
        let reading = self
            .readers(opts, Handoff::Memory(queue.producer()), checkpoints, ending)
            .spawn(prepared);
        // The readers hold the only producer: the queue ends when they do.
        drop(queue);
        let (read_result, write_result) = ending.wait(reading, writers).await;
        self.report.timeline = timeline.finish();
        self.report.writer = writer_report(&setup);
        // A run that ended early reads its pointers back within a bound,
        // and an error there does not hide the one that ended it.
        let pointers = match ending.early() {
            true => match tokio::time::timeout(REPORT_WAIT, pointer_reports(&setup.sink)).await {
                Ok(Ok(p)) => p,
                _ => pointer_reports_unread(&setup.sink),
            },
            false => pointer_reports(&setup.sink).await?,
        };
        self.report.pointers = pointers;
        read_result.and(write_result)
    }
}

/// How many writer tasks a run needs: a writer task keeps up to
/// `concurrency` calls in flight for its page, so a page or two in the
/// writers fill every call slot; more pages there (or waiting in the queue)
/// would only hold memory.
fn writer_tasks(prepared: &[Arc<Prepared>], concurrency: usize) -> usize {
    let smallest_page = prepared
        .iter()
        .map(|p| p.query.page_size())
        .min()
        .unwrap_or(1)
        .max(1);
    ((concurrency * sql2ddb_core::limits::MAX_BATCH_ITEMS).div_ceil(smallest_page) + 1)
        .min(concurrency)
}

/// How the writers behaved: concurrency, throttling, the capacity cap.
fn writer_report(setup: &SinkSetup) -> WriterReport {
    let c = setup.controller.snapshot();
    WriterReport {
        adaptive: c.adaptive,
        max_concurrency: c.max,
        final_concurrency: c.current,
        min_concurrency: c.min_reached,
        decreases: c.decreases,
        increases: c.increases,
        throttled: setup.sink.throttled.load(Ordering::Relaxed),
        max_wcu: setup.settings.max_wcu,
        capacity_wait_seconds: setup
            .limiter
            .as_ref()
            .map(|l| l.snapshot().waited.as_secs_f64())
            .unwrap_or(0.0),
        pacing: PacingReport::of(&setup.sink.limits.pacer),
    }
}

/// What each pointer did, its value not read back.
fn pointer_reports_unread(sink: &BatchSink) -> Vec<PointerReport> {
    let stats = sink.pointer_stats.lock().expect("pointer stats lock");
    stats
        .iter()
        .map(|(name, s)| PointerReport {
            name: name.clone(),
            keys: s.keys(),
            keys_at_least: !s.counted_all(),
            moved: s.moved,
            already_newer: s.already_newer,
            value: serde_json::Value::Null,
        })
        .collect()
}

/// What each pointer did, with its value read back when it has one key.
async fn pointer_reports(sink: &BatchSink) -> Result<Vec<PointerReport>, EngineError> {
    let stats = sink
        .pointer_stats
        .lock()
        .expect("pointer stats lock")
        .clone();
    let mut out = Vec::with_capacity(stats.len());
    for (name, s) in stats {
        let value = match (sink.pointer_target(), s.only_item()) {
            (Some(t), Some(update)) => read_pointer(&t.client, &t.table, &t.keys, update)
                .await?
                .map(|v| v.to_dynamo_json())
                .unwrap_or(serde_json::Value::Null),
            _ => serde_json::Value::Null,
        };
        out.push(PointerReport {
            keys: s.keys(),
            keys_at_least: !s.counted_all(),
            name,
            moved: s.moved,
            already_newer: s.already_newer,
            value,
        });
    }
    Ok(out)
}
