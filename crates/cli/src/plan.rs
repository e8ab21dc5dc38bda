//! `sql2ddb plan`: the items, cost, time and hot partitions of a migration,
//! from the source alone, as a table or one JSON object.

mod compact;

use std::fmt::Write as _;
use std::path::PathBuf;

use sql2ddb_core::capacity::{ON_DEMAND_WARM_WCU, PARTITION_WCU};
use sql2ddb_engine::plan::{
    CapacityOptions, CapacityPrediction, EntityPlan, PlanOptions, PlanReport, TableMode,
    DEFAULT_SAMPLE,
};

use crate::outcome::Ended;
use crate::table::{bytes, thousands};
use crate::{fail, limits, load};

pub const EXIT_CODES: &str = "\
Exit codes:
  0   planned, nothing to warn about
  2   planned, with warnings (hot partitions, key collisions, rejects,
      items near the 400 KB limit): read them before running
  64  usage error: unknown option, missing argument, value out of range
  69  the source could not be reached, or refused
  74  a file could not be read or written (the mapping, the plan's directory)
  78  the mapping is invalid or does not fit its source";

/// Arguments of `sql2ddb plan`.
#[derive(clap::Args)]
pub struct PlanArgs {
    /// The mapping spec (TOML).
    pub mapping: PathBuf,
    /// Rows sampled per entity, spread over its key range.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SAMPLE, value_parser = limits::positive::<usize>)]
    pub sample: usize,
    /// Planned write rate, in items per second.
    #[arg(long, value_name = "ITEMS_PER_S", value_parser = positive_f64)]
    pub rate: Option<f64>,
    /// Use the catalog's row estimates instead of counting (PostgreSQL,
    /// MySQL), and find hot partitions and collisions in the sample instead
    /// of grouping every row: for very large tables.
    #[arg(long)]
    pub estimate: bool,
    /// Print the plan as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// US dollars per million write request units, instead of the price table's.
    #[arg(long, value_name = "USD", value_parser = price)]
    pub price_wru: Option<f64>,
    /// US dollars per GB-month of storage, instead of the price table's.
    #[arg(long, value_name = "USD", value_parser = price)]
    pub price_gb: Option<f64>,
    /// US dollars per GB imported from S3, instead of the price table's.
    #[arg(long, value_name = "USD", value_parser = price)]
    pub price_import_gb: Option<f64>,
    /// US dollars per provisioned write capacity unit-hour, to cost the
    /// provisioned path (the price table has none).
    #[arg(long, value_name = "USD", value_parser = price)]
    pub price_wcu_hour: Option<f64>,
    /// Source URL, overriding the mapping's (postgres://, mysql://, sqlite://).
    #[arg(long)]
    pub source: Option<String>,
    /// AWS region whose prices are used, overriding the mapping's.
    #[arg(long)]
    pub region: Option<String>,
    /// Write units per second the run will be capped at, overriding the
    /// mapping's `max_wcu`.
    #[arg(long, value_parser = limits::max_wcu())]
    pub max_wcu: Option<u64>,
    /// Predict the time DynamoDB's capacity allows for these items, per
    /// partition: `on-demand` (at its warm throughput) or a provisioned
    /// table's write units per second.
    #[arg(long, value_name = "on-demand|WCU", value_parser = capacity_mode)]
    pub capacity: Option<TableMode>,
    /// With --capacity on-demand: the table's warm write throughput.
    #[arg(long, value_name = "WCU", default_value_t = ON_DEMAND_WARM_WCU, requires = "capacity", value_parser = limits::positive::<u64>)]
    pub warm_wcu: u64,
    /// With --capacity: the table's partitions (default: as many as carry
    /// the table's rate at --partition-wcu each).
    #[arg(long, value_name = "N", requires = "capacity", value_parser = limits::positive::<u32>)]
    pub partitions: Option<u32>,
    /// With --capacity: write units per second of one partition.
    #[arg(long, value_name = "WCU", default_value_t = PARTITION_WCU, requires = "capacity", value_parser = limits::positive::<u64>)]
    pub partition_wcu: u64,
    /// The `sql2ddb worker` processes that will write the run: each one's
    /// share of --max-wcu, and the fleet's time (they share one cap and
    /// one table; the join adds up to 5 s).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = limits::positive::<u32>)]
    pub workers: u32,
    /// Where the plan's directory is made (`plan-<id>/` with `report.json`
    /// and `report.html`).
    #[arg(long, value_name = "DIR", default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
}

fn capacity_mode(text: &str) -> Result<TableMode, String> {
    match text {
        "on-demand" => Ok(TableMode::OnDemand),
        _ => match text.parse::<u64>() {
            Ok(wcu) if wcu > 0 => Ok(TableMode::Provisioned(wcu)),
            _ => Err(format!(
                "{text:?} is neither on-demand nor a positive number of write units per second"
            )),
        },
    }
}

fn positive_f64(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

fn price(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a price (a number, zero or more)")),
    }
}

/// Runs `sql2ddb plan`.
pub async fn plan(args: PlanArgs) -> Ended {
    let mapping = load(&args.mapping, args.source.as_deref())?;
    let opts = PlanOptions {
        source: args.source.clone(),
        sample: args.sample,
        rate: args.rate,
        estimate: args.estimate,
        price_wru: args.price_wru,
        price_gb: args.price_gb,
        price_import_gb: args.price_import_gb,
        price_wcu_hour: args.price_wcu_hour,
        region: args.region.clone(),
        max_wcu: args.max_wcu,
        capacity: args.capacity.map(|table| CapacityOptions {
            warm_wcu: args.warm_wcu,
            partitions: args.partitions,
            partition_wcu: args.partition_wcu,
            ..CapacityOptions::new(table)
        }),
        workers: args.workers,
        ..PlanOptions::default()
    };
    let report = sql2ddb_engine::plan::plan(&mapping, &opts).await?;
    let dir = args
        .runs_dir
        .join(format!("plan-{}", sql2ddb_engine::new_run_id()));
    let json = report.save(&dir)?;
    let page = crate::html::save_plan(&report, &dir)?;
    let saved = format!(
        "report: {} (to look at: {})",
        json.display(),
        page.display()
    );
    // Where the report was saved ends the text report, on stdout as the
    // run's does; with --json, stdout holds the JSON alone.
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => println!("{text}"),
            Err(e) => return Ok(fail(&format!("the plan as JSON: {e}"))),
        }
        eprintln!("{saved}");
    } else {
        print!("{}", render(&report));
        println!("{saved}");
    }
    Ok(match report.warnings.is_empty() {
        true => 0,
        false => 2,
    })
}

/// Dollars, with cents, or four decimals under one dollar.
fn usd(v: f64) -> String {
    match v {
        v if v >= 1.0 => format!("${v:.2}"),
        v => format!("${v:.4}"),
    }
}

fn seconds(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// Lines of a table whose first column is left-aligned, the others right.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let _ = match i {
                0 => write!(out, "{c:<w$}"),
                _ => write!(out, "  {c:>w$}"),
            };
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push_str(&line(widths.iter().map(|w| "-".repeat(*w)).collect()));
    for r in rows {
        out.push_str(&line(r.clone()));
    }
    out
}

fn entity_row(e: &EntityPlan) -> Vec<String> {
    let rows = match e.rows_estimated {
        true => format!("~{}", thousands(e.rows)),
        false => thousands(e.rows),
    };
    vec![
        e.name.clone(),
        rows,
        thousands(e.sampled_rows),
        thousands(e.items),
        e.item_size.p50.to_string(),
        e.item_size.p95.to_string(),
        e.item_size.max.to_string(),
        thousands(e.write_units),
        thousands(e.indexes.iter().map(|i| i.write_units).sum()),
        bytes(e.storage_bytes + e.indexes.iter().map(|i| i.storage_bytes).sum::<u64>()),
    ]
}

/// The plan as the terminal shows it.
pub fn render(r: &PlanReport) -> String {
    let mut out = format!(
        "plan for table {} from {} (sample of up to {} rows per entity)\n\n",
        r.table,
        r.source,
        thousands(r.sample_size as u64)
    );
    let header = [
        "entity",
        "rows",
        "sampled",
        "items",
        "p50 B",
        "p95 B",
        "max B",
        "WRU",
        "index WRU",
        "storage",
    ];
    let mut rows: Vec<Vec<String>> = r.entities.iter().map(entity_row).collect();
    let t = &r.totals;
    rows.push(vec![
        "total".into(),
        thousands(t.rows),
        String::new(),
        thousands(t.items),
        String::new(),
        String::new(),
        String::new(),
        thousands(t.write_units),
        thousands(t.index_write_units),
        bytes(t.storage_bytes),
    ]);
    out.push_str(&table(&header, &rows));
    render_indexes(r, &mut out);
    let p = &r.prices;
    let _ = writeln!(
        out,
        "\ncost ({}: ${}/million WRU, ${}/GB-month, import ${}/GB)",
        p.note, p.write_per_million, p.storage_gb_month, p.import_per_gb
    );
    let _ = writeln!(out, "  writes (on demand)      {}", usd(r.cost.writes_usd));
    let _ = writeln!(
        out,
        "  storage, per month      {}",
        usd(r.cost.storage_month_usd)
    );
    let _ = writeln!(
        out,
        "  or import from S3       {} for {} of DynamoDB JSON (new table only; no write units)",
        usd(r.cost.import_from_s3_usd),
        bytes(t.import_bytes)
    );
    render_load_paths(r, &mut out);
    out.push_str("\ntime to write\n");
    for d in &r.time {
        let fleet = d.fleet_seconds.map_or(String::new(), |s| {
            format!(" ({} workers: {})", r.fleet.workers, seconds(s))
        });
        let _ = writeln!(out, "  at {:<40} {}{fleet}", d.at, seconds(d.seconds));
    }
    if r.fleet.workers > 1 {
        let _ = writeln!(out, "  fleet: {}", r.fleet.basis);
    }
    if let Some(c) = &r.capacity {
        render_capacity(c, r.fleet.workers, &mut out);
    }
    render_partitions(r, &mut out);
    render_details(r, &mut out);
    if !r.warnings.is_empty() {
        out.push_str("\nwarnings\n");
        for w in &r.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}

/// The three ways to load, side by side; what is not published says so.
fn render_load_paths(r: &PlanReport, out: &mut String) {
    out.push_str("\nways to load\n");
    let rows: Vec<Vec<String>> = r
        .load_paths
        .iter()
        .map(|p| {
            vec![
                p.path.clone(),
                p.table.to_string(),
                p.cost_usd.map_or("-".into(), usd),
                p.seconds.map_or("-".into(), seconds),
            ]
        })
        .collect();
    out.push_str(&table(&["path", "table", "cost", "time"], &rows));
    for p in &r.load_paths {
        let _ = writeln!(
            out,
            "  {}: cost {}; time {}",
            p.path, p.cost_basis, p.time_basis
        );
    }
}

fn render_indexes(r: &PlanReport, out: &mut String) {
    let rows: Vec<Vec<String>> = r
        .entities
        .iter()
        .flat_map(|e| {
            e.indexes.iter().filter(|i| i.items > 0).map(move |i| {
                vec![
                    format!("{} → {}", e.name, i.name),
                    i.projection.clone(),
                    thousands(i.items),
                    i.projected_size.p50.to_string(),
                    i.projected_size.max.to_string(),
                    thousands(i.write_units),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        out.push_str("\nindexes\n");
        let header = [
            "entity → index",
            "projection",
            "items",
            "p50 B",
            "max B",
            "WRU",
        ];
        out.push_str(&table(&header, &rows));
    }
}

fn render_capacity(c: &CapacityPrediction, workers: u32, out: &mut String) {
    let l = &c.limits;
    let _ = writeln!(
        out,
        "\ntime the table's capacity allows ({}, {} partitions of {} WCU/s)",
        c.table, l.partitions, l.partition_wcu
    );
    let _ = writeln!(
        out,
        "  table                   {} for {} WRU at {} WCU/s",
        seconds(c.table_seconds),
        thousands(c.write_units),
        l.table_wcu
    );
    let busiest = c
        .partition_units
        .get(c.busiest_partition)
        .copied()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  busiest partition       {} for {} WRU at {} WCU/s (partition {}, key {}: {:.0}% of it)",
        seconds(c.partition_seconds),
        thousands(busiest),
        l.partition_wcu,
        c.busiest_partition,
        c.hot_key.as_deref().unwrap_or("-"),
        c.hot_key_share * 100.0
    );
    let why = match c.partition_bound {
        true => "the per-partition limit makes it longer than the table's rate",
        false => "the table's rate decides",
    };
    let _ = writeln!(
        out,
        "  predicted               {} ({why})",
        seconds(c.seconds)
    );
    let who = match workers {
        1 => "one process".to_string(),
        n => format!("{n} workers"),
    };
    let _ = writeln!(
        out,
        "  {:<23} {} ({})",
        who,
        seconds(c.fleet_seconds),
        c.fleet_basis
    );
    let _ = writeln!(
        out,
        "  items retried, paced    about {} ({})",
        thousands(c.retries.items),
        c.retries.basis
    );
}

fn render_partitions(r: &PlanReport, out: &mut String) {
    let _ = writeln!(
        out,
        "\nhot partitions (at {}: {:.0} WCU/s)",
        r.planned_rate_from, r.planned_wcu_per_second
    );
    let rows: Vec<Vec<String>> = r
        .hot_partitions
        .iter()
        .map(|p| {
            vec![
                p.key.clone(),
                p.entities.join(","),
                thousands(p.items),
                bytes(p.bytes),
                format!("{:.0}", p.wcu_per_second),
            ]
        })
        .collect();
    out.push_str(&table(
        &["partition key", "entities", "items", "bytes", "WCU/s"],
        &rows,
    ));
}

fn render_details(r: &PlanReport, out: &mut String) {
    for e in &r.entities {
        let _ = writeln!(out, "\nentity {}", e.name);
        let c = &e.collisions;
        let how = if c.exact { "exact" } else { "in the sample" };
        let _ = writeln!(
            out,
            "  key collisions ({how}): {} keys, {} rows",
            c.keys, c.rows
        );
        for k in &c.examples {
            let _ = writeln!(out, "    {} ← {} rows", k.key, k.rows);
        }
        for j in &e.rejects {
            let column = j
                .column
                .as_deref()
                .map(|c| format!(" [{c}]"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  rejected in the sample: {} rows{column}: {} (e.g. {})",
                j.rows, j.reason, j.example_key
            );
        }
        for item in &e.sample_items {
            let _ = writeln!(out, "  sample item {}", compact::item(item));
        }
    }
}
