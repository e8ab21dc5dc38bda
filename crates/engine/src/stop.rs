//! Stopping a run cleanly: the first Ctrl-C or SIGTERM asks readers to stop
//! after the page they are reading, writers finish what was handed to them
//! (within a grace period), and the run still writes its report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// How long writers may take, once a stop is asked, to finish the pages
/// already handed to them before the run gives up on them (they stay
/// pending: a rerun or `--resume` writes them).
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// A request to stop, shared by whoever asks (the CLI's signal handler) and
/// the run's readers and writers.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopSignal {
    /// A signal nobody has raised yet.
    pub fn new() -> std::sync::Arc<StopSignal> {
        std::sync::Arc::new(StopSignal::default())
    }

    /// Asks the run to stop; idempotent.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether a stop was asked.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Resolves once a stop is asked.
    pub async fn stopped(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}
