//! `sql2ddb run`: its arguments and the run; how a run that ended early
//! goes on is in [`resume`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{RunOptions, RunProgress, RunReport, StopSignal};
use sql2ddb_mapping::Plan;

use crate::failure::fail_job;
use crate::live::{draw_progress, print_notes, stop_on_signals};
use crate::load_choice::{IfNotEmptyArg, SnapshotArg};
use crate::outcome::{Ended, Output};
use crate::run_ref::DEFAULT_RUNS_DIR;
use crate::{distributed, limits, load, table};

mod follow;
pub(crate) mod resume;
use resume::how_to_continue;

pub const EXIT_CODES: &str = "\
Exit codes:
  0   every row was written (with --queue: every page was enqueued; run
      `sql2ddb verify` to know when the workers are done)
  1   the run failed: rows not written or not read, a run that cannot be
      resumed as asked
  2   the run finished, but some rows were rejected (see the rejects file)
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  65  the follower met a change it cannot carry (a schema change, a
      truncate, a statement-format event, a partial row image): it stopped
      before it, its position kept; the error says what to do
  69  the source, DynamoDB or SQS could not be reached, or refused
  74  a file could not be read or written (the mapping, the runs directory)
  75  DynamoDB kept refusing writes (throttling) past the retry budget
      (--retry-budget): status `throttled`, no row rejected for it; the
      rows not written are pending, and the printed --resume command
      writes them later
  78  the mapping is invalid or does not fit its source or its table, or the
      settings do not fit together; the table already holds items and
      --if-not-empty does not say what to do with them (nothing was read or
      written); with --follow: what following needs and lacks, every reason
      in one list, before anything was created
  130 interrupted (Ctrl-C, SIGTERM): the pages in flight were written
      (within --shutdown-grace), the report says where it stopped and how to
      continue";

/// `--shutdown-grace`'s default, in seconds.
const DEFAULT_SHUTDOWN_GRACE: u64 = sql2ddb_engine::stop::STOP_GRACE.as_secs();

/// Past the grace period and the report's time, how long a stopped run may
/// still take (closing its source) before the process exits without it.
const LAST_RESORT: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct RunArgs {
    /// The mapping spec (TOML).
    mapping: PathBuf,
    /// Source URL, overriding the mapping's (postgres://, mysql://, sqlite://).
    #[arg(long)]
    source: Option<String>,
    /// DynamoDB endpoint: a URL, or `local` for an embedded server whose data
    /// file goes into the run directory. Default: the mapping's, else AWS
    /// (credentials and region from the usual AWS environment and profile).
    #[arg(long)]
    endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    region: Option<String>,
    /// Print the final report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Where run directories (rejects file, report, local data) are created.
    #[arg(long, default_value = DEFAULT_RUNS_DIR)]
    runs_dir: PathBuf,
    /// Most BatchWriteItem calls in flight, 1..=256 (default: the mapping's
    /// [writer] concurrency, else 8). It adapts to throttling within [1, N]
    /// unless --fixed-concurrency is given.
    #[arg(long, value_parser = limits::concurrency())]
    concurrency: Option<usize>,
    /// Keep concurrency at --concurrency instead of adapting to throttling.
    #[arg(long)]
    fixed_concurrency: bool,
    /// Cap on write units per second for this process, counted as DynamoDB
    /// bills them (1 KB rounding per item, each GSI counted). With several
    /// workers, give each its share of the table's budget; 1..=1000000000.
    #[arg(long, value_parser = limits::max_wcu())]
    max_wcu: Option<u64>,
    /// Rows per source page, for every entity (at least 1).
    #[arg(long, value_parser = limits::positive::<usize>)]
    page_size: Option<usize>,
    /// Segments each entity's key range is cut into and read concurrently,
    /// 1..=64 (default: the mapping's `read_parallelism`, else chosen from
    /// the table size: one per 100,000 rows, at most 8).
    #[arg(long, value_parser = limits::read_parallelism())]
    read_parallelism: Option<u32>,
    /// Source connections of the run, which is also how many segments are
    /// read at once (at least 1).
    #[arg(
        long,
        value_parser = limits::positive::<u32>,
        default_value_t = sql2ddb_engine::run::DEFAULT_SOURCE_CONNECTIONS
    )]
    source_connections: u32,
    /// Read and map every row, write nothing: checks the whole source against
    /// the mapping (rejects are reported) and measures the read ceiling.
    #[arg(long)]
    dry_run: bool,
    /// Replay the rows of a rejects file (e.g. `sql2ddb-runs/RUN/rejects.jsonl`):
    /// read exactly those rows again from the source, by key, through the
    /// current (fixed) mapping, as a new run with its own report.
    #[arg(long, value_name = "REJECTS_FILE", conflicts_with_all = ["dry_run", "queue", "resume", "progress_table"])]
    only_rejects: Option<PathBuf>,
    /// What a run that is not resumed does when the table already holds
    /// items: `fail` refuses, saying how many (the default); `append`
    /// writes into it as it is (items of the same key replaced, the others
    /// kept); `truncate` deletes every item first (the table, its indexes
    /// and settings kept), then loads. A table the run creates is empty.
    #[arg(long, value_enum, value_name = "WHAT", conflicts_with_all = ["resume", "only_rejects"])]
    if_not_empty: Option<IfNotEmptyArg>,
    /// `consistent`: every read of the run sees the source as it was at one
    /// moment (PostgreSQL: an exported snapshot, its id and WAL position in
    /// the report; it holds one source connection for the run); `none`: each
    /// read sees the source as it is then.
    #[arg(long, value_enum, default_value = "consistent")]
    snapshot: SnapshotArg,
    /// On the first SIGTERM or Ctrl-C, seconds the pages already handed to
    /// the writers get to be written; past it they stay pending (a rerun or
    /// --resume writes them). The report follows within 10 more seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_SHUTDOWN_GRACE)]
    shutdown_grace: u64,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    distributed: distributed::DistributedArgs,
    #[command(flatten)]
    follow: crate::follow::RunFollowArgs,
    #[command(flatten)]
    budget: crate::budget::RetryBudgetArg,
}

pub async fn run(args: RunArgs) -> Ended {
    let plan = load(&args.mapping, args.source.as_deref())?;
    if !args.follow.follow && args.follow.stop.given() {
        eprintln!("error: --follow-until-idle, --cutover and --no-verify go with --follow");
        return Ok(crate::EXIT_USAGE);
    }
    let mut opts = options(&args);
    announce(&args, &plan, &opts);
    let stop = StopSignal::new();
    opts.stop = Some(stop.clone());
    let signals = tokio::spawn(stop_on_signals(stop.clone()));
    let progress = RunProgress::new();
    let notes = tokio::spawn(print_notes(progress.clone()));
    let bars = (!args.quiet).then(|| tokio::spawn(draw_progress(progress.clone())));
    // The run ends within its grace period and the report's time once
    // stopped; should anything still hold it, the process does not wait.
    let last_resort = opts.shutdown_grace + sql2ddb_engine::run::REPORT_WAIT + LAST_RESORT;
    let bars = std::sync::Mutex::new(bars);
    let stop_bars = || {
        if let Some(b) = bars.lock().expect("bars lock").take() {
            b.abort();
            let _ = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(b));
        }
    };
    // Past the full load a stop ends the follow after the batch in hand,
    // which has no last resort.
    let following = AtomicBool::new(false);
    let job = async {
        match args.follow.follow {
            false => RunEnd::Load(
                sql2ddb_engine::run(&plan, &opts, progress.clone())
                    .await
                    .map(Box::new),
            ),
            true => RunEnd::Follow(
                follow::run_and_follow(
                    &args,
                    &plan,
                    &opts,
                    progress.clone(),
                    &following,
                    &notes,
                    || {
                        signals.abort();
                        stop_bars();
                    },
                )
                .await,
            ),
        }
    };
    let Some(result) = or_last_resort(job, &stop, &following, last_resort).await else {
        eprintln!(
            "exiting: the run did not end within {} s of the stop; the report is not written",
            last_resort.as_secs()
        );
        return Ok(crate::failure::EXIT_INTERRUPTED);
    };
    signals.abort();
    notes.abort();
    stop_bars();
    match result {
        RunEnd::Load(report) => {
            let report = report?;
            Ok(loaded(&args, &report))
        }
        RunEnd::Follow(code) => Ok(code),
    }
}

/// How `job` ended, or `None` when it did not end within `last_resort` of
/// a stop; once `following`, a stop has no last resort (it ends the follow
/// after the batch in hand).
async fn or_last_resort(
    job: impl std::future::Future<Output = RunEnd>,
    stop: &StopSignal,
    following: &AtomicBool,
    last_resort: Duration,
) -> Option<RunEnd> {
    tokio::select! {
        ended = job => Some(ended),
        _ = async {
            stop.stopped().await;
            if following.load(Ordering::Relaxed) {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(last_resort).await
        } => None,
    }
}

/// The run's options from its arguments (with `--follow`, its id chosen
/// now: the slot is named after it).
fn options(args: &RunArgs) -> RunOptions {
    let mut opts = RunOptions {
        source: args.source.clone(),
        endpoint: args.endpoint.clone(),
        region: args.region.clone(),
        runs_dir: args.runs_dir.clone(),
        concurrency: args.concurrency,
        page_size: args.page_size,
        read_parallelism: args.read_parallelism,
        source_connections: args.source_connections,
        dry_run: args.dry_run,
        max_wcu: args.max_wcu,
        fixed_concurrency: args.fixed_concurrency,
        only_rejects: args.only_rejects.clone(),
        retry_budget: args.budget.retry_budget,
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        snapshot: args.snapshot.resolve(),
        if_not_empty: IfNotEmptyArg::resolve(args.if_not_empty),
        ..RunOptions::default()
    };
    args.distributed.apply(&mut opts);
    if args.follow.follow {
        opts.run_id.get_or_insert_with(sql2ddb_engine::new_run_id);
    }
    opts
}

/// Logs the run's start, and says its id on stderr.
fn announce(args: &RunArgs, plan: &Plan, opts: &RunOptions) {
    tracing::debug!(
        mapping = %args.mapping.display(),
        source = %redact_secrets(opts.source.as_deref().unwrap_or(&plan.source.url)),
        endpoint = %opts
            .endpoint
            .as_deref()
            .or(plan.target.endpoint.as_deref())
            .unwrap_or("aws"),
        table = %plan.target.table,
        dry_run = opts.dry_run,
        "starting run"
    );
    // First, so a run can be followed (`status`) and resumed even if this
    // process dies; one write (stderr is unbuffered, and `eprintln!` writes
    // each piece on its own), so a reader of the pipe never sees `run `
    // without its id.
    let first = format!(
        "run {}{}\n",
        opts.run_id.as_deref().unwrap_or("?"),
        match &opts.queue {
            Some(q) => format!(": sending pages to {q}"),
            None => String::new(),
        }
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), first.as_bytes());
}

/// How the job of a run ended.
enum RunEnd {
    /// A run without `--follow`.
    Load(Result<Box<RunReport>, sql2ddb_engine::EngineError>),
    /// `run --follow`: its exit code, all printed.
    Follow(u8),
}

/// Prints a full load's report (on stdout; with `--json` the JSON alone
/// there and the table on stderr), then how to go on, after its page is
/// saved beside `report.json`; its exit code.
pub(crate) fn loaded(args: &RunArgs, report: &RunReport) -> u8 {
    if let Err(e) = crate::html::save_run(report) {
        return fail_job(&e);
    }
    let load = match args.dry_run {
        true => table::Load::DryRun,
        false => table::Load::Write,
    };
    Output::new(args.json).report(
        &table::render(report, load),
        report.error.as_deref().map(|e| (e, report.cause)),
        how_to_continue(args, report),
        report,
    );
    crate::failure::run_ended(report)
}
