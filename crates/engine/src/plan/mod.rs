//! `sql2ddb plan`: what a run would write, cost and take, from the source
//! alone (no DynamoDB call), before anything is written.
//!
//! Every entity is prepared as a dry run prepares it, a sample of its rows
//! (spread over its key range) is mapped by the run's own mapping, and the
//! sample's sizes and write units are scaled to the entity's row count.
//! Partition keys and key collisions are counted exactly with `GROUP BY`s on
//! the columns the key templates read (or, with `--estimate`, in the sample).
//! docs/planning.md explains each number.

use std::path::PathBuf;

use sql2ddb_core::attr::map_to_dynamo_json;
use sql2ddb_core::{redact_url, write_units, KeyAttr};
use sql2ddb_mapping::{Entity, Gsi, Plan, Projection};

pub mod capacity;
mod keys;
mod paths;
mod prices;
mod report;
pub mod retries;
pub mod size;
mod workers;

pub use capacity::{CapacityOptions, CapacityPrediction, TableMode};
pub use prices::Prices;
pub use report::{
    Collisions, Cost, Duration, EntityPlan, IndexPlan, KeyCount, LoadPath, Partition, PlanReport,
    RejectReason, Totals,
};
pub use retries::RetryEstimate;
pub use workers::FleetPlan;

use crate::error::EngineError;
use crate::run::{EntitySample, RunOptions, Sampler};
use capacity::CapacityLoad;
use keys::{collisions, hot_partitions, partition_keys, EntityPartitions};
use size::SizeStats;

/// Rows sampled per entity unless `--sample` says.
pub const DEFAULT_SAMPLE: usize = 10_000;
/// Write request units per second a new on-demand table takes at first.
pub const ON_DEMAND_NEW_TABLE_WRU: f64 = 4_000.0;
/// The default quota of write request units per second of one table.
pub const ON_DEMAND_TABLE_QUOTA_WRU: f64 = 40_000.0;
/// Write units per second one partition takes.
pub const PARTITION_WCU: f64 = 1_000.0;
/// Bytes of one partition (and of an item collection with a local index).
pub const PARTITION_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// Bytes DynamoDB adds to each stored item (and index entry) for storage.
pub const ITEM_OVERHEAD: u64 = 100;

/// What `plan` takes besides the mapping.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Overrides the mapping's source URL.
    pub source: Option<String>,
    /// Rows sampled per entity.
    pub sample: usize,
    /// Planned items per second (`--rate`).
    pub rate: Option<f64>,
    /// The catalog's row estimates instead of counts; partitions and
    /// collisions from the sample instead of `GROUP BY`s over every row.
    pub estimate: bool,
    /// Overrides the price per million write request units.
    pub price_wru: Option<f64>,
    /// Overrides the price per GB-month.
    pub price_gb: Option<f64>,
    /// Overrides the price per GB imported from S3.
    pub price_import_gb: Option<f64>,
    /// The price per provisioned WCU-hour (not in the price table).
    pub price_wcu_hour: Option<f64>,
    /// Overrides the mapping's region (for the prices).
    pub region: Option<String>,
    /// Overrides the mapping's `max_wcu`.
    pub max_wcu: Option<u64>,
    /// Source connections.
    pub source_connections: u32,
    /// Predict the time with the capacity model for this table (`--capacity`).
    pub capacity: Option<CapacityOptions>,
    /// The `sql2ddb worker` processes that will write the run (`--workers`;
    /// one: `run` alone).
    pub workers: u32,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            source: None,
            sample: DEFAULT_SAMPLE,
            rate: None,
            estimate: false,
            price_wru: None,
            price_gb: None,
            price_import_gb: None,
            price_wcu_hour: None,
            region: None,
            max_wcu: None,
            source_connections: crate::run::DEFAULT_SOURCE_CONNECTIONS,
            capacity: None,
            workers: 1,
        }
    }
}

/// Plans the migration of `mapping`: connects to the source only.
pub async fn plan(mapping: &Plan, opts: &PlanOptions) -> Result<PlanReport, EngineError> {
    if opts.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(EngineError::Config(
            "--rate must be a positive number of items per second".into(),
        ));
    }
    if opts.workers == 0 {
        return Err(EngineError::Config(
            "--workers must be at least 1 (the processes that write the run)".into(),
        ));
    }
    let region = opts.region.as_deref().or(mapping.target.region.as_deref());
    let mut prices = Prices::lookup(region, opts.price_wru, opts.price_gb)?;
    for (what, v) in [
        ("--price-import-gb", opts.price_import_gb),
        ("--price-wcu-hour", opts.price_wcu_hour),
    ] {
        if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return Err(EngineError::Config(format!(
                "{what} must be a price of zero or more"
            )));
        }
    }
    if let Some(p) = opts.price_import_gb {
        prices.import_per_gb = p;
        prices
            .note
            .push_str("; import price overridden on the command line");
    }
    prices.provisioned_wcu_hour = opts.price_wcu_hour;
    // Collisions are what the plan reports, not a reason to stop before it.
    let mut relaxed = mapping.clone();
    relaxed.entities.iter_mut().for_each(|e| e.overwrite = true);
    let scratch = scratch_dir();
    let run_opts = RunOptions {
        source: opts.source.clone(),
        runs_dir: scratch.clone(),
        source_connections: opts.source_connections,
        ..RunOptions::default()
    };
    let opened = Sampler::open(&relaxed, &run_opts, !opts.estimate).await;
    let result = match opened {
        Ok(sampler) => {
            let r = build(mapping, &sampler, opts, prices).await;
            sampler.close().await;
            r
        }
        Err(e) => Err(e),
    };
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// A directory for the dry run's files, removed when the plan is done.
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("sql2ddb-plan-{}", uuid::Uuid::new_v4().simple()))
}

async fn build(
    mapping: &Plan,
    sampler: &Sampler,
    opts: &PlanOptions,
    prices: Prices,
) -> Result<PlanReport, EngineError> {
    let mut entities = Vec::new();
    let mut partitions = Vec::new();
    let mut warnings = Vec::new();
    let mut load = opts.capacity.map(|c| CapacityLoad::new(mapping, c));
    for (i, (name, counted)) in sampler.entities().into_iter().enumerate() {
        let entity = mapping
            .entity(&name)
            .ok_or_else(|| EngineError::Config(format!("entity {name:?} is not in the mapping")))?;
        let sample = sampler.sample(i, opts.sample).await?;
        let (mut e, parts) =
            plan_entity(mapping, entity, sampler, i, counted, &sample, opts).await?;
        e.collisions = collisions(mapping, entity, sampler, i, &sample, opts.estimate).await?;
        entity_warnings(entity, &e, &mut warnings);
        if let Some(load) = &mut load {
            let scale = match sample.rows {
                0 => 0.0,
                n => e.rows as f64 / n as f64,
            };
            load.add(&sample, scale);
        }
        partitions.push((name, parts));
        entities.push(e);
    }
    let totals = totals(&entities);
    // The run's cap, by the rule every job caps with.
    let cap = crate::settings::max_wcu(opts.max_wcu, mapping.writer.max_wcu);
    let (planned, planned_from) = planned_rate(cap, opts, &totals);
    if !opts.estimate {
        keys::count_shared(mapping, sampler, &mut partitions).await?;
    }
    let hot = hot_partitions(partitions, planned, &totals);
    partition_warnings(&hot, opts, &planned_from, &mut warnings);
    let fleet = FleetPlan::new(opts.workers, cap);
    let capacity = load.map(|l| l.predict(&fleet));
    warnings.extend(capacity.as_ref().and_then(CapacityPrediction::warning));
    let cost = cost_of(&totals, &prices);
    let mut time = durations(cap, opts, &totals);
    for d in &mut time {
        d.fleet_seconds = fleet.fleet_seconds(d.seconds);
    }
    let load_paths = paths::load_paths(mapping, cap, &totals, &prices, &cost, &time, planned);
    Ok(PlanReport {
        load_paths,
        table: mapping.target.table.clone(),
        source: redact_url(opts.source.as_deref().unwrap_or(&mapping.source.url)),
        sample_size: opts.sample,
        time,
        entities,
        totals,
        prices,
        cost,
        hot_partitions: hot,
        planned_wcu_per_second: planned,
        planned_rate_from: planned_from,
        fleet,
        capacity,
        warnings,
    })
}

/// Warnings of the partition keys that need more than a partition writes
/// (`--partition-wcu` with `--capacity`, else DynamoDB's) or holds.
fn partition_warnings(
    hot: &[Partition],
    opts: &PlanOptions,
    planned_from: &str,
    warnings: &mut Vec<String>,
) {
    let (partition_wcu, per_partition) = match &opts.capacity {
        Some(c) => (c.partition_wcu as f64, "--partition-wcu"),
        None => (PARTITION_WCU, "DynamoDB's"),
    };
    for p in hot {
        if p.wcu_per_second > partition_wcu {
            warnings.push(format!(
                "partition key {:?} needs about {:.0} WCU/s at {planned_from}, over {per_partition} {partition_wcu:.0} WCU/s per partition: its writes will be throttled and the run slowed; spread it (add a column or a shard suffix to the partition key) or lower the rate",
                p.key, p.wcu_per_second
            ));
        }
        if p.bytes > PARTITION_BYTES {
            warnings.push(format!(
                "partition key {:?} holds about {}, over 10 GB: one partition key value that large cannot be spread by DynamoDB (and is refused with a local secondary index)",
                p.key,
                sql2ddb_core::shown::bytes(p.bytes)
            ));
        }
    }
}

/// What the writes, a month of storage and an import from S3 cost at `prices`.
fn cost_of(totals: &Totals, prices: &Prices) -> Cost {
    let gb = |b: u64| b as f64 / (1024.0 * 1024.0 * 1024.0);
    Cost {
        writes_usd: (totals.write_units + totals.index_write_units) as f64 / 1e6
            * prices.write_per_million,
        storage_month_usd: gb(totals.storage_bytes) * prices.storage_gb_month,
        import_from_s3_usd: gb(totals.import_bytes) * prices.import_per_gb,
    }
}

/// The sizes of the sample's items as each index projects them, and the
/// bytes of the sample as import lines (`{"Item": …}` and a newline).
fn projected_sizes(
    sample: &EntitySample,
    gsis: &[Gsi],
    keys: &[KeyAttr],
) -> (Vec<Vec<usize>>, usize) {
    let mut index_sizes: Vec<Vec<usize>> = vec![Vec::new(); gsis.len()];
    let mut import = 0usize;
    for m in &sample.items {
        let (_, projected) = size::item_units(&m.item, m.size, gsis, keys);
        for (list, s) in index_sizes.iter_mut().zip(projected) {
            list.extend(s);
        }
        import += serde_json::json!({ "Item": map_to_dynamo_json(&m.item) })
            .to_string()
            .len()
            + 1;
    }
    (index_sizes, import)
}

/// Sizes, units, storage and partitions of one entity, from its sample.
async fn plan_entity(
    mapping: &Plan,
    entity: &Entity,
    sampler: &Sampler,
    i: usize,
    counted: Option<u64>,
    sample: &EntitySample,
    opts: &PlanOptions,
) -> Result<(EntityPlan, EntityPartitions), EngineError> {
    let estimate = match counted {
        Some(_) => None,
        None => sampler.source().estimate_rows(&sampler.relation(i)).await?,
    };
    let rows = match (estimate, counted) {
        (Some(n), _) | (None, Some(n)) => n,
        // No estimate in the catalog (SQLite, a query entity): counted after all.
        (None, None) => sampler.source().count(&sampler.relation(i)).await?,
    };
    let scale = match sample.rows {
        0 => 0.0,
        n => rows as f64 / n as f64,
    };
    let scaled = |v: f64| (v * scale).round() as u64;
    let keys = mapping.key_attrs();
    let gsis = &mapping.target.gsis;
    let sizes: Vec<usize> = sample.items.iter().map(|m| m.size).collect();
    let units: u64 = sizes.iter().map(|&s| write_units(s)).sum();
    let (index_sizes, import) = projected_sizes(sample, gsis, &keys);
    let indexes = gsis
        .iter()
        .zip(&index_sizes)
        .map(|(g, s)| IndexPlan {
            name: g.name.clone(),
            projection: match &g.projection {
                Projection::All => "all".into(),
                Projection::KeysOnly => "keys_only".into(),
                Projection::Include(_) => "include".into(),
            },
            items: scaled(s.len() as f64),
            projected_size: SizeStats::of(s),
            write_units: scaled(s.iter().map(|&s| write_units(s)).sum::<u64>() as f64),
            storage_bytes: scaled(s.iter().map(|&s| s as u64 + ITEM_OVERHEAD).sum::<u64>() as f64),
        })
        .collect();
    let item_size = SizeStats::of(&sizes);
    let n = sample.items.len().max(1) as f64;
    let parts = EntityPartitions {
        keys: partition_keys(mapping, entity, sampler, i, sample, scale, opts.estimate).await?,
        mean_size: item_size.mean,
        mean_units: units as f64 / n,
    };
    let plan = EntityPlan {
        name: entity.name.clone(),
        rows,
        rows_estimated: estimate.is_some(),
        sampled_rows: sample.rows,
        exact: estimate.is_none() && sample.rows >= rows,
        items: scaled(sample.items.len() as f64),
        write_units: scaled(units as f64),
        storage_bytes: scaled(sizes.iter().map(|&s| s as u64 + ITEM_OVERHEAD).sum::<u64>() as f64),
        import_bytes: scaled(import as f64),
        item_size,
        indexes,
        partitions_exact: !opts.estimate,
        collisions: Collisions::default(),
        sample_items: sample
            .items
            .iter()
            .take(3)
            .map(|m| map_to_dynamo_json(&m.item))
            .collect(),
        rejects: reject_reasons(sample),
        null_key_rows: match opts.estimate {
            true => None,
            false => Some(keys::null_key_rows(entity, sampler, i).await?),
        },
    };
    Ok((plan, parts))
}

/// The sample's rejects, grouped by column and reason, most frequent first.
fn reject_reasons(sample: &EntitySample) -> Vec<RejectReason> {
    let mut out: Vec<RejectReason> = Vec::new();
    for r in &sample.rejects {
        match out
            .iter_mut()
            .find(|o| o.column == r.column && o.reason == r.reason)
        {
            Some(o) => o.rows += 1,
            None => out.push(RejectReason {
                column: r.column.clone(),
                reason: r.reason.clone(),
                rows: 1,
                example_key: r.key.clone(),
            }),
        }
    }
    out.sort_by_key(|r| std::cmp::Reverse(r.rows));
    out
}

/// Warnings of one entity: items near the limit, rejects, collisions.
fn entity_warnings(entity: &Entity, e: &EntityPlan, warnings: &mut Vec<String>) {
    let name = &entity.name;
    if e.item_size.near_limit > 0.0 {
        warnings.push(format!(
            "entity {name:?}: {:.1}% of the sampled items are at 90% of the 400 KB item limit or more (largest {} bytes): a little more data and they are rejected",
            e.item_size.near_limit * 100.0,
            e.item_size.max
        ));
    }
    if let Some(n) = e.null_key_rows.filter(|n| *n > 0) {
        warnings.push(format!(
            "entity {name:?}: {n} rows hold NULL in a column its key templates read ({}): they make no key, and `run` rejects them (give the column a value, or use another column)",
            size::columns(std::iter::once(entity.pk_template()).chain(entity.sk_template())).join(", ")
        ));
    }
    let rejected: u64 = e.rejects.iter().map(|r| r.rows).sum();
    if rejected > 0 {
        warnings.push(format!(
            "entity {name:?}: {rejected} of {} sampled rows would be rejected (first reason: {})",
            e.sampled_rows,
            e.rejects.first().map_or("", |r| r.reason.as_str())
        ));
    }
    let c = &e.collisions;
    if c.rows > 0 {
        let what = match entity.overwrite {
            true => "with overwrite = true the last write wins and the others are lost",
            false => "`run` refuses the entity until its key templates tell them apart (or overwrite = true)",
        };
        warnings.push(format!(
            "entity {name:?}: {} rows map to {} keys that another row maps to too ({what}); for example {} ({} rows)",
            c.rows,
            c.keys,
            c.examples.first().map_or("", |k| k.key.as_str()),
            c.examples.first().map_or(0, |k| k.rows)
        ));
    }
}

fn totals(entities: &[EntityPlan]) -> Totals {
    let mut t = Totals::default();
    for e in entities {
        t.rows += e.rows;
        t.items += e.items;
        t.write_units += e.write_units;
        t.index_write_units += e.indexes.iter().map(|i| i.write_units).sum::<u64>();
        t.storage_bytes += e.storage_bytes + e.indexes.iter().map(|i| i.storage_bytes).sum::<u64>();
        t.import_bytes += e.import_bytes;
    }
    t
}

/// The table write units per second the run is planned at, and whence
/// (`cap`: the run's write-capacity cap, resolved once).
fn planned_rate(cap: Option<u64>, opts: &PlanOptions, totals: &Totals) -> (f64, String) {
    let per_item = match totals.items {
        0 => 1.0,
        n => totals.write_units as f64 / n as f64,
    };
    if let Some(rate) = opts.rate {
        return (rate * per_item, format!("--rate {rate} items/s"));
    }
    if let Some(wcu) = cap {
        return (wcu as f64, format!("max_wcu {wcu}"));
    }
    if let Some(c) = &opts.capacity {
        return match c.table {
            TableMode::Provisioned(wcu) => (wcu as f64, format!("--capacity {wcu} WCU/s")),
            TableMode::OnDemand => (
                c.warm_wcu as f64,
                format!(
                    "--capacity on-demand's {} WCU/s warm throughput",
                    c.warm_wcu
                ),
            ),
        };
    }
    (
        ON_DEMAND_NEW_TABLE_WRU,
        "a new on-demand table's 4,000 WRU/s".into(),
    )
}

/// How long writing takes at each rate that applies (`cap`: the run's
/// write-capacity cap).
fn durations(cap: Option<u64>, opts: &PlanOptions, t: &Totals) -> Vec<Duration> {
    let mut out = Vec::new();
    if let Some(rate) = opts.rate {
        out.push(Duration {
            at: format!("--rate {rate} items/s"),
            seconds: t.items as f64 / rate,
            fleet_seconds: None,
        });
    }
    if let Some(wcu) = cap {
        out.push(Duration {
            at: format!("max_wcu {wcu} WCU/s"),
            seconds: t.write_units as f64 / wcu as f64,
            fleet_seconds: None,
        });
    }
    for (at, wru) in [
        (
            "a new on-demand table (4,000 WRU/s)",
            ON_DEMAND_NEW_TABLE_WRU,
        ),
        (
            "the per-table quota (40,000 WRU/s)",
            ON_DEMAND_TABLE_QUOTA_WRU,
        ),
    ] {
        out.push(Duration {
            at: at.into(),
            seconds: t.write_units as f64 / wru,
            fleet_seconds: None,
        });
    }
    out
}
