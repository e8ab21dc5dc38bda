//! Checkpoints: where each segment of a run may resume, kept in the progress
//! store.
//!
//! A segment's cursor advances to page `p` only once every page up to `p` is
//! handed on: sent to SQS, or written and recorded by an in-process writer.
//! In-process writers finish pages out of order, so each segment keeps the
//! pages handed to the writers until the ones before them are done too. A
//! segment is recorded as finished (its row total) only when its reader
//! reached the end *and* every one of its pages is handed on, so a resumed
//! run never skips a segment with pages still unwritten.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use sql2ddb_core::{BatchPart, RunId, SqlValue, WorkBatch};
use sql2ddb_dynamo::progress::{BatchCost, BatchRecord, ProgressStore};
use sql2ddb_queue::Message;

use crate::error::EngineError;
use crate::outcome::BatchOutcome;

/// What identifies a batch and what its record needs, kept while its items
/// are being written (writing consumes the batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchId {
    /// Run id.
    pub run_id: RunId,
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page within the segment.
    pub page: u64,
    /// Part of the page.
    pub part: BatchPart,
    /// Source rows the batch accounts for.
    pub rows_read: u64,
    /// Items it carries.
    pub items: u64,
}

impl BatchId {
    /// The identity of `batch`.
    pub fn of(batch: &WorkBatch) -> BatchId {
        BatchId {
            run_id: batch.run_id.clone(),
            entity: batch.entity.clone(),
            segment: batch.segment,
            page: batch.page,
            part: batch.part,
            rows_read: batch.rows_read,
            items: batch.items.len() as u64,
        }
    }

    /// The identity of a message's page, whichever its kind.
    pub fn of_message(message: &Message) -> BatchId {
        BatchId {
            run_id: message.run_id().clone(),
            entity: message.entity().to_string(),
            segment: message.segment(),
            page: message.page(),
            part: message.part(),
            rows_read: message.rows_read(),
            items: message.items().len() as u64,
        }
    }

    /// The progress record of the batch once written as `out` says. Rows
    /// rejected while mapping are the batch's rows without an item.
    pub fn record(&self, out: &BatchOutcome) -> BatchRecord {
        BatchRecord {
            entity: self.entity.clone(),
            segment: self.segment,
            page: self.page,
            part: self.part.index,
            parts: self.part.count,
            rows: self.rows_read,
            items: out.written,
            rejected: self.rows_read.saturating_sub(self.items) + out.rejected,
            failed: out.failed,
        }
    }

    /// What writing the batch cost, as `out` says, for its record.
    pub fn cost(&self, out: &BatchOutcome) -> BatchCost {
        BatchCost {
            bytes: out.bytes,
            write_units: out.write_units,
            retries: out.retries,
        }
    }
}

/// Where a segment's reader starts: page number and rows already handed on
/// (both 0 for a fresh run; from the cursor for a resumed one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentStart {
    /// The next page's number.
    pub page: u64,
    /// Rows in the pages before it.
    pub rows: u64,
}

/// A cursor to record: `pages` pages holding `rows` rows are handed on, the
/// last ending at key `cursor`.
#[derive(Debug, Clone, PartialEq)]
pub struct Advance {
    /// Pages handed on.
    pub pages: u64,
    /// The key of the last row of the last of them.
    pub cursor: Vec<SqlValue>,
    /// Rows in them.
    pub rows: u64,
}

/// A page handed to the writers and not yet passed by the cursor.
#[derive(Debug)]
struct Mark {
    cursor: Vec<SqlValue>,
    rows: u64,
    done: bool,
}

/// The pages of one segment between its cursor and its reader.
#[derive(Debug, Default)]
pub struct SegmentTracker {
    /// Pages `0..next` are handed on.
    next: u64,
    marks: BTreeMap<u64, Mark>,
    /// Set by the reader at the end: (pages, rows) of the whole segment.
    end: Option<(u64, u64)>,
    finished: bool,
}

impl SegmentTracker {
    /// A tracker whose pages before `start.page` are already handed on.
    pub fn new(start: SegmentStart) -> SegmentTracker {
        SegmentTracker {
            next: start.page,
            ..SegmentTracker::default()
        }
    }

    /// The reader gave `page` to the writers; it ends at key `cursor`, and
    /// the segment's pages up to it hold `rows` rows.
    pub fn handed(&mut self, page: u64, cursor: Vec<SqlValue>, rows: u64) {
        self.marks.insert(
            page,
            Mark {
                cursor,
                rows,
                done: false,
            },
        );
    }

    /// `page` is done; returns the new cursor when the pages before it are
    /// done too (the cursor moves over every done page in a row).
    pub fn done(&mut self, page: u64) -> Option<Advance> {
        if let Some(mark) = self.marks.get_mut(&page) {
            mark.done = true;
        }
        let mut advance = None;
        while self.marks.get(&self.next).is_some_and(|m| m.done) {
            let mark = self.marks.remove(&self.next).expect("checked");
            self.next += 1;
            advance = Some(Advance {
                pages: self.next,
                cursor: mark.cursor,
                rows: mark.rows,
            });
        }
        advance
    }

    /// The reader reached the end after `pages` pages and `rows` rows.
    pub fn reader_done(&mut self, pages: u64, rows: u64) {
        self.end = Some((pages, rows));
    }

    /// The segment's total to record, once: when the reader is done and the
    /// cursor has passed every page.
    pub fn take_finish(&mut self) -> Option<(u64, u64)> {
        match self.end {
            Some((pages, rows)) if !self.finished && self.next >= pages => {
                self.finished = true;
                Some((pages, rows))
            }
            _ => None,
        }
    }
}

/// The checkpoints of one run, recorded in its progress store.
pub struct Checkpoints {
    store: ProgressStore,
    run_id: RunId,
    starts: HashMap<(String, u32), SegmentStart>,
    segments: Mutex<HashMap<(String, u32), SegmentTracker>>,
}

impl Checkpoints {
    /// Checkpoints of run `run_id`; `starts` holds where resumed segments
    /// continue (others start at page 0).
    pub fn new(
        store: ProgressStore,
        run_id: RunId,
        starts: HashMap<(String, u32), SegmentStart>,
    ) -> Checkpoints {
        Checkpoints {
            store,
            run_id,
            starts,
            segments: Mutex::new(HashMap::new()),
        }
    }

    /// The store.
    pub fn store(&self) -> &ProgressStore {
        &self.store
    }

    /// The run id.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Where a segment's reader starts.
    pub fn start(&self, entity: &str, segment: u32) -> SegmentStart {
        self.starts
            .get(&(entity.to_string(), segment))
            .copied()
            .unwrap_or_default()
    }

    fn with_segment<T>(
        &self,
        entity: &str,
        segment: u32,
        f: impl FnOnce(&mut SegmentTracker) -> T,
    ) -> T {
        let mut all = self.segments.lock().expect("checkpoint lock");
        let tracker = all
            .entry((entity.to_string(), segment))
            .or_insert_with(|| SegmentTracker::new(self.start(entity, segment)));
        f(tracker)
    }

    /// A page is about to go to the writers (call before handing it on).
    pub fn handed(&self, entity: &str, segment: u32, page: u64, cursor: Vec<SqlValue>, rows: u64) {
        self.with_segment(entity, segment, |t| t.handed(page, cursor, rows));
    }

    /// A page is handed on for good (sent, or written and recorded): moves
    /// the segment's cursor when it can, and records the segment's total
    /// when it was the last page missing.
    pub async fn done(&self, entity: &str, segment: u32, page: u64) -> Result<(), EngineError> {
        let (advance, finish) = self.with_segment(entity, segment, |t| {
            let advance = t.done(page);
            (advance, t.take_finish())
        });
        if let Some(a) = advance {
            // Concurrent writers may record out of order: the store keeps the furthest.
            self.store
                .set_cursor(&self.run_id, entity, segment, &a.cursor, a.pages, a.rows)
                .await?;
        }
        if let Some((pages, rows)) = finish {
            self.store
                .finish_segment(&self.run_id, entity, segment, rows, pages)
                .await?;
        }
        Ok(())
    }

    /// An in-process writer wrote a batch: records it with its cost, then
    /// marks its page done.
    pub async fn written(&self, id: &BatchId, out: &BatchOutcome) -> Result<(), EngineError> {
        self.store
            .record_batch_with_cost(&self.run_id, &id.record(out), &id.cost(out))
            .await?;
        self.done(&id.entity, id.segment, id.page).await
    }

    /// A segment's reader reached the end after `pages` pages and `rows` rows
    /// (counted from the segment's start, resumed pages included).
    pub async fn reader_done(
        &self,
        entity: &str,
        segment: u32,
        pages: u64,
        rows: u64,
    ) -> Result<(), EngineError> {
        let finish = self.with_segment(entity, segment, |t| {
            t.reader_done(pages, rows);
            t.take_finish()
        });
        if let Some((pages, rows)) = finish {
            self.store
                .finish_segment(&self.run_id, entity, segment, rows, pages)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: i64) -> Vec<SqlValue> {
        vec![SqlValue::Int(k)]
    }

    #[test]
    fn the_cursor_waits_for_every_earlier_page_when_pages_finish_out_of_order() {
        let mut t = SegmentTracker::new(SegmentStart::default());
        for page in 0..4 {
            t.handed(page, key(100 * (page as i64 + 1)), 10 * (page + 1));
        }
        assert_eq!(t.done(2), None);
        assert_eq!(t.done(1), None);
        assert_eq!(
            t.done(0),
            Some(Advance {
                pages: 3,
                cursor: key(300),
                rows: 30
            })
        );
        t.reader_done(4, 40);
        assert_eq!(t.take_finish(), None, "page 3 is not done yet");
        assert_eq!(t.done(3).map(|a| a.pages), Some(4));
        assert_eq!(t.take_finish(), Some((4, 40)));
        assert_eq!(t.take_finish(), None, "a segment finishes once");
    }

    #[test]
    fn a_resumed_segment_counts_from_its_cursor_and_an_empty_rest_finishes_at_once() {
        let mut t = SegmentTracker::new(SegmentStart { page: 7, rows: 70 });
        t.handed(7, key(800), 80);
        assert_eq!(t.done(7).map(|a| (a.pages, a.rows)), Some((8, 80)));
        t.reader_done(8, 80);
        assert_eq!(t.take_finish(), Some((8, 80)));

        let mut nothing_left = SegmentTracker::new(SegmentStart { page: 5, rows: 50 });
        nothing_left.reader_done(5, 50);
        assert_eq!(nothing_left.take_finish(), Some((5, 50)));
    }

    #[test]
    fn a_page_done_twice_or_unknown_moves_nothing() {
        let mut t = SegmentTracker::new(SegmentStart::default());
        assert_eq!(t.done(0), None, "never handed");
        t.handed(0, key(1), 1);
        assert!(t.done(0).is_some());
        assert_eq!(t.done(0), None);
    }

    #[test]
    fn a_record_counts_rows_rejected_while_mapping_and_by_dynamodb() {
        let id = BatchId {
            run_id: "r".parse().unwrap(),
            entity: "order".into(),
            segment: 1,
            page: 4,
            part: BatchPart::WHOLE,
            rows_read: 10,
            items: 8,
        };
        let out = BatchOutcome {
            written: 7,
            rejected: 1,
            ..BatchOutcome::default()
        };
        let r = id.record(&out);
        assert_eq!((r.rows, r.items, r.rejected, r.failed), (10, 7, 3, 0));
        assert_eq!(r.sort_key(), "BATCH#order#00001#0000000004#000");
    }
}
