//! The `sql2ddb` binary: arguments → engine; progress bars; tables; exit codes.

// A run allocates and frees every item's strings and maps; with the system
// allocator that was about 40% of the CPU (see docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod deep;
mod distributed;
mod export;
mod init;
mod limits;
mod plan;
mod queue;
mod table;
mod update;
mod verify;
mod worker;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{
    EntityProgress, RunOptions, RunProgress, RunReport, RunStatus, SnapshotMode, StopSignal,
};
use sql2ddb_mapping::Plan;

/// The exit code of a command line that could not be parsed (an unknown
/// option, a missing argument, a value out of its range): EX_USAGE of
/// sysexits.h, so it never reads as "finished with rejects" (2).
pub(crate) const EXIT_USAGE: u8 = 64;

const EXIT_CODES: &str = "\
Exit codes:
  0   every row was written (with --queue: every page was enqueued; run
      `sql2ddb verify` to know when the workers are done)
  1   the run failed (bad mapping, unreachable source or table, rows not written)
  2   the run finished, but some rows were rejected (see the rejects file)
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  130 interrupted (Ctrl-C, SIGTERM): the pages in flight were written, the
      report says where it stopped and how to continue";

const ALL_EXIT_CODES: &str = "\
Exit codes:
  0   success (`check`: valid; `run`: every row written, or enqueued with --queue;
      `verify`: every row accounted for)
  1   failure (bad mapping, unreachable source or table, rows not written,
      `verify`: rows missing)
  2   `run`: finished, but some rows were rejected (see the rejects file);
      `check`: valid, with warnings
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  130 `run`: interrupted (Ctrl-C, SIGTERM); the report says how to continue
Each command's --help lists its own.";

const LOGGING: &str = "\
Logging: log lines go to stderr. SQL2DDB_LOG, else RUST_LOG, sets the filter
(`debug`, `info`, `warn,sql2ddb=debug`, …); SQL2DDB_LOG wins when both are set.
Default: warnings and errors.";

/// An `after_help` text: the exit codes, then how to turn on logging.
pub(crate) fn footer(exit_codes: &str) -> String {
    format!("{exit_codes}\n\n{LOGGING}")
}

/// Migrate relational data (PostgreSQL, MySQL/MariaDB, SQLite) into Amazon DynamoDB.
#[derive(Parser)]
#[command(name = "sql2ddb", version, about, after_help = footer(ALL_EXIT_CODES))]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a mapping file (no connection is made).
    #[command(
        after_help = footer("Exit codes: 0 valid; 2 valid, with warnings of possible silent overwrites (keys that leave out the unique key, entities whose keys can collide); 1 invalid; 64 usage error.")
    )]
    Check {
        /// The mapping spec (TOML).
        mapping: PathBuf,
    },
    /// Migrate: read the source page by page, write the items, print a report.
    #[command(after_help = footer(EXIT_CODES))]
    Run(RunArgs),
    /// Write the items as DynamoDB-JSON files for DynamoDB's import from S3
    /// (a directory or s3://), with a manifest and the import command.
    #[command(after_help = footer(export::EXIT_CODES))]
    Export(export::ExportArgs),
    /// Write the batches a `run --queue` sends, from the queue (run as many
    /// as you like, anywhere).
    #[command(after_help = footer(worker::EXIT_CODES))]
    Worker(worker::WorkerArgs),
    /// Show a run's counts from its progress table: rows read, written,
    /// rejected, pending; its queue and dead-letter queue.
    #[command(after_help = footer(verify::STATUS_EXIT_CODES), mut_arg("run", |a| a.required(true)))]
    Status(verify::StatusArgs),
    /// Check that every row of a run is accounted for, by counting its
    /// batch records; names the segments and pages missing. With --deep,
    /// compare every item of the table with the source, as mapped now.
    #[command(after_help = footer(verify::VERIFY_EXIT_CODES), mut_arg("run", |a| a.required_unless_present("deep")))]
    Verify(verify::VerifyArgs),
    /// Create, redrive, inspect or delete work queues.
    #[command(subcommand, after_help = footer(queue::EXIT_CODES))]
    Queue(queue::QueueCommand),
    /// Change (or delete) every item of a table that meets a condition, from
    /// an update job file: the mass UPDATE … WHERE (or DELETE … WHERE).
    #[command(after_help = footer(update::EXIT_CODES))]
    Update(update::UpdateArgs),
    /// Before writing: the items, write units, cost, time, hot partitions
    /// and key collisions of a migration, from the source alone.
    #[command(after_help = footer(plan::EXIT_CODES))]
    Plan(plan::PlanArgs),
    /// Print a commented mapping scaffolded from the source's schema
    /// (tables, keys, foreign keys, column types).
    #[command(after_help = footer(init::EXIT_CODES))]
    Init(init::InitArgs),
}

#[derive(clap::Args)]
struct RunArgs {
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
enum SnapshotArg {
    Consistent,
    None,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version come this way too, on stdout, with 0.
            let _ = e.print();
            return ExitCode::from(match e.use_stderr() {
                true => EXIT_USAGE,
                false => 0,
            });
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(log_filter())
        .init();
    let code = match cli.command {
        Command::Check { mapping } => check(&mapping),
        Command::Run(args) => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(run(args))
        }
        Command::Export(args) => block_on(export::export(args)),
        Command::Worker(args) => block_on(worker::work(args)),
        Command::Status(args) => block_on(verify::status(args)),
        Command::Verify(args) => block_on(verify::verify(args)),
        Command::Queue(command) => block_on(queue::queue(command)),
        Command::Update(args) => block_on(update::update(args)),
        Command::Plan(args) => block_on(plan::plan(args)),
        Command::Init(args) => block_on(init::init(args)),
    };
    ExitCode::from(code)
}

/// The log filter: SQL2DDB_LOG, else RUST_LOG, else warnings only. A filter
/// that does not parse is said so, not ignored in silence.
fn log_filter() -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    let chosen = ["SQL2DDB_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|var| Some((var, env(var).filter(|v| !v.trim().is_empty())?)));
    if let Some((var, value)) = chosen {
        match EnvFilter::try_new(&value) {
            Ok(filter) => return filter,
            Err(e) => eprintln!(
                "warning: {var}={value:?} is not a log filter ({e}); logging warnings only"
            ),
        }
    }
    // The embedded server logs every "table not found" it answers, and the
    // AWS config chain every probe it makes: noise by default.
    EnvFilter::new("warn,dynoxide=error,aws_config=error,sqlx=error")
}

fn block_on(job: impl std::future::Future<Output = u8>) -> u8 {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(job)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub(crate) fn load(path: &Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Plan::parse(&text, path, &env).map_err(|e| e.to_string())
}

pub(crate) fn fail(message: &str) -> u8 {
    eprintln!("error: {}", redact_secrets(message));
    1
}

fn check(path: &Path) -> u8 {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", path.display())),
    };
    match sql2ddb_engine::check(&text, path, &env) {
        Ok(summary) => {
            tracing::debug!(
                mapping = %path.display(),
                table = %summary.table,
                entities = summary.entities.len(),
                warnings = summary.warnings.len(),
                "mapping checked"
            );
            println!("{}: ok", path.display());
            println!(
                "  table {} keyed by {}",
                summary.table,
                summary.keys.join(", ")
            );
            for e in summary.entities {
                println!("  entity {e}");
            }
            for w in &summary.warnings {
                eprintln!("warning: {w}");
            }
            if summary.warnings.is_empty() {
                0
            } else {
                2
            }
        }
        Err(e) => fail(&e.to_string()),
    }
}

async fn run(args: RunArgs) -> u8 {
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
    // First, so a run can be followed (`status`) and resumed even if this process dies.
    eprintln!(
        "run {}{}",
        opts.run_id.as_deref().unwrap_or("?"),
        match &opts.queue {
            Some(q) => format!(": sending pages to {q}"),
            None => String::new(),
        }
    );
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

/// Prints the lines the run announces (its snapshot) on stderr.
async fn print_notes(progress: Arc<RunProgress>) {
    let mut seen = 0;
    loop {
        for line in progress.notes_after(seen).await {
            eprintln!("{line}");
            seen += 1;
        }
    }
}

/// The first Ctrl-C or SIGTERM asks the run to stop cleanly; the second
/// exits at once.
async fn stop_on_signals(stop: Arc<StopSignal>) {
    next_signal().await;
    eprintln!(
        "stopping: no new pages are read; the pages in flight are being written (Ctrl-C again to exit at once)"
    );
    stop.stop();
    next_signal().await;
    eprintln!("exiting at once: the report is not written");
    std::process::exit(sql2ddb_engine::report::EXIT_INTERRUPTED);
}

async fn next_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
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

/// One bar per entity: rows accounted for (written + rejected) out of the
/// counted total, with rate and ETA.
async fn draw_progress(progress: Arc<RunProgress>) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix:>14} [{bar:30}] {pos}/{len} rows  {per_sec}  ETA {eta}  {msg}",
    )
    .expect("template")
    .progress_chars("=> ");
    let mut shown: Vec<(Arc<EntityProgress>, ProgressBar)> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let update = |shown: &Vec<(Arc<EntityProgress>, ProgressBar)>| {
        for (e, bar) in shown {
            let total = EntityProgress::get(&e.total);
            bar.set_length(total.max(EntityProgress::get(&e.read)));
            let done = EntityProgress::get(&e.written)
                + EntityProgress::get(&e.rejected)
                + EntityProgress::get(&e.failed);
            bar.set_position(done);
            let rejected = EntityProgress::get(&e.rejected);
            if rejected > 0 {
                bar.set_message(format!("{rejected} rejected"));
            }
            if e.is_done() && !bar.is_finished() {
                bar.finish();
            }
        }
    };
    let _guard = ClearOnDrop(multi.clone());
    loop {
        tick.tick().await;
        for e in progress.entities() {
            if !shown.iter().any(|(s, _)| Arc::ptr_eq(s, &e)) {
                let bar = multi.add(
                    ProgressBar::new(0)
                        .with_style(style.clone())
                        .with_prefix(e.name.clone()),
                );
                shown.push((e, bar));
            }
        }
        update(&shown);
    }
}

struct ClearOnDrop(MultiProgress);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        let _ = self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn help(path: &[&str]) -> String {
        let mut cmd = Cli::command();
        cmd.build();
        for name in path {
            cmd = cmd.find_subcommand(name).expect(name).clone();
        }
        cmd.render_long_help().to_string()
    }

    const COMMANDS: [&[&str]; 8] = [
        &[],
        &["check"],
        &["run"],
        &["export"],
        &["worker"],
        &["status"],
        &["verify"],
        &["queue"],
    ];

    #[test]
    fn arguments_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_help_lists_the_usage_exit_code_and_logging() {
        for path in COMMANDS {
            let text = help(path);
            assert!(
                text.contains(&format!("{EXIT_USAGE} usage error"))
                    || text.contains(&format!("{EXIT_USAGE}  usage error")),
                "{path:?}:\n{text}"
            );
            assert!(
                text.contains("SQL2DDB_LOG") && text.contains("RUST_LOG"),
                "{path:?}:\n{text}"
            );
        }
    }

    #[test]
    fn help_states_the_ranges_that_are_enforced() {
        use sql2ddb_mapping::{MAX_CONCURRENCY, MAX_READ_PARALLELISM, MAX_WCU};
        let run = help(&["run"]);
        let worker = help(&["worker"]);
        for text in [&run, &worker] {
            assert!(text.contains(&format!("1..={MAX_CONCURRENCY}")), "{text}");
            assert!(text.contains(&format!("1..={MAX_WCU}")), "{text}");
        }
        assert!(
            run.contains(&format!("1..={MAX_READ_PARALLELISM}")),
            "{run}"
        );
        let poll = sql2ddb_engine::queues::MAX_WAIT.as_secs();
        assert!(worker.contains(&format!("1..={poll}")), "{worker}");
        let create = help(&["queue", "create"]);
        for max in [limits::MAX_VISIBILITY_SECONDS, limits::MAX_RECEIVE_COUNT] {
            assert!(create.contains(&format!("1..={max}")), "{create}");
        }
    }
}
