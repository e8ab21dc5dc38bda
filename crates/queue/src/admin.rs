//! Queue admin: create a work queue with its dead-letter queue, move
//! dead-lettered messages back, count what each holds.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_sqs::types::QueueAttributeName;
use aws_sdk_sqs::Client;

use crate::error::call_err;
pub use crate::sqs::dead_letter_url;
use crate::sqs::{queue_counts, send_bodies, DEFAULT_ENTRY_RETRY, MAX_RECEIVE};
use crate::{QueueDepth, QueueError};
use sql2ddb_aws::sdk_message;

/// A sensible visibility timeout for workers: long enough for a page's
/// writes under throttling, short enough that a crashed worker's batch comes
/// back soon (a worker extends it while it is still writing).
pub const DEFAULT_VISIBILITY: Duration = Duration::from_secs(120);
/// Receives before SQS moves a message to the dead-letter queue.
pub const DEFAULT_MAX_RECEIVE_COUNT: u32 = 5;
/// How long both queues keep a message (the service's maximum, 14 days).
pub const RETENTION: Duration = Duration::from_secs(14 * 24 * 60 * 60);
/// Suffix of the dead-letter queue's name.
pub const DEAD_LETTER_SUFFIX: &str = "-dlq";

/// The URLs of a work queue and its dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueUrls {
    /// The work queue.
    pub queue: String,
    /// Its dead-letter queue.
    pub dead_letter: String,
}

async fn attribute(
    client: &Client,
    url: &str,
    name: QueueAttributeName,
) -> Result<String, QueueError> {
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(name.clone())
        .send()
        .await
        .map_err(|e| call_err("GetQueueAttributes", url, sdk_message(&e)))?;
    out.attributes()
        .and_then(|a| a.get(&name))
        .cloned()
        .ok_or_else(|| QueueError::Config {
            queue: url.to_string(),
            message: format!("has no {name} attribute"),
        })
}

/// Creates queue `name` and its dead-letter queue `name-dlq` (or finds them,
/// when they exist with the same settings): messages up to 1 MiB, kept 14
/// days, long polling by default, and a redrive policy that moves a message
/// to the dead-letter queue after `max_receive_count` receives.
pub async fn create_queue(
    client: &Client,
    name: &str,
    visibility: Duration,
    max_receive_count: u32,
) -> Result<QueueUrls, QueueError> {
    let dlq_name = format!("{name}{DEAD_LETTER_SUFFIX}");
    let common = [
        (
            QueueAttributeName::MaximumMessageSize,
            crate::MAX_MESSAGE_BYTES.to_string(),
        ),
        (
            QueueAttributeName::MessageRetentionPeriod,
            RETENTION.as_secs().to_string(),
        ),
    ];
    let dead_letter = client
        .create_queue()
        .queue_name(&dlq_name)
        .set_attributes(Some(HashMap::from(common.clone())))
        .send()
        .await
        .map_err(|e| call_err("CreateQueue", &dlq_name, sdk_message(&e)))?
        .queue_url
        .ok_or_else(|| {
            call_err(
                "CreateQueue",
                &dlq_name,
                "no queue URL in the answer".into(),
            )
        })?;
    let dlq_arn = attribute(client, &dead_letter, QueueAttributeName::QueueArn).await?;
    let policy = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": max_receive_count.max(1),
    });
    let mut attributes = HashMap::from(common);
    attributes.insert(
        QueueAttributeName::VisibilityTimeout,
        visibility.as_secs().max(1).to_string(),
    );
    attributes.insert(
        QueueAttributeName::ReceiveMessageWaitTimeSeconds,
        "20".to_string(),
    );
    attributes.insert(QueueAttributeName::RedrivePolicy, policy.to_string());
    let queue = client
        .create_queue()
        .queue_name(name)
        .set_attributes(Some(attributes))
        .send()
        .await
        .map_err(|e| call_err("CreateQueue", name, sdk_message(&e)))?
        .queue_url
        .ok_or_else(|| call_err("CreateQueue", name, "no queue URL in the answer".into()))?;
    Ok(QueueUrls { queue, dead_letter })
}

/// Moves every message of the dead-letter queue back to the work queue, body
/// unchanged, and returns how many moved. Each is sent before it is deleted,
/// so a crash in between leaves a duplicate (harmless: every write is
/// idempotent), never a loss.
pub async fn redrive(
    client: &Client,
    dead_letter_url: &str,
    queue_url: &str,
) -> Result<u64, QueueError> {
    let mut moved = 0u64;
    loop {
        // A long poll (not a short one) sees every server, so an empty answer means empty.
        let out = client
            .receive_message()
            .queue_url(dead_letter_url)
            .max_number_of_messages(MAX_RECEIVE as i32)
            .wait_time_seconds(1)
            .send()
            .await
            .map_err(|e| call_err("ReceiveMessage", dead_letter_url, sdk_message(&e)))?;
        let messages: Vec<(String, String)> = out
            .messages()
            .iter()
            .filter_map(|m| Some((m.receipt_handle()?.to_string(), m.body()?.to_string())))
            .collect();
        if messages.is_empty() {
            return Ok(moved);
        }
        let bodies = messages.iter().map(|(_, body)| body.clone()).collect();
        send_bodies(client, queue_url, bodies, DEFAULT_ENTRY_RETRY).await?;
        for (handle, _) in &messages {
            client
                .delete_message()
                .queue_url(dead_letter_url)
                .receipt_handle(handle)
                .send()
                .await
                .map_err(|e| call_err("DeleteMessage", dead_letter_url, sdk_message(&e)))?;
            moved += 1;
        }
    }
}

/// Approximate counts of a work queue and its dead-letter queue.
pub async fn depths(client: &Client, urls: &QueueUrls) -> Result<QueueDepth, QueueError> {
    let (visible, in_flight) = queue_counts(client, &urls.queue).await?;
    let (dead, _) = queue_counts(client, &urls.dead_letter).await?;
    Ok(QueueDepth {
        visible,
        in_flight,
        dead_letter: Some(dead),
    })
}

/// Deletes a queue (tests and `queue delete`); a missing queue is not an error.
pub async fn delete_queue(client: &Client, url: &str) -> Result<(), QueueError> {
    match client.delete_queue().queue_url(url).send().await {
        Ok(_) => Ok(()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_queue_does_not_exist()) =>
        {
            Ok(())
        }
        Err(e) => Err(call_err("DeleteQueue", url, sdk_message(&e))),
    }
}
