//! `sql2ddb run`: read each entity page by page, map rows to items, queue the
//! batches, write them with a pool of writers, count everything.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sql2ddb_core::redact_url;
use sql2ddb_dynamo::{
    connect, ensure_table_spec, read_pointer, Billing, Endpoint, GsiSpec, LocalDynamo, Projection,
    RetryPolicy, TableSpec,
};
use sql2ddb_mapping::{BoundEntity, BoundPointer, EntitySource, GsiProjection, Plan};
use sql2ddb_queue::{MemoryQueue, SqsQueue};
use sql2ddb_source::{default_read_parallelism, PageQuery, Relation, Segment, Source};

mod drain;
mod embed;
mod handoff;
mod keys;
mod read;
mod replay;
mod tracking;

use crate::checkpoint::Checkpoints;
use handoff::{Handoff, PageOut};

use crate::error::EngineError;
use crate::progress::{EntityProgress, RunProgress};
use crate::rejects::RejectsFile;
use crate::report::{EntityReport, PointerReport, RunReport, RunStatus, WriterReport};

/// Default number of source connections per run (keeps the source healthy).
pub const DEFAULT_SOURCE_CONNECTIONS: u32 = 4;

/// Everything a run takes besides the mapping.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Overrides the mapping's source URL.
    pub source: Option<String>,
    /// Overrides the mapping's endpoint: `local` or a URL.
    pub endpoint: Option<String>,
    /// Overrides the mapping's region.
    pub region: Option<String>,
    /// Where run directories go (`<runs_dir>/<run id>/`).
    pub runs_dir: PathBuf,
    /// Overrides the mapping's writer concurrency.
    pub concurrency: Option<usize>,
    /// Overrides every entity's page size.
    pub page_size: Option<usize>,
    /// Retry parameters of the writers.
    pub retry: RetryPolicy,
    /// Source connections of the run, also the most segments read at once.
    pub source_connections: u32,
    /// Overrides every entity's `read_parallelism` (segments per entity).
    pub read_parallelism: Option<u32>,
    /// Overrides the mapping's `max_wcu`: write units per second for this process.
    pub max_wcu: Option<u64>,
    /// Keeps concurrency fixed instead of adapting to throttling.
    pub fixed_concurrency: bool,
    /// Read and map everything, write nothing (no DynamoDB call at all): the
    /// source-read ceiling, and a full check of every row against the mapping.
    pub dry_run: bool,
    /// The run's id; a new one from [`new_run_id`] when `None`. With
    /// `resume`, the run to continue.
    pub run_id: Option<String>,
    /// Continue run `run_id` from its checkpoints.
    pub resume: bool,
    /// Keep progress in the progress store (always so with `queue` or `resume`).
    pub track_progress: bool,
    /// The progress table; default `<target>-sql2ddb-progress`. Naming one
    /// turns progress tracking on.
    pub progress_table: Option<String>,
    /// Send pages to this SQS queue instead of writing them: workers write.
    pub queue: Option<String>,
    /// SQS endpoint URL (any SQS-compatible server); default AWS.
    pub sqs_endpoint: Option<String>,
    /// Pause reading while the queue holds this many messages waiting.
    pub max_queued: Option<u64>,
    /// Raised to stop the run cleanly (Ctrl-C): readers stop after their
    /// page, writers finish within [`crate::stop::STOP_GRACE`], the report
    /// says `interrupted`.
    pub stop: Option<Arc<crate::stop::StopSignal>>,
    /// Replay the rows of this rejects file (read again by key through the
    /// current mapping) instead of reading every row.
    pub only_rejects: Option<PathBuf>,
}

impl RunOptions {
    /// The writer's part of the options.
    pub fn sink_options(&self) -> crate::sink::SinkOptions {
        crate::sink::SinkOptions {
            concurrency: self.concurrency,
            fixed_concurrency: self.fixed_concurrency,
            max_wcu: self.max_wcu,
            retry: self.retry,
            dry_run: self.dry_run,
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            source: None,
            endpoint: None,
            region: None,
            runs_dir: PathBuf::from("sql2ddb-runs"),
            concurrency: None,
            page_size: None,
            retry: RetryPolicy::default(),
            source_connections: DEFAULT_SOURCE_CONNECTIONS,
            read_parallelism: None,
            max_wcu: None,
            fixed_concurrency: false,
            dry_run: false,
            run_id: None,
            resume: false,
            track_progress: false,
            progress_table: None,
            queue: None,
            sqs_endpoint: None,
            max_queued: None,
            stop: None,
            only_rejects: None,
        }
    }
}

/// Write-side figures of one entity, updated by the writers.
#[derive(Default)]
struct WriteStats {
    bytes: AtomicU64,
    write_units: AtomicU64,
    retries: AtomicU64,
    pages: AtomicU64,
    started: Mutex<Option<Instant>>,
    finished: Mutex<Option<Instant>>,
}

impl WriteStats {
    fn touch(&self) {
        *self.finished.lock().expect("stats lock") = Some(Instant::now());
    }
}

/// One entity, resolved against its source and ready to read.
struct Prepared {
    bound: Arc<BoundEntity>,
    query: PageQuery,
    segments: Vec<Segment>,
    /// Embedded child rows, fetched per page.
    children: Vec<embed::ChildPlan>,
    /// Pointers this entity's rows move.
    pointers: Vec<BoundPointer>,
    /// The target table's key attributes (to tie a pointer to its item).
    keys: Vec<sql2ddb_core::KeyAttr>,
    counters: Arc<EntityProgress>,
    stats: Arc<WriteStats>,
    /// Rows that landed on an earlier row's item (`overwrite = true` only).
    overwrites: Option<keys::Overwrites>,
    /// What the entity reads, to count its rows again at the end.
    from: EntitySource,
    /// Rows the source held when the run prepared the entity (with
    /// `--only-rejects`: the rows to replay).
    counted: u64,
    /// With `--only-rejects`: the keys of the rows to read again, instead of
    /// the segments.
    replay: Option<Vec<Vec<sql2ddb_core::SqlValue>>>,
}

/// The target table as the mapping declares it: keys, GSIs, billing.
fn table_spec(plan: &Plan) -> TableSpec {
    let t = &plan.target;
    TableSpec {
        name: t.table.clone(),
        keys: plan.key_attrs(),
        gsis: t
            .gsis
            .iter()
            .map(|g| GsiSpec {
                name: g.name.clone(),
                keys: g.keys(),
                projection: match &g.projection {
                    GsiProjection::All => Projection::All,
                    GsiProjection::KeysOnly => Projection::KeysOnly,
                    GsiProjection::Include(a) => Projection::Include(a.clone()),
                },
            })
            .collect(),
        billing: match t.billing {
            sql2ddb_mapping::Billing::OnDemand => Billing::OnDemand,
            sql2ddb_mapping::Billing::Provisioned { read, write } => {
                Billing::Provisioned { read, write }
            }
        },
    }
}

/// A new run id: UTC time and a short random suffix (`20240501T100000Z-3f9a1c`).
pub fn new_run_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let short = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &short[..6])
}

/// Runs a migration. Errors before the first write (mapping, source,
/// table) are returned; an error while running ends the run with status
/// `failed` and the error in the report.
pub async fn run(
    plan: &Plan,
    opts: &RunOptions,
    progress: Arc<RunProgress>,
) -> Result<RunReport, EngineError> {
    let started = Instant::now();
    if opts.resume && opts.run_id.is_none() {
        return Err(EngineError::Resume {
            run_id: String::new(),
            message: "to resume, give the run id".into(),
        });
    }
    let rejected = match &opts.only_rejects {
        Some(_) if opts.resume || opts.queue.is_some() || opts.track_progress => {
            return Err(EngineError::Resume {
                run_id: opts.run_id.clone().unwrap_or_default(),
                message: "--only-rejects replays rows in this process: it cannot be combined with --queue, --resume or --progress-table".into(),
            })
        }
        Some(path) => Some(replay::Rejected::load(path, plan)?),
        None => None,
    };
    let run_id = opts.run_id.clone().unwrap_or_else(new_run_id);
    let run_dir = opts.runs_dir.join(&run_id);
    std::fs::create_dir_all(&run_dir).map_err(|e| EngineError::io(&run_dir, e))?;
    let rejects = Arc::new(RejectsFile::new(run_dir.join("rejects.jsonl")));

    let source_url = opts.source.as_deref().unwrap_or(&plan.source.url);
    let source = Arc::new(Source::connect(source_url, opts.source_connections).await?);

    let endpoint_setting = opts.endpoint.as_deref().or(plan.target.endpoint.as_deref());
    let mut local = None;
    let endpoint = match endpoint_setting {
        // A dry run makes no DynamoDB call: nothing to start or resolve.
        _ if opts.dry_run => Endpoint::Url("http://127.0.0.1:9".to_string()),
        Some("local") => {
            let l = LocalDynamo::start(Some(&run_dir.join("dynamodb.sqlite"))).await?;
            let e = Endpoint::Url(l.url().to_string());
            local = Some(l);
            e
        }
        Some(url) => Endpoint::parse(url)?,
        None => Endpoint::Aws,
    };
    let region = opts.region.as_deref().or(plan.target.region.as_deref());
    let client = connect(&endpoint, region).await?;
    let mut tracking = match tracking::wanted(opts) {
        true => Some(tracking::Tracking::open(plan, opts, &client, &run_id).await?),
        false => None,
    };
    // A resumed run sends to the queue it sent to before, unless told otherwise.
    let queue_url = opts
        .queue
        .clone()
        .or_else(|| tracking.as_ref()?.recorded_queue().map(str::to_string));

    let mut report = RunReport {
        run_id: run_id.clone(),
        status: RunStatus::Ok,
        source: redact_url(source_url),
        table: plan.target.table.clone(),
        endpoint: match endpoint_setting {
            _ if opts.dry_run => "none (dry run)".to_string(),
            Some("local") => "local".to_string(),
            Some(url) => redact_url(url),
            None => "aws".to_string(),
        },
        local_data_file: local.as_ref().map(|l| l.path().display().to_string()),
        table_created: false,
        queue: queue_url.clone(),
        progress_table: None,
        run_dir: run_dir.display().to_string(),
        rejects_file: rejects.path().display().to_string(),
        entities: Vec::new(),
        totals: EntityReport::default(),
        writer: WriterReport::default(),
        pointers: Vec::new(),
        warnings: Vec::new(),
        error: None,
    };

    let result = async {
        // Resolve every entity against the source before the first write, so
        // a mapping that does not fit its table fails before touching DynamoDB.
        let mut prepared: Vec<Arc<Prepared>> = Vec::with_capacity(plan.entities.len());
        for entity in &plan.entities {
            if rejected.as_ref().is_some_and(|r| !r.has(&entity.name)) {
                continue;
            }
            let from = match &entity.from {
                EntitySource::Table(t) => Relation::Table(t),
                EntitySource::Query(q) => Relation::Query(q),
            };
            let shape = source.describe_named(&entity.name, &from).await?;
            let key = match &entity.key {
                Some(k) => k.clone(),
                None => shape.primary_key.clone(),
            };
            if key.is_empty() {
                return Err(EngineError::Entity {
                    entity: entity.name.clone(),
                    message:
                        "has no primary key to page by; set `key = [\"col\", …]` in its [[entity]]"
                            .into(),
                });
            }
            let (bound, children) = if entity.embeds().is_empty() {
                (entity.bind(plan, &shape.columns, &key)?, Vec::new())
            } else {
                let (shapes, children) =
                    embed::prepare(&source, &entity.name, entity.embeds()).await?;
                let bound = entity.bind_with_children(plan, &shape.columns, &key, &shapes)?;
                (bound, children)
            };
            let overwrites = keys::settle(entity, &shape, &key, &mut report.warnings)?;
            keys::prove_unique(&source, entity, &from, &shape, &key).await?;
            let pointers = plan
                .pointers()
                .iter()
                .filter(|p| p.entity == entity.name)
                .map(|p| p.bind(plan, &shape.columns))
                .collect::<Result<Vec<_>, _>>()?;
            let page_size = opts.page_size.unwrap_or_else(|| entity.page_size(plan));
            let query = source.page_query(&from, &shape, &key, page_size)?;
            let counters = progress.entity(&entity.name);
            let replay = match &rejected {
                Some(r) => Some(r.keys(&entity.name, &key)?),
                None => None,
            };
            let total = match &replay {
                Some(keys) => keys.len() as u64,
                None => source.count(&from).await?,
            };
            counters.total.store(total, Ordering::Relaxed);
            let parallelism = opts
                .read_parallelism
                .or_else(|| entity.read_parallelism(plan))
                .unwrap_or_else(|| default_read_parallelism(total));
            let recorded = tracking
                .as_ref()
                .and_then(|t| t.recorded_segments(&entity.name));
            let segments = match recorded {
                Some(s) => s,
                None if replay.is_some() => Vec::new(),
                None => source.split(&query, parallelism).await?,
            };
            let segments = match &mut tracking {
                Some(t) => {
                    t.describe(&entity.name, &segments);
                    t.remaining(&entity.name, segments)
                }
                None => segments,
            };
            prepared.push(Arc::new(Prepared {
                bound: Arc::new(bound),
                query,
                segments,
                children,
                pointers,
                keys: plan.key_attrs(),
                counters,
                stats: Arc::new(WriteStats::default()),
                overwrites,
                from: entity.from.clone(),
                counted: total,
                replay,
            }));
        }
        if !opts.dry_run {
            report.table_created =
                ensure_table_spec(&client, &table_spec(plan), plan.target.create).await?;
        }
        let checkpoints = match &tracking {
            Some(t) => Some(
                t.start(plan, &run_id, source_url, queue_url.as_deref())
                    .await?,
            ),
            None => None,
        };
        match &queue_url {
            Some(url) => {
                let sqs =
                    sql2ddb_queue::connect(opts.sqs_endpoint.as_deref(), None, Some(url)).await?;
                let queue = Arc::new(SqsQueue::open(sqs, url).await?);
                let handoff = Handoff::Sqs {
                    queue,
                    max_queued: opts.max_queued,
                };
                enqueue(
                    &prepared,
                    &run_id,
                    opts,
                    &source,
                    &rejects,
                    handoff,
                    checkpoints,
                )
                .await?;
            }
            None => {
                pipeline(
                    &prepared,
                    &run_id,
                    plan,
                    opts,
                    &client,
                    &source,
                    &rejects,
                    &mut report.writer,
                    &mut report.pointers,
                    checkpoints,
                )
                .await?
            }
        }
        Ok(prepared)
    }
    .await;

    let prepared = match result {
        Ok(p) => p,
        Err(e)
            if report.entities.is_empty()
                && !matches!(
                    e,
                    EngineError::Source(_) | EngineError::Dynamo(_) | EngineError::Queue(_)
                ) =>
        {
            return Err(e);
        }
        Err(e) => {
            report.error = Some(sql2ddb_core::redact_secrets(&e.to_string()));
            Vec::new()
        }
    };
    rejects.flush()?;
    for p in &prepared {
        let c = &p.counters;
        let s = &p.stats;
        let seconds = match (
            *s.started.lock().expect("lock"),
            *s.finished.lock().expect("lock"),
        ) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let overwritten = p.overwrites.as_ref().map_or(0, keys::Overwrites::count);
        report.entities.push(EntityReport {
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
        });
    }
    if let Some(t) = &tracking {
        report.progress_table = Some(t.table().to_string());
        if let Err(e) = t
            .settle_report(&run_id, &mut report.entities, queue_url.is_none())
            .await
        {
            report.error.get_or_insert_with(|| e.to_string());
        }
    }
    let interrupted = opts.stop.as_ref().is_some_and(|s| s.is_stopped());
    if interrupted && queue_url.is_none() {
        for e in &mut report.entities {
            e.pending = e
                .rows_read
                .saturating_sub(e.items_written + e.overwritten + e.rejected + e.failed);
        }
    }
    if report.error.is_none() && !interrupted {
        keys::check_counts(&source, &prepared, &mut report).await;
    }
    report.finish(started.elapsed().as_secs_f64());
    if interrupted && report.error.is_none() {
        report.status = RunStatus::Interrupted;
    }
    if queue_url.is_some() && report.error.is_none() && !interrupted {
        report.status = RunStatus::Enqueued;
    }
    source.close().await;
    if let Some(l) = local {
        l.stop().await;
    }
    let report_path = run_dir.join("report.json");
    std::fs::write(
        &report_path,
        serde_json::to_vec_pretty(&report).expect("report serialises"),
    )
    .map_err(|e| EngineError::io(&report_path, e))?;
    Ok(report)
}

/// `read_parallelism` segment readers per entity, all entities at once (at
/// most `source_connections` reading at a time), feed a bounded queue that
/// a few writer tasks drain, keeping up to `concurrency` calls in flight.
#[allow(clippy::too_many_arguments)] // one caller; the run's parts stay explicit
async fn pipeline(
    prepared: &[Arc<Prepared>],
    run_id: &str,
    plan: &Plan,
    opts: &RunOptions,
    client: &sql2ddb_dynamo::Client,
    source: &Arc<Source>,
    rejects: &Arc<RejectsFile>,
    writer_report: &mut WriterReport,
    pointer_report: &mut Vec<PointerReport>,
    checkpoints: Option<Arc<Checkpoints>>,
) -> Result<(), EngineError> {
    let crate::sink::SinkSetup {
        sink,
        controller,
        limiter,
        max_wcu,
        concurrency,
    } = crate::sink::build_sink(plan, &opts.sink_options(), client, rejects.clone());
    // A writer task keeps up to `concurrency` calls in flight for its page,
    // so a page or two in the writers fill every call slot; more pages there
    // (or waiting in the queue) would only hold memory.
    let smallest_page = prepared
        .iter()
        .map(|p| p.query.page_size())
        .min()
        .unwrap_or(1)
        .max(1);
    let writer_tasks =
        ((concurrency * sql2ddb_core::limits::MAX_BATCH_ITEMS).div_ceil(smallest_page) + 1)
            .min(concurrency);
    let queue = MemoryQueue::new(writer_tasks);
    let entities: Arc<Vec<Arc<Prepared>>> = Arc::new(prepared.to_vec());
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..writer_tasks {
        writers.spawn(drain::drain(
            queue.consumer(),
            sink.clone(),
            entities.clone(),
            checkpoints.clone(),
        ));
    }
    let readers = read::Readers {
        source: source.clone(),
        rejects: rejects.clone(),
        run_id: run_id.to_string(),
        out: PageOut {
            handoff: Handoff::Memory(queue.producer()),
            checkpoints,
        },
        slots: Arc::new(tokio::sync::Semaphore::new(
            opts.source_connections.max(1) as usize
        )),
        stop: opts.stop.clone(),
    };
    drop(queue);
    let read_result = readers.read_all(prepared).await;
    let mut write_result = Ok(());
    // Once a stop is asked, writers get a grace period for what they hold.
    let grace = async {
        match &opts.stop {
            Some(s) => {
                s.stopped().await;
                tokio::time::sleep(crate::stop::STOP_GRACE).await
            }
            None => std::future::pending().await,
        }
    };
    tokio::pin!(grace);
    let mut given_up = false;
    loop {
        tokio::select! {
            joined = writers.join_next() => match joined {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => write_result = Err(e),
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(panic)) => std::panic::resume_unwind(panic.into_panic()),
            },
            _ = &mut grace, if !given_up => {
                tracing::warn!("writers did not finish within the stop grace period; their pages stay pending");
                given_up = true;
                writers.abort_all();
            }
        }
    }
    for p in prepared {
        p.counters.done.store(true, Ordering::Relaxed);
    }
    let c = controller.snapshot();
    *writer_report = WriterReport {
        adaptive: c.adaptive,
        max_concurrency: c.max,
        final_concurrency: c.current,
        min_concurrency: c.min_reached,
        decreases: c.decreases,
        increases: c.increases,
        throttled: sink.throttled.load(Ordering::Relaxed),
        max_wcu,
        capacity_wait_seconds: limiter
            .map(|l| l.snapshot().waited.as_secs_f64())
            .unwrap_or(0.0),
    };
    *pointer_report = pointer_reports(&sink).await?;
    read_result.and(write_result)
}

/// What each pointer did, with its value read back when it has one key.
async fn pointer_reports(sink: &crate::sink::BatchSink) -> Result<Vec<PointerReport>, EngineError> {
    let stats = sink
        .pointer_stats
        .lock()
        .expect("pointer stats lock")
        .clone();
    let mut out = Vec::with_capacity(stats.len());
    for (name, s) in stats {
        let value = match (&sink.pointers, s.items.values().next()) {
            (Some(t), Some(update)) if s.items.len() == 1 => {
                read_pointer(&t.client, &t.table, &t.keys, update)
                    .await?
                    .map(|v| v.to_dynamo_json())
                    .unwrap_or(serde_json::Value::Null)
            }
            _ => serde_json::Value::Null,
        };
        out.push(PointerReport {
            name,
            keys: s.items.len() as u64,
            moved: s.moved,
            already_newer: s.already_newer,
            value,
        });
    }
    Ok(out)
}

/// The read side alone, for a run cut at the queue: segment readers send
/// their pages to SQS, and `sql2ddb worker` processes write them.
async fn enqueue(
    prepared: &[Arc<Prepared>],
    run_id: &str,
    opts: &RunOptions,
    source: &Arc<Source>,
    rejects: &Arc<RejectsFile>,
    handoff: Handoff,
    checkpoints: Option<Arc<Checkpoints>>,
) -> Result<(), EngineError> {
    let readers = read::Readers {
        source: source.clone(),
        rejects: rejects.clone(),
        run_id: run_id.to_string(),
        out: PageOut {
            handoff,
            checkpoints,
        },
        slots: Arc::new(tokio::sync::Semaphore::new(
            opts.source_connections.max(1) as usize
        )),
        stop: opts.stop.clone(),
    };
    let result = readers.read_all(prepared).await;
    for p in prepared {
        p.counters.done.store(true, Ordering::Relaxed);
    }
    result
}
