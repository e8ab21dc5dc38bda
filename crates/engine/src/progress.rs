//! Live counters of a run, updated by the pipeline and read by whoever shows
//! progress (the CLI's bars). Plain atomics: cheap on the hot path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counters of one entity.
#[derive(Debug, Default)]
pub struct EntityProgress {
    /// Entity name.
    pub name: String,
    /// Rows expected (from a count), 0 when unknown.
    pub total: AtomicU64,
    /// Rows read from the source.
    pub read: AtomicU64,
    /// Rows whose item is written.
    pub written: AtomicU64,
    /// Rows rejected (mapping or DynamoDB validation).
    pub rejected: AtomicU64,
    /// Rows still unwritten when the retry budget ran out.
    pub failed: AtomicU64,
    /// Set when every row of the entity is accounted for.
    pub done: AtomicBool,
}

impl EntityProgress {
    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether every row is accounted for.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }
}

/// Counters of a whole run, and the lines it announces while it runs.
#[derive(Debug, Default)]
pub struct RunProgress {
    entities: Mutex<Vec<Arc<EntityProgress>>>,
    notes: Mutex<Vec<String>>,
    noted: tokio::sync::Notify,
}

impl RunProgress {
    /// A new, empty set of counters.
    pub fn new() -> Arc<Self> {
        Arc::new(RunProgress::default())
    }

    /// Registers an entity and returns its counters.
    pub fn entity(&self, name: &str) -> Arc<EntityProgress> {
        let mut all = self.entities.lock().expect("progress lock");
        if let Some(e) = all.iter().find(|e| e.name == name) {
            return e.clone();
        }
        let e = Arc::new(EntityProgress {
            name: name.to_string(),
            ..EntityProgress::default()
        });
        all.push(e.clone());
        e
    }

    /// Announces a line (e.g. the snapshot the run reads) to whoever shows
    /// progress.
    pub fn note(&self, line: impl Into<String>) {
        self.notes.lock().expect("notes lock").push(line.into());
        self.noted.notify_waiters();
    }

    /// The announced lines from the `seen`-th on, waiting for one when there
    /// is none yet.
    pub async fn notes_after(&self, seen: usize) -> Vec<String> {
        loop {
            let notified = self.noted.notified();
            let new: Vec<String> = self
                .notes
                .lock()
                .expect("notes lock")
                .get(seen..)
                .map(<[String]>::to_vec)
                .unwrap_or_default();
            if !new.is_empty() {
                return new;
            }
            notified.await;
        }
    }

    /// Every entity registered so far, in order.
    pub fn entities(&self) -> Vec<Arc<EntityProgress>> {
        self.entities.lock().expect("progress lock").clone()
    }
}
