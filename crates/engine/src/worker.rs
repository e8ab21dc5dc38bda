//! `sql2ddb worker`: the write side of a run cut at the queue.
//!
//! A worker takes batches from the queue and, for each: keeps it invisible
//! while writing ([`VisibilityExtender`]), writes its items and pointers with
//! the one write path ([`BatchSink::write_batch`]), records the batch in the
//! run's progress store, and only then deletes the message. On any failure
//! it leaves the message alone: it becomes visible again after the queue's
//! visibility timeout (a natural backoff), and after the queue's
//! `maxReceiveCount` SQS moves it to the dead-letter queue.
//!
//! A batch the table kept refusing (throttling) past the retry budget is
//! left on the queue the same way, and the worker stops taking batches:
//! the table cannot take the load now, and more batches would only be
//! refused too. It reports why ([`StopReason::Throttled`]) and its caller
//! exits with "try again later".
//!
//! A worker needs the mapping (target table, keys, endpoint, writer limits);
//! the run a batch belongs to is in the batch, and the worker checks once per
//! run that the run's recorded table is the mapping's, so a queue shared by
//! runs of other mappings never makes it write the wrong table.

use std::collections::{BTreeSet, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_mapping::{Plan, UpdateJob};
use sql2ddb_queue::{AckHandle, Received, SqsQueue, VisibilityExtender, WorkQueue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::checkpoint::BatchId;
use crate::error::EngineError;
use crate::fleet::{Beating, Fleet};
use crate::ids::RunId;
use crate::outcome::BatchOutcome;
use crate::recorder::BatchRecorder;
pub use crate::recorder::WorkerSetup;
use crate::rejects::RejectsFile;
use crate::resources::Resources;
use crate::sink::BatchSink;
use crate::stop::StopSignal;

impl WorkerReport {
    /// A report of nothing done yet.
    fn empty(rejects_file: String) -> WorkerReport {
        WorkerReport {
            messages: 0,
            rows: 0,
            items_written: 0,
            rejected: 0,
            left: 0,
            throttled: 0,
            released: 0,
            runs: Vec::new(),
            fleet_workers: 1,
            stopped: StopReason::Signal,
            error: None,
            rejects_file,
        }
    }
}

/// `first`, and as many more call slots as are free, up to one receive's worth.
fn more_permits(first: OwnedSemaphorePermit, slots: &Arc<Semaphore>) -> Vec<OwnedSemaphorePermit> {
    let mut permits = vec![first];
    while permits.len() < MAX_RECEIVE {
        match slots.clone().try_acquire_owned() {
            Ok(p) => permits.push(p),
            Err(_) => break,
        }
    }
    permits
}

/// Most messages one receive asks for (SQS's limit).
const MAX_RECEIVE: usize = 10;

/// How a worker works and when it stops.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Batches written at once.
    pub concurrency: usize,
    /// Longest wait for a message per receive (a long poll).
    pub poll: Duration,
    /// Stop once every run this worker watches is complete (verified by counting).
    pub until_done: bool,
    /// Runs to watch besides those of the batches received.
    pub runs: Vec<RunId>,
    /// Stop after this long without receiving a batch.
    pub idle_exit: Option<Duration>,
    /// On shutdown, how long the batches being written may take to finish
    /// before they are released to other workers.
    pub grace: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 4,
            poll: Duration::from_secs(10),
            until_done: false,
            runs: Vec::new(),
            idle_exit: None,
            grace: Duration::from_secs(20),
        }
    }
}

/// Why a worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every watched run is complete.
    Done,
    /// No batch came for the idle time.
    Idle,
    /// Asked to stop (SIGTERM, Ctrl-C).
    Signal,
    /// The table kept refusing a batch's writes (throttling) past the retry
    /// budget: that batch (and any other refused) is left on the queue.
    Throttled,
}

/// What a worker did.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    /// Batches written, recorded and deleted from the queue.
    pub messages: u64,
    /// Source rows those batches account for.
    pub rows: u64,
    /// Items written.
    pub items_written: u64,
    /// Rows rejected (mapping or DynamoDB), in the rejects file.
    pub rejected: u64,
    /// Batches that failed and were left for redelivery.
    pub left: u64,
    /// Of those, batches the table kept refusing (throttling) past the
    /// retry budget: no row at fault, they come back after the queue's
    /// visibility timeout.
    pub throttled: u64,
    /// Batches released unfinished at shutdown.
    pub released: u64,
    /// Runs whose batches it received.
    pub runs: Vec<RunId>,
    /// The most workers (itself included) seen writing its runs at once:
    /// they shared the write-capacity cap, each taking its part.
    pub fleet_workers: usize,
    /// Why it stopped.
    pub stopped: StopReason,
    /// With [`StopReason::Throttled`]: what the table said of the first
    /// batch it kept refusing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where rows DynamoDB refused go.
    pub rejects_file: String,
}

/// A worker bound to its queue, table and progress store.
pub struct Worker<Q> {
    queue: Arc<Q>,
    visibility: Duration,
    recorder: BatchRecorder,
}

/// A worker of an SQS queue, as `sql2ddb worker` runs it.
pub type SqsWorker = Worker<SqsQueue>;

impl Worker<SqsQueue> {
    /// Connects a worker for `plan`'s table to an SQS queue.
    pub async fn connect(plan: &Plan, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, resources) = BatchRecorder::connect(plan, setup).await?;
        Self::over_sqs(recorder, &resources, setup).await
    }

    /// Connects a worker for an update job's table to an SQS queue: it
    /// applies update batches (`sql2ddb update --queue`) and refuses
    /// migration batches, which need a worker started with the mapping.
    pub async fn connect_job(job: &UpdateJob, setup: &WorkerSetup) -> Result<Self, EngineError> {
        let (recorder, resources) = BatchRecorder::connect_job(job, setup).await?;
        Self::over_sqs(recorder, &resources, setup).await
    }

    /// A worker of `setup.queue` writing through `recorder`.
    async fn over_sqs(
        recorder: BatchRecorder,
        resources: &Resources,
        setup: &WorkerSetup,
    ) -> Result<Self, EngineError> {
        let queue = resources.queue(&setup.queue).await?;
        let visibility = queue.visibility_timeout();
        Ok(Worker {
            queue,
            visibility,
            recorder,
        })
    }
}

impl<Q: WorkQueue + 'static> Worker<Q> {
    /// A worker of `queue` (whose messages stay invisible for `visibility`
    /// once received) writing table `table` through `sink`.
    pub fn new(
        queue: Arc<Q>,
        visibility: Duration,
        sink: Arc<BatchSink>,
        store: ProgressStore,
        table: impl Into<String>,
        rejects: Arc<RejectsFile>,
    ) -> Self {
        Worker {
            queue,
            visibility,
            recorder: BatchRecorder::new(sink, store, table, rejects),
        }
    }

    /// Writes one batch and records it; an error leaves the batch unrecorded.
    async fn write(&self, received: Received) -> Result<(BatchId, BatchOutcome), EngineError> {
        self.recorder.write(received.message).await
    }

    /// This worker's membership of its runs' fleets.
    fn fleet(&self) -> Fleet {
        let limits = self.recorder.sink.limits.clone();
        Fleet::new(self.recorder.store.clone(), limits)
    }

    /// Whether every run in `runs` is complete by its progress records.
    async fn all_done(&self, runs: &BTreeSet<RunId>) -> Result<bool, EngineError> {
        if runs.is_empty() {
            return Ok(false);
        }
        for run in runs {
            if !crate::verify::summarize(&self.recorder.store.load(run).await?).complete {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Works until `shutdown` resolves, the watched runs are done
    /// (`until_done`), or no batch came for `idle_exit`. Batches being
    /// written when it stops get `grace` to finish, then are released.
    pub async fn work(
        self: Arc<Self>,
        opts: &WorkerOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<WorkerReport, EngineError> {
        let mut shutdown = std::pin::pin!(shutdown);
        let slots = Arc::new(Semaphore::new(opts.concurrency.max(1)));
        let held: Arc<Mutex<HashSet<AckHandle>>> = Arc::default();
        let mut tasks: JoinSet<Done> = JoinSet::new();
        let mut report = WorkerReport::empty(self.recorder.rejects.path().display().to_string());
        let mut runs: BTreeSet<RunId> = opts.runs.iter().cloned().collect();
        let beating = Beating::start(self.fleet(), runs.clone()).await;
        let mut last_batch = Instant::now();
        // Raised by a batch the table kept refusing past the retry budget.
        let refused = StopSignal::new();
        let stopped = loop {
            while let Some(joined) = tasks.try_join_next() {
                tally(&mut report, joined);
            }
            if refused.is_stopped() {
                break StopReason::Throttled;
            }
            let permit = tokio::select! {
                _ = &mut shutdown => break StopReason::Signal,
                _ = refused.stopped() => break StopReason::Throttled,
                p = slots.clone().acquire_owned() => p.expect("never closed"),
            };
            let permits = more_permits(permit, &slots);
            let received = self
                .receive_or_stop(permits.len(), opts.poll, &mut shutdown, &refused)
                .await;
            let received = match received {
                Err((stop, released)) => {
                    report.released += released;
                    break stop;
                }
                Ok(received) => received,
            };
            // The queue retried a failed receive already (SQS: the retry
            // engine, the SDK trying each attempt once): no retry on top.
            let received = received?;
            if received.is_empty() {
                drop(permits);
                match self
                    .idle_stop(!tasks.is_empty(), opts, &runs, last_batch)
                    .await?
                {
                    Some(stop) => break stop,
                    None => continue,
                }
            }
            last_batch = Instant::now();
            for (r, permit) in received.into_iter().zip(permits) {
                let run = r.message.run_id();
                if let (true, Some(b)) = (runs.insert(run.clone()), &beating) {
                    b.join(run).await;
                }
                held.lock().expect("held lock").insert(r.handle.clone());
                tasks.spawn(
                    self.clone()
                        .process(r, permit, held.clone(), refused.clone()),
                );
            }
        };
        report.stopped = stopped;
        self.wind_down(tasks, &held, opts.grace, &mut report).await;
        if let Some(beating) = beating {
            report.fleet_workers = beating.stop().await;
        }
        if report.throttled > 0 {
            // A batch refused while winding down after another stop.
            report.stopped = StopReason::Throttled;
        }
        self.recorder.rejects.flush().await?;
        report.runs = runs.into_iter().collect();
        Ok(report)
    }

    /// Why a worker that received nothing stops: its runs are done
    /// (`until_done`), or no batch came for `idle_exit`; never while
    /// batches are still `writing`.
    async fn idle_stop(
        &self,
        writing: bool,
        opts: &WorkerOptions,
        runs: &BTreeSet<RunId>,
        last_batch: Instant,
    ) -> Result<Option<StopReason>, EngineError> {
        if writing {
            return Ok(None);
        }
        if opts.until_done && self.all_done(runs).await? {
            return Ok(Some(StopReason::Done));
        }
        if opts.idle_exit.is_some_and(|d| last_batch.elapsed() >= d) {
            return Ok(Some(StopReason::Idle));
        }
        Ok(None)
    }

    /// Receives up to `max` batches, unless a `shutdown` or a batch the
    /// table `refused` comes first: then the batches a receive took midway
    /// (invisible until their timeout) are given back, and why it stops and
    /// how many were given back is returned.
    async fn receive_or_stop<F: Future<Output = ()>>(
        &self,
        max: usize,
        poll: Duration,
        shutdown: &mut std::pin::Pin<&mut F>,
        refused: &StopSignal,
    ) -> Result<Result<Vec<Received>, sql2ddb_queue::QueueError>, (StopReason, u64)> {
        let receive = self.queue.receive(max, poll);
        let mut receive = std::pin::pin!(receive);
        let stop = tokio::select! {
            r = &mut receive => return Ok(r),
            _ = shutdown => StopReason::Signal,
            _ = refused.stopped() => StopReason::Throttled,
        };
        let taken = receive.await.unwrap_or_default();
        let released = self.release(taken.into_iter().map(|r| r.handle)).await;
        Err((stop, released))
    }

    /// Lets the batches being written finish within `grace`; past it they
    /// are released for another worker.
    async fn wind_down(
        &self,
        mut tasks: JoinSet<Done>,
        held: &Mutex<HashSet<AckHandle>>,
        grace: Duration,
        report: &mut WorkerReport,
    ) {
        let finish = async {
            while let Some(joined) = tasks.join_next().await {
                tally(report, joined);
            }
        };
        if tokio::time::timeout(grace, finish).await.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            let unfinished: Vec<AckHandle> = held.lock().expect("held lock").drain().collect();
            report.released += self.release(unfinished).await;
        }
    }

    /// Gives batches back to the queue at once; returns how many went back
    /// (the others return after their visibility timeout).
    async fn release(&self, handles: impl IntoIterator<Item = AckHandle>) -> u64 {
        let mut released = 0;
        for handle in handles {
            match self.queue.release(&handle).await {
                Ok(()) => released += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "could not release a batch; it returns after its visibility timeout")
                }
            }
        }
        released
    }

    /// One batch: extend while writing, then acknowledge or leave it (and
    /// raise `refused` when the table kept refusing it).
    async fn process(
        self: Arc<Self>,
        received: Received,
        _permit: OwnedSemaphorePermit,
        held: Arc<Mutex<HashSet<AckHandle>>>,
        refused: Arc<StopSignal>,
    ) -> Done {
        let handle = received.handle.clone();
        let receives = received.receive_count;
        let extender =
            VisibilityExtender::start(self.queue.clone(), handle.clone(), self.visibility);
        let result = self.write(received).await;
        extender.stop().await;
        let done = match result {
            Ok((id, out)) => {
                if let Err(e) = self.queue.ack(&handle).await {
                    // The batch comes back and is written again: harmless.
                    tracing::warn!(error = %e, "could not delete a written batch from the queue");
                }
                Done::Written(id, out)
            }
            Err(e) if e.is_throttling() => {
                let error = sql2ddb_core::redact_secrets(&e.to_string());
                tracing::warn!(%error, receives, "the table kept refusing the batch's writes past the retry budget; left for redelivery, taking no more batches");
                refused.stop();
                Done::Refused(error)
            }
            Err(e) => {
                tracing::warn!(
                    error = %sql2ddb_core::redact_secrets(&e.to_string()),
                    receives,
                    "batch not written; left for redelivery"
                );
                Done::Left
            }
        };
        held.lock().expect("held lock").remove(&handle);
        done
    }
}

/// What became of one received batch.
enum Done {
    Written(BatchId, BatchOutcome),
    Left,
    /// Left: the table kept refusing it (throttling) past the retry budget.
    Refused(String),
}

fn tally(report: &mut WorkerReport, joined: Result<Done, tokio::task::JoinError>) {
    match joined {
        Ok(Done::Written(id, out)) => {
            report.messages += 1;
            report.rows += id.rows_read;
            report.items_written += out.written;
            report.rejected += id.rows_read.saturating_sub(id.items) + out.rejected;
        }
        Ok(Done::Left) => report.left += 1,
        Ok(Done::Refused(error)) => {
            report.left += 1;
            report.throttled += 1;
            report.error.get_or_insert(error);
        }
        Err(e) if e.is_cancelled() => {}
        Err(panic) => std::panic::resume_unwind(panic.into_panic()),
    }
}
