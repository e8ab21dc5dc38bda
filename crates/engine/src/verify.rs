//! `sql2ddb status` and `sql2ddb verify`: a run's state from its progress
//! store, readable from any machine while workers write.
//!
//! The batch records of the run's partition are read with one Query (paged)
//! and added up per entity; the sums are compared with the rows read (the
//! segments' totals). Whatever is missing is named: segments whose reader has
//! not finished, and pages sent without a record. When the run went through
//! a queue, the queue's depths (and its dead-letter queue's) are shown too.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use sql2ddb_dynamo::progress::{RunMeta, RunProgress, SegmentTotal};

use crate::error::EngineError;
use crate::ids::RunId;
use crate::resources::Resources;

/// A segment whose reader has not reached its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnfinishedSegment {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Pages it handed on so far.
    pub pages_sent: u64,
}

/// Consecutive pages of one segment without a (whole) batch record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingPages {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// First page.
    pub first: u64,
    /// Last page (inclusive).
    pub last: u64,
}

/// The queue of a run, as seen now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueState {
    /// Queue URL.
    pub url: String,
    /// Messages waiting.
    pub visible: u64,
    /// Messages received and not yet deleted.
    pub in_flight: u64,
    /// Messages in the dead-letter queue (`None` without one).
    pub dead_letter: Option<u64>,
}

/// Everything `status` and `verify` show about a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunState {
    /// Run id.
    pub run_id: RunId,
    /// Target table.
    pub table: String,
    /// Progress table.
    pub progress_table: String,
    /// When the run started.
    pub started: String,
    /// Every row is accounted for (written, rejected or failed).
    pub complete: bool,
    /// Per entity, in the run's order.
    pub entities: Vec<EntityCount>,
    /// Segments still being read (or whose reader stopped).
    pub unfinished: Vec<UnfinishedSegment>,
    /// Pages sent but not recorded as written, in ranges.
    pub missing: Vec<MissingPages>,
    /// The run's queue, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueState>,
    /// Why the queue could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_error: Option<String>,
}

impl RunState {
    /// Rows that ran out of retries, over all entities.
    pub fn failed(&self) -> u64 {
        self.entities.iter().map(|e| e.failed).sum()
    }

    /// Rows rejected, over all entities.
    pub fn rejected(&self) -> u64 {
        self.entities.iter().map(|e| e.rejected).sum()
    }

    /// `verify`'s verdict: every row accounted for and none failed. Rejected
    /// rows are accounted for (each is in a rejects file with its reason).
    pub fn verified(&self) -> bool {
        self.complete && self.failed() == 0
    }

    /// Nothing can move the run on by itself: every segment is read, the
    /// queue holds nothing to write, yet pages are missing and some messages
    /// sit in the dead-letter queue (fix the cause, then `queue redrive`).
    pub fn stalled(&self) -> bool {
        let Some(q) = &self.queue else { return false };
        !self.complete
            && self.unfinished.is_empty()
            && q.visible == 0
            && q.in_flight == 0
            && q.dead_letter.unwrap_or(0) > 0
    }
}

/// The counts of one entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityCount {
    /// Entity name.
    pub entity: String,
    /// Segments of the entity.
    pub segments: u32,
    /// Segments whose reader reached the end.
    pub segments_finished: u32,
    /// Rows read from the source: the sum of the segment totals, `None`
    /// while any segment is unfinished.
    pub rows_read: Option<u64>,
    /// Rows the batch records account for.
    pub rows_recorded: u64,
    /// Items written.
    pub written: u64,
    /// Rows rejected (mapping or DynamoDB).
    pub rejected: u64,
    /// Items that ran out of retries.
    pub failed: u64,
    /// Rows read but not yet in a batch record, once `rows_read` is known.
    pub pending: Option<u64>,
}

/// A page that was handed on but is not (wholly) recorded as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct MissingPage {
    /// Entity name.
    pub entity: String,
    /// Segment.
    pub segment: u32,
    /// Page.
    pub page: u64,
}

/// What [`summarize`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Per entity, in the run's order.
    pub entities: Vec<EntityCount>,
    /// Pages sent without a record for each of their parts, in order.
    pub missing: Vec<MissingPage>,
    /// Every row is accounted for: the run is described, every segment is
    /// finished, no page is missing, and for every entity the records add up
    /// to the rows read (`written + rejected + failed`). Rejected and failed
    /// rows count as accounted for: they are in the rejects file.
    pub complete: bool,
}

/// Adds a run's records up and compares them with the rows read.
pub fn summarize(progress: &RunProgress) -> Verification {
    let missing = missing_pages(progress);
    let mut complete = progress.meta.is_some() && missing.is_empty();
    let mut entities = Vec::new();
    for (entity, segments) in entity_order(progress) {
        let count = count_entity(progress, entity, segments);
        let accounted = count.written + count.rejected + count.failed;
        complete &=
            count.rows_read == Some(count.rows_recorded) && accounted == count.rows_recorded;
        entities.push(count);
    }
    Verification {
        entities,
        missing,
        complete,
    }
}

/// Entities in the run's order with their segment counts, then any only
/// seen in records (as many segments as their highest recorded one).
fn entity_order(progress: &RunProgress) -> Vec<(String, u32)> {
    let mut order: Vec<(String, u32)> = progress
        .meta
        .iter()
        .flat_map(|m| m.entities.iter().map(|e| (e.name.clone(), e.segments)))
        .collect();
    let seen = progress
        .batches
        .iter()
        .map(|b| (b.entity.as_str(), b.segment))
        .chain(
            progress
                .cursors
                .iter()
                .map(|c| (c.entity.as_str(), c.segment)),
        )
        .chain(
            progress
                .totals
                .iter()
                .map(|t| (t.entity.as_str(), t.segment)),
        );
    let mut extra: BTreeMap<&str, u32> = BTreeMap::new();
    for (entity, segment) in seen {
        if !order.iter().any(|(name, _)| name == entity) {
            let segments = extra.entry(entity).or_default();
            *segments = (*segments).max(segment + 1);
        }
    }
    order.extend(extra.into_iter().map(|(e, s)| (e.to_string(), s)));
    order
}

/// Pages handed on (by a cursor or a segment total) without a record for
/// each of their parts, in order.
fn missing_pages(progress: &RunProgress) -> Vec<MissingPage> {
    // Parts recorded per page, and how many parts the page has.
    let mut recorded: HashMap<(&str, u32, u64), (u32, HashSet<u32>)> = HashMap::new();
    for b in &progress.batches {
        let entry = recorded
            .entry((b.entity.as_str(), b.segment, b.page))
            .or_default();
        entry.0 = entry.0.max(b.parts);
        entry.1.insert(b.part);
    }
    let mut sent: BTreeMap<(&str, u32), u64> = BTreeMap::new();
    for c in &progress.cursors {
        let pages = sent.entry((c.entity.as_str(), c.segment)).or_default();
        *pages = (*pages).max(c.pages_sent);
    }
    for t in &progress.totals {
        let pages = sent.entry((t.entity.as_str(), t.segment)).or_default();
        *pages = (*pages).max(t.pages);
    }
    let mut missing = Vec::new();
    for ((entity, segment), pages) in sent {
        for page in 0..pages {
            let whole = recorded
                .get(&(entity, segment, page))
                .is_some_and(|(count, parts)| (0..*count).all(|p| parts.contains(&p)));
            if !whole {
                missing.push(MissingPage {
                    entity: entity.to_string(),
                    segment,
                    page,
                });
            }
        }
    }
    missing
}

/// The counts of one entity of `segments` segments.
fn count_entity(progress: &RunProgress, entity: String, segments: u32) -> EntityCount {
    let totals: Vec<&SegmentTotal> = progress
        .totals
        .iter()
        .filter(|t| t.entity == entity && t.segment < segments)
        .collect();
    let finished: HashSet<u32> = totals.iter().map(|t| t.segment).collect();
    let segments_finished = finished.len() as u32;
    let rows_read = (segments_finished == segments).then(|| totals.iter().map(|t| t.rows).sum());
    let mut count = EntityCount {
        entity,
        segments,
        segments_finished,
        rows_read,
        rows_recorded: 0,
        written: 0,
        rejected: 0,
        failed: 0,
        pending: None,
    };
    for b in progress.batches.iter().filter(|b| b.entity == count.entity) {
        count.rows_recorded += b.rows;
        count.written += b.items;
        count.rejected += b.rejected;
        count.failed += b.failed;
    }
    count.pending = rows_read.map(|r| r.saturating_sub(count.rows_recorded));
    count
}

/// Reads a run's state: its records from the progress store of
/// `resources`, and its queue's depths through their SQS client when it has
/// a queue.
pub async fn inspect(resources: &Resources, run_id: &RunId) -> Result<RunState, EngineError> {
    let store = &resources.progress_store()?;
    let progress = match store.load(run_id).await {
        Ok(p) => p,
        // Said in words: the service's "resource not found" names no flag.
        Err(_) if matches!(store.exists().await, Ok(false)) => {
            return Err(EngineError::Config(format!(
                "the progress table {} does not exist: a run's counts are kept there only when it runs with --progress-table (or --queue); without one, compare the table with the source: `sql2ddb verify MAPPING --deep`",
                store.table()
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let Some(meta) = progress.meta.clone() else {
        return Err(EngineError::Resume {
            run_id: run_id.clone(),
            message: format!("is not recorded in the progress table {}", store.table()),
        });
    };
    let Verification {
        entities,
        missing,
        complete,
    } = summarize(&progress);
    let unfinished = unfinished_segments(&meta, &progress);
    let ranges = page_ranges(missing);
    let (queue, queue_error) = match &meta.queue {
        Some(url) => queue_state(resources, url).await,
        None => (None, None),
    };
    Ok(RunState {
        run_id: run_id.clone(),
        table: meta.table,
        progress_table: store.table().to_string(),
        started: meta.started,
        complete,
        entities,
        unfinished,
        missing: ranges,
        queue,
        queue_error,
    })
}

/// The segments of a run with no total recorded, each with the pages its
/// reader handed on.
fn unfinished_segments(meta: &RunMeta, progress: &RunProgress) -> Vec<UnfinishedSegment> {
    let mut unfinished = Vec::new();
    for e in &meta.entities {
        for segment in 0..e.segments {
            let finished = progress
                .totals
                .iter()
                .any(|t| t.entity == e.name && t.segment == segment);
            if !finished {
                let pages_sent = progress
                    .cursors
                    .iter()
                    .find(|c| c.entity == e.name && c.segment == segment)
                    .map_or(0, |c| c.pages_sent);
                unfinished.push(UnfinishedSegment {
                    entity: e.name.clone(),
                    segment,
                    pages_sent,
                });
            }
        }
    }
    unfinished
}

/// Missing pages, in order, as ranges of consecutive pages per segment.
fn page_ranges(missing: Vec<MissingPage>) -> Vec<MissingPages> {
    let mut ranges: Vec<MissingPages> = Vec::new();
    for m in missing {
        match ranges.last_mut() {
            Some(r) if r.entity == m.entity && r.segment == m.segment && r.last + 1 == m.page => {
                r.last = m.page;
            }
            _ => ranges.push(MissingPages {
                entity: m.entity,
                segment: m.segment,
                first: m.page,
                last: m.page,
            }),
        }
    }
    ranges
}

/// The depths of the run's queue at `url`, or why they could not be read
/// (secrets masked).
async fn queue_state(resources: &Resources, url: &str) -> (Option<QueueState>, Option<String>) {
    match resources.queue_depth(url).await {
        Ok(d) => (
            Some(QueueState {
                url: url.to_string(),
                visible: d.visible,
                in_flight: d.in_flight,
                dead_letter: d.dead_letter,
            }),
            None,
        ),
        Err(e) => (None, Some(sql2ddb_core::redact_secrets(&e.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(complete: bool, failed: u64, dead: u64, visible: u64) -> RunState {
        RunState {
            run_id: "r".parse().unwrap(),
            table: "t".into(),
            progress_table: "p".into(),
            started: String::new(),
            complete,
            entities: vec![EntityCount {
                entity: "order".into(),
                segments: 1,
                segments_finished: 1,
                rows_read: Some(10),
                rows_recorded: 10,
                written: 10 - failed,
                rejected: 0,
                failed,
                pending: Some(0),
            }],
            unfinished: Vec::new(),
            missing: Vec::new(),
            queue: Some(QueueState {
                url: "q".into(),
                visible,
                in_flight: 0,
                dead_letter: Some(dead),
            }),
            queue_error: None,
        }
    }

    #[test]
    fn verified_only_when_complete_without_failures() {
        assert!(state(true, 0, 0, 0).verified());
        assert!(!state(true, 1, 0, 0).verified());
        assert!(!state(false, 0, 0, 0).verified());
    }

    #[test]
    fn stalled_when_only_the_dead_letter_queue_holds_work() {
        assert!(state(false, 0, 2, 0).stalled());
        assert!(!state(false, 0, 2, 1).stalled(), "messages still waiting");
        assert!(!state(false, 0, 0, 0).stalled(), "nothing dead-lettered");
        assert!(!state(true, 0, 2, 0).stalled(), "complete");
    }
}
