//! `sql2ddb worker`: writes the batches of an SQS queue until told to stop.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sql2ddb_core::shown::count;
use sql2ddb_engine::worker::{
    SqsWorker, StopReason, Worker, WorkerOptions, WorkerReport, WorkerSetup,
};
use sql2ddb_engine::{EngineError, RunOptions};
use sql2ddb_mapping::{UpdateJob, DEFAULT_CONCURRENCY};

use crate::outcome::{Ended, Output};
use crate::{limits, load};

/// Arguments of `sql2ddb worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The mapping of the runs it writes: target table, keys, endpoint,
    /// region and [writer] limits (its source is not used). A worker given
    /// the mapping also applies `sql2ddb update --queue` batches of its
    /// table; one given an update job's file applies those only.
    pub mapping: PathBuf,
    /// The SQS queue URL the run sends to.
    #[arg(long, value_name = "URL")]
    pub queue: String,
    /// SQS endpoint URL, for any SQS-compatible server (default: AWS).
    #[arg(long, value_name = "URL", env = "SQL2DDB_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,
    /// DynamoDB endpoint URL, overriding the mapping's (default: AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// The progress table (default: `<target table>-sql2ddb-progress`).
    #[arg(long, value_name = "NAME", env = "SQL2DDB_PROGRESS_TABLE")]
    pub progress_table: Option<String>,
    /// Batches written at once, 1..=256 (default: the mapping's [writer]
    /// concurrency).
    #[arg(long, value_parser = limits::concurrency())]
    pub concurrency: Option<usize>,
    /// Write units per second for this worker, overriding the mapping's
    /// max_wcu; 1..=1000000000.
    #[arg(long, value_parser = limits::max_wcu())]
    pub max_wcu: Option<u64>,
    /// Exit once every run it has seen (and every --run) is complete.
    #[arg(long)]
    pub until_done: bool,
    /// A run to wait for with --until-done, before any of its batches arrive.
    #[arg(long = "run", value_name = "RUN_ID")]
    pub runs: Vec<sql2ddb_engine::RunId>,
    /// Exit after this many seconds without a batch (0: once the queue is
    /// drained).
    #[arg(long, value_name = "SECONDS")]
    pub idle_exit: Option<u64>,
    /// Longest wait for messages per receive (long poll), 1..=20.
    #[arg(long, value_name = "SECONDS", value_parser = limits::poll(), default_value_t = 10)]
    pub poll: u64,
    /// On SIGTERM or Ctrl-C, seconds the batches being written get to finish
    /// before they are released to other workers.
    #[arg(long, value_name = "SECONDS", default_value_t = 20)]
    pub shutdown_grace: u64,
    /// Where the worker's directory (its rejects file) is created.
    #[arg(long, default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
    /// Print what it did as one JSON object on stdout when it stops.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub budget: crate::budget::RetryBudgetArg,
}

/// The exit codes of `sql2ddb worker`, for its --help.
pub const EXIT_CODES: &str = "\
Exit codes:
  0   stopped as asked (--until-done, --idle-exit, SIGTERM or Ctrl-C)
  1   a batch could not be handled
  64  usage error: unknown option, missing argument, value out of range
  69  SQS or DynamoDB could not be reached, or refused (the queue kept failing)
  74  a file could not be read or written (the mapping, the rejects file)
  75  DynamoDB kept refusing a batch's writes (throttling) past the retry
      budget (--retry-budget): the batch stays on the queue (it comes back
      after the visibility timeout) and the worker stops taking batches;
      start it again later
  78  the mapping or job file is invalid or does not fit its table, or the
      queue cannot be used as configured";

/// SIGTERM or Ctrl-C, whichever comes first.
async fn stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::warn!("stopping: no new batches; those being written finish or are released");
}

/// A worker of the runs of the mapping at `args.mapping`, and how many
/// batches it writes at once.
async fn connect_mapping(args: &WorkerArgs) -> Result<(Arc<SqsWorker>, usize), EngineError> {
    let plan = load(&args.mapping, None)?;
    let concurrency = args.concurrency.unwrap_or(plan.writer.concurrency);
    let worker = Worker::connect(&plan, &setup(args, concurrency)).await?;
    Ok((Arc::new(worker), concurrency))
}

/// A worker of an update job's batches (`text` is the job's file).
async fn connect_job(
    text: &str,
    args: &WorkerArgs,
) -> Result<(Arc<SqsWorker>, usize), EngineError> {
    let job = UpdateJob::parse(text, &args.mapping, &crate::env)?;
    let concurrency = args.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    let worker = Worker::connect_job(&job, &setup(args, concurrency)).await?;
    Ok((Arc::new(worker), concurrency))
}

fn setup(args: &WorkerArgs, concurrency: usize) -> WorkerSetup {
    WorkerSetup {
        queue: args.queue.clone(),
        run: RunOptions {
            sqs_endpoint: args.sqs_endpoint.clone(),
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            progress_table: args.progress_table.clone(),
            runs_dir: args.runs_dir.clone(),
            concurrency: Some(concurrency),
            max_wcu: args.max_wcu,
            retry_budget: args.budget.retry_budget,
            ..RunOptions::default()
        },
    }
}

/// `sql2ddb worker`.
pub async fn work(args: WorkerArgs) -> Ended {
    let text = crate::read(&args.mapping)?;
    let (worker, concurrency) = match UpdateJob::is_job_file(&text) {
        true => connect_job(&text, &args).await?,
        false => connect_mapping(&args).await?,
    };
    let opts = WorkerOptions {
        concurrency,
        poll: Duration::from_secs(args.poll),
        until_done: args.until_done,
        runs: args.runs.clone(),
        idle_exit: args.idle_exit.map(Duration::from_secs),
        grace: Duration::from_secs(args.shutdown_grace),
    };
    let report = worker.work(&opts, stop_signal()).await?;
    // The summary is the result: on stdout, unless --json has it.
    let output = Output::new(args.json);
    output.say(&summary(&report));
    output.json(&report);
    Ok(match report.stopped {
        StopReason::Throttled => throttled(&args, &report),
        _ => 0,
    })
}

/// A worker that stopped because the table kept refusing a batch: what
/// the table said, where the batches are, how to go on; exit 75.
fn throttled(args: &WorkerArgs, report: &WorkerReport) -> u8 {
    let error = report
        .error
        .as_deref()
        .unwrap_or("the table kept refusing writes");
    crate::failure::report_error(
        &format!("DynamoDB: {error}"),
        Some(sql2ddb_engine::Cause::Dynamo(
            sql2ddb_engine::DynamoErrorKind::Call,
            Some(sql2ddb_engine::DynamoFailure::Throttled),
        )),
    );
    let mut command = vec![
        "sql2ddb".to_string(),
        "worker".to_string(),
        crate::run::resume::shell_word(&args.mapping.display().to_string()),
        "--queue".to_string(),
        crate::run::resume::shell_word(&args.queue),
    ];
    let options = [
        ("--sqs-endpoint", args.sqs_endpoint.clone()),
        ("--endpoint", args.endpoint.clone()),
        ("--region", args.region.clone()),
        ("--progress-table", args.progress_table.clone()),
        ("--concurrency", args.concurrency.map(|c| c.to_string())),
        ("--max-wcu", args.max_wcu.map(|w| w.to_string())),
        (
            "--retry-budget",
            args.budget.retry_budget.map(sql2ddb_core::duration_text),
        ),
    ];
    for (name, value) in options {
        if let Some(v) = value {
            command.push(name.to_string());
            command.push(crate::run::resume::shell_word(
                &sql2ddb_core::redact_secrets(&v),
            ));
        }
    }
    if args.until_done {
        command.push("--until-done".to_string());
    }
    eprintln!(
        "throttled: {} left on the queue, not written and not rejected; SQS delivers {} again after the queue's visibility timeout. Start a worker again later (or with more capacity, or a larger --retry-budget):\n  {}",
        count(report.throttled, "batch the table kept refusing is", "batches the table kept refusing are"),
        if report.throttled == 1 { "it" } else { "them" },
        command.join(" ")
    );
    crate::failure::EXIT_TEMPFAIL
}

/// What a worker did, in one line.
fn summary(report: &WorkerReport) -> String {
    let why = match report.stopped {
        StopReason::Done => "every run it watched is complete",
        StopReason::Idle => "no batch came for the idle time",
        StopReason::Signal => "asked to stop",
        StopReason::Throttled => "the table kept refusing writes past the retry budget",
    };
    let fleet = match report.fleet_workers {
        0 | 1 => String::new(),
        n => format!("; up to {n} workers wrote its runs at once, sharing the write-capacity cap"),
    };
    format!(
        "worker stopped, {why}: {}, {}, {} written, {} rejected, {} left for redelivery, {} released{fleet}",
        count(report.messages, "batch", "batches"),
        count(report.rows, "row", "rows"),
        count(report.items_written, "item", "items"),
        crate::table::thousands(report.rejected),
        crate::table::thousands(report.left),
        crate::table::thousands(report.released),
    )
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    fn report(messages: u64, stopped: StopReason) -> WorkerReport {
        WorkerReport {
            messages,
            rows: messages * 1000,
            items_written: 1,
            rejected: 0,
            left: 0,
            throttled: 0,
            released: 2,
            runs: Vec::new(),
            fleet_workers: 1,
            stopped,
            error: None,
            rejects_file: String::new(),
        }
    }

    #[test]
    fn the_summary_says_why_in_words_and_counts_in_the_singular_for_one() {
        assert_eq!(
            summary(&report(1, StopReason::Done)),
            "worker stopped, every run it watched is complete: 1 batch, 1,000 rows, 1 item written, 0 rejected, 0 left for redelivery, 2 released"
        );
        let idle = summary(&report(3, StopReason::Idle));
        assert!(
            idle.starts_with(
                "worker stopped, no batch came for the idle time: 3 batches, 3,000 rows"
            ),
            "{idle}"
        );
        assert!(summary(&report(0, StopReason::Signal)).contains("asked to stop: 0 batches"));
        let fleet = WorkerReport {
            fleet_workers: 4,
            ..report(2, StopReason::Done)
        };
        assert!(
            summary(&fleet).ends_with(
                "2 released; up to 4 workers wrote its runs at once, sharing the write-capacity cap"
            ),
            "{}",
            summary(&fleet)
        );
    }
}
