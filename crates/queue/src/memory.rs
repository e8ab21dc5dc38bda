//! The in-process queue: bounded, so a slow table slows the reader and memory
//! stays flat whatever the table size.
//!
//! It implements [`WorkQueue`] with in-flight tracking (acknowledge, release)
//! but no visibility timeout: a batch held by a task of this process is only
//! lost with the process itself, and a run resumes from its cursors then.
//! [`Producer`] and [`Consumer`] are the simple push/pop handles of a run in
//! one process (a queue of [`sql2ddb_core::WorkBatch`]es there: an
//! in-process run has migration pages only); the queue ends for consumers when every producer handle (and
//! every [`MemoryQueue`] clone) is dropped, or on [`MemoryQueue::close`].

use std::collections::{HashMap, VecDeque};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use crate::{AckHandle, Message, QueueDepth, QueueError, Received, WorkQueue};

/// A bounded in-process queue of `T` ([`Message`]s behind [`WorkQueue`]), shared by one
/// or more producers and any number of consumers.
pub struct MemoryQueue<T> {
    sender: SenderGuard<T>,
}

impl<T> Clone for MemoryQueue<T> {
    fn clone(&self) -> Self {
        MemoryQueue {
            sender: self.sender.clone(),
        }
    }
}

/// The queue was closed: no consumer will take the batch.
#[derive(Debug, thiserror::Error)]
#[error("the work queue is closed")]
pub struct QueueClosed;

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Woken when a batch becomes available, one is acknowledged, or the queue closes.
    changed: Notify,
    /// One permit per free slot among newly sent batches; released batches do not wait.
    room: Semaphore,
}

struct State<T> {
    ready: VecDeque<Waiting<T>>,
    in_flight: HashMap<u64, Waiting<T>>,
    next_handle: u64,
    senders: usize,
    closed: bool,
}

struct Waiting<T> {
    batch: T,
    receives: u32,
    /// Whether the batch holds a slot of `room` (newly sent, not released).
    holds_room: bool,
}

/// Counts the handles that can still send; the last one dropped closes the queue.
struct SenderGuard<T>(Arc<Shared<T>>);

impl<T> Clone for SenderGuard<T> {
    fn clone(&self) -> Self {
        self.0.state.lock().expect("queue lock").senders += 1;
        SenderGuard(self.0.clone())
    }
}

impl<T> Drop for SenderGuard<T> {
    fn drop(&mut self) {
        let last = {
            let mut state = self.0.state.lock().expect("queue lock");
            state.senders -= 1;
            state.senders == 0
        };
        if last {
            close(&self.0);
        }
    }
}

fn close<T>(shared: &Shared<T>) {
    shared.state.lock().expect("queue lock").closed = true;
    shared.room.close();
    shared.changed.notify_waiters();
}

impl<T> MemoryQueue<T> {
    /// A queue holding at most `capacity` newly sent batches before `send` waits.
    pub fn new(capacity: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                in_flight: HashMap::new(),
                next_handle: 0,
                senders: 1,
                closed: false,
            }),
            changed: Notify::new(),
            room: Semaphore::new(capacity.max(1)),
        });
        MemoryQueue {
            sender: SenderGuard(shared),
        }
    }

    /// A producer handle; the queue ends for consumers once every producer
    /// handle (and the queue's own) is dropped.
    pub fn producer(&self) -> Producer<T> {
        Producer {
            sender: self.sender.clone(),
        }
    }

    /// A consumer handle. Consumers share the batches: each goes to one of them.
    pub fn consumer(&self) -> Consumer<T> {
        Consumer {
            shared: self.sender.0.clone(),
        }
    }

    /// Closes the queue now, whatever handles remain: sends fail, and
    /// receivers get [`QueueError::Closed`] once it is drained.
    pub fn close(&self) {
        close(&self.sender.0);
    }

    fn shared(&self) -> &Shared<T> {
        &self.sender.0
    }
}

async fn push<T>(shared: &Shared<T>, batch: T) -> Result<(), QueueError> {
    let permit = shared
        .room
        .acquire()
        .await
        .map_err(|_| QueueError::Closed)?;
    {
        let mut state = shared.state.lock().expect("queue lock");
        if state.closed {
            return Err(QueueError::Closed);
        }
        permit.forget();
        state.ready.push_back(Waiting {
            batch,
            receives: 0,
            holds_room: true,
        });
    }
    shared.changed.notify_waiters();
    Ok(())
}

/// Takes up to `max` batches, waiting until `deadline` (`None`: for ever) for the first.
async fn take(
    shared: &Shared<Message>,
    max: usize,
    deadline: Option<Instant>,
) -> Result<Vec<Received>, QueueError> {
    loop {
        // Register for wake-ups before looking, so none is missed in between.
        let mut changed = pin!(shared.changed.notified());
        changed.as_mut().enable();
        {
            let mut state = shared.state.lock().expect("queue lock");
            if !state.ready.is_empty() {
                let mut out = Vec::new();
                while out.len() < max.max(1) {
                    let Some(mut waiting) = state.ready.pop_front() else {
                        break;
                    };
                    if waiting.holds_room {
                        waiting.holds_room = false;
                        shared.room.add_permits(1);
                    }
                    waiting.receives += 1;
                    let id = state.next_handle;
                    state.next_handle += 1;
                    out.push(Received {
                        message: waiting.batch.clone(),
                        handle: AckHandle(id.to_string()),
                        receive_count: waiting.receives,
                    });
                    state.in_flight.insert(id, waiting);
                }
                return Ok(out);
            }
            if state.closed && state.in_flight.is_empty() {
                return Err(QueueError::Closed);
            }
        }
        match deadline {
            None => changed.await,
            Some(deadline) => {
                if tokio::time::timeout_at(deadline, changed).await.is_err() {
                    return Ok(Vec::new());
                }
            }
        }
    }
}

fn handle_id(handle: &AckHandle) -> Result<u64, QueueError> {
    handle
        .0
        .parse()
        .map_err(|_| QueueError::UnknownHandle(handle.0.clone()))
}

impl WorkQueue for MemoryQueue<Message> {
    async fn send(&self, messages: Vec<Message>) -> Result<usize, QueueError> {
        let n = messages.len();
        for message in messages {
            push(self.shared(), message).await?;
        }
        Ok(n)
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Received>, QueueError> {
        take(self.shared(), max, Instant::now().checked_add(wait)).await
    }

    async fn ack(&self, handle: &AckHandle) -> Result<(), QueueError> {
        let id = handle_id(handle)?;
        let removed = self
            .shared()
            .state
            .lock()
            .expect("queue lock")
            .in_flight
            .remove(&id);
        if removed.is_none() {
            return Err(QueueError::UnknownHandle(handle.0.clone()));
        }
        // A closed queue ends once nothing is in flight: tell waiting receivers.
        self.shared().changed.notify_waiters();
        Ok(())
    }

    async fn extend(&self, handle: &AckHandle, _visibility: Duration) -> Result<(), QueueError> {
        // Nothing times out in memory; only check that the batch is held.
        let id = handle_id(handle)?;
        if self
            .shared()
            .state
            .lock()
            .expect("queue lock")
            .in_flight
            .contains_key(&id)
        {
            Ok(())
        } else {
            Err(QueueError::UnknownHandle(handle.0.clone()))
        }
    }

    async fn release(&self, handle: &AckHandle) -> Result<(), QueueError> {
        let id = handle_id(handle)?;
        {
            let mut state = self.shared().state.lock().expect("queue lock");
            let waiting = state
                .in_flight
                .remove(&id)
                .ok_or_else(|| QueueError::UnknownHandle(handle.0.clone()))?;
            // First in line again: it has waited longest.
            state.ready.push_front(waiting);
        }
        self.shared().changed.notify_waiters();
        Ok(())
    }

    async fn depth(&self) -> Result<QueueDepth, QueueError> {
        let state = self.shared().state.lock().expect("queue lock");
        Ok(QueueDepth {
            visible: state.ready.len() as u64,
            in_flight: state.in_flight.len() as u64,
            dead_letter: None,
        })
    }
}

/// Sends batches into a [`MemoryQueue`].
pub struct Producer<T> {
    sender: SenderGuard<T>,
}

impl<T> Clone for Producer<T> {
    fn clone(&self) -> Self {
        Producer {
            sender: self.sender.clone(),
        }
    }
}

impl<T> Producer<T> {
    /// Waits for room, then enqueues the batch.
    pub async fn push(&self, batch: T) -> Result<(), QueueClosed> {
        push(&self.sender.0, batch).await.map_err(|_| QueueClosed)
    }
}

/// Takes batches from a [`MemoryQueue`], each acknowledged as it is taken.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Consumer<T> {
    fn clone(&self) -> Self {
        Consumer {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Consumer<T> {
    /// The next batch, or `None` once all producers are gone and the queue is empty.
    pub async fn pop(&self) -> Option<T> {
        // The batch is moved out, never cloned: unlike `receive`, nothing is
        // kept for an ack, and a page of items is costly to copy.
        let shared = &self.shared;
        loop {
            let mut changed = pin!(shared.changed.notified());
            changed.as_mut().enable();
            {
                let mut state = shared.state.lock().expect("queue lock");
                if let Some(waiting) = state.ready.pop_front() {
                    if waiting.holds_room {
                        shared.room.add_permits(1);
                    }
                    drop(state);
                    shared.changed.notify_waiters();
                    return Some(waiting.batch);
                }
                if state.closed && state.in_flight.is_empty() {
                    return None;
                }
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::{BatchPart, WorkBatch};

    use super::*;

    fn batch(page: u64) -> Message {
        Message::Migration(page_of(page))
    }

    fn page_of(page: u64) -> WorkBatch {
        WorkBatch {
            run_id: "r".parse().unwrap(),
            entity: "e".into(),
            segment: 0,
            page,
            part: BatchPart::WHOLE,
            pointers: Vec::new(),
            rows_read: 0,
            items: vec![],
        }
    }

    #[tokio::test]
    async fn every_batch_reaches_exactly_one_consumer_then_the_queue_ends() {
        let q = MemoryQueue::<WorkBatch>::new(2);
        let producer = q.producer();
        let consumers: Vec<_> = (0..3).map(|_| q.consumer()).collect();
        drop(q);
        let send = tokio::spawn(async move {
            for page in 0..100 {
                producer.push(page_of(page)).await.unwrap();
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

    #[tokio::test]
    async fn send_waits_for_room_while_the_queue_is_full() {
        let q = MemoryQueue::new(2);
        q.send(vec![batch(0), batch(1)]).await.unwrap();
        let third = q.send(vec![batch(2)]);
        let blocked = tokio::time::timeout(Duration::from_millis(50), third).await;
        assert!(blocked.is_err(), "a full queue let a third batch in");
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(got.len(), 1);
        q.send(vec![batch(2)]).await.unwrap();
        let depth = q.depth().await.unwrap();
        assert_eq!(
            (depth.visible, depth.in_flight, depth.dead_letter),
            (2, 1, None)
        );
    }

    #[tokio::test]
    async fn a_released_batch_comes_back_first_and_an_acked_one_never() {
        let q = MemoryQueue::new(10);
        q.send((0..3).map(batch).collect()).await.unwrap();
        let first = q.receive(2, Duration::ZERO).await.unwrap();
        assert_eq!(
            first.iter().map(|r| r.message.page()).collect::<Vec<_>>(),
            [0, 1]
        );
        q.extend(&first[0].handle, Duration::from_secs(30))
            .await
            .unwrap();
        q.ack(&first[0].handle).await.unwrap();
        q.release(&first[1].handle).await.unwrap();
        let again = q.receive(10, Duration::ZERO).await.unwrap();
        let pages: Vec<(u64, u32)> = again
            .iter()
            .map(|r| (r.message.page(), r.receive_count))
            .collect();
        assert_eq!(pages, [(1, 2), (2, 1)]);
        // A handle works once.
        let err = q.ack(&first[0].handle).await.unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::UnknownHandle);
        assert!(q.release(&first[1].handle).await.is_err());
    }

    #[tokio::test]
    async fn a_closed_queue_ends_only_once_nothing_is_left_in_flight() {
        let q = MemoryQueue::new(10);
        q.send(vec![batch(0)]).await.unwrap();
        q.close();
        assert_eq!(
            q.send(vec![batch(1)]).await.unwrap_err().kind(),
            crate::ErrorKind::Closed
        );
        let held = q.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(held.len(), 1);
        // Still in flight: the holder may release it, so the queue has not ended.
        assert!(q.receive(1, Duration::ZERO).await.unwrap().is_empty());
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move { q.receive(1, Duration::from_secs(60)).await })
        };
        tokio::task::yield_now().await;
        q.release(&held[0].handle).await.unwrap();
        let back = waiter.await.unwrap().unwrap();
        assert_eq!(back[0].message.page(), 0);
        q.ack(&back[0].handle).await.unwrap();
        let end = q.receive(1, Duration::from_secs(60)).await.unwrap_err();
        assert_eq!(end.kind(), crate::ErrorKind::Closed);
    }

    #[tokio::test]
    async fn receive_gives_up_after_its_wait_with_nothing() {
        let q = MemoryQueue::new(1);
        let got = q.receive(5, Duration::from_millis(20)).await.unwrap();
        assert!(got.is_empty());
    }
}
