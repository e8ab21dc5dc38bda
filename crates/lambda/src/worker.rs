//! The worker function: fed by the work queue's event source mapping.
//!
//! Each message's batch is written and recorded by the engine
//! ([`MessageWriter::write_message`], the write path of `sql2ddb worker`).
//! The answer lists exactly the messages that failed (a partial batch
//! response, `ReportBatchItemFailures`): the others are deleted, the failed
//! ones come back after the visibility timeout and, after the queue's
//! `maxReceiveCount`, go to its dead-letter queue.
//!
//! The writer, made once at the cold start, is this execution environment's
//! membership of its runs' fleets: it beats before and while it writes, so
//! the environments (and any `sql2ddb worker` of the same run) share the
//! write-capacity cap.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use sql2ddb_engine::serverless::MessageWriter;

use crate::Error;

/// Handles one event: writes every message's batch, concurrently.
pub async fn handle(
    writer: &MessageWriter,
    event: lambda_runtime::LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let writes = event.payload.records.into_iter().map(|m| async move {
        let id = m.message_id.unwrap_or_default();
        let result = match m.body {
            Some(body) => writer.write_message(&body).await,
            None => Err(sql2ddb_engine::EngineError::Worker(
                "message has no body".into(),
            )),
        };
        (id, result)
    });
    // Polled as each is woken (`join_all` of a few futures polls every one
    // of them on each wake-up, which cost the handler CPU per item); every
    // write ends before the answer is made.
    let done: Vec<_> =
        futures::StreamExt::collect(writes.collect::<futures::stream::FuturesUnordered<_>>()).await;
    let mut response = SqsBatchResponse::default();
    for (id, result) in done {
        match result {
            Ok(out) => tracing::debug!(
                message = %id, run = %out.run_id, entity = %out.entity,
                segment = out.segment, page = out.page, written = out.written,
                "batch written"
            ),
            Err(e) => {
                tracing::warn!(
                    message = %id,
                    error = %sql2ddb_engine::serverless::redact_secrets(&e.to_string()),
                    "batch not written; left for redelivery"
                );
                if id.is_empty() {
                    // Without its id the message cannot be named: fail the event.
                    return Err("a message without a message id failed".into());
                }
                response.add_failure(id);
            }
        }
    }
    Ok(response)
}
