//! The options of `sql2ddb run` for runs cut at the queue, resumed runs and
//! runs that keep their progress.

use sql2ddb_engine::RunOptions;

use crate::limits;

/// Queue, resume and progress options of `run`.
#[derive(clap::Args)]
pub struct DistributedArgs {
    /// Read and send every page to this SQS queue instead of writing it;
    /// `sql2ddb worker` processes write. Prints the run id; `sql2ddb status`
    /// and `verify` follow the run from anywhere.
    #[arg(long, value_name = "URL", conflicts_with = "dry_run")]
    pub queue: Option<String>,
    /// SQS endpoint URL, for any SQS-compatible server (default: AWS, with
    /// the usual AWS environment).
    #[arg(long, value_name = "URL", env = "SQL2DDB_SQS_ENDPOINT")]
    pub sqs_endpoint: Option<String>,
    /// Pause reading while the queue holds this many messages waiting (keeps
    /// it shallow when the workers fall behind); at least 1.
    #[arg(long, value_name = "N", requires = "queue", value_parser = limits::positive::<u64>)]
    pub max_queued: Option<u64>,
    /// Continue run RUN_ID after a crash: finished segments are skipped, the
    /// others restart from their cursor. A run that went through a queue goes
    /// on sending to it.
    #[arg(long, value_name = "RUN_ID", conflicts_with = "dry_run")]
    pub resume: Option<sql2ddb_engine::RunId>,
    /// Keep the run's progress in a DynamoDB table next to the target table
    /// (default name `<table>-sql2ddb-progress`), so it can be verified and
    /// resumed. Always on with --queue and --resume.
    #[arg(long, value_name = "NAME", num_args = 0..=1, default_missing_value = "", conflicts_with = "dry_run")]
    pub progress_table: Option<String>,
}

impl DistributedArgs {
    /// Sets the options these arguments stand for.
    pub fn apply(&self, opts: &mut RunOptions) {
        opts.queue = self.queue.clone();
        opts.sqs_endpoint = self.sqs_endpoint.clone();
        opts.max_queued = self.max_queued;
        opts.resume = self.resume.is_some();
        opts.run_id = Some(
            self.resume
                .clone()
                .unwrap_or_else(sql2ddb_engine::new_run_id),
        );
        opts.track_progress = self.progress_table.is_some();
        opts.progress_table = self.progress_table.clone().filter(|t| !t.is_empty());
    }
}
