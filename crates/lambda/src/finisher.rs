//! The finisher function: fed by the progress table's stream (new images).
//!
//! An event carries a burst of records; the runs they belong to are
//! collected first, so each run costs one check however many of its batch
//! records arrived ([`Finisher::check`]: one `GetItem`, and one Query of the
//! run's partition until it is done). The check that writes a run's `DONE`
//! record (a conditional put: only one can) publishes the announcement,
//! once; every later record of that run finds the record and does nothing.

use std::collections::BTreeSet;

use aws_lambda_events::event::dynamodb::Event;
use serde::{Deserialize, Serialize};
use sql2ddb_engine::serverless::{Completion, DoneRecord, Finisher};
use sql2ddb_engine::RunId;

use crate::Error;

/// What an invocation did.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FinisherResponse {
    /// Runs checked (once each).
    pub checked: Vec<RunId>,
    /// Runs found complete by this invocation, their `DONE` record written.
    pub completed: Vec<RunId>,
    /// Runs announced on the topic by this invocation.
    pub announced: Vec<RunId>,
}

/// The finisher's state across invocations.
pub struct FinisherHandler {
    /// The progress table's finisher.
    pub finisher: Finisher,
    /// Where completions are announced: the SNS client and topic.
    pub topic: Option<(aws_sdk_sns::Client, String)>,
}

/// The run of a stream record, when the record is a batch record or a
/// segment total (the records that can complete a run) of a run id.
fn run_of(record: &aws_lambda_events::event::dynamodb::EventRecord) -> Option<RunId> {
    let image = serde_json::to_value(&record.change.new_image).ok()?;
    let text = |name: &str| image.get(name)?.get("S")?.as_str().map(str::to_string);
    let sk = text("SK")?;
    if !(sk.starts_with("BATCH#") || sk.starts_with("TOTAL#")) {
        return None;
    }
    RunId::parse(text("PK")?.strip_prefix("RUN#")?).ok()
}

impl FinisherHandler {
    /// Handles one event.
    pub async fn handle(
        &self,
        event: lambda_runtime::LambdaEvent<Event>,
    ) -> Result<FinisherResponse, Error> {
        let runs: BTreeSet<RunId> = event.payload.records.iter().filter_map(run_of).collect();
        let mut response = FinisherResponse::default();
        for run in runs {
            response.checked.push(run.clone());
            match self.finisher.check(&run).await? {
                Completion::NewlyDone(done) => {
                    tracing::info!(run = %run, rows = done.rows, "run complete: DONE recorded");
                    response.completed.push(run.clone());
                    if self.announce(&done).await? {
                        response.announced.push(run);
                    }
                }
                Completion::AlreadyDone { .. } | Completion::Incomplete => {}
            }
        }
        Ok(response)
    }

    /// Publishes the completion of a run, once: only the check that wrote
    /// the `DONE` record calls it. A failed publish is logged and leaves the
    /// record's `announced` false (it is not retried: no announcement is
    /// ever sent twice).
    async fn announce(&self, done: &DoneRecord) -> Result<bool, Error> {
        let Some((sns, topic)) = &self.topic else {
            return Ok(false);
        };
        let message = serde_json::to_string(done)?;
        let sent = sns
            .publish()
            .topic_arn(topic)
            .subject(format!("sql2ddb run {} complete", done.run_id))
            .message(message)
            .send()
            .await;
        match sent {
            Ok(_) => {
                self.finisher.announced(&done.run_id).await?;
                Ok(true)
            }
            Err(e) => {
                tracing::error!(
                    run = %done.run_id,
                    error = %aws_sdk_sns::error::DisplayErrorContext(&e),
                    "the run is complete (DONE recorded) but its announcement could not be published"
                );
                Ok(false)
            }
        }
    }
}
