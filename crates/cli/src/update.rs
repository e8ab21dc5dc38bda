//! `sql2ddb update JOB.toml`: the mass UPDATE/DELETE … WHERE of an update
//! job on an existing table, with a progress bar, a final table, `--json`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sql2ddb_core::redact_secrets;
use sql2ddb_engine::update::{
    CostEstimate, UpdateOptions, UpdateProgress, UpdateReport, UpdateStatus,
};
use sql2ddb_engine::StopSignal;
use sql2ddb_mapping::UpdateJob;

use crate::limits;
use crate::outcome::{Ended, Live, Output};
use crate::run_ref::DEFAULT_RUNS_DIR;
use crate::table::thousands;

pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   every matching item was updated or skipped (it no longer matched when
      written); --dry-run: counted and estimated
  1   the job failed: items not written (see failed.jsonl in the run
      directory), a run that cannot be resumed as asked
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  69  DynamoDB or SQS could not be reached, or refused (the table cannot be
      written)
  74  a file could not be read or written (the job file, the run directory)
  75  stopped at its --max-seconds limit, or DynamoDB kept refusing its
      reads or writes (throttling) past the retry budget (--retry-budget):
      nothing counted failed for it; continue with --resume RUN_ID
  78  the job file is invalid or does not fit its table, or the settings do
      not fit together
  130 interrupted (Ctrl-C, SIGTERM): the pages in flight were written;
      continue with --resume RUN_ID";

#[derive(clap::Args)]
pub(crate) struct UpdateArgs {
    /// The update job (TOML): [target] and [update] with where, set or delete.
    job: PathBuf,
    /// Read and count the matching items and print what the job would cost
    /// (read units, write units per table and index, time at --max-wcu);
    /// write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the final report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// DynamoDB endpoint URL, overriding the job's. Default: AWS.
    #[arg(long)]
    endpoint: Option<String>,
    /// AWS region, overriding the job's and the environment's.
    #[arg(long)]
    region: Option<String>,
    /// Cap on write units per second, counted as DynamoDB bills them (1 KB
    /// rounding per item, each index written counted); 1..=1000000000.
    #[arg(long, value_parser = limits::max_wcu())]
    max_wcu: Option<u64>,
    /// Cap on read units per second of the Scan or Query; 1..=1000000000.
    #[arg(long, value_parser = limits::max_wcu())]
    max_rcu: Option<u64>,
    /// Most conditional writes in flight, 1..=256 (default 32); adapts to
    /// throttling within [1, N].
    #[arg(long, value_parser = limits::concurrency())]
    concurrency: Option<usize>,
    /// Where run directories (report, failed.jsonl) are created.
    #[arg(long, default_value = DEFAULT_RUNS_DIR)]
    runs_dir: PathBuf,
    /// Use this run id instead of a new one. A job whose update reads the
    /// item's current value (ADD, DELETE, `SET a = a + :x`, `SET a = b`,
    /// list_append, if_not_exists, a list index such as `REMOVE tags[0]`)
    /// marks each item it changed with its run id: running it again with
    /// the same id finishes an interrupted run without changing any item
    /// twice. The report (--dry-run too) says which kind a job is.
    #[arg(long, conflicts_with = "resume")]
    run_id: Option<sql2ddb_engine::RunId>,
    /// Continue run RUN_ID (interrupted, stopped at --max-seconds, or
    /// crashed): each read segment from the page after the last one it
    /// finished, as the progress table's cursors say (with
    /// --progress-table, from any machine), else as the checkpoint in its
    /// run directory says. The counts are every attempt's together.
    #[arg(long, value_name = "RUN_ID", conflicts_with = "dry_run")]
    resume: Option<sql2ddb_engine::RunId>,
    /// Stop cleanly once the next page would likely end after N seconds
    /// from the start (each segment reads at least one page): the report
    /// says `time_up`, the exit code is 75, and --resume continues.
    #[arg(long, value_name = "N", value_parser = limits::positive::<u64>)]
    max_seconds: Option<u64>,
    /// Keep the run's records in this progress table (created if missing),
    /// so `sql2ddb status --run ID` and `sql2ddb verify --run ID` follow it
    /// from any machine: matched items count as rows, updated and skipped
    /// ones as written.
    #[arg(long, value_name = "NAME")]
    progress_table: Option<String>,
    /// Send each page's matching keys to this SQS queue instead of writing
    /// them here: `sql2ddb worker` processes apply them (default mode only).
    /// The run is recorded in the progress table (default
    /// `<table>-sql2ddb-progress`), where `verify` tells when it is done.
    #[arg(long, value_name = "URL")]
    queue: Option<String>,
    /// SQS endpoint URL, for any SQS-compatible server (default: AWS).
    #[arg(long, value_name = "URL", env = "SQL2DDB_SQS_ENDPOINT")]
    sqs_endpoint: Option<String>,
    #[command(flatten)]
    budget: crate::budget::RetryBudgetArg,
}

pub(crate) async fn update(args: UpdateArgs) -> Ended {
    let text = crate::read(&args.job)?;
    let job = UpdateJob::parse(&text, &args.job, &crate::env)?;
    let stop = StopSignal::new();
    let opts = options(&args, &stop);
    eprintln!(
        "update {} on {}, run {}{}",
        job.name,
        job.target.table,
        opts.run_id.as_deref().unwrap_or("?"),
        if args.dry_run {
            " (dry run: nothing is written)"
        } else {
            ""
        }
    );
    let progress = Arc::new(UpdateProgress::default());
    let bar = (!args.quiet).then(|| tokio::spawn(draw(progress.clone())));
    let live = Live::start(stop, bar.into_iter().collect());
    let result = sql2ddb_engine::update::update(&job, &opts, progress).await;
    live.end().await;
    let report = result?;
    crate::html::save_update(&report)?;
    Output::new(args.json).report(
        &render(&report),
        report.error.as_deref().map(|e| (e, report.cause)),
        continue_hint(&args, &report),
        &report,
    );
    Ok(crate::failure::update_ended(&report))
}

/// The job's options from its arguments, stopped by `stop`.
fn options(args: &UpdateArgs, stop: &Arc<StopSignal>) -> UpdateOptions {
    UpdateOptions {
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        runs_dir: args.runs_dir.clone(),
        run_id: Some(
            args.resume
                .clone()
                .or(args.run_id.clone())
                .unwrap_or_else(sql2ddb_engine::new_run_id),
        ),
        resume: args.resume.is_some(),
        progress_table: args.progress_table.clone(),
        max_seconds: args.max_seconds,
        dry_run: args.dry_run,
        concurrency: args.concurrency,
        max_wcu: args.max_wcu,
        max_rcu: args.max_rcu,
        stop: Some(stop.clone()),
        queue: args.queue.clone(),
        sqs_endpoint: args.sqs_endpoint.clone(),
        retry_budget: args.budget.retry_budget,
        ..UpdateOptions::default()
    }
}

/// One bar: matching items handled out of those found so far.
async fn draw(progress: Arc<UpdateProgress>) {
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr()).with_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} matched items written  {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    let _guard = ClearOnDrop(bar.clone());
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        let get = UpdateProgress::get;
        bar.set_length(get(&progress.matched));
        bar.set_position(get(&progress.updated) + get(&progress.skipped) + get(&progress.failed));
        bar.set_message(format!(
            "{} scanned, {} skipped, {} failed",
            get(&progress.scanned),
            get(&progress.skipped),
            get(&progress.failed)
        ));
    }
}

struct ClearOnDrop(ProgressBar);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// What to run to finish a run that stopped before its end: interrupted,
/// stopped at its time limit, or failed once its pages were being written.
/// A dry run has no checkpoint: it is simply run again.
fn continue_hint(args: &UpdateArgs, r: &UpdateReport) -> Option<String> {
    if r.dry_run {
        return None;
    }
    let command = resume_command(args, r);
    match r.status {
        UpdateStatus::Interrupted | UpdateStatus::TimeUp => {
            Some(format!("to continue where it stopped, run\n  {command}"))
        }
        UpdateStatus::Throttled => Some(format!(
            "throttled: table {} kept refusing the job's calls past the retry budget; no item failed, {} matching item(s) are pending. Later (or with more capacity, or a larger --retry-budget), continue where it stopped with\n  {command}",
            r.table,
            thousands(r.pending)
        )),
        UpdateStatus::Failed if r.error.is_some() && r.pages > 0 => Some(format!(
            "once the cause is fixed, continue after the last page written with\n  {command}"
        )),
        _ => None,
    }
}

/// The command that continues an interrupted or time-boxed run.
fn resume_command(args: &UpdateArgs, r: &UpdateReport) -> String {
    let mut cmd = format!(
        "sql2ddb update {} --resume {}",
        args.job.display(),
        r.run_id
    );
    if args.runs_dir != std::path::Path::new(DEFAULT_RUNS_DIR) {
        cmd.push_str(&format!(" --runs-dir {}", args.runs_dir.display()));
    }
    if let Some(e) = &args.endpoint {
        cmd.push_str(&format!(" --endpoint {}", redact_secrets(e)));
    }
    if let Some(t) = &args.progress_table {
        cmd.push_str(&format!(" --progress-table {t}"));
    }
    if let Some(q) = &args.queue {
        cmd.push_str(&format!(" --queue {q}"));
    }
    if let Some(e) = &args.sqs_endpoint {
        cmd.push_str(&format!(" --sqs-endpoint {}", redact_secrets(e)));
    }
    // The same limits: a capped or time-boxed run goes on capped and
    // time-boxed.
    let limits = [
        ("--region", args.region.clone()),
        ("--max-wcu", args.max_wcu.map(|n| n.to_string())),
        ("--max-rcu", args.max_rcu.map(|n| n.to_string())),
        ("--concurrency", args.concurrency.map(|n| n.to_string())),
        ("--max-seconds", args.max_seconds.map(|n| n.to_string())),
        (
            "--retry-budget",
            args.budget.retry_budget.map(sql2ddb_core::duration_text),
        ),
    ];
    for (flag, value) in limits {
        if let Some(v) = value {
            cmd.push_str(&format!(" {flag} {v}"));
        }
    }
    cmd
}

/// The final report as a small table, then the estimate and notes (the
/// error, if any, goes to stderr on its own).
fn render(r: &UpdateReport) -> String {
    let status = match r.status {
        UpdateStatus::Ok => "ok",
        UpdateStatus::Failed => "failed",
        UpdateStatus::Interrupted => "interrupted",
        UpdateStatus::TimeUp => "stopped at --max-seconds",
        UpdateStatus::Throttled => "throttled",
    };
    let mut out = format!(
        "{} {} on {} ({}): {status}{}\n",
        r.action,
        r.job,
        r.table,
        r.read,
        if r.resumed {
            " (resumed: counts of every attempt)"
        } else {
            ""
        }
    );
    let rows = [
        ("scanned", r.scanned),
        ("not matched", r.not_matched),
        ("matched", r.matched),
        (
            if r.action == "delete" {
                "deleted"
            } else {
                "updated"
            },
            r.updated,
        ),
        ("skipped", r.skipped),
        ("failed", r.failed),
        ("pending", r.pending),
        ("retries", r.retries),
    ];
    for (name, n) in rows {
        out.push_str(&format!("  {name:<12} {:>14}\n", thousands(n)));
    }
    out.push_str(&format!(
        "  {:<12} {:>14.1}\n  {:<12} {:>14.1}\n  {:<12} {:>14.2}\n",
        "read units", r.read_units, "write units", r.write_units, "seconds", r.seconds
    ));
    out.push_str(&crate::table::pacing_line(&r.pacing));
    if let Some(e) = &r.estimate {
        out.push_str(&render_estimate(r.matched, e));
    }
    for note in &r.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    if r.failed > 0 {
        out.push_str(&format!("failed items: {}\n", r.failures_file));
    }
    if let Some(q) = &r.queue {
        out.push_str(&format!(
            "queued: {} matching items sent to {q}; `sql2ddb worker` processes apply them\n",
            thousands(r.pending)
        ));
    }
    if let Some(t) = &r.progress_table {
        out.push_str(&format!(
            "progress table: {t} (sql2ddb verify --run {} --progress-table {t})\n",
            r.run_id
        ));
    }
    out.push_str(&format!(
        "report: {0}/report.json (to look at: {0}/report.html)",
        r.run_dir
    ));
    out
}

/// A dry run's estimate of `matched` writes, in a sentence.
fn render_estimate(matched: u64, e: &CostEstimate) -> String {
    let mut out = format!(
        "dry run, nothing written. The job would write {} items: {} write units on the table",
        thousands(matched),
        thousands(e.write_units)
    );
    for i in e.index_write_units.iter().filter(|i| i.write_units > 0) {
        out.push_str(&format!(
            ", {} on {} ({} items)",
            thousands(i.write_units),
            i.index,
            thousands(i.items)
        ));
    }
    out.push_str(&format!(
        "; {} in all (1 KB rounding per item), after reading {:.1} read units",
        thousands(e.total_write_units),
        e.read_units
    ));
    match e.seconds_at_max_wcu {
        Some(s) => out.push_str(&format!("; {s:.0} s of writes at --max-wcu\n")),
        None => out.push_str("; give --max-wcu to see how long the writes take\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn help_lists_the_exit_codes_ranges_and_logging() {
        let mut cmd = crate::Cli::command();
        cmd.build();
        let text = cmd
            .find_subcommand("update")
            .expect("update")
            .clone()
            .render_long_help()
            .to_string();
        for says in [
            "64  usage error",
            "SQL2DDB_LOG",
            "RUST_LOG",
            "--dry-run",
            "1..=1000000000",
            "1..=256",
        ] {
            assert!(text.contains(says), "{says}:\n{text}");
        }
    }

    #[test]
    fn numbers_get_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
