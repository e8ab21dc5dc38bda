//! The `sql2ddb` binary: arguments → engine; progress bars; tables; exit codes.

// A run allocates and frees every item's strings and maps; with the system
// allocator that was about 40% of the CPU (see docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod budget;
mod check;
mod deep;
mod distributed;
mod export;
mod failure;
mod follow;
mod follow_report;
mod get;
mod html;
mod init;
mod limits;
mod live;
mod load_choice;
mod outcome;
mod plan;
mod pointers;
mod queue;
mod run;
mod run_ref;
mod runs;
mod shell;
mod table;
mod update;
mod verify;
mod worker;

use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sql2ddb_core::redact_secrets;
use sql2ddb_engine::EngineError;
use sql2ddb_mapping::Plan;

use crate::outcome::exit;

/// The exit code of a command line that could not be parsed (an unknown
/// option, a missing argument, a value out of its range): EX_USAGE of
/// sysexits.h, so it never reads as "finished with rejects" (2).
pub(crate) const EXIT_USAGE: u8 = 64;

const ALL_EXIT_CODES: &str = "\
Exit codes:
  0   success (`check`: valid; `run`: every row written, or enqueued with --queue;
      `verify`: every row accounted for)
  1   the job failed: rows not written or not read, `verify`: rows missing,
      a run that cannot be resumed as asked; `check`: invalid; `get`: the
      row's item differs or is missing in the table, or the row is not in
      the source
  2   `run`: finished, but some rows were rejected (see the rejects file);
      `check`: valid, with warnings
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  69  the source, DynamoDB or SQS could not be reached, or refused
  74  a file could not be read or written (the mapping, the runs directory,
      an export's files)
  75  try again later: DynamoDB kept throttling past the retry budget
      (--retry-budget; `run`: status `throttled`, nothing rejected, the
      printed --resume continues); `update`: also stopped at --max-seconds
  78  the mapping is invalid or does not fit its source or its table, or the
      settings do not fit together
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

/// The version and the commit the binary was built from ("unknown" when
/// built outside a git checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SQL2DDB_COMMIT"),
    ")"
);

/// Migrate relational data (PostgreSQL, MySQL/MariaDB, SQLite) into Amazon DynamoDB.
#[derive(Parser)]
#[command(name = "sql2ddb", version = VERSION, about, after_help = footer(ALL_EXIT_CODES))]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a mapping file (no connection is made, unless --source or
    /// --follow).
    #[command(after_help = footer(check::EXIT_CODES))]
    Check(check::CheckArgs),
    /// Migrate: read the source page by page, write the items, print a report.
    #[command(after_help = footer(run::EXIT_CODES))]
    Run(run::RunArgs),
    /// Write the items as DynamoDB-JSON files for DynamoDB's import from S3
    /// or its bulk put items (a directory or s3://), with a manifest and
    /// the command that loads them.
    #[command(after_help = footer(export::EXIT_CODES))]
    Export(export::ExportArgs),
    /// After a bulk put of an `export --for bulk-put`: write the pointer
    /// items from the pointer file it wrote, each with `run`'s conditional
    /// update, so a pointer only moves forward.
    #[command(after_help = footer(pointers::EXIT_CODES))]
    Pointers(pointers::PointersArgs),
    /// Follow the source's changes after a `run --follow` (PostgreSQL: from
    /// the slot it created; MySQL/MariaDB: from the binary log position in
    /// its run directory): resume after a stop, cut over, show the lag, or
    /// drop the slot.
    #[command(after_help = footer(follow::EXIT_CODES))]
    Follow(follow::FollowArgs),
    /// Write the batches a `run --queue` sends, from the queue (run as many
    /// as you like, anywhere).
    #[command(after_help = footer(worker::EXIT_CODES))]
    Worker(worker::WorkerArgs),
    /// Show a run's counts from its progress table: rows read, written,
    /// rejected, pending; its queue and dead-letter queue. For a followed
    /// run, where its follow stands: state, applied position, the source's
    /// position and the lag in time.
    #[command(after_help = footer(verify::STATUS_EXIT_CODES))]
    Status(verify::StatusArgs),
    /// Check that every row of a run is accounted for, by counting its
    /// batch records; names the segments and pages missing. With --deep,
    /// compare every item of the table with the source, as mapped now.
    #[command(after_help = footer(verify::VERIFY_EXIT_CODES))]
    Verify(verify::VerifyArgs),
    /// Explain one source row: the item(s) the mapping makes of it beside
    /// what the table holds at their keys, attribute by attribute, the
    /// differences marked.
    #[command(after_help = footer(get::EXIT_CODES))]
    Get(get::GetArgs),
    /// List the runs of a runs directory (of one mapping), newest first:
    /// id, start, how it ended, table, mapping.
    #[command(after_help = footer(runs::EXIT_CODES))]
    Runs(runs::RunsArgs),
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
    /// Print a completion script for a shell (see the README for where to put it).
    #[command(after_help = footer(shell::COMPLETIONS_EXIT_CODES))]
    Completions(shell::CompletionsArgs),
    /// Print the man page, or write one page per command with --dir.
    #[command(after_help = footer(shell::MAN_EXIT_CODES))]
    Man(shell::ManArgs),
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
        Command::Check(args) => check::check(args),
        Command::Run(args) => exit(block_on(run::run(args))),
        Command::Export(args) => exit(block_on(export::export(args))),
        Command::Pointers(args) => exit(block_on(pointers::pointers(args))),
        Command::Follow(args) => exit(block_on(follow::follow(args))),
        Command::Worker(args) => exit(block_on(worker::work(args))),
        Command::Status(args) => exit(block_on(verify::status(args))),
        Command::Verify(args) => exit(block_on(verify::verify(args))),
        Command::Get(args) => exit(block_on(get::get(args))),
        Command::Runs(args) => exit(runs::runs(args)),
        Command::Queue(command) => exit(block_on(queue::queue(command))),
        Command::Update(args) => exit(block_on(update::update(args))),
        Command::Plan(args) => exit(block_on(plan::plan(args))),
        Command::Init(args) => exit(block_on(init::init(args))),
        Command::Completions(args) => shell::completions(args),
        Command::Man(args) => shell::man(args),
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

/// Runs a job to its end, then exits without waiting for what it left
/// behind: a thread still blocked (a name lookup, a connection that never
/// answers) would otherwise keep the process after its report.
fn block_on<T>(job: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(job);
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The mapping at `path`, with `source` (`--source`) in place of its source
/// URL when given: an error of kind Io if it cannot be read, of kind
/// Mapping if it is not valid.
pub(crate) fn load(path: &Path, source: Option<&str>) -> Result<Plan, EngineError> {
    let text = read(path)?;
    Ok(Plan::parse_with_source(&text, path, &env, source)?)
}

/// The text of the file at `path` (a mapping, an update job).
pub(crate) fn read(path: &Path) -> Result<String, EngineError> {
    std::fs::read_to_string(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Prints a failure that is no error of a kind (no such replication slot,
/// `check`'s invalid mapping, a serialisation that failed); exit 1.
pub(crate) fn fail(message: &str) -> u8 {
    eprintln!("error: {}", redact_secrets(message));
    failure::EXIT_FAILURE
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

    const COMMANDS: [&[&str]; 13] = [
        &[],
        &["check"],
        &["run"],
        &["export"],
        &["worker"],
        &["status"],
        &["verify"],
        &["queue"],
        &["update"],
        &["plan"],
        &["init"],
        &["completions"],
        &["man"],
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
    fn every_help_lists_the_codes_of_the_errors_it_can_meet() {
        use failure::{EXIT_CONFIG, EXIT_FAILURE, EXIT_IOERR, EXIT_TEMPFAIL, EXIT_UNAVAILABLE};
        let (failed, unavailable, io, later, config) = (
            EXIT_FAILURE,
            EXIT_UNAVAILABLE,
            EXIT_IOERR,
            EXIT_TEMPFAIL,
            EXIT_CONFIG,
        );
        let all = [failed, unavailable, io, later, config];
        let cases: [(&[&str], &[u8]); 12] = [
            (&[], &all),
            (&["run"], &all),
            (&["export"], &[failed, unavailable, io, config]),
            (&["follow"], &all),
            (&["worker"], &all),
            (&["status"], &all),
            (&["verify"], &all),
            (&["queue"], &[unavailable, config]),
            (&["update"], &all),
            (&["plan"], &[unavailable, io, config]),
            (&["init"], &[unavailable, config]),
            (&["man"], &[io]),
        ];
        for (path, codes) in cases {
            let text = help(path);
            for code in codes {
                assert!(
                    text.contains(&format!(" {code} ")),
                    "{path:?} {code}:\n{text}"
                );
            }
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
