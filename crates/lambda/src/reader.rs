//! The reader function: a run cut at the queue, in invocations of at most
//! 15 minutes chained by the function itself.
//!
//! Each invocation reads and enqueues pages until the time left is under
//! its margin ([`sql2ddb_engine::serverless::read_until`]), then asks the
//! Lambda service, through an [`Invoker`], to invoke the function again
//! with `{run_id, resume: true}`. The chain ends when every segment is read;
//! an invocation for a run already read does nothing and says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sql2ddb_engine::serverless::{
    read_until, update_until, JobFile, Plan, ReaderOutcome, UpdateJob,
};
use sql2ddb_engine::update::UpdateOptions;
use sql2ddb_engine::{IfNotEmpty, RunId};

use crate::{deadline_of, Error, Settings};

/// The reader's event.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReaderEvent {
    /// The mapping: inline TOML, a file path or an `s3://bucket/key` URL;
    /// default the function's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<String>,
    /// The run's id; a new run gets a new one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// Continue run `run_id` from its cursors.
    #[serde(default)]
    pub resume: bool,
}

/// What an invocation answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReaderResponse {
    /// The run.
    pub run_id: RunId,
    /// `finished`, `time_up`, `already_finished` or `failed`.
    pub outcome: String,
    /// Whether the next invocation was requested.
    pub reinvoked: bool,
    /// Rows this invocation read (for an update job: items matched).
    pub rows_read: u64,
    /// A line for people.
    pub message: String,
}

/// The future an [`Invoker`] returns.
pub type InvokeFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

/// How the reader asks for its next invocation: in production the Lambda
/// service's asynchronous `Invoke` of its own function.
pub trait Invoker: Send + Sync {
    /// Invokes the function asynchronously with `event`.
    fn invoke(&self, event: &ReaderEvent) -> InvokeFuture<'_>;
}

/// [`Invoker`] through the Lambda API (`InvocationType::Event`).
pub struct LambdaInvoker {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl LambdaInvoker {
    /// Invokes `function` (name or ARN) with `client`.
    pub fn new(client: aws_sdk_lambda::Client, function: impl Into<String>) -> Self {
        LambdaInvoker {
            client,
            function: function.into(),
        }
    }
}

impl Invoker for LambdaInvoker {
    fn invoke(&self, event: &ReaderEvent) -> InvokeFuture<'_> {
        let payload = serde_json::to_vec(event);
        Box::pin(async move {
            self.client
                .invoke()
                .function_name(&self.function)
                .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                .payload(aws_sdk_lambda::primitives::Blob::new(payload?))
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot invoke {} for the next part of the run: {}",
                        self.function,
                        aws_sdk_lambda::error::DisplayErrorContext(&e)
                    )
                })?;
            Ok(())
        })
    }
}

/// The reader's state across invocations.
pub struct Reader {
    /// The function's settings.
    pub settings: Settings,
    /// How it invokes itself.
    pub invoker: Arc<dyn Invoker>,
}

impl Reader {
    /// Handles one invocation: a migration's reader, or an update job's
    /// (`sql2ddb update --queue`) when the file is an update job.
    pub async fn handle(
        &self,
        event: lambda_runtime::LambdaEvent<ReaderEvent>,
    ) -> Result<ReaderResponse, Error> {
        let deadline = deadline_of(&event.context);
        let ev = event.payload;
        let mapping = self.settings.mapping_or(ev.mapping.as_deref())?;
        let env = |name: &str| std::env::var(name).ok();
        let file = crate::mapping::load_file(mapping, &self.settings.s3_options(), &env).await?;
        if ev.resume && ev.run_id.is_none() {
            return Err("to resume, the event gives the run_id".into());
        }
        let step = match file {
            JobFile::Mapping(plan) => self.read_mapping(&plan, &ev, deadline).await?,
            JobFile::Update(job) => self.read_job(&job, &ev, deadline).await?,
        };
        let (outcome, message) = match step.outcome {
            ReaderOutcome::Finished => {
                ("finished", "every segment is read and enqueued".to_string())
            }
            ReaderOutcome::TimeUp => (
                "time_up",
                format!(
                    "stopped {} ms before the deadline; the run continues in the next invocation",
                    step.margin_ms
                ),
            ),
            ReaderOutcome::AlreadyFinished => (
                "already_finished",
                "the run was read to its end already: nothing to do".to_string(),
            ),
            ReaderOutcome::Failed => (
                "failed",
                step.error
                    .clone()
                    .unwrap_or_else(|| "the run failed".into()),
            ),
        };
        if step.outcome == ReaderOutcome::Failed {
            // An error makes Lambda retry the event (a resume from the cursors).
            return Err(format!("run {}: {message}", step.run_id).into());
        }
        let reinvoked = step.outcome == ReaderOutcome::TimeUp;
        let rows_read = step.rows;
        if reinvoked {
            let next = ReaderEvent {
                mapping: ev.mapping,
                run_id: Some(step.run_id.clone()),
                resume: true,
            };
            self.invoker.invoke(&next).await?;
        }
        tracing::info!(run = %step.run_id, outcome, rows_read, "{message}");
        Ok(ReaderResponse {
            run_id: step.run_id,
            outcome: outcome.to_string(),
            reinvoked,
            rows_read,
            message,
        })
    }

    /// Reads and enqueues a migration's pages until the margin.
    async fn read_mapping(
        &self,
        plan: &Plan,
        ev: &ReaderEvent,
        deadline: std::time::Instant,
    ) -> Result<Step, Error> {
        let opts = sql2ddb_engine::RunOptions {
            run_id: ev.run_id.clone(),
            resume: ev.resume,
            ..self.settings.run_options()
        };
        let step = match read_until(plan, &opts, deadline, self.settings.reader_margin).await {
            Ok(step) => step,
            // The refusal names the function's setting, not the command line's flag.
            Err(sql2ddb_engine::EngineError::NotEmpty(refused)) => {
                let setting =
                    |c: IfNotEmpty| format!("{}={}", crate::settings::IF_NOT_EMPTY, c.name());
                return Err(refused.message(setting).into());
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Step {
            rows: step.report.as_ref().map_or(0, |r| r.totals.rows_read),
            error: step.report.and_then(|r| r.error),
            run_id: step.run_id,
            outcome: step.outcome,
            margin_ms: step.margin_ms,
        })
    }

    /// Reads an update job's table and sends the matching keys until the
    /// margin; rows are the items matched.
    async fn read_job(
        &self,
        job: &UpdateJob,
        ev: &ReaderEvent,
        deadline: std::time::Instant,
    ) -> Result<Step, Error> {
        let opts = UpdateOptions {
            run_id: ev.run_id.clone(),
            resume: ev.resume,
            ..self.settings.update_options()
        };
        let step = update_until(job, &opts, deadline, self.settings.reader_margin).await?;
        Ok(Step {
            rows: step.report.as_ref().map_or(0, |r| r.matched),
            error: step.report.and_then(|r| r.error),
            run_id: step.run_id,
            outcome: step.outcome,
            margin_ms: step.margin_ms,
        })
    }
}

/// What one invocation's read came to, a migration's or an update job's.
struct Step {
    run_id: RunId,
    outcome: ReaderOutcome,
    margin_ms: u64,
    rows: u64,
    error: Option<String>,
}
