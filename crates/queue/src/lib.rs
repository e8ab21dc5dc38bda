//! Work queues between the reader and the writers.
//!
//! This release has the in-process queue only: a bounded channel, so a slow
//! table slows the reader and memory stays flat whatever the table size.
//! The SQS queue and the `WorkQueue` trait shared by both come with
//! distributed runs.

use std::sync::Arc;

use sql2ddb_core::WorkBatch;
use tokio::sync::{mpsc, Mutex};

/// A bounded in-process queue of work batches, shared by one or more
/// producers and any number of consumers.
#[derive(Clone)]
pub struct MemoryQueue {
    tx: mpsc::Sender<WorkBatch>,
    rx: Arc<Mutex<mpsc::Receiver<WorkBatch>>>,
}

/// The queue was closed: no consumer will take the batch.
#[derive(Debug, thiserror::Error)]
#[error("the work queue is closed")]
pub struct QueueClosed;

impl MemoryQueue {
    /// A queue holding at most `capacity` batches before `push` waits.
    pub fn new(capacity: usize) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        MemoryQueue {
            tx,
            rx: Arc::new(Mutex::new(rx)),
        }
    }

    /// A producer handle; the queue ends for consumers once every producer
    /// handle (and the queue's own) is dropped.
    pub fn producer(&self) -> Producer {
        Producer {
            tx: self.tx.clone(),
        }
    }

    /// A consumer handle. Consumers share the batches: each goes to one of them.
    pub fn consumer(&self) -> Consumer {
        Consumer {
            rx: self.rx.clone(),
        }
    }
}

/// Sends batches into a [`MemoryQueue`].
#[derive(Clone)]
pub struct Producer {
    tx: mpsc::Sender<WorkBatch>,
}

impl Producer {
    /// Waits for room, then enqueues the batch.
    pub async fn push(&self, batch: WorkBatch) -> Result<(), QueueClosed> {
        self.tx.send(batch).await.map_err(|_| QueueClosed)
    }
}

/// Takes batches from a [`MemoryQueue`].
#[derive(Clone)]
pub struct Consumer {
    rx: Arc<Mutex<mpsc::Receiver<WorkBatch>>>,
}

impl Consumer {
    /// The next batch, or `None` once all producers are gone and the queue is empty.
    pub async fn pop(&self) -> Option<WorkBatch> {
        self.rx.lock().await.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(page: u64) -> WorkBatch {
        WorkBatch {
            run_id: "r".into(),
            entity: "e".into(),
            segment: 0,
            page,
            rows_read: 0,
            items: vec![],
        }
    }

    #[tokio::test]
    async fn every_batch_reaches_exactly_one_consumer_then_the_queue_ends() {
        let q = MemoryQueue::new(2);
        let producer = q.producer();
        let consumers: Vec<_> = (0..3).map(|_| q.consumer()).collect();
        drop(q);
        let send = tokio::spawn(async move {
            for page in 0..100 {
                producer.push(batch(page)).await.unwrap();
            }
        });
        let mut handles = Vec::new();
        for c in consumers {
            handles.push(tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(b) = c.pop().await {
                    got.push(b.page);
                }
                got
            }));
        }
        send.await.unwrap();
        let mut all: Vec<u64> = Vec::new();
        for h in handles {
            all.extend(h.await.unwrap());
        }
        all.sort();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
