//! `sql2ddb queue`: create a work queue with its dead-letter queue, move
//! dead-lettered batches back, show depths, delete.

use std::time::Duration;

use sql2ddb_engine::queues::{QueueAdmin, DEFAULT_MAX_RECEIVE_COUNT, DEFAULT_VISIBILITY};
use sql2ddb_engine::EngineError;

use crate::limits;
use crate::outcome::Ended;

/// The exit codes of `sql2ddb queue`, for its --help.
pub const EXIT_CODES: &str = "\
Exit codes:
  0   done
  64  usage error: unknown option, missing argument, value out of range
  69  SQS refused, or could not be reached
  78  the queue cannot be used as asked (e.g. it has no dead-letter queue)";

/// `sql2ddb queue …`.
#[derive(clap::Subcommand)]
pub enum QueueCommand {
    /// Create queue NAME and its dead-letter queue NAME-dlq (or find them);
    /// prints both URLs.
    Create {
        /// Queue name.
        name: String,
        /// Seconds a received batch stays invisible to other workers (a
        /// worker extends it while still writing), 1..=43200.
        #[arg(
            long,
            value_name = "SECONDS",
            value_parser = limits::visibility_timeout(),
            default_value_t = DEFAULT_VISIBILITY.as_secs()
        )]
        visibility_timeout: u64,
        /// Receives before a batch moves to the dead-letter queue, 1..=1000.
        #[arg(
            long,
            value_name = "N",
            value_parser = limits::max_receive_count(),
            default_value_t = DEFAULT_MAX_RECEIVE_COUNT
        )]
        max_receive_count: u32,
        #[command(flatten)]
        sqs: SqsArgs,
    },
    /// Move every batch of the queue's dead-letter queue back to it (once
    /// the cause of the failures is fixed).
    Redrive {
        /// The work queue's URL.
        #[arg(long, value_name = "URL")]
        queue: String,
        #[command(flatten)]
        sqs: SqsArgs,
    },
    /// Show how many batches wait, are being written, and are dead-lettered.
    Depth {
        /// The work queue's URL.
        #[arg(long, value_name = "URL")]
        queue: String,
        #[command(flatten)]
        sqs: SqsArgs,
    },
    /// Delete the queue and its dead-letter queue.
    Delete {
        /// The work queue's URL.
        #[arg(long, value_name = "URL")]
        queue: String,
        #[command(flatten)]
        sqs: SqsArgs,
    },
}

/// Where SQS is.
#[derive(clap::Args)]
pub struct SqsArgs {
    /// SQS endpoint URL, for any SQS-compatible server (default: AWS).
    #[arg(long, value_name = "URL", env = "SQL2DDB_SQS_ENDPOINT")]
    sqs_endpoint: Option<String>,
    /// AWS region (default: the environment's, else the queue URL's).
    #[arg(long)]
    region: Option<String>,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs a queue command.
pub async fn queue(command: QueueCommand) -> Ended {
    run(command).await?;
    Ok(0)
}

fn print(json: bool, value: serde_json::Value, text: String) {
    match json {
        true => println!("{value}"),
        false => println!("{text}"),
    }
}

async fn run(command: QueueCommand) -> Result<(), EngineError> {
    let admin = |sqs: &SqsArgs, url: Option<&str>| {
        let (endpoint, region) = (sqs.sqs_endpoint.clone(), sqs.region.clone());
        let url = url.map(str::to_string);
        async move { QueueAdmin::connect(endpoint.as_deref(), region.as_deref(), url.as_deref()).await }
    };
    match command {
        QueueCommand::Create {
            name,
            visibility_timeout,
            max_receive_count,
            sqs,
        } => {
            let urls = admin(&sqs, None)
                .await?
                .create(
                    &name,
                    Duration::from_secs(visibility_timeout),
                    max_receive_count,
                )
                .await?;
            print(
                sqs.json,
                serde_json::json!({"queue": urls.queue, "dead_letter": urls.dead_letter}),
                format!(
                    "queue       {}\ndead-letter {}",
                    urls.queue, urls.dead_letter
                ),
            );
        }
        QueueCommand::Redrive { queue, sqs } => {
            let moved = admin(&sqs, Some(&queue)).await?.redrive(&queue).await?;
            print(
                sqs.json,
                serde_json::json!({"moved": moved}),
                format!(
                    "moved {} back to {queue}",
                    sql2ddb_core::shown::count(moved, "batch", "batches")
                ),
            );
        }
        QueueCommand::Depth { queue, sqs } => {
            let d = admin(&sqs, Some(&queue)).await?.depth(&queue).await?;
            print(
                sqs.json,
                serde_json::json!({"visible": d.visible, "in_flight": d.in_flight, "dead_letter": d.dead_letter}),
                format!(
                    "{} waiting, {} in flight, dead-letter {}",
                    d.visible,
                    d.in_flight,
                    d.dead_letter.map_or("none".to_string(), |n| n.to_string())
                ),
            );
        }
        QueueCommand::Delete { queue, sqs } => {
            admin(&sqs, Some(&queue)).await?.delete(&queue).await?;
            print(
                sqs.json,
                serde_json::json!({"deleted": queue}),
                format!("deleted {queue}"),
            );
        }
    }
    Ok(())
}
