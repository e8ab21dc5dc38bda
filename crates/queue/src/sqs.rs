//! The SQS queue: batches travel as [`codec`] bodies through a standard queue.

use std::collections::HashSet;
use std::time::Duration;

use aws_sdk_sqs::types::{
    MessageSystemAttributeName, QueueAttributeName, SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use sql2ddb_aws::{sdk_message, Attempt, Retrier, RetryPolicy};

use crate::codec;
use crate::error::call_err;
use crate::parts::{encode_split, MAX_MESSAGE_BYTES};
use crate::retry::{attempt_of, gave_up_message, sdk_once};
pub use crate::retry::{DEFAULT_ENTRY_RETRY, RECEIVE_RETRY};
use crate::{AckHandle, Message, QueueDepth, QueueError, Received, WorkQueue};

/// Entries per `SendMessageBatch` call (the service's limit).
pub const MAX_BATCH_ENTRIES: usize = 10;
/// Messages per `ReceiveMessage` call (the service's limit).
pub const MAX_RECEIVE: usize = 10;
/// The longest long poll SQS allows.
pub const MAX_WAIT: Duration = Duration::from_secs(20);
/// The longest visibility SQS allows.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 60 * 60);

/// A standard SQS queue of work batches.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    url: String,
    max_message_bytes: usize,
    visibility: Duration,
    dead_letter_url: Option<String>,
    retry: RetryPolicy,
    receive_retry: RetryPolicy,
}

impl SqsQueue {
    /// Opens an existing queue: reads its visibility timeout, its largest
    /// message size (the smaller of it and [`MAX_MESSAGE_BYTES`] bounds our
    /// bodies) and its dead-letter queue from its redrive policy.
    pub async fn open(client: Client, url: impl Into<String>) -> Result<SqsQueue, QueueError> {
        let url = url.into();
        let attrs = client
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .map_err(|e| call_err("GetQueueAttributes", &url, sdk_message(&e)))?;
        let attrs = attrs.attributes().cloned().unwrap_or_default();
        let number = |name: QueueAttributeName| -> Option<u64> { attrs.get(&name)?.parse().ok() };
        let visibility =
            Duration::from_secs(number(QueueAttributeName::VisibilityTimeout).unwrap_or(30));
        let max_message_bytes = number(QueueAttributeName::MaximumMessageSize)
            .map(|n| (n as usize).min(MAX_MESSAGE_BYTES))
            .unwrap_or(MAX_MESSAGE_BYTES);
        let dead_letter_url = match attrs.get(&QueueAttributeName::RedrivePolicy) {
            Some(policy) => Some(dead_letter_url(&client, &url, policy).await?),
            None => None,
        };
        Ok(SqsQueue {
            client,
            url,
            max_message_bytes,
            visibility,
            dead_letter_url,
            retry: DEFAULT_ENTRY_RETRY,
            receive_retry: RECEIVE_RETRY,
        })
    }

    /// Replaces the retry of failed batch entries.
    pub fn with_entry_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Replaces the retry of a failed `ReceiveMessage` ([`RECEIVE_RETRY`]).
    pub fn with_receive_retry(mut self, retry: RetryPolicy) -> Self {
        self.receive_retry = retry;
        self
    }

    /// The queue URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The queue's own visibility timeout (what a received message gets).
    pub fn visibility_timeout(&self) -> Duration {
        self.visibility
    }

    /// The largest body this queue is sent.
    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// The dead-letter queue's URL, when the queue has a redrive policy.
    pub fn dead_letter_url(&self) -> Option<&str> {
        self.dead_letter_url.as_deref()
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends encoded bodies: in calls of at most [`MAX_BATCH_ENTRIES`] whose
    /// bodies total at most [`MAX_MESSAGE_BYTES`], re-sending failed entries.
    pub(crate) async fn send_bodies(&self, bodies: Vec<String>) -> Result<(), QueueError> {
        send_bodies(&self.client, &self.url, bodies, self.retry).await
    }

    async fn change_visibility(
        &self,
        handle: &AckHandle,
        visibility: Duration,
    ) -> Result<(), QueueError> {
        let secs = visibility.min(MAX_VISIBILITY).as_secs_f64().ceil() as i32;
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(handle.as_str())
            .visibility_timeout(secs)
            .send()
            .await
            .map_err(|e| call_err("ChangeMessageVisibility", &self.url, sdk_message(&e)))?;
        Ok(())
    }
}

/// Groups bodies into calls within SQS's limits (count and total size).
fn group_bodies(bodies: Vec<String>) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut size = 0;
    for body in bodies {
        let fits = groups
            .last()
            .is_some_and(|g| g.len() < MAX_BATCH_ENTRIES && size + body.len() <= MAX_MESSAGE_BYTES);
        if !fits {
            groups.push(Vec::new());
            size = 0;
        }
        size += body.len();
        groups.last_mut().expect("just pushed").push(body);
    }
    groups
}

/// Sends `bodies` in calls within SQS's limits; the entries a call reports
/// failed are sent again by the retry engine (a retry of part of the call),
/// a failed call is the SDK's to retry.
pub(crate) async fn send_bodies(
    client: &Client,
    url: &str,
    bodies: Vec<String>,
    retry: RetryPolicy,
) -> Result<(), QueueError> {
    for group in group_bodies(bodies) {
        let pending: Vec<(String, String)> = group
            .into_iter()
            .enumerate()
            .map(|(i, b)| (format!("m{i}"), b))
            .collect();
        let out = Retrier::new(retry)
            .run("SendMessageBatch", pending, |pending| {
                send_some(client, url, pending)
            })
            .await;
        out.map_err(|gave_up| match gave_up.error {
            Unsent::Call(e) => e,
            Unsent::Entries { left, last } => call_err(
                "SendMessageBatch",
                url,
                format!(
                    "{left} entries still failing after {} attempts, last: {last}",
                    gave_up.attempts
                ),
            ),
        })?;
    }
    Ok(())
}

/// Why entries of a `SendMessageBatch` were not sent.
enum Unsent {
    /// The call failed (after the SDK's retries), or SQS refused a message.
    Call(QueueError),
    /// The call reported this many entries failed, the last for this reason.
    Entries { left: usize, last: String },
}

/// One `SendMessageBatch` of `pending` (id, body): done when every entry
/// is reported sent, else the entries left to send again.
async fn send_some(
    client: &Client,
    url: &str,
    mut pending: Vec<(String, String)>,
) -> Attempt<(), Unsent, Vec<(String, String)>> {
    let entries = pending
        .iter()
        .map(|(id, body)| {
            SendMessageBatchRequestEntry::builder()
                .id(id)
                .message_body(body)
                .build()
                .expect("id and body are set")
        })
        .collect();
    let call = client
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await;
    let out = match call {
        Ok(out) => out,
        Err(e) => {
            let e = call_err("SendMessageBatch", url, sdk_message(&e));
            return Attempt::GiveUp(Unsent::Call(e));
        }
    };
    // An entry counts as sent only when the answer lists it as such.
    let sent: HashSet<&str> = out.successful().iter().map(|s| s.id()).collect();
    let before = pending.len();
    pending.retain(|(id, _)| !sent.contains(id.as_str()));
    if pending.is_empty() {
        return Attempt::Done(());
    }
    let describe = |f: &aws_sdk_sqs::types::BatchResultErrorEntry| {
        format!("{}: {}", f.code(), f.message().unwrap_or("no message"))
    };
    if let Some(f) = out.failed().iter().find(|f| f.sender_fault()) {
        let message = format!("message refused, {}", describe(f));
        return Attempt::GiveUp(Unsent::Call(call_err("SendMessageBatch", url, message)));
    }
    let last = out
        .failed()
        .iter()
        .find(|f| pending.iter().any(|(id, _)| id == f.id()))
        .map_or_else(|| "entries missing from the answer".to_string(), describe);
    tracing::debug!(
        queue = url,
        failed = pending.len(),
        "re-sending failed entries"
    );
    let error = Unsent::Entries {
        left: pending.len(),
        last,
    };
    match pending.len() < before {
        true => Attempt::RetryPart {
            rest: pending,
            throttled: false,
            error,
        },
        false => Attempt::Retry {
            work: pending,
            throttled: false,
            error,
        },
    }
}

/// The dead-letter queue's URL named by a redrive policy
/// (`{"deadLetterTargetArn": "arn:aws:sqs:REGION:ACCOUNT:NAME", …}`).
pub async fn dead_letter_url(
    client: &Client,
    queue_url: &str,
    policy: &str,
) -> Result<String, QueueError> {
    let bad = |message: String| QueueError::Config {
        queue: queue_url.to_string(),
        message,
    };
    let policy: serde_json::Value = serde_json::from_str(policy)
        .map_err(|e| bad(format!("redrive policy is not JSON: {e}")))?;
    let arn = policy["deadLetterTargetArn"]
        .as_str()
        .ok_or_else(|| bad("redrive policy has no deadLetterTargetArn".into()))?;
    let parts: Vec<&str> = arn.split(':').collect();
    let [_, _, "sqs", _, account, name] = parts[..] else {
        return Err(bad(format!(
            "dead-letter target {arn} is not an SQS queue ARN"
        )));
    };
    let out = client
        .get_queue_url()
        .queue_name(name)
        .queue_owner_aws_account_id(account)
        .send()
        .await
        .map_err(|e| call_err("GetQueueUrl", name, sdk_message(&e)))?;
    out.queue_url
        .ok_or_else(|| call_err("GetQueueUrl", name, "no queue URL in the answer".into()))
}

/// Approximate visible and in-flight counts of one queue.
pub(crate) async fn queue_counts(client: &Client, url: &str) -> Result<(u64, u64), QueueError> {
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| call_err("GetQueueAttributes", url, sdk_message(&e)))?;
    let get = |name: QueueAttributeName| -> u64 {
        out.attributes()
            .and_then(|a| a.get(&name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok((
        get(QueueAttributeName::ApproximateNumberOfMessages),
        get(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
    ))
}

impl WorkQueue for SqsQueue {
    async fn send(&self, messages: Vec<Message>) -> Result<usize, QueueError> {
        let mut bodies = Vec::with_capacity(messages.len());
        for message in &messages {
            bodies.extend(encode_split(message, self.max_message_bytes)?);
        }
        let n = bodies.len();
        self.send_bodies(bodies).await?;
        Ok(n)
    }

    /// Long-polls for up to `wait` (whole seconds, at most 20; under a second
    /// is a short poll). A failed call is retried by the retry engine with
    /// the queue's receive retry ([`RECEIVE_RETRY`]), the SDK making one
    /// attempt of each. A body that does not decode is left in the queue, so
    /// it reaches the dead-letter queue after `maxReceiveCount` receives
    /// instead of being lost or blocking the others.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Received>, QueueError> {
        let out = Retrier::new(self.receive_retry)
            .run("ReceiveMessage", (), |()| {
                let call = self
                    .client
                    .receive_message()
                    .queue_url(&self.url)
                    .max_number_of_messages(max.clamp(1, MAX_RECEIVE) as i32)
                    .wait_time_seconds(wait.min(MAX_WAIT).as_secs() as i32)
                    .message_system_attribute_names(
                        MessageSystemAttributeName::ApproximateReceiveCount,
                    )
                    .customize()
                    .config_override(sdk_once())
                    .send();
                async move { attempt_of("ReceiveMessage", call.await) }
            })
            .await
            .map_err(|g| call_err("ReceiveMessage", &self.url, gave_up_message(g)))?;
        let mut received = Vec::new();
        for message in out.messages() {
            let (Some(handle), Some(body)) = (message.receipt_handle(), message.body()) else {
                continue;
            };
            match codec::decode(body) {
                Ok(decoded) => received.push(Received {
                    message: decoded,
                    handle: AckHandle(handle.to_string()),
                    receive_count: message
                        .attributes()
                        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1),
                }),
                Err(e) => tracing::warn!(
                    queue = %self.url,
                    message_id = message.message_id().unwrap_or("?"),
                    error = %e,
                    "message is not a work batch; left for the dead-letter queue"
                ),
            }
        }
        Ok(received)
    }

    async fn ack(&self, handle: &AckHandle) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(handle.as_str())
            .send()
            .await
            .map_err(|e| call_err("DeleteMessage", &self.url, sdk_message(&e)))?;
        Ok(())
    }

    async fn extend(&self, handle: &AckHandle, visibility: Duration) -> Result<(), QueueError> {
        self.change_visibility(handle, visibility).await
    }

    async fn release(&self, handle: &AckHandle) -> Result<(), QueueError> {
        self.change_visibility(handle, Duration::ZERO).await
    }

    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let (visible, in_flight) = queue_counts(&self.client, &self.url).await?;
        let dead_letter = match &self.dead_letter_url {
            Some(dlq) => Some(queue_counts(&self.client, dlq).await?.0),
            None => None,
        };
        Ok(QueueDepth {
            visible,
            in_flight,
            dead_letter,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_grouped_by_count_and_total_size() {
        let small = vec!["x".repeat(10); 23];
        let groups = group_bodies(small);
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 3]);
        let big = vec!["x".repeat(400_000); 5];
        let groups = group_bodies(big);
        // Two of 400 KB fit 1 MiB, three do not.
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        let full = vec!["x".repeat(MAX_MESSAGE_BYTES); 2];
        assert_eq!(group_bodies(full).len(), 2);
        assert!(group_bodies(Vec::new()).is_empty());
    }
}
