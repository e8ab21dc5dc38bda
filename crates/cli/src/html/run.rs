//! The pages of a run and of an update job: the figures, the per-entity
//! table, throughput, throttling and the concurrency limit over time, and
//! the rejects by reason.

use super::chart::{bar, lines, Fold, Line};
use super::{error, figures, none, table, warnings, Cell, Figure, Page, Row};
use sql2ddb_engine::rejects::RejectCount;
use sql2ddb_engine::report::{EntityReport, PacingReport, RunReport};
use sql2ddb_engine::timeline::Timeline;
use sql2ddb_engine::update::UpdateReport;

/// The page of a run.
pub fn run_page(r: &RunReport) -> String {
    let status = serde_plain(&r.status);
    let mut page = Page::new(
        &format!("sql2ddb run {}", r.run_id),
        &format!("{} → {}", r.source, r.table),
    );
    let mut summary = status_line(&status);
    let mut shown = vec![
        Figure::text("Run", "run_id", &r.run_id),
        Figure::text("Source", "source", &r.source),
        Figure::text("Table", "table", &r.table),
        Figure::text("Endpoint", "endpoint", &r.endpoint),
        Figure::real("Seconds", "seconds", r.totals.seconds, 1),
    ];
    if let Some(deleted) = r.table_emptied {
        shown.push(Figure::count(
            "Items deleted first",
            "table_emptied",
            deleted,
        ));
    }
    // No rejects file when nothing was rejected.
    if let Some(file) = &r.rejects_file {
        shown.push(Figure::text("Rejects file", "rejects_file", file));
    }
    summary.push_str(&figures(&shown));
    if let Some(e) = &r.error {
        summary.push_str(&error(e));
    }
    summary.push_str(&warnings(&r.warnings));
    page.section("summary", "Summary", &summary);
    page.section("entities", "Entities", &entity_table(r));
    timeline_sections(&mut page, &r.timeline, "Items written");
    let w = &r.writer;
    let mut limit = figures(&[
        Figure::text("Adaptive", "adaptive", &w.adaptive.to_string()),
        Figure::count(
            "Most calls in flight",
            "max_concurrency",
            w.max_concurrency as u64,
        ),
        Figure::count("Lowest limit", "min_concurrency", w.min_concurrency as u64),
        Figure::count(
            "Limit at the end",
            "final_concurrency",
            w.final_concurrency as u64,
        ),
        Figure::count("Halvings", "decreases", w.decreases),
        Figure::count("Increases", "increases", w.increases),
        Figure::count(
            "Calls retried (throttled, unprocessed, transient errors)",
            "throttled",
            w.throttled,
        ),
        Figure::real(
            "Seconds waiting for capacity",
            "capacity_wait_seconds",
            w.capacity_wait_seconds,
            1,
        ),
    ]);
    limit.push_str(&concurrency_chart(&r.timeline));
    page.section("writer", "Adaptive limit (calls in flight)", &limit);
    if w.pacing.paced() {
        page.section("pacing", "Pacing", &pacing_figures(&w.pacing));
    }
    page.section(
        "rejects",
        "Rejects by reason",
        &rejects_table(&r.rejects_by_reason),
    );
    if !r.pointers.is_empty() {
        page.section("pointers", "Pointers", &pointer_table(r));
    }
    page.finish()
}

/// What the pacer learned from the table's refusals and held back.
fn pacing_figures(p: &PacingReport) -> String {
    figures(&[
        Figure::real(
            "Table rate learned (WCU/s; 0: not limited)",
            "table_rate",
            p.table_rate.unwrap_or(0.0),
            0,
        ),
        Figure::count("Times the table's rate was set", "rate_cuts", p.rate_cuts),
        Figure::count(
            "Partition keys paced at the end",
            "keys_paced",
            p.keys_paced as u64,
        ),
        Figure::count(
            "Items that waited their key's turn",
            "items_held",
            p.items_held,
        ),
        Figure::real(
            "Seconds waiting for the table's rate",
            "pacing_wait_seconds",
            p.wait_seconds,
            1,
        ),
    ])
}

/// The page of an update job.
pub fn update_page(r: &UpdateReport) -> String {
    let status = serde_plain(&r.status);
    let mut page = Page::new(
        &format!("sql2ddb update {} ({})", r.job, r.run_id),
        &format!("{} of {} by {}", r.action, r.table, r.read),
    );
    let mut summary = status_line(&status);
    summary.push_str(&figures(&[
        Figure::text("Run", "run_id", &r.run_id),
        Figure::text("Job", "job", &r.job),
        Figure::text("Table", "table", &r.table),
        Figure::text("Mode", "mode", &r.mode),
        Figure::count("Scanned", "scanned", r.scanned),
        Figure::count("Matched", "matched", r.matched),
        Figure::count("Not matched", "not_matched", r.not_matched),
        Figure::count("Updated", "updated", r.updated),
        Figure::count("Skipped", "skipped", r.skipped),
        Figure::count("Failed", "failed", r.failed),
        Figure::count("Pending", "pending", r.pending),
        Figure::count("Pages", "pages", r.pages),
        Figure::count("Retries", "retries", r.retries),
        Figure::count("Throttled calls", "throttled", r.throttled),
        Figure::real("Read units", "read_units", r.read_units, 1),
        Figure::real("Write units", "write_units", r.write_units, 1),
        Figure::real("Seconds", "seconds", r.seconds, 1),
    ]));
    if let Some(e) = &r.error {
        summary.push_str(&error(e));
    }
    summary.push_str(&warnings(&r.notes));
    page.section("summary", "Summary", &summary);
    timeline_sections(&mut page, &r.timeline, "Items changed");
    page.section(
        "writer",
        "Adaptive limit (calls in flight)",
        &concurrency_chart(&r.timeline),
    );
    if r.pacing.paced() {
        page.section("pacing", "Pacing", &pacing_figures(&r.pacing));
    }
    page.finish()
}

/// A serde enum as its JSON string.
fn serde_plain<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

fn status_line(status: &str) -> String {
    format!(
        "<p>Status: <strong class=\"status-{0}\" data-field=\"status\" data-value=\"{0}\">{0}</strong></p>\n",
        super::escape(status)
    )
}

fn entity_row(kind: &'static str, e: &EntityReport) -> Row {
    Row {
        kind,
        name: Some(e.name.clone()),
        cells: vec![
            Cell::Text(e.name.clone()),
            Cell::Count("rows_read", e.rows_read),
            Cell::Count("rows_counted", e.rows_counted),
            Cell::Count("items_written", e.items_written),
            Cell::Count("overwritten", e.overwritten),
            Cell::Count("rejected", e.rejected),
            Cell::Count("failed", e.failed),
            Cell::Count("pending", e.pending),
            Cell::Count("bytes", e.bytes),
            Cell::Count("write_units", e.write_units),
            Cell::Count("retries", e.retries),
            Cell::Count("pages", e.pages),
            Cell::Real("seconds", e.seconds, 1),
        ],
    }
}

fn entity_table(r: &RunReport) -> String {
    let header = [
        "Entity",
        "Read",
        "Counted",
        "Written",
        "Overwritten",
        "Rejected",
        "Failed",
        "Pending",
        "Bytes",
        "Write units",
        "Retries",
        "Pages",
        "Seconds",
    ];
    let rows: Vec<Row> = r.entities.iter().map(|e| entity_row("entity", e)).collect();
    table(
        "entity-table",
        &header,
        &rows,
        Some(&entity_row("totals", &r.totals)),
    )
}

/// Throughput and throttling over time.
fn timeline_sections(page: &mut Page, t: &Timeline, written: &str) {
    if t.is_empty() {
        page.section(
            "throughput",
            "Throughput over time",
            &none("No writes in this process (a run cut at a queue: its workers write)."),
        );
        return;
    }
    let items: Vec<f64> = t.items_written.iter().map(|n| *n as f64).collect();
    let throttled: Vec<f64> = t.throttled_calls.iter().map(|n| *n as f64).collect();
    let total: u64 = t.items_written.iter().sum();
    let peak = t.items_written.iter().copied().max().unwrap_or(0);
    let mut html = figures(&[
        Figure::count("Seconds recorded", "timeline_seconds", t.len() as u64),
        Figure::count("Written in those seconds", "timeline_items_written", total),
        Figure::count("Most in one second", "timeline_peak_items", peak),
    ]);
    let label = format!("{written} per second");
    html.push_str(&lines(
        "throughput-chart",
        &label,
        "/s",
        &[Line {
            label: &label,
            values: &items,
            fold: Fold::Mean,
        }],
    ));
    page.section("throughput", "Throughput over time", &html);
    let throttled_total: u64 = t.throttled_calls.iter().sum();
    let mut html = figures(&[Figure::count(
        "Throttled calls in those seconds",
        "timeline_throttled_calls",
        throttled_total,
    )]);
    html.push_str(&lines(
        "throttled-chart",
        "Calls throttled or with unprocessed items, per second",
        "/s",
        &[Line {
            label: "throttled calls per second",
            values: &throttled,
            fold: Fold::Mean,
        }],
    ));
    page.section("throttling", "Throttled calls over time", &html);
}

fn concurrency_chart(t: &Timeline) -> String {
    if t.is_empty() {
        return none("No writes in this process.");
    }
    let limit: Vec<f64> = t.concurrency.iter().map(|c| *c as f64).collect();
    lines(
        "concurrency-chart",
        "Calls in flight allowed, at the end of each second",
        "calls",
        &[Line {
            label: "concurrency limit",
            values: &limit,
            fold: Fold::Min,
        }],
    )
}

fn rejects_table(reasons: &[RejectCount]) -> String {
    if reasons.is_empty() {
        return none("Nothing rejected.");
    }
    let max = reasons.iter().map(|r| r.rows).max().unwrap_or(0) as f64;
    let rows: Vec<Row> = reasons
        .iter()
        .map(|r| Row {
            kind: "reason",
            name: Some(r.reason.clone()),
            cells: vec![
                Cell::Text(r.entity.clone()),
                Cell::Text(r.column.clone().unwrap_or_default()),
                Cell::Text(r.reason.clone()),
                Cell::Count("rows", r.rows),
                Cell::Html(bar(r.rows as f64, max, true)),
            ],
        })
        .collect();
    table(
        "rejects-table",
        &["Entity", "Column", "Reason", "Rows", ""],
        &rows,
        None,
    )
}

fn pointer_table(r: &RunReport) -> String {
    let rows: Vec<Row> = r
        .pointers
        .iter()
        .map(|p| Row {
            kind: "pointer",
            name: Some(p.name.clone()),
            cells: vec![
                Cell::Text(p.name.clone()),
                Cell::Count("keys", p.keys),
                Cell::Count("moved", p.moved),
                Cell::Count("already_newer", p.already_newer),
                Cell::Text(match &p.value {
                    serde_json::Value::Null => String::new(),
                    v => v.to_string(),
                }),
            ],
        })
        .collect();
    table(
        "pointer-table",
        &["Pointer", "Keys", "Moved", "Already newer", "Value"],
        &rows,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_engine::report::{RunStatus, SnapshotReport, WriterReport};

    fn report() -> RunReport {
        let orders = EntityReport {
            name: "orders<&>".into(),
            rows_read: 1500,
            rows_counted: 1500,
            items_written: 1490,
            rejected: 10,
            bytes: 123_456,
            write_units: 1600,
            pages: 3,
            seconds: 2.5,
            ..EntityReport::default()
        };
        let mut r = RunReport {
            run_id: sql2ddb_engine::RunId::parse("R1").unwrap(),
            mapping: "shop.toml".into(),
            status: RunStatus::Ok,
            source: "sqlite://shop.db".into(),
            table: "shop".into(),
            endpoint: "local".into(),
            local_data_file: None,
            table_created: true,
            queue: None,
            progress_table: None,
            run_dir: "runs/R1".into(),
            rejects_file: Some("runs/R1/rejects.jsonl".into()),
            entities: vec![orders],
            totals: EntityReport::default(),
            writer: WriterReport {
                adaptive: true,
                max_concurrency: 8,
                final_concurrency: 6,
                min_concurrency: 2,
                decreases: 2,
                increases: 4,
                throttled: 7,
                ..WriterReport::default()
            },
            pointers: Vec::new(),
            rejects_by_reason: vec![RejectCount {
                entity: "orders<&>".into(),
                column: Some("total".into()),
                reason: "text \"…\" is not a <number>".into(),
                rows: 10,
            }],
            timeline: Timeline {
                interval_seconds: 1,
                items_written: vec![1000, 490],
                throttled_calls: vec![0, 7],
                concurrency: vec![8, 2],
            },
            warnings: vec!["a <b> warning".into()],
            table_emptied: None,
            error: None,
            cause: None,
            snapshot: SnapshotReport::default(),
        };
        r.finish(2.5);
        r
    }

    #[test]
    fn every_figure_of_the_run_is_on_the_page_with_its_field() {
        let html = run_page(&report());
        for needle in [
            "data-row=\"entity\" data-name=\"orders&lt;&amp;&gt;\"",
            "data-field=\"rows_read\" data-value=\"1500\">1,500<",
            "data-field=\"items_written\" data-value=\"1490\">1,490<",
            "data-field=\"rejected\" data-value=\"10\">10<",
            "data-field=\"bytes\" data-value=\"123456\">123,456<",
            "data-row=\"totals\" data-name=\"total\"",
            "data-field=\"status\" data-value=\"rejected\"",
            "data-field=\"timeline_items_written\" data-value=\"1490\"",
            "data-field=\"timeline_throttled_calls\" data-value=\"7\"",
            "data-field=\"timeline_peak_items\" data-value=\"1000\"",
            "data-field=\"min_concurrency\" data-value=\"2\"",
            "data-field=\"throttled\" data-value=\"7\"",
            "id=\"throughput-chart\" data-seconds=\"2\"",
            "id=\"throttled-chart\"",
            "id=\"concurrency-chart\"",
            "text &quot;…&quot; is not a &lt;number&gt;",
            "a &lt;b&gt; warning",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
        assert!(!html.contains("<b>") && !html.contains("<number>"));
    }

    #[test]
    fn a_run_cut_at_a_queue_says_it_has_no_timeline() {
        let mut r = report();
        r.timeline = Timeline::default();
        r.rejects_by_reason.clear();
        let html = run_page(&r);
        assert!(html.contains("its workers write"));
        assert!(html.contains("Nothing rejected."));
        assert!(!html.contains("<polyline"));
    }

    #[test]
    fn the_pacer_s_figures_are_shown_when_it_held_items_back() {
        let mut r = report();
        assert!(
            !run_page(&r).contains("id=\"pacing\""),
            "nothing paced: no section"
        );
        r.writer.pacing = PacingReport {
            table_rate: Some(1_912.4),
            rate_cuts: 3,
            items_held: 4_210,
            keys_paced: 12,
            wait_seconds: 8.44,
        };
        let html = run_page(&r);
        for needle in [
            "data-field=\"table_rate\" data-value=\"1912.4\">1912<",
            "data-field=\"rate_cuts\" data-value=\"3\">3<",
            "data-field=\"items_held\" data-value=\"4210\">4,210<",
            "data-field=\"keys_paced\" data-value=\"12\">12<",
            "data-field=\"pacing_wait_seconds\" data-value=\"8.44\">8.4<",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
    }
}
