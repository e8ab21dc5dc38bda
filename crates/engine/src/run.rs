//! `sql2ddb run`: read each entity page by page, map rows to items, queue the
//! batches, write them with a pool of writers, count everything.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sql2ddb_core::{redact_url, MappedItem, Reject, SqlValue, WorkBatch};
use sql2ddb_dynamo::{connect, ensure_table, BatchWriter, Endpoint, LocalDynamo, RetryPolicy};
use sql2ddb_mapping::{BoundEntity, EntitySource, Plan};
use sql2ddb_queue::{MemoryQueue, Producer};
use sql2ddb_source::{From, PageQuery, Source};

use crate::error::EngineError;
use crate::progress::{EntityProgress, RunProgress};
use crate::rejects::RejectsFile;
use crate::report::{EntityReport, RunReport, RunStatus};

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
    /// Source connections of the run.
    pub source_connections: u32,
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

/// An entity's name with its live counters and write figures.
type EntityCounters = (String, Arc<EntityProgress>, Arc<WriteStats>);

/// One entity, resolved against its source and ready to read.
struct Prepared {
    bound: Arc<BoundEntity>,
    query: PageQuery,
    counters: Arc<EntityProgress>,
    stats: Arc<WriteStats>,
}

fn new_run_id() -> String {
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
    let run_id = new_run_id();
    let run_dir = opts.runs_dir.join(&run_id);
    std::fs::create_dir_all(&run_dir).map_err(|e| EngineError::io(&run_dir, e))?;
    let rejects = Arc::new(RejectsFile::new(run_dir.join("rejects.jsonl")));

    let source_url = opts.source.as_deref().unwrap_or(&plan.source.url);
    let source = Arc::new(Source::connect(source_url, opts.source_connections).await?);

    let endpoint_setting = opts.endpoint.as_deref().or(plan.target.endpoint.as_deref());
    let mut local = None;
    let endpoint = match endpoint_setting {
        Some("local") => {
            let l = LocalDynamo::start(Some(&run_dir.join("dynamodb.sqlite"))).await?;
            let e = Endpoint::Url(l.url().to_string());
            local = Some(l);
            e
        }
        Some(url) => Endpoint::Url(url.to_string()),
        None => Endpoint::Aws,
    };
    let region = opts.region.as_deref().or(plan.target.region.as_deref());
    let client = connect(&endpoint, region).await;
    let keys = plan.key_attrs();

    let mut report = RunReport {
        run_id: run_id.clone(),
        status: RunStatus::Ok,
        source: redact_url(source_url),
        table: plan.target.table.clone(),
        endpoint: match endpoint_setting {
            Some("local") => "local".to_string(),
            Some(url) => redact_url(url),
            None => "aws".to_string(),
        },
        local_data_file: local.as_ref().map(|l| l.path().display().to_string()),
        table_created: false,
        run_dir: run_dir.display().to_string(),
        rejects_file: rejects.path().display().to_string(),
        entities: Vec::new(),
        totals: EntityReport::default(),
        error: None,
    };

    let result = async {
        // Resolve every entity against the source before the first write, so
        // a mapping that does not fit its table fails before touching DynamoDB.
        let mut prepared = Vec::with_capacity(plan.entities.len());
        for entity in &plan.entities {
            let from = match &entity.from {
                EntitySource::Table(t) => From::Table(t),
                EntitySource::Query(q) => From::Query(q),
            };
            let shape = source.describe(&from).await?;
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
            let bound = entity.bind(plan, &shape.columns, &key)?;
            let page_size = opts.page_size.unwrap_or_else(|| entity.page_size(plan));
            let query = source.page_query(&from, &shape, &key, page_size)?;
            let counters = progress.entity(&entity.name);
            counters
                .total
                .store(source.count(&from).await?, Ordering::Relaxed);
            prepared.push(Prepared {
                bound: Arc::new(bound),
                query,
                counters,
                stats: Arc::new(WriteStats::default()),
            });
        }
        report.table_created =
            ensure_table(&client, &plan.target.table, &keys, plan.target.create).await?;
        pipeline(&prepared, &run_id, plan, opts, &client, &source, &rejects).await?;
        Ok(prepared)
    }
    .await;

    let prepared = match result {
        Ok(p) => p,
        Err(e)
            if report.entities.is_empty()
                && !matches!(e, EngineError::Source(_) | EngineError::Dynamo(_)) =>
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
        report.entities.push(EntityReport {
            name: p.bound.name().to_string(),
            rows_read: EntityProgress::get(&c.read),
            items_written: EntityProgress::get(&c.written),
            rejected: EntityProgress::get(&c.rejected),
            failed: EntityProgress::get(&c.failed),
            bytes: s.bytes.load(Ordering::Relaxed),
            write_units: s.write_units.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            segments: 1,
            pages: s.pages.load(Ordering::Relaxed),
            seconds,
        });
    }
    report.finish(started.elapsed().as_secs_f64());
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

/// Readers feed the queue entity after entity; `concurrency` writers drain it.
async fn pipeline(
    prepared: &[Prepared],
    run_id: &str,
    plan: &Plan,
    opts: &RunOptions,
    client: &sql2ddb_dynamo::Client,
    source: &Source,
    rejects: &Arc<RejectsFile>,
) -> Result<(), EngineError> {
    let concurrency = opts.concurrency.unwrap_or(plan.writer.concurrency).max(1);
    let queue = MemoryQueue::new(concurrency);
    let writer = Arc::new(BatchWriter::new(
        client.clone(),
        plan.target.table.clone(),
        plan.key_attrs(),
        opts.retry,
    ));
    let by_name: Arc<Vec<EntityCounters>> = Arc::new(
        prepared
            .iter()
            .map(|p| {
                (
                    p.bound.name().to_string(),
                    p.counters.clone(),
                    p.stats.clone(),
                )
            })
            .collect(),
    );
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let consumer = queue.consumer();
        let writer = writer.clone();
        let by_name = by_name.clone();
        let rejects = rejects.clone();
        writers.spawn(async move {
            while let Some(batch) = consumer.pop().await {
                let (_, counters, stats) = by_name
                    .iter()
                    .find(|(n, _, _)| *n == batch.entity)
                    .expect("batches come from known entities");
                let entity = batch.entity.clone();
                let out = writer.write(batch.items).await;
                EntityProgress::add(&counters.written, out.written);
                EntityProgress::add(&counters.rejected, out.rejected.len() as u64);
                EntityProgress::add(&counters.failed, out.failed.len() as u64);
                stats.bytes.fetch_add(out.bytes, Ordering::Relaxed);
                stats
                    .write_units
                    .fetch_add(out.write_units, Ordering::Relaxed);
                stats.retries.fetch_add(out.retries, Ordering::Relaxed);
                stats.touch();
                let failed: Vec<Reject> = out
                    .rejected
                    .iter()
                    .chain(out.failed.iter())
                    .map(|(m, reason)| write_reject(&entity, m, reason))
                    .collect();
                rejects.write(&failed)?;
            }
            Ok::<(), EngineError>(())
        });
    }
    let producer = queue.producer();
    drop(queue);
    let mut read_result = Ok(());
    for p in prepared {
        if let Err(e) = read_entity(p, source, rejects, run_id, &producer).await {
            read_result = Err(e);
            break;
        }
    }
    drop(producer);
    let mut write_result = Ok(());
    while let Some(joined) = writers.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(e)) => write_result = Err(e),
            Err(panic) => std::panic::resume_unwind(panic.into_panic()),
        }
    }
    for p in prepared {
        p.counters.done.store(true, Ordering::Relaxed);
    }
    read_result.and(write_result)
}

/// A reject for an item DynamoDB refused or that ran out of retries.
fn write_reject(entity: &str, m: &MappedItem, reason: &str) -> Reject {
    Reject {
        entity: entity.to_string(),
        key: m.source_key.clone(),
        column: None,
        reason: reason.to_string(),
        row: sql2ddb_core::attr::map_to_dynamo_json(&m.item),
    }
}

/// Reads one entity page by page (keyset), maps each page and queues it.
async fn read_entity(
    p: &Prepared,
    source: &Source,
    rejects: &RejectsFile,
    run_id: &str,
    producer: &Producer,
) -> Result<(), EngineError> {
    *p.stats.started.lock().expect("lock") = Some(Instant::now());
    let mut after: Option<Vec<SqlValue>> = None;
    let mut page = 0u64;
    loop {
        let rows = source.read_page(&p.query, after.as_deref()).await?;
        let Some(last) = rows.last() else { break };
        after = Some(p.query.key_of(last));
        let mut items = Vec::with_capacity(rows.len());
        let mut rejected = Vec::new();
        for row in &rows {
            match p.bound.map_row(row) {
                Ok(m) => items.push(m),
                Err(r) => rejected.push(r),
            }
        }
        EntityProgress::add(&p.counters.read, rows.len() as u64);
        EntityProgress::add(&p.counters.rejected, rejected.len() as u64);
        p.stats.pages.fetch_add(1, Ordering::Relaxed);
        rejects.write(&rejected)?;
        let batch = WorkBatch {
            run_id: run_id.to_string(),
            entity: p.bound.name().to_string(),
            segment: 0,
            page,
            rows_read: rows.len() as u64,
            items,
        };
        producer
            .push(batch)
            .await
            .map_err(|e| EngineError::Entity {
                entity: p.bound.name().to_string(),
                message: e.to_string(),
            })?;
        page += 1;
    }
    p.stats.touch();
    Ok(())
}
