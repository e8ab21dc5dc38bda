//! The final report as a terminal table, in the manner of pgloader's.

use sql2ddb_engine::{EntityReport, PacingReport, RunReport};

pub(crate) use sql2ddb_core::shown::{bytes, thousands};

fn row(e: &EntityReport) -> [String; 10] {
    [
        e.name.clone(),
        thousands(u64::from(e.segments)),
        thousands(e.pages),
        thousands(e.rows_read),
        thousands(e.items_written),
        thousands(e.rejected),
        thousands(e.failed),
        bytes(e.bytes),
        thousands(e.write_units),
        format!("{:.2}", e.seconds),
    ]
}

/// One line per embed: its child rows read, and where each ended.
fn embed_lines(r: &RunReport) -> String {
    let mut out = String::new();
    for e in r.entities.iter().flat_map(|e| &e.embeds) {
        out.push_str(&format!(
            "embed {}: {} child rows read = {} nested in items + {} with a rejected parent + {} with no parent (rejected)\n",
            e.name,
            thousands(e.rows_read),
            thousands(e.nested),
            thousands(e.rejected_with_parent),
            thousands(e.no_parent)
        ));
    }
    out
}

/// What a run's report is of, for the words of its table: a run that
/// writes the table, a dry run that writes nothing, or an export that
/// writes files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// Items written to the table.
    Write,
    /// Items mapped, nothing written (`--dry-run`).
    DryRun,
    /// Items written to files (`export`).
    Export,
}

/// Renders the report: one line per entity, a total line, then where
/// things are, in the words of `load`.
pub(crate) fn render(r: &RunReport, load: Load) -> String {
    let mut out = entity_table(r, load);
    out.push_str(&entity_notes(r));
    out.push_str(&embed_lines(r));
    let status = serde_json::to_value(r.status).expect("status serialises");
    out.push_str(&format!(
        "\nrun {}  status {}\n",
        r.run_id,
        status.as_str().unwrap_or("?")
    ));
    out.push_str(&target_line(r, load));
    // A dry run and an export make no call to a table: no writers to show.
    out.push_str(&writers_and_pointers(r, load == Load::Write));
    for w in &r.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    if let Some(f) = &r.local_data_file {
        out.push_str(&format!("local DynamoDB data: {f}\n"));
    }
    if let Some(f) = r.rejects_file.as_ref() {
        out.push_str(&format!("rejects: {f}\n"));
    }
    out.push_str(&format!(
        "report: {0}/report.json (to look at: {0}/report.html)",
        r.run_dir
    ));
    out
}

/// The figures of each entity and their total, as aligned columns between
/// rules.
fn entity_table(r: &RunReport, load: Load) -> String {
    let header = [
        "entity",
        "segments",
        "pages",
        "read",
        match load {
            Load::Write => "written",
            Load::DryRun => "mapped",
            Load::Export => "exported",
        },
        "rejected",
        "failed",
        "bytes",
        "write units",
        "seconds",
    ];
    let rows: Vec<[String; 10]> = r.entities.iter().map(row).collect();
    let total = row(&r.totals);
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for line in rows.iter().chain(std::iter::once(&total)) {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let fmt = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 0 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let rule = "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1));
    let mut out = String::new();
    out.push_str(&fmt(&header.map(String::from)));
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for line in &rows {
        out.push_str(&fmt(line));
        out.push('\n');
    }
    out.push_str(&rule);
    out.push('\n');
    out.push_str(&fmt(&total));
    out.push('\n');
    out
}

/// Where the items went, and what was done to the table first.
fn target_line(r: &RunReport, load: Load) -> String {
    let mut out = match load {
        Load::Write => format!("table {} at {}", r.table, r.endpoint),
        Load::DryRun => format!(
            "dry run: every row read and mapped, nothing written to table {}",
            r.table
        ),
        Load::Export => format!(
            "items of table {}, written to files (below); the table is not touched",
            r.table
        ),
    };
    if r.table_created {
        out.push_str(" (created)");
    }
    if let Some(deleted) = r.table_emptied {
        out.push_str(&format!(
            " (emptied first: {} deleted, --if-not-empty truncate)",
            sql2ddb_core::shown::count(deleted, "item", "items")
        ));
    }
    out.push('\n');
    out
}

/// The writers' behaviour (when `writers`: a run that wrote a table) and
/// each pointer's final value.
fn writers_and_pointers(r: &RunReport, writers: bool) -> String {
    let mut out = String::new();
    let w = &r.writer;
    if writers && w.max_concurrency > 0 {
        out.push_str(&format!(
            "writers: {} concurrency {} (lowest {}, {} decreases), {} throttled calls, {} retries",
            if w.adaptive { "adaptive" } else { "fixed" },
            w.max_concurrency,
            w.min_concurrency,
            thousands(w.decreases),
            thousands(w.throttled),
            thousands(r.totals.retries),
        ));
        if let Some(cap) = w.max_wcu {
            out.push_str(&format!(", capped at {} WCU/s", thousands(cap)));
        }
        out.push('\n');
        out.push_str(&pacing_line(&w.pacing));
    }
    for p in &r.pointers {
        let value = match p.value.as_object().and_then(|o| o.values().next()) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None if p.keys_at_least => format!("at least {} items", thousands(p.keys)),
            None if p.keys > 1 => format!("{} items", thousands(p.keys)),
            None => "-".to_string(),
        };
        out.push_str(&format!(
            "pointer {} = {value} ({} moved, {} already newer)\n",
            p.name,
            thousands(p.moved),
            thousands(p.already_newer)
        ));
    }
    out
}

/// What the pacer held back for the table's refusals, when it held
/// anything: `paced: table rate 1,900 WCU/s (set 3 times), 12 partition
/// keys paced, 4,210 items waited their key's turn, 8.4 s waited for the
/// table's rate`.
pub(crate) fn pacing_line(p: &PacingReport) -> String {
    use sql2ddb_core::shown::count;
    if !p.paced() {
        return String::new();
    }
    let mut parts = Vec::new();
    if let Some(r) = p.table_rate {
        parts.push(format!(
            "table rate {} WCU/s (set {})",
            thousands(r.round() as u64),
            count(p.rate_cuts, "time", "times")
        ));
    }
    parts.push(format!(
        "{} paced",
        count(p.keys_paced as u64, "partition key", "partition keys")
    ));
    parts.push(format!(
        "{} waited their key's turn",
        count(p.items_held, "item", "items")
    ));
    if p.table_rate.is_some() {
        parts.push(format!(
            "{:.1} s waited for the table's rate",
            p.wait_seconds
        ));
    }
    format!("paced: {}\n", parts.join(", "))
}

/// A line for each entity with overwritten or pending rows.
fn entity_notes(r: &RunReport) -> String {
    let mut out = String::new();
    for e in &r.entities {
        if e.overwritten > 0 {
            out.push_str(&format!(
                "{}: {} rows overwrote the item of an earlier row (overwrite = true); {} distinct items\n",
                e.name,
                thousands(e.overwritten),
                thousands(e.items_written)
            ));
        }
        if e.pending > 0 {
            out.push_str(&format!(
                "{}: {} rows read but not confirmed written when the run stopped\n",
                e.name,
                thousands(e.pending)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pacing_line_says_what_the_pacer_held_back_and_nothing_when_it_did_not() {
        assert_eq!(pacing_line(&PacingReport::default()), "");
        let table = PacingReport {
            table_rate: Some(1_912.4),
            rate_cuts: 3,
            items_held: 4_210,
            keys_paced: 12,
            wait_seconds: 8.44,
        };
        assert_eq!(
            pacing_line(&table),
            "paced: table rate 1,912 WCU/s (set 3 times), 12 partition keys paced, 4,210 items waited their key's turn, 8.4 s waited for the table's rate\n"
        );
        let keys_only = PacingReport {
            items_held: 1,
            keys_paced: 1,
            ..PacingReport::default()
        };
        assert_eq!(
            pacing_line(&keys_only),
            "paced: 1 partition key paced, 1 item waited their key's turn\n"
        );
    }
}
