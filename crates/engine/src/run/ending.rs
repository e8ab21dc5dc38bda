//! How a run's readers and writers end. Together, once every page is read
//! and written; early when a stop is asked (Ctrl-C, SIGTERM: no new page is
//! read, the writers get the grace period for the pages handed to them,
//! then every task is abandoned and its pages stay pending); early too when
//! a writer fails (the table or the progress table cannot be written: no
//! new page is read or taken, the pages being written are finished).

use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinHandle, JoinSet};

use crate::error::EngineError;
use crate::stop::StopSignal;

/// The signals a run's tasks end by.
pub(super) struct Ending {
    /// The user's stop, if the run can be stopped.
    pub asked: Option<Arc<StopSignal>>,
    /// Raised by a stop or a writer's failure: readers end after their
    /// page, and a page waiting for room in the queue stays pending.
    pub halt: Arc<StopSignal>,
    /// Raised by a writer's failure: writers take no new page.
    pub failed: Arc<StopSignal>,
    /// How long the tasks may take once a stop is asked.
    pub grace: Duration,
}

impl Ending {
    /// Signals for a run stopped by `asked`, with `grace` once it is raised.
    pub fn new(asked: Option<Arc<StopSignal>>, grace: Duration) -> Ending {
        Ending {
            asked,
            halt: StopSignal::new(),
            failed: StopSignal::new(),
            grace,
        }
    }

    /// Whether the run ended early (a stop, or a writer's failure).
    pub fn early(&self) -> bool {
        self.halt.is_stopped()
    }

    /// Waits for the readers and the writers; returns the readers' result
    /// and the writers' (their first error). A writer's error halts the
    /// readers and the other writers; a stop halts the readers at once and
    /// abandons every task after the grace period.
    pub async fn wait(
        &self,
        mut reading: JoinHandle<Result<(), EngineError>>,
        mut writers: JoinSet<Result<(), EngineError>>,
    ) -> (Result<(), EngineError>, Result<(), EngineError>) {
        let asked = async {
            match &self.asked {
                Some(s) => s.stopped().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(asked);
        let give_up = tokio::time::sleep(Duration::MAX);
        tokio::pin!(give_up);
        let (mut read, mut write) = (None, Ok(()));
        let (mut writers_done, mut stopping, mut given_up) = (false, false, false);
        while read.is_none() || !writers_done {
            tokio::select! {
                r = &mut reading, if read.is_none() => read = Some(match r {
                    Ok(r) => r,
                    Err(e) if e.is_cancelled() => Ok(()),
                    Err(panic) => std::panic::resume_unwind(panic.into_panic()),
                }),
                joined = writers.join_next(), if !writers_done => match joined {
                    None => writers_done = true,
                    Some(Ok(Ok(()))) => {}
                    Some(Ok(Err(e))) => {
                        self.failed.stop();
                        self.halt.stop();
                        if write.is_ok() {
                            write = Err(e);
                        }
                    }
                    Some(Err(e)) if e.is_cancelled() => {}
                    Some(Err(panic)) => std::panic::resume_unwind(panic.into_panic()),
                },
                _ = &mut asked, if !stopping => {
                    stopping = true;
                    self.halt.stop();
                    give_up.as_mut().reset(tokio::time::Instant::now() + self.grace);
                }
                _ = &mut give_up, if stopping && !given_up => {
                    tracing::warn!(
                        grace_seconds = self.grace.as_secs(),
                        "the pages being written did not finish within the stop grace period; they stay pending"
                    );
                    given_up = true;
                    writers.abort_all();
                    reading.abort();
                }
            }
        }
        (read.expect("joined"), write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault() -> EngineError {
        EngineError::Config("the progress table cannot be written".into())
    }

    #[tokio::test]
    async fn a_writer_failure_halts_the_readers_and_the_other_writers() {
        let ending = Ending::new(None, Duration::from_secs(30));
        // A reader waiting for room that only the writers could make.
        let halt = ending.halt.clone();
        let reading = tokio::spawn(async move {
            halt.stopped().await;
            Ok(())
        });
        let mut writers = JoinSet::new();
        writers.spawn(async { Err(fault()) });
        let failed = ending.failed.clone();
        writers.spawn(async move {
            failed.stopped().await;
            Ok(())
        });
        let (read, write) = ending.wait(reading, writers).await;
        assert!(read.is_ok());
        assert!(write.is_err(), "the writer's error is the run's");
        assert!(ending.early() && ending.failed.is_stopped());
    }

    #[tokio::test]
    async fn a_stop_abandons_tasks_stuck_past_the_grace_period() {
        let asked = StopSignal::new();
        let ending = Ending::new(Some(asked.clone()), Duration::from_millis(10));
        let reading = tokio::spawn(std::future::pending());
        let mut writers = JoinSet::new();
        writers.spawn(std::future::pending());
        asked.stop();
        // Tasks that would never end: it returns all the same.
        let (read, write) = ending.wait(reading, writers).await;
        assert!(read.is_ok() && write.is_ok());
        assert!(ending.early() && !ending.failed.is_stopped());
    }

    #[tokio::test]
    async fn a_run_that_reads_and_writes_everything_ends_without_halting() {
        let ending = Ending::new(Some(StopSignal::new()), Duration::from_secs(5));
        let reading = tokio::spawn(async { Ok(()) });
        let mut writers = JoinSet::new();
        writers.spawn(async { Ok(()) });
        let (read, write) = ending.wait(reading, writers).await;
        assert!(read.is_ok() && write.is_ok());
        assert!(!ending.early());
    }
}
