//! `sql2ddb run`: its arguments, the run, and how an interrupted run goes on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{RunOptions, RunProgress, RunReport, RunStatus, StopSignal};

use crate::failure::fail_job;
use crate::live::{draw_progress, print_notes, stop_on_signals};
use crate::load_choice::{IfNotEmptyArg, SnapshotArg};
use crate::{distributed, limits, load, table};

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

/// `--runs-dir`'s default.
pub(crate) const DEFAULT_RUNS_DIR: &str = "sql2ddb-runs";

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

pub async fn run(args: RunArgs) -> u8 {
    let plan = match load(&args.mapping, args.source.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail_job(&e),
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
        retry_budget: args.budget.retry_budget,
        shutdown_grace: Duration::from_secs(args.shutdown_grace),
        snapshot: args.snapshot.resolve(),
        if_not_empty: IfNotEmptyArg::resolve(args.if_not_empty),
        ..RunOptions::default()
    };
    args.distributed.apply(&mut opts);
    if !args.follow.follow && args.follow.stop.given() {
        eprintln!("error: --follow-until-idle, --cutover and --no-verify go with --follow");
        return crate::EXIT_USAGE;
    }
    let slot = match args.follow.follow {
        true => {
            let run_id = opts
                .run_id
                .get_or_insert_with(sql2ddb_engine::new_run_id)
                .clone();
            let url = opts.source.clone().unwrap_or(plan.source.url.clone());
            let run_dir = args.runs_dir.join(&run_id);
            let endpoint = opts.endpoint.as_deref();
            // The run would refuse a table that holds items: before the slot.
            if let Err(e) = sql2ddb_engine::target::check_table(&plan, &opts).await {
                return fail_job(&e);
            }
            match crate::follow::before_run(&plan, &url, endpoint, &run_dir, &run_id).await {
                Ok(anchor) => Some(anchor),
                Err(e) => return fail_job(&e),
            }
        }
        false => None,
    };
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
    let signals = tokio::spawn(stop_on_signals(stop.clone()));
    let progress = RunProgress::new();
    let notes = tokio::spawn(print_notes(progress.clone()));
    let bars = (!args.quiet).then(|| tokio::spawn(draw_progress(progress.clone())));
    // The run ends within its grace period and the report's time once
    // stopped; should anything still hold it, the process does not wait.
    let last_resort = opts.shutdown_grace + sql2ddb_engine::run::REPORT_WAIT + LAST_RESORT;
    let result = tokio::select! {
        result = sql2ddb_engine::run(&plan, &opts, progress.clone()) => result,
        _ = async {
            stop.stopped().await;
            tokio::time::sleep(last_resort).await
        } => {
            eprintln!(
                "exiting: the run did not end within {} s of the stop; the report is not written",
                last_resort.as_secs()
            );
            return sql2ddb_engine::report::EXIT_INTERRUPTED as u8;
        }
    };
    signals.abort();
    notes.abort();
    if let Some(b) = bars {
        b.abort();
        let _ = b.await;
    }
    match result {
        Ok(report) => {
            // The report on stdout (`run … > report.txt` keeps it), progress
            // and logs on stderr; with --json, stdout holds the JSON alone.
            let say = |text: &str| match args.json {
                true => eprintln!("{text}"),
                false => println!("{text}"),
            };
            say(&table::render(&report));
            if let Some(err) = &report.error {
                crate::failure::report_error(err, report.cause);
            }
            if let Some(hint) = how_to_continue(&args, &report) {
                say(&hint);
            }
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&report).expect("report serialises")
                );
            }
            let code = crate::failure::run_ended(&report);
            match slot {
                Some(anchor) => then_follow(&args, &plan, &opts, &report, anchor, code).await,
                None => code,
            }
        }
        Err(e) => {
            if let Some(crate::follow::Anchor::Slot(slot)) = slot {
                let head = crate::follow_report::command_head(
                    plan.file(),
                    args.endpoint.as_deref(),
                    args.region.as_deref(),
                    &args.runs_dir,
                );
                eprintln!("replication slot {slot} is kept: drop it with `{head} --slot {slot} --drop-slot`");
            }
            fail_job(&e)
        }
    }
}

/// `run --follow` once the full load ended: the follow, through the
/// engine's hand-over, when the load is complete; else what is kept and
/// how to go on. The follow's failure (or stop) wins over the full load's
/// rejects (2): no code of a kind is masked.
async fn then_follow(
    args: &RunArgs,
    plan: &sql2ddb_mapping::Plan,
    opts: &RunOptions,
    report: &RunReport,
    anchor: crate::follow::Anchor,
    code: u8,
) -> u8 {
    let flags = crate::follow_report::flag_words(&opts.sink_options().flags());
    if !matches!(report.status, RunStatus::Ok | RunStatus::Rejected) {
        let head = crate::follow_report::command_head(
            plan.file(),
            args.endpoint.as_deref(),
            args.region.as_deref(),
            &args.runs_dir,
        );
        eprintln!("{}", anchor.kept(&report.run_id, &head, &flags));
        return code;
    }
    let follow = sql2ddb_engine::follow::FollowOptions::after_full_load(
        plan,
        opts,
        report,
        args.follow.server_id,
    );
    let target = crate::follow::Target {
        plan,
        follow,
        runs_dir: args.runs_dir.clone(),
        summary_to: match args.json {
            true => crate::follow_report::SummaryTo::Stderr,
            false => crate::follow_report::SummaryTo::Stdout,
        },
        flags,
    };
    match crate::follow::run_follow(&target, &args.follow.stop).await {
        0 => code,
        followed => followed,
    }
}

/// What to run to go on with a run that ended before its end: interrupted,
/// throttled past its retry budget, or failed on an error once it was
/// reading.
fn how_to_continue(args: &RunArgs, report: &RunReport) -> Option<String> {
    let throttled;
    let (state, fixed) = match report.status {
        RunStatus::Interrupted => ("interrupted", ""),
        RunStatus::Throttled => {
            throttled = format!(
                "throttled: table {} kept refusing writes past the retry budget; no row is at fault. {} row(s) read are not written yet (pending)",
                report.table,
                crate::table::thousands(report.totals.pending)
            );
            (
                throttled.as_str(),
                "later (or with more capacity, or a larger --retry-budget), ",
            )
        }
        RunStatus::Failed if report.error.is_some() && report.totals.pages > 0 => {
            ("failed", "once the cause is fixed, ")
        }
        _ => return None,
    };
    let resume = report.progress_table.is_some();
    let (command, note) = continue_command(args, report, resume);
    Some(match resume {
        true => format!("{state}: {fixed}continue where it stopped with\n  {command}{note}"),
        false => format!(
            "{state}: this run kept no progress table, so it cannot be resumed; {fixed}running it again\n  {command}{note}\nrewrites the same items with the same values (nothing is duplicated). To make the next run resumable, pass --progress-table."
        ),
    })
}

/// The `sql2ddb run` command that goes on with this run (`resume`: from its
/// checkpoints; else from the start), with every option that decides where
/// it reads and writes — source, endpoint, region, runs directory, progress
/// table, queue — and those that set its pace, so that pasted as printed it
/// does what this one did. Secrets are not printed: a URL's password is
/// masked, and the note (a line of its own, or empty) says to put it back.
fn continue_command(args: &RunArgs, report: &RunReport, resume: bool) -> (String, String) {
    let mut words = vec![
        "sql2ddb".to_string(),
        "run".to_string(),
        shell_word(&args.mapping.display().to_string()),
    ];
    let mut masked = Vec::new();
    let mut option = |name: &str, value: &str| {
        words.push(name.to_string());
        words.push(shell_word(value));
    };
    let mut url = |name: &'static str, value: &str, option: &mut dyn FnMut(&str, &str)| {
        let shown = redact_secrets(value);
        if shown != value {
            masked.push(name);
        }
        option(name, &shown);
    };
    if resume {
        option("--resume", &report.run_id);
        if let Some(table) = &report.progress_table {
            option("--progress-table", table);
        }
    }
    if let Some(source) = &args.source {
        url("--source", source, &mut option);
    }
    if let Some(endpoint) = &args.endpoint {
        url("--endpoint", endpoint, &mut option);
    }
    if let Some(region) = &args.region {
        option("--region", region);
    }
    if args.runs_dir != Path::new(DEFAULT_RUNS_DIR) {
        option("--runs-dir", &args.runs_dir.display().to_string());
    }
    if let Some(queue) = report.queue.as_ref().or(args.distributed.queue.as_ref()) {
        url("--queue", queue, &mut option);
    }
    if let Some(sqs) = &args.distributed.sqs_endpoint {
        url("--sqs-endpoint", sqs, &mut option);
    }
    if !resume {
        match &args.only_rejects {
            Some(file) => option("--only-rejects", &file.display().to_string()),
            // The table holds this run's items now: a run again writes over them.
            None if !args.dry_run => option("--if-not-empty", "append"),
            None => {}
        }
    }
    let numbers = [
        ("--max-queued", args.distributed.max_queued),
        ("--concurrency", args.concurrency.map(|c| c as u64)),
        ("--max-wcu", args.max_wcu),
        ("--page-size", args.page_size.map(|p| p as u64)),
        ("--read-parallelism", args.read_parallelism.map(u64::from)),
        (
            "--source-connections",
            Some(u64::from(args.source_connections))
                .filter(|c| *c != u64::from(sql2ddb_engine::run::DEFAULT_SOURCE_CONNECTIONS)),
        ),
        (
            "--shutdown-grace",
            Some(args.shutdown_grace).filter(|g| *g != DEFAULT_SHUTDOWN_GRACE),
        ),
    ];
    for (name, value) in numbers {
        if let Some(v) = value {
            option(name, &v.to_string());
        }
    }
    if args.fixed_concurrency {
        words.push("--fixed-concurrency".to_string());
    }
    if let Some(budget) = args.budget.retry_budget {
        words.push("--retry-budget".to_string());
        words.push(sql2ddb_core::duration_text(budget));
    }
    if matches!(args.snapshot, SnapshotArg::None) {
        words.push("--snapshot".to_string());
        words.push("none".to_string());
    }
    if args.dry_run && !resume {
        words.push("--dry-run".to_string());
    }
    let note = match masked.is_empty() {
        true => String::new(),
        false => format!(
            "\n(passwords are not printed: put them back in {} where it shows ***)",
            masked.join(", ")
        ),
    };
    (words.join(" "), note)
}

/// `word` as a POSIX shell reads it back: as is when it holds nothing the
/// shell would interpret, else in single quotes.
pub(crate) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sql2ddb_engine::{EntityReport, SnapshotReport, WriterReport};

    use super::*;

    fn args(line: &[&str]) -> RunArgs {
        let mut argv = vec!["sql2ddb", "run", "m.toml"];
        argv.extend_from_slice(line);
        match crate::Cli::try_parse_from(argv).expect("parses").command {
            crate::Command::Run(args) => args,
            _ => unreachable!("a run"),
        }
    }

    fn report(status: RunStatus, progress_table: Option<&str>, pages: u64) -> RunReport {
        RunReport {
            run_id: "R1".into(),
            mapping: "shop.toml".into(),
            status,
            source: String::new(),
            table: "t".into(),
            endpoint: String::new(),
            local_data_file: None,
            table_created: false,
            queue: None,
            progress_table: progress_table.map(str::to_string),
            run_dir: String::new(),
            rejects_file: None,
            entities: Vec::new(),
            totals: EntityReport {
                pages,
                ..EntityReport::default()
            },
            writer: WriterReport::default(),
            pointers: Vec::new(),
            rejects_by_reason: Vec::new(),
            timeline: Default::default(),
            warnings: Vec::new(),
            table_emptied: None,
            error: (status == RunStatus::Failed).then(|| "DynamoDB: gone".to_string()),
            cause: None,
            snapshot: SnapshotReport::default(),
        }
    }

    #[test]
    fn the_resume_command_keeps_where_the_run_reads_and_writes_and_no_password() {
        let args = args(&[
            "--source",
            "postgres://app:s3cret@db.internal/shop",
            "--endpoint",
            "http://127.0.0.1:8000",
            "--region",
            "eu-west-1",
            "--runs-dir",
            "my runs",
            "--progress-table",
            "p",
            "--queue",
            "https://sqs.eu-west-1.amazonaws.com/1/q",
            "--sqs-endpoint",
            "http://127.0.0.1:4566",
            "--max-wcu",
            "100",
            "--snapshot",
            "none",
            "--fixed-concurrency",
            "--shutdown-grace",
            "5",
            "--json",
        ]);
        let hint = how_to_continue(&args, &report(RunStatus::Interrupted, Some("p"), 3))
            .expect("an interrupted run says how to continue");
        assert!(!hint.contains("s3cret"), "{hint}");
        for part in [
            "sql2ddb run m.toml --resume R1 --progress-table p",
            "--source 'postgres://app:***@db.internal/shop'",
            "--endpoint http://127.0.0.1:8000",
            "--region eu-west-1",
            "--runs-dir 'my runs'",
            "--queue https://sqs.eu-west-1.amazonaws.com/1/q",
            "--sqs-endpoint http://127.0.0.1:4566",
            "--max-wcu 100",
            "--shutdown-grace 5",
            "--fixed-concurrency",
            "--snapshot none",
            "put them back in --source",
        ] {
            assert!(hint.contains(part), "{part}:\n{hint}");
        }
        assert!(!hint.contains("--json"), "{hint}");
    }

    #[test]
    fn a_run_failed_while_writing_says_how_to_continue_and_one_that_never_read_does_not() {
        let args = args(&["--endpoint", "http://127.0.0.1:8000"]);
        let failed = how_to_continue(&args, &report(RunStatus::Failed, Some("p"), 3))
            .expect("a run that failed while writing can be continued");
        assert!(
            failed.contains("once the cause is fixed")
                && failed
                    .contains("--resume R1 --progress-table p --endpoint http://127.0.0.1:8000"),
            "{failed}"
        );
        let untracked = how_to_continue(&args, &report(RunStatus::Failed, None, 3)).unwrap();
        assert!(
            untracked.contains("cannot be resumed")
                && untracked.contains("sql2ddb run m.toml --endpoint http://127.0.0.1:8000"),
            "{untracked}"
        );
        assert_eq!(
            how_to_continue(&args, &report(RunStatus::Failed, Some("p"), 0)),
            None
        );
        assert_eq!(
            how_to_continue(&args, &report(RunStatus::Ok, Some("p"), 3)),
            None
        );
    }

    #[test]
    fn a_throttled_run_says_no_row_is_at_fault_and_resumes_with_its_budget() {
        let args = args(&["--progress-table", "p", "--retry-budget", "90s"]);
        let mut r = report(RunStatus::Throttled, Some("p"), 3);
        r.totals.pending = 1200;
        let hint = how_to_continue(&args, &r).expect("a throttled run can be continued");
        for part in [
            "throttled: table t kept refusing writes past the retry budget",
            "no row is at fault",
            "1,200 row(s) read are not written yet (pending)",
            "sql2ddb run m.toml --resume R1 --progress-table p",
            "--retry-budget 1m30s",
        ] {
            assert!(hint.contains(part), "{part}:\n{hint}");
        }
        assert_eq!(RunStatus::Throttled.exit_code(), 75);
    }

    #[test]
    fn words_are_quoted_only_when_the_shell_would_read_them_otherwise() {
        assert_eq!(shell_word("runs/2024-05"), "runs/2024-05");
        assert_eq!(shell_word("my runs"), "'my runs'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("$HOME"), "'$HOME'");
        assert_eq!(shell_word(""), "''");
    }
}
