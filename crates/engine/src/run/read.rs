//! The read side of a run: one task per segment of each entity, reading
//! keyset pages, mapping them, and handing them to the queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use sql2ddb_core::{BatchPart, SqlValue, WorkBatch};
use sql2ddb_queue::Producer;
use sql2ddb_source::{Segment, Source};
use tokio::sync::Semaphore;

use super::Prepared;
use crate::error::EngineError;
use crate::progress::EntityProgress;
use crate::rejects::RejectsFile;

/// What every segment reader shares.
pub(super) struct Readers {
    pub source: Arc<Source>,
    pub rejects: Arc<RejectsFile>,
    pub run_id: String,
    pub producer: Producer,
    /// Segments reading at once, at most the run's source connections.
    pub slots: Arc<Semaphore>,
}

impl Readers {
    /// Reads every segment of every entity, concurrently, and returns the
    /// first error (the other readers stop at their next page).
    pub async fn read_all(self, prepared: &[Arc<Prepared>]) -> Result<(), EngineError> {
        let this = Arc::new(self);
        let mut tasks = tokio::task::JoinSet::new();
        for p in prepared {
            for segment in &p.segments {
                let (this, p, segment) = (this.clone(), p.clone(), segment.clone());
                tasks.spawn(async move {
                    let _slot = this
                        .slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("never closed");
                    this.read_segment(&p, &segment).await
                });
            }
        }
        let mut result = Ok(());
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    if result.is_ok() {
                        result = Err(e);
                        tasks.abort_all();
                    }
                }
                Err(e) if e.is_cancelled() => {}
                Err(panic) => std::panic::resume_unwind(panic.into_panic()),
            }
        }
        result
    }

    /// Reads one segment page by page, maps each page and queues it.
    async fn read_segment(&self, p: &Prepared, segment: &Segment) -> Result<(), EngineError> {
        p.stats
            .started
            .lock()
            .expect("lock")
            .get_or_insert_with(Instant::now);
        let name = p.bound.name();
        let mut after: Option<Vec<SqlValue>> = segment.after.clone();
        let mut page = 0u64;
        loop {
            let rows = self
                .source
                .read_range(&p.query, after.as_deref(), segment.until.as_deref())
                .await?;
            let Some(last) = rows.last() else { break };
            after = Some(p.query.key_of(last));
            let full = rows.len() >= p.query.page_size();
            let mut items = Vec::with_capacity(rows.len());
            let mut rejected = Vec::new();
            for row in &rows {
                match p.bound.map_row(row) {
                    Ok(m) => items.push(m),
                    Err(r) => rejected.push(r),
                }
            }
            EntityProgress::add(&p.counters.read, rows.len() as u64);
            EntityProgress::add(&p.counters.rejected, rejected.len() as u64);
            p.stats.pages.fetch_add(1, Ordering::Relaxed);
            self.rejects.write(&rejected)?;
            let batch = WorkBatch {
                run_id: self.run_id.clone(),
                entity: name.to_string(),
                segment: segment.index,
                page,
                part: BatchPart::WHOLE,
                rows_read: rows.len() as u64,
                items,
            };
            self.producer
                .push(batch)
                .await
                .map_err(|e| EngineError::Entity {
                    entity: name.to_string(),
                    message: e.to_string(),
                })?;
            page += 1;
            if !full {
                break;
            }
        }
        p.stats.touch();
        Ok(())
    }
}
