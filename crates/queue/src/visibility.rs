//! Keeping a batch invisible while a worker is still writing it, so a slow
//! page is not handed to a second worker meanwhile.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::{AckHandle, WorkQueue};

/// The shortest interval between two extensions.
const MIN_INTERVAL: Duration = Duration::from_millis(200);

/// A task that extends one received batch's visibility to `visibility` every
/// `visibility / 2` until stopped (or dropped). Stop it before acknowledging
/// or releasing the batch.
///
/// A failed extension is logged and retried at the next tick: if the batch
/// does become visible again, another worker writes it a second time, which
/// is harmless (every write is idempotent).
pub struct VisibilityExtender {
    task: Option<JoinHandle<()>>,
}

impl VisibilityExtender {
    /// Starts extending `handle` on `queue`. Needs a tokio runtime.
    pub fn start<Q: WorkQueue + 'static>(
        queue: Arc<Q>,
        handle: AckHandle,
        visibility: Duration,
    ) -> VisibilityExtender {
        let interval = (visibility / 2).max(MIN_INTERVAL);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                if let Err(e) = queue.extend(&handle, visibility).await {
                    tracing::warn!(error = %e, "could not extend a batch's visibility");
                }
            }
        });
        VisibilityExtender { task: Some(task) }
    }

    /// Stops extending and waits until no extension is in progress.
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for VisibilityExtender {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::{Message, QueueDepth, QueueError, Received};

    /// Counts extensions; nothing else is called.
    #[derive(Default)]
    struct Counting {
        extends: AtomicU32,
    }

    impl WorkQueue for Counting {
        async fn send(&self, _: Vec<Message>) -> Result<usize, QueueError> {
            unreachable!()
        }
        async fn receive(&self, _: usize, _: Duration) -> Result<Vec<Received>, QueueError> {
            unreachable!()
        }
        async fn ack(&self, _: &AckHandle) -> Result<(), QueueError> {
            unreachable!()
        }
        async fn extend(&self, handle: &AckHandle, visibility: Duration) -> Result<(), QueueError> {
            assert_eq!(
                (handle.as_str(), visibility),
                ("h", Duration::from_secs(60))
            );
            self.extends.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn release(&self, _: &AckHandle) -> Result<(), QueueError> {
            unreachable!()
        }
        async fn depth(&self) -> Result<QueueDepth, QueueError> {
            unreachable!()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn extends_every_half_visibility_until_stopped() {
        let queue = Arc::new(Counting::default());
        let extender = VisibilityExtender::start(
            queue.clone(),
            AckHandle("h".into()),
            Duration::from_secs(60),
        );
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(queue.extends.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(queue.extends.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(queue.extends.load(Ordering::SeqCst), 3);
        extender.stop().await;
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert_eq!(queue.extends.load(Ordering::SeqCst), 3);
    }
}
