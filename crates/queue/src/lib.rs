//! Work queues between the reader and the writers.
//!
//! [`WorkQueue`] is what both sides see: send messages (a [`Message`] is a
//! page of a migration or of an update job); receive some, each with an
//! [`AckHandle`]; acknowledge one once its items, pointers and progress
//! record are written; extend its visibility while still writing it; release it
//! to be taken again at once. Two queues implement it:
//! - [`MemoryQueue`], a bounded in-process queue, so a slow table slows the
//!   reader and memory stays flat whatever the table size;
//! - [`SqsQueue`], for runs cut at the queue: one process reads and sends, any
//!   number of workers on any machines receive and write. A message not
//!   acknowledged becomes visible again after the queue's visibility timeout,
//!   and after the queue's `maxReceiveCount` SQS moves it to the dead-letter
//!   queue ([`admin::create_queue`] makes both, [`admin::redrive`] moves
//!   messages back).
//!
//! Messages are encoded by [`codec`]: versioned and compressed; [`parts`]
//! splits a page by items when it would exceed SQS's 1 MiB, never drops it.

#![warn(missing_docs)]

use std::future::Future;
use std::time::Duration;

pub mod admin;
pub mod client;
pub mod codec;
pub mod error;
mod head;
pub mod memory;
pub mod message;
pub mod parts;
mod retry;
pub mod sqs;
pub mod visibility;

pub use admin::{create_queue, delete_queue, depths, redrive, QueueUrls};
/// The SQS client type [`connect`] builds.
pub use aws_sdk_sqs::Client as SqsClient;
pub use client::{client_of, connect};
pub use codec::CodecError;
pub use error::{ErrorKind, QueueError};
pub use memory::{Consumer, MemoryQueue, Producer, QueueClosed};
pub use message::Message;
pub use parts::{encode_split, MAX_MESSAGE_BYTES};
pub use sql2ddb_aws::RetryPolicy;
pub use sqs::{SqsQueue, DEFAULT_ENTRY_RETRY, RECEIVE_RETRY};
pub use visibility::VisibilityExtender;

/// Identifies one delivery of one batch, for [`WorkQueue::ack`],
/// [`WorkQueue::extend`] and [`WorkQueue::release`] (an SQS receipt handle,
/// or the in-memory queue's own number).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AckHandle(pub String);

impl AckHandle {
    /// The handle as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A message taken from a queue, invisible to other receivers until it is
/// acknowledged, released, or its visibility runs out.
#[derive(Debug, Clone)]
pub struct Received {
    /// The message.
    pub message: Message,
    /// The delivery's handle.
    pub handle: AckHandle,
    /// How many times the batch has been received, this time included.
    pub receive_count: u32,
}

/// How many messages a queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueDepth {
    /// Waiting to be received.
    pub visible: u64,
    /// Received and neither acknowledged nor visible again yet.
    pub in_flight: u64,
    /// In the dead-letter queue, when the queue has one.
    pub dead_letter: Option<u64>,
}

/// A queue of work batches with at-least-once delivery.
///
/// A receiver acknowledges a batch only after everything it covers is written;
/// until then a crash, a [`release`](WorkQueue::release) or the end of its
/// visibility hands the batch to another receiver.
pub trait WorkQueue: Send + Sync {
    /// Enqueues the messages (splitting any that do not fit one message);
    /// returns how many messages were sent. `Ok` means every page is in the
    /// queue, which is when a reader may advance its cursor past them.
    fn send(
        &self,
        messages: Vec<Message>,
    ) -> impl Future<Output = Result<usize, QueueError>> + Send;

    /// Takes up to `max` messages, waiting up to `wait` for the first one;
    /// an empty list when none came in time.
    fn receive(
        &self,
        max: usize,
        wait: Duration,
    ) -> impl Future<Output = Result<Vec<Received>, QueueError>> + Send;

    /// Removes a received batch for good: it is written.
    fn ack(&self, handle: &AckHandle) -> impl Future<Output = Result<(), QueueError>> + Send;

    /// Keeps a received batch invisible for `visibility` from now.
    fn extend(
        &self,
        handle: &AckHandle,
        visibility: Duration,
    ) -> impl Future<Output = Result<(), QueueError>> + Send;

    /// Makes a received batch visible again now, for another receiver.
    fn release(&self, handle: &AckHandle) -> impl Future<Output = Result<(), QueueError>> + Send;

    /// How many messages the queue holds (approximate for SQS).
    fn depth(&self) -> impl Future<Output = Result<QueueDepth, QueueError>> + Send;
}
