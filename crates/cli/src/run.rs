//! `sql2ddb run`: its arguments, the run, and how an interrupted run goes on.

use std::path::PathBuf;

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{RunOptions, RunProgress, RunReport, RunStatus, SnapshotMode, StopSignal};

use crate::live::{draw_progress, print_notes, stop_on_signals};
use crate::{distributed, fail, limits, load, table};

pub const EXIT_CODES: &str = "\
Exit codes:
  0   every row was written (with --queue: every page was enqueued; run
      `sql2ddb verify` to know when the workers are done)
  1   the run failed (bad mapping, unreachable source or table, rows not written)
  2   the run finished, but some rows were rejected (see the rejects file)
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  130 interrupted (Ctrl-C, SIGTERM): the pages in flight were written, the
      report says where it stopped and how to continue";

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
    #[arg(long, default_value = "sql2ddb-runs")]
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
    /// `consistent`: every read of the run sees the source as it was at one
    /// moment (PostgreSQL: an exported snapshot, its id and WAL position in
    /// the report; it holds one source connection for the run); `none`: each
    /// read sees the source as it is then.
    #[arg(long, value_enum, default_value = "consistent")]
    snapshot: SnapshotArg,
    /// No progress bars.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    distributed: distributed::DistributedArgs,
}

/// `--snapshot`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SnapshotArg {
    Consistent,
    None,
}

pub async fn run(args: RunArgs) -> u8 {
    let plan = match load(&args.mapping) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
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
        snapshot: match args.snapshot {
            SnapshotArg::Consistent => SnapshotMode::Consistent,
            SnapshotArg::None => SnapshotMode::None,
        },
        ..RunOptions::default()
    };
    args.distributed.apply(&mut opts);
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
    let stop = StopSignal::new();
    opts.stop = Some(stop.clone());
    let signals = tokio::spawn(stop_on_signals(stop));
    let progress = RunProgress::new();
    let notes = tokio::spawn(print_notes(progress.clone()));
    let bars = (!args.quiet).then(|| tokio::spawn(draw_progress(progress.clone())));
    let result = sql2ddb_engine::run(&plan, &opts, progress.clone()).await;
    signals.abort();
    notes.abort();
    if let Some(b) = bars {
        b.abort();
        let _ = b.await;
    }
    match result {
        Ok(report) => {
            eprintln!("{}", table::render(&report));
            if let Some(err) = &report.error {
                eprintln!("error: {}", redact_secrets(err));
            }
            if report.status == RunStatus::Interrupted {
                eprintln!("{}", how_to_continue(&args, &report));
            }
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("report serialises")
                );
            }
            report.status.exit_code() as u8
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// What to run to finish an interrupted run.
fn how_to_continue(args: &RunArgs, report: &RunReport) -> String {
    let mapping = args.mapping.display();
    match &report.progress_table {
        Some(table) => format!(
            "interrupted: to continue where it stopped, run\n  sql2ddb run {mapping} --resume {} --progress-table {table}",
            report.run_id
        ),
        None => format!(
            "interrupted: this run kept no progress table, so it cannot be resumed; running it again\n  sql2ddb run {mapping}\nrewrites the same items with the same values (nothing is duplicated). To make the next run resumable, pass --progress-table."
        ),
    }
}
