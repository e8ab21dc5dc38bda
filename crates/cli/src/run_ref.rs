//! The run `status` and `verify` look at: its id, its progress table and
//! where to reach it. Shared by the counts (`verify.rs`) and `--deep`
//! (`deep.rs`), so neither imports the other's arguments.

use std::path::PathBuf;

use crate::limits;

/// Where a run keeps its files (its report, rejects, checkpoints) unless
/// `--runs-dir` says otherwise: `run`, `update`, `follow` and the hints
/// they print share it.
pub(crate) const DEFAULT_RUNS_DIR: &str = "sql2ddb-runs";

/// Which run, and where its progress table is.
#[derive(clap::Args)]
pub struct StatusArgs {
    /// The run id (`run` prints it; `sql2ddb runs` lists them). `latest`,
    /// or none, is the newest run of the mapping in --runs-dir. With
    /// --deep: the run whose directory gets `diff.jsonl` (and holds its
    /// `--endpoint local` data); none is a new directory, except with the
    /// `local` endpoint, where it is the newest run.
    #[arg(long, value_name = "RUN_ID|latest")]
    pub run: Option<String>,
    /// The run's mapping, for its table, endpoint and region (not needed
    /// with --progress-table and --endpoint).
    pub mapping: Option<PathBuf>,
    /// The progress table (default: the one the run's report names, else
    /// `<target table>-sql2ddb-progress`).
    #[arg(long, value_name = "NAME", env = "SQL2DDB_PROGRESS_TABLE")]
    pub progress_table: Option<String>,
    /// DynamoDB endpoint URL, overriding the mapping's (default: AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// SQS endpoint URL, for the run's queue depths (default: AWS).
    #[arg(long, value_name = "URL", env = "SQL2DDB_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,
    /// Poll until every row is accounted for.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between two polls with --watch (at least 1).
    #[arg(long, value_name = "SECONDS", value_parser = limits::positive::<u64>, default_value_t = 5)]
    pub interval: u64,
    /// With --watch, give up after this many seconds (at least 1).
    #[arg(long, value_name = "SECONDS", value_parser = limits::positive::<u64>)]
    pub timeout: Option<u64>,
    /// Print each state as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where run directories are: with `--endpoint local`, the run's
    /// directory holds the table's data; with --deep, `diff.jsonl` goes into
    /// the run's directory (a new one without --run).
    #[arg(long, value_name = "DIR", default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
}
