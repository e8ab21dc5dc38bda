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

/// Counters of a whole run.
#[derive(Debug, Default)]
pub struct RunProgress {
    entities: Mutex<Vec<Arc<EntityProgress>>>,
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

    /// Every entity registered so far, in order.
    pub fn entities(&self) -> Vec<Arc<EntityProgress>> {
        self.entities.lock().expect("progress lock").clone()
    }
}
