//! The read side of a run: one task per segment of each entity, reading
//! keyset pages, mapping them, and handing them to the queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use sql2ddb_core::{BatchPart, BatchPointer, EncodedItem, Reject, Row, SqlValue, WorkBatch};
use sql2ddb_source::{Segment, Source};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::embed;
use super::handoff::PageOut;
use super::prepared::Prepared;
use crate::error::EngineError;
use crate::ids::RunId;
use crate::progress::EntityProgress;
use crate::rejects::RejectsFile;

/// What every segment reader shares.
pub(super) struct Readers {
    pub source: Arc<Source>,
    pub rejects: Arc<RejectsFile>,
    pub run_id: RunId,
    /// Where pages go, and the checkpoints when the run keeps them.
    pub out: PageOut,
    /// Segments reading at once, at most the run's source connections.
    pub slots: Arc<Semaphore>,
    /// A stop request: readers end after the page they are reading, and a
    /// page waiting for room in the queue stays pending.
    pub stop: Option<Arc<crate::stop::StopSignal>>,
}

impl Readers {
    /// [`Readers::read_all`] in a task of its own, so that the run can
    /// abandon it.
    pub fn spawn(self, prepared: &[Arc<Prepared>]) -> JoinHandle<Result<(), EngineError>> {
        let prepared = prepared.to_vec();
        tokio::spawn(async move { self.read_all(&prepared).await })
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.is_stopped())
    }

    /// Reads every segment of every entity, concurrently, and returns the
    /// first error (the other readers stop at their next page).
    pub async fn read_all(self, prepared: &[Arc<Prepared>]) -> Result<(), EngineError> {
        let this = Arc::new(self);
        let mut tasks = tokio::task::JoinSet::new();
        for p in prepared {
            // A replay reads its keys in one task; a run, each segment in its own.
            let jobs = match p.replay {
                Some(_) => vec![None],
                None => p.segments.iter().cloned().map(Some).collect(),
            };
            // Child rows no parent row reads: found once per run, under its
            // snapshot, and rejected rather than lost.
            if p.replay.is_none() && !p.children.is_empty() {
                let (this, p) = (this.clone(), p.clone());
                tasks.spawn(async move {
                    let _slot = this
                        .slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("never closed");
                    if this.stopped() {
                        return Ok(());
                    }
                    embed::reject_orphans(&this.source, &p.children, &this.rejects).await?;
                    Ok(())
                });
            }
            for segment in jobs {
                let (this, p) = (this.clone(), p.clone());
                tasks.spawn(async move {
                    let _slot = this
                        .slots
                        .clone()
                        .acquire_owned()
                        .await
                        .expect("never closed");
                    match segment {
                        Some(segment) => this.read_segment(&p, &segment).await,
                        None => this.read_keys(&p).await,
                    }
                });
            }
        }
        crate::tasks::first_error(tasks).await
    }

    /// Maps a page: fetches its embedded children (one query per embed),
    /// maps each row, and takes the pointer candidates of the rows that
    /// became items, each tied to its item's key.
    async fn map_page(
        &self,
        p: &Prepared,
        rows: &[Row],
    ) -> Result<(Vec<EncodedItem>, Vec<Reject>, Vec<BatchPointer>), EngineError> {
        let children = if p.children.is_empty() {
            Vec::new()
        } else {
            let keys: Vec<Vec<SqlValue>> = rows.iter().map(|r| p.query.key_of(r)).collect();
            embed::fetch(&self.source, &p.children, &keys).await?
        };
        let mut items = Vec::with_capacity(rows.len());
        let mut rejected = Vec::new();
        let mut mapped_rows = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            // Serialised once, here, straight from the row: the text is what travels.
            let encoded = match children.get(i) {
                Some(c) => p.bound.encode_row_with_children(row, c),
                None => p.bound.encode_row(row),
            };
            if let Some(c) = children.get(i) {
                embed::count(&p.children, c, encoded.is_ok());
            }
            match encoded {
                Ok(item) => {
                    if !p.pointers.is_empty() {
                        mapped_rows.push(row.clone());
                    }
                    items.push(item)
                }
                Err(r) => rejected.push(r),
            }
        }
        if let Some(o) = &p.overwrites {
            o.record(&items);
        }
        let mut pointers = Vec::new();
        for bound in &p.pointers {
            for (i, update) in bound.candidates_indexed(&mapped_rows) {
                let item_key = items[i].key.clone();
                pointers.push(BatchPointer { update, item_key });
            }
        }
        Ok((items, rejected, pointers))
    }

    /// `--only-rejects`: reads the entity's rejected rows again by key, a
    /// page of keys at a time, maps and queues them like any page.
    async fn read_keys(&self, p: &Prepared) -> Result<(), EngineError> {
        p.stats
            .started
            .lock()
            .expect("lock")
            .get_or_insert_with(Instant::now);
        let keys = p.replay.as_deref().unwrap_or(&[]);
        let mut rows_so_far = 0;
        for (page, chunk) in keys.chunks(p.query.page_size().max(1)).enumerate() {
            if self.stopped() {
                break;
            }
            let rows = self.source.read_keys(&p.query, chunk).await?;
            let Some(last) = rows.last() else { continue };
            let cursor = p.query.key_of(last);
            rows_so_far += rows.len() as u64;
            let at = PageAt {
                segment: 0,
                page: page as u64,
                cursor,
                segment_rows: rows_so_far,
            };
            self.map_and_hand_on(p, rows, at).await?;
        }
        p.stats.touch();
        Ok(())
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
        // A resumed segment starts at its cursor (`segment.after`) and goes on numbering.
        let start = self.out.start(name, segment.index);
        let (mut page, mut segment_rows) = (start.page, start.rows);
        loop {
            if self.stopped() {
                // Not finished: no segment total; the checkpoint says where it stopped.
                p.stats.touch();
                return Ok(());
            }
            let rows = self
                .source
                .read_range(&p.query, after.as_deref(), segment.until.as_deref())
                .await?;
            let Some(last) = rows.last() else { break };
            after = Some(p.query.key_of(last));
            let full = rows.len() >= p.query.page_size();
            segment_rows += rows.len() as u64;
            let at = PageAt {
                segment: segment.index,
                page,
                cursor: after.clone().expect("set from this page"),
                segment_rows,
            };
            self.map_and_hand_on(p, rows, at).await?;
            if self.stopped() {
                // The page may not have been handed on: not finished either.
                p.stats.touch();
                return Ok(());
            }
            page += 1;
            if !full {
                break;
            }
        }
        // Rows this attempt read must be the rows the segment's range holds.
        let held = self
            .source
            .count_range(&p.query, segment.after.as_deref(), segment.until.as_deref())
            .await?;
        let read_now = segment_rows - start.rows;
        if held != read_now {
            p.segment_mismatches
                .lock()
                .expect("mismatch lock")
                .push(format!(
                    "entity {:?} segment {}: read {read_now} rows, its key range holds {held} (the source changed under the run, or rows were skipped)",
                    name, segment.index
                ));
        }
        self.out
            .segment_done(name, segment.index, page, segment_rows)
            .await?;
        p.stats.touch();
        Ok(())
    }

    /// Maps a page read at `at`, records its rejects and counts, and hands
    /// it on as one batch.
    async fn map_and_hand_on(
        &self,
        p: &Prepared,
        rows: Vec<Row>,
        at: PageAt,
    ) -> Result<(), EngineError> {
        let (items, rejected, pointers) = self.map_page(p, &rows).await?;
        let read = rows.len() as u64;
        // Not held while waiting for room in the queue: the items are the page now.
        drop(rows);
        EntityProgress::add(&p.counters.read, read);
        EntityProgress::add(&p.counters.rejected, rejected.len() as u64);
        p.stats.pages.fetch_add(1, Ordering::Relaxed);
        self.rejects.write(&rejected).await?;
        let batch = WorkBatch {
            run_id: self.run_id.clone(),
            entity: p.bound.name().to_string(),
            segment: at.segment,
            page: at.page,
            part: BatchPart::WHOLE,
            rows_read: read,
            items,
            pointers,
        };
        self.out
            .hand_on(batch, at.cursor, at.segment_rows, self.stop.as_deref())
            .await
    }
}

/// Where a page was read: its segment and number, the key of its last row,
/// and the rows of its segment so far, this page included.
struct PageAt {
    segment: u32,
    page: u64,
    cursor: Vec<SqlValue>,
    segment_rows: u64,
}
