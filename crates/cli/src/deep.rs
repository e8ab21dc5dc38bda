//! `sql2ddb verify MAPPING --deep`: the flags, the progress bars, and the
//! summary on the terminal (long values shortened; `diff.jsonl` has them whole).

use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sql2ddb_engine::deep::{
    verify_deep, DeepOptions, DeepProgress, DeepReport, Difference, DEFAULT_MEMORY_BUDGET,
    DEFAULT_SCAN_SEGMENTS,
};
use sql2ddb_engine::{new_run_id, EntityProgress, RunOptions, RunProgress};

use sql2ddb_core::shown::{count, thousands};

use crate::outcome::{Ended, Output};
use crate::run_ref::StatusArgs;
use crate::{limits, load};

/// Longest value shown on the terminal.
const SHOWN_VALUE: usize = 60;

/// The flags of `verify --deep`.
#[derive(clap::Args)]
pub struct DeepArgs {
    /// Compare the source, as the mapping maps it now, with the table as it
    /// is now, item by item (needs the mapping; --run names the run
    /// directory, for `--endpoint local` data).
    #[arg(long, requires = "mapping", conflicts_with_all = ["watch", "timeout", "progress_table"])]
    pub deep: bool,
    /// With --deep: check only a deterministic fraction of the keys
    /// (0 < F ≤ 1), fetched by key with BatchGetItem; finds missing and
    /// different items, not extra ones.
    #[arg(long, value_name = "FRACTION", requires = "deep", value_parser = fraction)]
    pub sample: Option<f64>,
    /// With --deep: only this entity.
    #[arg(long, value_name = "NAME", requires = "deep")]
    pub entity: Option<String>,
    /// With --deep: read units per second the table side may spend.
    #[arg(long, value_name = "N", requires = "deep", value_parser = limits::positive::<u64>)]
    pub max_rcu: Option<u64>,
    /// With --deep: segments of the table's parallel Scan, 1..=1024.
    #[arg(long, value_name = "N", requires = "deep",
          value_parser = clap::value_parser!(u32).range(1..=1024),
          default_value_t = DEFAULT_SCAN_SEGMENTS)]
    pub segments: u32,
    /// With --deep: source URL, overriding the mapping's.
    #[arg(long, value_name = "URL", requires = "deep")]
    pub source: Option<String>,
    /// With --deep: how long a read the table throttles is retried, from
    /// its first attempt: 90s, 10m, 1h30m (at most 24h). Past it the
    /// verification stops with exit 75 (try again later). Default: the
    /// mapping's [writer] retry_seconds, else 10m.
    #[arg(long, value_name = "DURATION", requires = "deep",
          value_parser = crate::budget::retry_budget)]
    pub retry_budget: Option<std::time::Duration>,
    /// Bytes of items held in memory before spilling to files.
    #[arg(long, hide = true, env = "SQL2DDB_VERIFY_MEMORY", value_name = "BYTES",
          value_parser = limits::positive::<usize>)]
    pub memory_budget: Option<usize>,
}

/// A fraction in (0, 1].
fn fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err(format!(
            "{text:?} is not a fraction greater than 0 and at most 1"
        )),
    }
}

/// Runs `verify --deep`; 0 when nothing differs.
pub async fn verify(args: &StatusArgs, deep: &DeepArgs) -> Ended {
    let Some(path) = &args.mapping else {
        eprintln!("error: --deep needs the mapping file");
        return Ok(crate::EXIT_USAGE);
    };
    let plan = load(path, deep.source.as_deref())?;
    let endpoint = args.endpoint.as_deref().or(plan.target.endpoint.as_deref());
    // The embedded `local` endpoint keeps its data in the run's directory:
    // no --run is the newest run of the mapping there.
    let run = match (args.run.as_deref(), endpoint) {
        (None, Some(e)) if e != "local" => None,
        (None, None) => None,
        (run, _) => Some(crate::runs::chosen_run(run, &args.runs_dir, Some(path))?),
    };
    let opts = DeepOptions {
        run: RunOptions {
            source: deep.source.clone(),
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            runs_dir: args.runs_dir.clone(),
            run_id: Some(run.clone().unwrap_or_else(new_run_id)),
            retry_budget: deep.retry_budget,
            ..RunOptions::default()
        },
        entity: deep.entity.clone(),
        sample: deep.sample,
        max_rcu: deep.max_rcu,
        segments: deep.segments,
        memory_budget: deep.memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
    };
    let progress = RunProgress::new();
    let counters = Arc::new(DeepProgress::default());
    let bars = tokio::spawn(draw(progress.clone(), counters.clone(), args.json));
    let result = verify_deep(&plan, &opts, &progress, counters).await;
    bars.abort();
    let _ = bars.await;
    let report = result?;
    crate::html::save_deep(&report)?;
    show(&report, Output::new(args.json));
    Ok(u8::from(!report.clean()))
}

fn show(report: &DeepReport, output: Output) {
    for e in report.entities.iter().filter(|e| e.no_parent > 0) {
        eprintln!(
            "{}: {} of its embeds {} no parent row, so {} in no item (listed as \"no parent\" in {}/verify-rejects.jsonl)",
            e.entity,
            count(e.no_parent, "child row", "child rows"),
            if e.no_parent == 1 { "has" } else { "have" },
            if e.no_parent == 1 { "it is" } else { "they are" },
            report.run_dir
        );
    }
    let verdict = match report.differences {
        0 if report.no_parent() > 0 => format!(
            "not verified: every item is what the mapping makes of the source, but {} no parent",
            match report.no_parent() {
                1 => "1 child row has".to_string(),
                n => format!("{} child rows have", thousands(n)),
            }
        ),
        0 => "verified: every item is exactly what the mapping makes of the source".to_string(),
        n => format!(
            "not verified: {} (every one in {})",
            count(n, "difference", "differences"),
            report.diff_file
        ),
    };
    // The report on stdout (`verify … > report.txt` keeps it); with --json
    // stdout holds the JSON alone and the verdict goes to stderr.
    output.json(report);
    if !output.is_json() {
        print!("{}", render(report));
    }
    output.say(&verdict);
    // Where the report was saved ends the text report, as the run's does.
    let dir = std::path::Path::new(&report.run_dir);
    let saved = format!(
        "report: {} (to look at: {})",
        dir.join(sql2ddb_engine::deep::REPORT_JSON).display(),
        dir.join(crate::html::DEEP_REPORT_HTML).display()
    );
    output.say(&saved);
}

/// The report as a table for the terminal.
pub fn render(r: &DeepReport) -> String {
    let mut out = format!(
        "table {}  endpoint {}  {}\n",
        r.table,
        r.endpoint,
        match r.sample {
            Some(f) => format!("sample {f} of the keys (extra items are not looked for)"),
            None => "full scan".to_string(),
        }
    );
    out.push_str(&format!(
        "{:<16} {:>9} {:>9} {:>9} {:>8} {:>6} {:>9} {:>9} {:>8}\n",
        "entity",
        "expected",
        "found",
        "identical",
        "missing",
        "extra",
        "different",
        "collapsed",
        "rejected"
    ));
    for e in &r.entities {
        out.push_str(&format!(
            "{:<16} {:>9} {:>9} {:>9} {:>8} {:>6} {:>9} {:>9} {:>8}\n",
            e.entity,
            thousands(e.expected),
            thousands(e.found),
            thousands(e.identical),
            thousands(e.missing),
            thousands(e.extra),
            thousands(e.different),
            thousands(e.collapsed),
            thousands(e.rejected)
        ));
    }
    for p in &r.pointers {
        let actual = p
            .actual
            .as_ref()
            .map_or("none".to_string(), |a| a.to_string());
        let verdict = match p.ok {
            true => "ok".to_string(),
            false => {
                let names: Vec<&str> = p.attributes.iter().map(|a| a.name.as_str()).collect();
                format!("WRONG in {}", names.join(", "))
            }
        };
        out.push_str(&format!(
            "pointer {} {}: {verdict} ({} expected {}, found {actual})\n",
            p.name, p.key, p.attribute, p.expected
        ));
    }
    if r.mode == "full" {
        out.push_str(&format!(
            "{} of {} key-hash buckets differed and were compared key by key\n",
            thousands(r.buckets_resolved),
            thousands(r.buckets)
        ));
    }
    if r.outside > 0 {
        out.push_str(&format!(
            "{} outside the mapping's key space {} not compared\n",
            count(r.outside, "item", "items"),
            if r.outside == 1 { "was" } else { "were" }
        ));
    }
    for d in &r.first_differences {
        out.push_str(&line(d));
        out.push('\n');
    }
    if r.differences > r.first_differences.len() as u64 {
        out.push_str(&format!(
            "… and {} more in {}\n",
            thousands(r.differences - r.first_differences.len() as u64),
            r.diff_file
        ));
    }
    out
}

/// One difference on one line, values shortened.
fn line(d: &Difference) -> String {
    let kind = serde_json::to_value(d.kind).expect("a kind serialises");
    let mut text = format!(
        "{} {} {}",
        kind.as_str().unwrap_or_default(),
        d.entity,
        d.key
    );
    if !d.source_keys.is_empty() {
        let keys: Vec<String> = d.source_keys.iter().map(|k| k.to_string()).collect();
        text.push_str(&format!(" from {}", keys.join(", ")));
    }
    for a in &d.attributes {
        let text_of = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
        let (expected, found) = shorten_pair(text_of(&a.expected), text_of(&a.actual));
        text.push_str(&format!(
            "\n    {}: expected {expected}, found {found}",
            a.name
        ));
    }
    text
}

/// Both values of an attribute, each cut to [`SHOWN_VALUE`] characters
/// around the first character where they differ, so that two long values
/// with a common beginning do not print as the same text.
pub(crate) fn shorten_pair(expected: Option<String>, found: Option<String>) -> (String, String) {
    let (expected, found) = match (expected, found) {
        (Some(e), Some(f)) => (e, f),
        (e, f) => {
            let alone = |v: Option<String>| v.map_or("absent".into(), |v| shorten(&v, 0));
            return (alone(e), alone(f));
        }
    };
    let common = expected
        .chars()
        .zip(found.chars())
        .take_while(|(a, b)| a == b)
        .count();
    // A little of what they share, for context, then where they part.
    let from = common.saturating_sub(SHOWN_VALUE / 4);
    (shorten(&expected, from), shorten(&found, from))
}

/// `text` from character `from`, at most [`SHOWN_VALUE`] characters of it,
/// saying what was left out.
fn shorten(text: &str, from: usize) -> String {
    let total = text.chars().count();
    if total <= SHOWN_VALUE {
        return text.to_string();
    }
    let from = from.min(total.saturating_sub(SHOWN_VALUE));
    let shown: String = text.chars().skip(from).take(SHOWN_VALUE).collect();
    let before = if from > 0 { "…" } else { "" };
    let after = if from + SHOWN_VALUE < total {
        "…"
    } else {
        ""
    };
    match from {
        0 => format!("{shown}{after} ({total} chars)"),
        _ => format!("{before}{shown}{after} (chars {}.. of {total})", from + 1),
    }
}

/// Two bars: source rows read, and items compared (after reading: buckets).
async fn draw(progress: Arc<RunProgress>, deep: Arc<DeepProgress>, json: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    let multi = MultiProgress::with_draw_target(match json {
        true => ProgressDrawTarget::hidden(),
        false => ProgressDrawTarget::stderr(),
    });
    let rows = multi.add(
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} rows  {msg}")
                .expect("template")
                .progress_chars("=> "),
        ),
    );
    rows.set_prefix("source");
    let items = multi.add(
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} buckets  {msg}")
                .expect("template")
                .progress_chars("=> "),
        ),
    );
    items.set_prefix("compared");
    let _clear = Clear(multi);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        let entities = progress.entities();
        let sum = |f: fn(&EntityProgress) -> u64| entities.iter().map(|e| f(e)).sum::<u64>();
        let read = sum(|e| EntityProgress::get(&e.read));
        rows.set_length(sum(|e| EntityProgress::get(&e.total)).max(read));
        rows.set_position(read);
        rows.set_message(format!(
            "{} mapped, {} read from the table",
            count(deep.expected.load(Relaxed), "item", "items"),
            thousands(deep.scanned.load(Relaxed))
        ));
        items.set_length(deep.buckets.load(Relaxed));
        items.set_position(deep.buckets_done.load(Relaxed));
        items.set_message(format!(
            "{} compared",
            count(deep.compared.load(Relaxed), "item", "items")
        ));
    }
}

/// Clears the bars when drawing stops.
struct Clear(MultiProgress);

impl Drop for Clear {
    fn drop(&mut self) {
        let _ = self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_where_they_differ() {
        let common = "x".repeat(200);
        let expected = format!("[{common}, \"apple\"]");
        let found = format!("[{common}, \"pear\"]");
        let (e, f) = shorten_pair(Some(expected.clone()), Some(found.clone()));
        assert_ne!(e, f);
        assert!(e.contains("apple") && f.contains("pear"), "{e}\n{f}");
        assert!(e.starts_with('…') && e.contains("of 211"), "{e}");
        assert!(e.chars().count() < 100, "{e}");

        // Short values are shown whole; a missing one is "absent".
        let (e, f) = shorten_pair(Some("1".into()), None);
        assert_eq!((e.as_str(), f.as_str()), ("1", "absent"));
        // A long value alone is cut from its start.
        let (e, _) = shorten_pair(Some(common.clone()), None);
        assert!(e.starts_with("xxx") && e.ends_with("… (200 chars)"), "{e}");
    }
}
