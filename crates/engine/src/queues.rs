//! `sql2ddb queue`: a work queue's administration — create it with its
//! dead-letter queue, move dead-lettered batches back, show its depth,
//! delete both — through the same SQS client set-up as runs and workers.

use std::time::Duration;

pub use sql2ddb_queue::admin::{DEFAULT_MAX_RECEIVE_COUNT, DEFAULT_VISIBILITY};
pub use sql2ddb_queue::sqs::MAX_WAIT;
use sql2ddb_queue::{create_queue, delete_queue, redrive, SqsQueue, WorkQueue};
pub use sql2ddb_queue::{QueueDepth, QueueUrls};

use crate::error::EngineError;

/// An SQS endpoint, for queue administration.
pub struct QueueAdmin {
    client: sql2ddb_queue::SqsClient,
}

impl QueueAdmin {
    /// Connects to SQS at `endpoint` (default AWS); the region from
    /// `region`, else the environment, else `queue_url`'s.
    pub async fn connect(
        endpoint: Option<&str>,
        region: Option<&str>,
        queue_url: Option<&str>,
    ) -> Result<QueueAdmin, EngineError> {
        // The command's one AWS context; the client is made from it.
        let aws = sql2ddb_aws::AwsContext::load(region, endpoint.is_none()).await;
        let client = sql2ddb_queue::client_of(&aws, endpoint, queue_url)?;
        Ok(QueueAdmin { client })
    }

    /// Creates queue `name` and its dead-letter queue (or finds them).
    pub async fn create(
        &self,
        name: &str,
        visibility: Duration,
        max_receive_count: u32,
    ) -> Result<QueueUrls, EngineError> {
        Ok(create_queue(&self.client, name, visibility, max_receive_count).await?)
    }

    /// Moves every batch of the queue's dead-letter queue back to it;
    /// returns how many.
    pub async fn redrive(&self, queue_url: &str) -> Result<u64, EngineError> {
        let queue = SqsQueue::open(self.client.clone(), queue_url).await?;
        let dlq = queue.dead_letter_url().ok_or_else(|| {
            EngineError::Config(format!("queue {queue_url} has no dead-letter queue"))
        })?;
        Ok(redrive(&self.client, dlq, queue_url).await?)
    }

    /// Batches waiting, being written, and dead-lettered.
    pub async fn depth(&self, queue_url: &str) -> Result<QueueDepth, EngineError> {
        let queue = SqsQueue::open(self.client.clone(), queue_url).await?;
        Ok(queue.depth().await?)
    }

    /// Deletes the queue and its dead-letter queue.
    pub async fn delete(&self, queue_url: &str) -> Result<(), EngineError> {
        let queue = SqsQueue::open(self.client.clone(), queue_url).await?;
        if let Some(dlq) = queue.dead_letter_url() {
            delete_queue(&self.client, dlq).await?;
        }
        Ok(delete_queue(&self.client, queue_url).await?)
    }
}
