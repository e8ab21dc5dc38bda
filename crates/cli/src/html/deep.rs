//! The page of `verify --deep`: the differences by kind, in all and per
//! entity, and the pointers.

use super::chart::bar;
use super::{figures, none, table, Cell, Figure, Page, Row};
use sql2ddb_engine::deep::DeepReport;

/// The page of a deep verification.
pub fn deep_page(r: &DeepReport) -> String {
    let mut page = Page::new(
        &format!("sql2ddb verify --deep of {}", r.table),
        &format!("{} comparison, {}", r.mode, r.endpoint),
    );
    let verdict = match r.clean() {
        true => "<p>Status: <strong class=\"status-ok\" data-field=\"clean\" data-value=\"true\">nothing differs</strong></p>\n",
        false => "<p>Status: <strong class=\"status-failed\" data-field=\"clean\" data-value=\"false\">differences found</strong></p>\n",
    };
    let mut summary = verdict.to_string();
    summary.push_str(&figures(&[
        Figure::text("Table", "table", &r.table),
        Figure::text("Mode", "mode", r.mode),
        Figure::count("Items read from the table", "items_read", r.items_read),
        Figure::count("Differences", "differences", r.differences),
        Figure::count("Items outside the mapping", "outside", r.outside),
        Figure::text("Differences file", "diff_file", &r.diff_file),
    ]));
    page.section("summary", "Summary", &summary);
    page.section("kinds", "Differences by kind", &kinds(r));
    page.section("entities", "Entities", &entities(r));
    if !r.pointers.is_empty() {
        page.section("pointers", "Pointers", &pointers(r));
    }
    page.finish()
}

/// Each kind's count over every entity (pointers: the pointer items that
/// are not what the mapping makes of the source).
pub(crate) fn kind_counts(r: &DeepReport) -> [(&'static str, u64); 5] {
    let sum =
        |f: fn(&sql2ddb_engine::deep::EntityDiff) -> u64| r.entities.iter().map(f).sum::<u64>();
    [
        ("missing", sum(|e| e.missing)),
        ("extra", sum(|e| e.extra)),
        ("different", sum(|e| e.different)),
        ("collapsed", sum(|e| e.collapsed)),
        (
            "pointer",
            r.pointers.iter().filter(|p| !p.ok).count() as u64,
        ),
    ]
}

fn kinds(r: &DeepReport) -> String {
    let counts = kind_counts(r);
    let max = counts.iter().map(|(_, n)| *n).max().unwrap_or(0) as f64;
    let rows: Vec<Row> = counts
        .iter()
        .map(|(kind, n)| Row {
            kind: "kind",
            name: Some(kind.to_string()),
            cells: vec![
                Cell::Text(kind.to_string()),
                Cell::Count("count", *n),
                Cell::Html(bar(*n as f64, max, *n > 0)),
            ],
        })
        .collect();
    table("kind-table", &["Kind", "Count", ""], &rows, None)
}

fn entities(r: &DeepReport) -> String {
    if r.entities.is_empty() {
        return none("No entity compared.");
    }
    let rows: Vec<Row> = r
        .entities
        .iter()
        .map(|e| Row {
            kind: "entity",
            name: Some(e.entity.clone()),
            cells: vec![
                Cell::Text(e.entity.clone()),
                Cell::Count("expected", e.expected),
                Cell::Count("found", e.found),
                Cell::Count("identical", e.identical),
                Cell::Count("missing", e.missing),
                Cell::Count("extra", e.extra),
                Cell::Count("different", e.different),
                Cell::Count("collapsed", e.collapsed),
                Cell::Count("rejected", e.rejected),
            ],
        })
        .collect();
    table(
        "entity-table",
        &[
            "Entity",
            "Expected",
            "Found",
            "Identical",
            "Missing",
            "Extra",
            "Different",
            "Collapsed",
            "Rejected",
        ],
        &rows,
        None,
    )
}

fn pointers(r: &DeepReport) -> String {
    let rows: Vec<Row> = r
        .pointers
        .iter()
        .map(|p| Row {
            kind: "pointer",
            name: Some(p.name.clone()),
            cells: vec![
                Cell::Text(p.name.clone()),
                Cell::Text(p.expected.to_string()),
                Cell::Text(p.actual.as_ref().map(|v| v.to_string()).unwrap_or_default()),
                Cell::Text(if p.ok { "ok" } else { "differs" }.to_string()),
            ],
        })
        .collect();
    table(
        "pointer-table",
        &["Pointer", "Expected", "In the table", ""],
        &rows,
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_engine::deep::EntityDiff;

    #[test]
    fn each_kind_of_difference_is_counted_on_the_page() {
        let r = DeepReport {
            table: "shop".into(),
            endpoint: "local".into(),
            mode: "full",
            sample: None,
            run_dir: "d".into(),
            diff_file: "d/diff.jsonl".into(),
            entities: vec![
                EntityDiff {
                    entity: "orders".into(),
                    expected: 10,
                    found: 9,
                    identical: 7,
                    missing: 1,
                    different: 2,
                    ..EntityDiff::default()
                },
                EntityDiff {
                    entity: "<c>".into(),
                    extra: 3,
                    ..EntityDiff::default()
                },
            ],
            pointers: Vec::new(),
            outside: 0,
            items_read: 12,
            differences: 6,
            first_differences: Vec::new(),
            spilled_bytes: 0,
            buckets: 16,
            buckets_resolved: 2,
        };
        let html = deep_page(&r);
        for needle in [
            "data-name=\"missing\"><td class=\"text\">missing</td><td data-field=\"count\" data-value=\"1\">",
            "data-name=\"extra\"><td class=\"text\">extra</td><td data-field=\"count\" data-value=\"3\">",
            "data-name=\"different\"><td class=\"text\">different</td><td data-field=\"count\" data-value=\"2\">",
            "data-name=\"&lt;c&gt;\"",
            "data-field=\"clean\" data-value=\"false\"",
            "data-field=\"differences\" data-value=\"6\"",
        ] {
            assert!(html.contains(needle), "missing {needle:?} in\n{html}");
        }
    }
}
