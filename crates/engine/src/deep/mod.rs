//! `sql2ddb verify MAPPING --deep`: the source, as the mapping maps it now,
//! compared item by item with the table as it is now.
//!
//! The expected side is the run's own read path ([`crate::run::expected::SourceItems`]:
//! the same segments, keyset pages, embeds and mapping code); the actual side
//! a parallel Scan of the table, its items attributed to entities by key
//! shape ([`shape`]). Both sides are partitioned by a stable hash of the
//! item's key into buckets. A full verification runs in two passes
//! ([`full`]): the first keeps only an order-independent digest per bucket
//! ([`digest`]), the second (only when some digests differ) reads both sides
//! again and keeps the records of the differing buckets, in memory up to a
//! budget and spilled to files in the run directory past it ([`spill`]),
//! then compares them key by key ([`compare`]). With `--sample F` only the
//! keys in a deterministic fraction F (by key hash) are kept, in spilled
//! buckets, and fetched with BatchGetItem instead of the scan: missing and
//! different items are found, extra ones are not.

pub mod canon;
mod compare;
mod digest;
mod full;
mod options;
mod pointers;
mod shape;
mod spill;
mod table;
mod take;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sql2ddb_core::WorkBatch;
use sql2ddb_dynamo::{RetryPolicy, WriteCapacityLimiter};
use sql2ddb_mapping::Plan;

pub use canon::AttrDiff;
pub use compare::{DiffKind, Difference, EntityDiff};
pub use options::{DeepOptions, DeepProgress};
pub use pointers::PointerCheck;

use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::run::expected::SourceItems;
use compare::Findings;
use pointers::PointerMax;
use spill::Buckets;
use table::TableSide;
use take::take_batch;

/// Bytes of records both sides hold in memory before spilling to files.
pub const DEFAULT_MEMORY_BUDGET: usize = 256 << 20;
/// Segments of the table's parallel Scan.
pub const DEFAULT_SCAN_SEGMENTS: u32 = 4;
/// Source rows per bucket aimed at with `--sample`: one bucket of each side
/// is in memory while compared.
const ROWS_PER_BUCKET: u64 = 20_000;
/// Fewest and most buckets per side.
const BUCKETS: (u64, u64) = (16, 4096);
/// The name of the differences file in the run directory.
pub const DIFF_FILE: &str = "diff.jsonl";
/// The report's JSON in the run directory (beside the run's own `report.json`).
pub const REPORT_JSON: &str = "verify-report.json";

/// What `verify --deep` found.
#[derive(Debug, Clone, Serialize)]
pub struct DeepReport {
    /// The table.
    pub table: String,
    /// The endpoint, as reports show it.
    pub endpoint: String,
    /// `full` or `sample`.
    pub mode: &'static str,
    /// The sampled fraction of keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<f64>,
    /// The run directory.
    pub run_dir: String,
    /// Every difference, one JSON object a line.
    pub diff_file: String,
    /// Per entity, in the mapping's order.
    pub entities: Vec<EntityDiff>,
    /// Pointer items.
    pub pointers: Vec<PointerCheck>,
    /// Items of the table outside the mapping's key space (not compared).
    pub outside: u64,
    /// Items read from the table.
    pub items_read: u64,
    /// Differences written to the file (pointers included).
    pub differences: u64,
    /// The first differences, for the terminal.
    pub first_differences: Vec<Difference>,
    /// Bytes spilled to files because memory held the budget.
    pub spilled_bytes: u64,
    /// Buckets the keys are partitioned into.
    pub buckets: u64,
    /// Buckets compared key by key: with `--sample` all, else those whose
    /// digests differ (none when the table is identical).
    pub buckets_resolved: u64,
}

impl DeepReport {
    /// Nothing differs, and every child row of an embed has its parent.
    pub fn clean(&self) -> bool {
        self.differences == 0 && self.no_parent() == 0
    }

    /// Child rows of embeds whose parent row does not exist: in no item.
    pub fn no_parent(&self) -> u64 {
        self.entities.iter().map(|e| e.no_parent).sum()
    }
}

/// Compares the source, mapped by `plan`, with the table.
pub async fn verify_deep(
    plan: &Plan,
    opts: &DeepOptions,
    progress: &RunProgress,
    deep: Arc<DeepProgress>,
) -> Result<DeepReport, EngineError> {
    if let Some(f) = opts.sample.filter(|f| !(*f > 0.0 && *f <= 1.0)) {
        return Err(EngineError::Config(format!(
            "--sample {f}: give a fraction of the keys greater than 0 and at most 1"
        )));
    }
    let read = restrict(plan, opts.entity.as_deref())?;
    let mut source = SourceItems::open(&read, &opts.run, progress).await?;
    let result = compare_all(plan, &read, opts, &mut source, (progress, deep)).await;
    source.close().await;
    let report = result?;
    save(&report)?;
    Ok(report)
}

/// Writes `verify-report.json` into the run directory.
fn save(report: &DeepReport) -> Result<(), EngineError> {
    let dir = std::path::Path::new(&report.run_dir);
    let path = dir.join(REPORT_JSON);
    let json = serde_json::to_vec_pretty(report).expect("the report serialises");
    std::fs::write(&path, json).map_err(|e| EngineError::io(&path, e))?;
    Ok(())
}

/// The plan with only the entity asked for.
fn restrict(plan: &Plan, entity: Option<&str>) -> Result<Plan, EngineError> {
    let Some(name) = entity else {
        return Ok(plan.clone());
    };
    if plan.entity(name).is_none() {
        let names: Vec<&str> = plan.entities.iter().map(|e| e.name.as_str()).collect();
        return Err(EngineError::Config(format!(
            "--entity {name:?}: the mapping has no such entity (it has {})",
            names.join(", ")
        )));
    }
    let mut only = plan.clone();
    only.entities.retain(|e| e.name == name);
    Ok(only)
}

/// Reads both sides, compares them (two passes, or the sample fetched by
/// key), checks the pointers, and writes `diff.jsonl`.
async fn compare_all(
    plan: &Plan,
    read: &Plan,
    opts: &DeepOptions,
    source: &mut SourceItems,
    (progress, deep): (&RunProgress, Arc<DeepProgress>),
) -> Result<DeepReport, EngineError> {
    let dir = source.run_dir().to_path_buf();
    let spill_dir = dir.join("verify-spill");
    // Left by an interrupted verification.
    let _ = std::fs::remove_dir_all(&spill_dir);
    let side = table_side(plan, opts, source, &deep);
    let started = std::time::Instant::now();
    let mut pointers = PointerMax::default();
    let path = dir.join(DIFF_FILE);
    let names: Vec<String> = read.entities.iter().map(|e| e.name.clone()).collect();
    let mut findings = Findings::create(&path, side.keys.clone(), &names)?;
    let full = full::Full {
        side: &side,
        opts,
        names: &names,
        spill_dir: &spill_dir,
        progress: (progress, &deep),
    };
    let outcome = match opts.sample {
        None => full.run(source, &mut findings, &mut pointers).await,
        Some(_) => sampled(&full, source, &mut findings, &mut pointers).await,
    };
    let _ = std::fs::remove_dir_all(&spill_dir);
    let outcome = outcome?;
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        "buckets compared"
    );
    let reads = (side.limiter.as_ref(), side.retry);
    let pointers = pointers
        .check(&side.client, &side.table, &side.keys, reads)
        .await?;
    for p in pointers.iter().filter(|p| !p.ok) {
        findings.add(pointer_difference(p))?;
    }
    findings.finish()?;
    let orphans = source.orphans();
    for e in &mut findings.entities {
        e.no_parent = orphans
            .iter()
            .find(|(n, _)| *n == e.entity)
            .map_or(0, |(_, r)| *r);
        e.rejected = outcome
            .rejected
            .iter()
            .find(|(n, _)| *n == e.entity)
            .map_or(0, |(_, r)| *r);
    }
    Ok(DeepReport {
        table: side.table.clone(),
        endpoint: source.endpoint().to_string(),
        mode: if opts.sample.is_some() {
            "sample"
        } else {
            "full"
        },
        sample: opts.sample,
        run_dir: dir.display().to_string(),
        diff_file: path.display().to_string(),
        entities: findings.entities.clone(),
        pointers,
        outside: outcome.outside,
        items_read: outcome.items_read,
        differences: findings.written,
        first_differences: findings.first.clone(),
        spilled_bytes: outcome.spilled_bytes,
        buckets: outcome.buckets,
        buckets_resolved: outcome.resolved,
    })
}

/// With `--sample`: the sampled expected items in buckets (spilled past the
/// budget), each bucket compared with the items fetched at its keys.
async fn sampled(
    full: &full::Full<'_>,
    source: &SourceItems,
    findings: &mut Findings,
    pointers: &mut PointerMax,
) -> Result<full::Outcome, EngineError> {
    let (progress, deep) = full.progress;
    let count = (source.rows() / ROWS_PER_BUCKET).clamp(BUCKETS.0, BUCKETS.1) as usize;
    let half = (full.opts.memory_budget / 2).max(1);
    let expected = Mutex::new(Buckets::new(full.spill_dir, "expected", count, half));
    let side = full.side;
    let sample = full.opts.sample;
    let take = |batch: WorkBatch| take_batch(batch, side, sample, &expected, Some(pointers));
    source.read(take).await?;
    tracing::info!("source read");
    deep.buckets.store(count as u64, Ordering::Relaxed);
    let mut expected = expected.into_inner().expect("buckets lock");
    for bucket in 0..count {
        let exp = expected.take(bucket)?;
        let act = side.fetch(&exp).await?;
        let n = findings.compare(exp, act)?;
        deep.compared.fetch_add(n, Ordering::Relaxed);
        deep.buckets_done.fetch_add(1, Ordering::Relaxed);
    }
    let rejected = full
        .names
        .iter()
        .map(|n| {
            (
                n.clone(),
                progress.entity(n).rejected.load(Ordering::Relaxed),
            )
        })
        .collect();
    Ok(full::Outcome {
        buckets: count as u64,
        resolved: count as u64,
        spilled_bytes: expected.spilled_bytes(),
        rejected,
        items_read: deep.scanned.load(Ordering::Relaxed),
        outside: 0,
    })
}

/// The table side of the comparison.
fn table_side(
    plan: &Plan,
    opts: &DeepOptions,
    source: &SourceItems,
    deep: &Arc<DeepProgress>,
) -> Arc<TableSide> {
    Arc::new(TableSide {
        client: source.client().clone(),
        table: plan.target.table.clone(),
        keys: plan.key_attrs(),
        space: shape::KeySpace::of(plan),
        names: plan.entities.iter().map(|e| e.name.clone()).collect(),
        wanted: opts.entity.clone(),
        limiter: opts.max_rcu.map(WriteCapacityLimiter::new),
        // Reads the table throttles are retried within the run's budget.
        retry: RetryPolicy::default().with_throttle_budget(crate::settings::retry_budget(
            opts.run.retry_budget,
            plan.writer.retry_seconds,
        )),
        outside: AtomicU64::new(0),
        progress: deep.clone(),
    })
}

fn pointer_difference(p: &PointerCheck) -> Difference {
    Difference {
        kind: DiffKind::Pointer,
        entity: p.name.clone(),
        key: p.key.clone(),
        source_keys: Vec::new(),
        attributes: p.attributes.clone(),
    }
}
