//! The page of a plan: the figures, the entities, the item-size histogram
//! of each entity's sample, and the partition heat (the partition keys with
//! the most items, against one partition's write units per second).

use sql2ddb_core::capacity::PARTITION_WCU;

use super::chart::bar;
use super::{escape, figures, int, none, table, warnings, Cell, Figure, Page, Row};
use sql2ddb_engine::plan::{CapacityPrediction, EntityPlan, PlanReport};

/// The page of a plan.
pub fn plan_page(r: &PlanReport) -> String {
    let mut page = Page::new(
        &format!("sql2ddb plan of {}", r.table),
        &format!("{} → {}", r.source, r.table),
    );
    let t = &r.totals;
    let mut summary = figures(&[
        Figure::text("Table", "table", &r.table),
        Figure::text("Source", "source", &r.source),
        Figure::count(
            "Rows sampled per entity",
            "sample_size",
            r.sample_size as u64,
        ),
        Figure::count("Rows", "rows", t.rows),
        Figure::count("Items", "items", t.items),
        Figure::count("Write units", "write_units", t.write_units),
        Figure::count(
            "Index write units",
            "index_write_units",
            t.index_write_units,
        ),
        Figure::count("Storage bytes", "storage_bytes", t.storage_bytes),
        Figure::real("Writes, USD", "writes_usd", r.cost.writes_usd, 4),
        Figure::real(
            "A month of storage, USD",
            "storage_month_usd",
            r.cost.storage_month_usd,
            4,
        ),
        Figure::text("Prices taken", "taken", &r.prices.taken),
    ]);
    summary.push_str(&warnings(&r.warnings));
    page.section("summary", "Summary", &summary);
    page.section("entities", "Entities", &entity_table(&r.entities));
    page.section("time", "Time to write", &time_table(r));
    if let Some(c) = &r.capacity {
        page.section(
            "capacity",
            "Time the table's capacity allows",
            &capacity(c, r),
        );
    }
    page.section(
        "sizes",
        "Item sizes (sampled items)",
        &histograms(&r.entities),
    );
    page.section("heat", "Partition heat", &heat(r));
    page.section(
        "rejects",
        "Sampled rejects by reason",
        &rejects(&r.entities),
    );
    page.finish()
}

fn entity_table(entities: &[EntityPlan]) -> String {
    let rows: Vec<Row> = entities
        .iter()
        .map(|e| Row {
            kind: "entity",
            name: Some(e.name.clone()),
            cells: vec![
                Cell::Text(e.name.clone()),
                Cell::Count("rows", e.rows),
                Cell::Count("sampled_rows", e.sampled_rows),
                Cell::Count("items", e.items),
                Cell::Count("write_units", e.write_units),
                Cell::Count("p50", e.item_size.p50),
                Cell::Count("p95", e.item_size.p95),
                Cell::Count("max", e.item_size.max),
                Cell::Count("storage_bytes", e.storage_bytes),
            ],
        })
        .collect();
    table(
        "entity-table",
        &[
            "Entity",
            "Rows",
            "Sampled",
            "Items",
            "Write units",
            "Median size",
            "p95 size",
            "Largest",
            "Storage bytes",
        ],
        &rows,
        None,
    )
}

fn time_table(r: &PlanReport) -> String {
    if r.time.is_empty() {
        return none("No rate to judge the time by.");
    }
    let fleet = r.fleet.workers > 1;
    let rows: Vec<Row> = r
        .time
        .iter()
        .map(|d| {
            let mut cells = vec![
                Cell::Text(d.at.clone()),
                Cell::Real("seconds", d.seconds, 1),
            ];
            if let (true, Some(s)) = (fleet, d.fleet_seconds) {
                cells.push(Cell::Real("fleet_seconds", s, 1));
            }
            Row {
                kind: "time",
                name: Some(d.at.clone()),
                cells,
            }
        })
        .collect();
    let mut html = match fleet {
        true => table(
            "time-table",
            &["At", "Seconds", "Seconds, the fleet"],
            &rows,
            None,
        ),
        false => table("time-table", &["At", "Seconds"], &rows, None),
    };
    if fleet {
        html.push_str(&format!("<p>{}</p>\n", escape(&r.fleet.basis)));
    }
    html
}

/// The capacity model's time, the fleet's, and the paced retry estimate.
fn capacity(c: &CapacityPrediction, r: &PlanReport) -> String {
    let mut list = vec![
        Figure::text("Table", "capacity_table", &c.table),
        Figure::real("Table's time, s", "table_seconds", c.table_seconds, 1),
        Figure::real(
            "Busiest partition's time, s",
            "partition_seconds",
            c.partition_seconds,
            1,
        ),
        Figure::real("Predicted, s", "seconds", c.seconds, 1),
        Figure::count("Workers", "workers", u64::from(r.fleet.workers)),
    ];
    if let Some(share) = r.fleet.share_wcu {
        list.push(Figure::real("Each worker's WCU/s", "share_wcu", share, 1));
    }
    list.push(Figure::real(
        "Predicted for the workers, s",
        "fleet_seconds",
        c.fleet_seconds,
        1,
    ));
    list.push(Figure::count(
        "Items retried, paced (estimate)",
        "retried_items",
        c.retries.items,
    ));
    let mut html = figures(&list);
    for basis in [&c.fleet_basis, &c.retries.basis] {
        html.push_str(&format!("<p>{}</p>\n", escape(basis)));
    }
    html
}

/// A size range's label: `≤ 64 B`, `≤ 2 KiB`.
fn range(up_to: u64) -> String {
    match up_to {
        n if n < 1024 => format!("≤ {n} B"),
        n if n.is_multiple_of(1024) => format!("≤ {} KiB", n / 1024),
        n => format!("≤ {} B", int(n)),
    }
}

fn histograms(entities: &[EntityPlan]) -> String {
    let mut out = String::new();
    for e in entities {
        let h = &e.item_size.histogram;
        if h.is_empty() {
            continue;
        }
        let max = h.iter().map(|b| b.items).max().unwrap_or(0) as f64;
        let rows: Vec<Row> = h
            .iter()
            .map(|b| Row {
                kind: "bucket",
                name: Some(b.up_to.to_string()),
                cells: vec![
                    Cell::Text(range(b.up_to)),
                    Cell::Count("items", b.items),
                    Cell::Html(bar(b.items as f64, max, false)),
                ],
            })
            .collect();
        out.push_str(&format!("<h3>{}</h3>\n", super::escape(&e.name)));
        out.push_str(&table(
            &format!("sizes-{}", e.name),
            &["Size", "Items", ""],
            &rows,
            None,
        ));
    }
    match out.is_empty() {
        true => none("No items sampled."),
        false => out,
    }
}

fn heat(r: &PlanReport) -> String {
    if r.hot_partitions.is_empty() {
        return none("No partition keys.");
    }
    let mut out = format!(
        "<p>Write units per second each partition key needs at {} ({} WCU/s), against one partition's {} WCU/s; red bars are over it.</p>\n",
        super::escape(&r.planned_rate_from),
        r.planned_wcu_per_second,
        PARTITION_WCU
    );
    let max = r
        .hot_partitions
        .iter()
        .map(|p| p.wcu_per_second)
        .fold(PARTITION_WCU as f64, f64::max);
    let rows: Vec<Row> = r
        .hot_partitions
        .iter()
        .map(|p| Row {
            kind: "partition",
            name: Some(p.key.clone()),
            cells: vec![
                Cell::Text(p.key.clone()),
                Cell::Text(p.entities.join(", ")),
                Cell::Count("items", p.items),
                Cell::Count("write_units", p.write_units),
                Cell::Real("wcu_per_second", p.wcu_per_second, 1),
                Cell::Html(bar(
                    p.wcu_per_second,
                    max,
                    p.wcu_per_second > PARTITION_WCU as f64,
                )),
            ],
        })
        .collect();
    out.push_str(&table(
        "heat-table",
        &[
            "Partition key",
            "Entities",
            "Items",
            "Write units",
            "WCU/s",
            "",
        ],
        &rows,
        None,
    ));
    out
}

fn rejects(entities: &[EntityPlan]) -> String {
    let rows: Vec<Row> = entities
        .iter()
        .flat_map(|e| {
            e.rejects.iter().map(|r| Row {
                kind: "reason",
                name: Some(r.reason.clone()),
                cells: vec![
                    Cell::Text(e.name.clone()),
                    Cell::Text(r.column.clone().unwrap_or_default()),
                    Cell::Text(r.reason.clone()),
                    Cell::Count("rows", r.rows),
                ],
            })
        })
        .collect();
    match rows.is_empty() {
        true => none("The sample held no rejected row."),
        false => table(
            "rejects-table",
            &["Entity", "Column", "Reason", "Rows"],
            &rows,
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::capacity::CapacityLimits;
    use sql2ddb_engine::plan::size::SizeStats;
    use sql2ddb_engine::plan::{
        CapacityPrediction, Cost, Duration, FleetPlan, Partition, Prices, RetryEstimate, Totals,
    };

    fn report() -> PlanReport {
        PlanReport {
            table: "shop".into(),
            source: "sqlite://x".into(),
            sample_size: 100,
            load_paths: Vec::new(),
            entities: vec![EntityPlan {
                name: "orders".into(),
                rows: 5000,
                sampled_rows: 100,
                items: 5000,
                write_units: 5200,
                item_size: SizeStats::of(&[100, 200, 3000]),
                ..EntityPlan::default()
            }],
            totals: Totals {
                rows: 5000,
                items: 5000,
                write_units: 5200,
                ..Totals::default()
            },
            prices: Prices::lookup(None, None, None).unwrap(),
            cost: Cost::default(),
            time: Vec::new(),
            hot_partitions: vec![Partition {
                key: "CUSTOMER#<7>".into(),
                entities: vec!["orders".into()],
                items: 4000,
                bytes: 1,
                write_units: 4000,
                wcu_per_second: 1500.0,
            }],
            planned_wcu_per_second: 4000.0,
            planned_rate_from: "on-demand".into(),
            fleet: FleetPlan::new(1, None),
            capacity: None,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn the_histogram_and_the_heat_are_on_the_page() {
        let html = plan_page(&report());
        for needle in [
            "data-field=\"items\" data-value=\"5000\">5,000<",
            "id=\"sizes-orders\"",
            "<td class=\"text\">≤ 128 B</td><td data-field=\"items\" data-value=\"1\">",
            "<td class=\"text\">≤ 4 KiB</td><td data-field=\"items\" data-value=\"1\">",
            "data-row=\"partition\" data-name=\"CUSTOMER#&lt;7&gt;\"",
            "data-field=\"wcu_per_second\" data-value=\"1500\">1500.0<",
            "class=\"hot\"",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
    }

    #[test]
    fn the_fleet_s_time_and_the_retry_estimate_are_on_the_page() {
        let mut r = report();
        r.fleet = FleetPlan::new(4, Some(2000));
        r.time = vec![Duration {
            at: "max_wcu 2000 WCU/s".into(),
            seconds: 2.6,
            fleet_seconds: Some(7.6),
        }];
        r.capacity = Some(CapacityPrediction {
            table: "provisioned 2000 WCU/s".into(),
            limits: CapacityLimits {
                table_wcu: 2000,
                partitions: 8,
                partition_wcu: 250,
            },
            items: 5000,
            write_units: 5200,
            partition_units: vec![650; 8],
            table_seconds: 2.6,
            partition_seconds: 2.6,
            seconds: 2.6,
            partition_bound: false,
            busiest_partition: 0,
            hot_key: None,
            hot_key_share: 0.0,
            cap_seconds: Some(2.6),
            fleet_seconds: 7.6,
            fleet_basis: "the table's rate decides".into(),
            retries: RetryEstimate {
                items: 260,
                at_limit: 250,
                paced_keys: 10,
                keys: 2,
                basis: "an estimate from the pacer's rules".into(),
            },
        });
        let html = plan_page(&r);
        for needle in [
            "data-field=\"fleet_seconds\" data-value=\"7.6\">7.6<",
            "data-field=\"workers\" data-value=\"4\">4<",
            "data-field=\"share_wcu\" data-value=\"500\">500.0<",
            "data-field=\"retried_items\" data-value=\"260\">260<",
            "4 workers share max_wcu 2,000 WCU/s: 500 WCU/s each",
            "an estimate from the pacer&#39;s rules",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        // Without --capacity there is no capacity section.
        assert!(!plan_page(&report()).contains("id=\"capacity\""));
    }
}
