//! What the writers did second by second: items written, calls throttled
//! (or answered with unprocessed items), and the adaptive concurrency limit,
//! sampled once a second while they run. A run of hours is judged by the
//! shape of these series: where throughput fell, and whether throttling or
//! the source was the cause.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use sql2ddb_dynamo::AdaptiveConcurrency;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Seconds between two samples.
pub const SAMPLE_SECONDS: u64 = 1;

/// The per-second series of one run (index `i`: the `i`-th second since
/// the writers started; the last entry may cover less than a second).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// Seconds each entry covers.
    pub interval_seconds: u64,
    /// Items written in each second.
    pub items_written: Vec<u64>,
    /// Calls throttled or answered with unprocessed items in each second
    /// (the signals the concurrency limit answers; the writer report's
    /// `throttled` also counts calls retried after a transient error).
    pub throttled_calls: Vec<u64>,
    /// The concurrency limit (calls in flight allowed) at the end of each
    /// second.
    pub concurrency: Vec<usize>,
}

impl Timeline {
    /// Seconds covered.
    pub fn len(&self) -> usize {
        self.items_written.len()
    }

    /// Whether nothing was recorded (a run cut at a queue, a plan).
    pub fn is_empty(&self) -> bool {
        self.items_written.is_empty()
    }
}

/// The counters a sample reads: items written so far, throttled calls so
/// far, the limit now.
type Probe = Box<dyn Fn() -> (u64, u64, usize) + Send + Sync>;

struct Series {
    timeline: Timeline,
    /// The cumulative counters at the last sample.
    last: (u64, u64),
}

impl Series {
    fn sample(&mut self, probe: &Probe) {
        let (written, throttled, limit) = probe();
        let t = &mut self.timeline;
        t.items_written.push(written.saturating_sub(self.last.0));
        t.throttled_calls
            .push(throttled.saturating_sub(self.last.1));
        t.concurrency.push(limit);
        self.last = (written, throttled);
    }
}

/// Samples the writers' counters once a second until [`Recorder::finish`].
pub(crate) struct Recorder {
    series: Arc<Mutex<Series>>,
    probe: Arc<Probe>,
    task: JoinHandle<()>,
}

impl Recorder {
    /// Starts sampling `items_written` (cumulative) and the controller's
    /// throttled calls and limit.
    pub fn start(
        controller: Arc<AdaptiveConcurrency>,
        items_written: impl Fn() -> u64 + Send + Sync + 'static,
    ) -> Recorder {
        let probe: Arc<Probe> = Arc::new(Box::new(move || {
            let c = controller.snapshot();
            (items_written(), c.throttled, c.current)
        }));
        let start = probe();
        let series = Arc::new(Mutex::new(Series {
            timeline: Timeline {
                interval_seconds: SAMPLE_SECONDS,
                ..Timeline::default()
            },
            last: (start.0, start.1),
        }));
        let every = Duration::from_secs(SAMPLE_SECONDS);
        let task = tokio::spawn({
            let (series, probe) = (series.clone(), probe.clone());
            async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                // A late tick covers the time since the last one, never a
                // burst of empty seconds.
                tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    series.lock().expect("timeline lock").sample(&probe);
                }
            }
        });
        Recorder {
            series,
            probe,
            task,
        }
    }

    /// Stops sampling; the last, partial second is sampled too.
    pub fn finish(self) -> Timeline {
        self.task.abort();
        let mut series = self.series.lock().expect("timeline lock");
        series.sample(&self.probe);
        std::mem::take(&mut series.timeline)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_second_holds_what_was_written_and_throttled_in_it() {
        let controller = Arc::new(AdaptiveConcurrency::new(8));
        let written = Arc::new(AtomicU64::new(0));
        let recorder = Recorder::start(controller.clone(), {
            let w = written.clone();
            move || w.load(Ordering::Relaxed)
        });
        written.store(100, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // Second 2: 50 more items, and two calls throttled (one halving).
        written.store(150, Ordering::Relaxed);
        let permits = vec![controller.acquire().await, controller.acquire().await];
        for p in permits {
            p.throttled();
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        written.store(160, Ordering::Relaxed);
        let t = recorder.finish();
        assert_eq!(t.interval_seconds, 1);
        assert_eq!(t.items_written, vec![100, 50, 10]);
        assert_eq!(t.throttled_calls, vec![0, 2, 0]);
        assert_eq!(t.concurrency, vec![8, 4, 4]);
        assert_eq!(t.len(), 3);
    }
}
