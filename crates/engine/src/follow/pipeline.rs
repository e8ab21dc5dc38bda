//! The follow loop as two halves that overlap: a task reads the next batch
//! and prepares it (decodes its tuples, folds it into the writes it comes
//! to) while the follower writes the batch before and moves the checkpoint
//! past it.
//!
//! What keeps it as safe as one batch at a time:
//! - batches are written one after the other, in source order, each one
//!   only once every write of the one before is acknowledged, so an item's
//!   changes still reach the table in source order;
//! - the checkpoint moves past a batch only once its writes are
//!   acknowledged (and past every batch before it);
//! - what is read ahead is not applied yet: a follower that stops or fails
//!   reads it again from the checkpoint on its next start.
//!
//! Reading ahead needs a reader that does not start at the checkpoint: the
//! slot's temporary copy or the binary log. A peeked slot reads its next
//! batch only once the one before is applied.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sql2ddb_core::KeyAttr;
use sql2ddb_source::cdc::{format_lsn, ChangeBatch, ShapeChange, Truncation};
use sql2ddb_source::Source;
use tokio::sync::{mpsc, Semaphore};

use super::apply::{self, Prepared};
use super::entities::ByTable;
use super::plan::{ApplyCounts, Target};
use super::record::Recorder;
use super::stream::{BatchEnd, Checkpoint, Reader};
use super::{FollowEnd, RETAINED_WARNING_BYTES};
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::stop::StopSignal;

/// Batches read but not yet applied, the one being written included, when
/// the reader can read ahead: one being written while the next is read and
/// prepared.
const BATCHES_AHEAD: usize = 2;

/// How many times `batch_changes` a read of a slot may ask for while the
/// reads before came back full (a backlog). Every read of a slot decodes
/// its WAL again from the slot's restart point, which stays put through a
/// backlog written in less than a few seconds: fewer, larger reads decode
/// it fewer times.
const BACKLOG_GROWTH: usize = 4;

/// A read of a slot asks for twice as much as the one before only while
/// that one's messages took at most half this: wide rows keep their
/// batches as they were.
const GROWN_READ_BYTES: usize = 32 << 20;

/// How long an idle follower of a slot waits before reading it again.
const POLL: Duration = Duration::from_millis(200);

/// How often an idle follower of a slot confirms the position its reads
/// reached (each confirmation writes the slot to the server's disk).
const CONFIRM_IDLE_EVERY: Duration = Duration::from_secs(1);

/// How often the follower says where it is.
const NOTE_EVERY: Duration = Duration::from_secs(10);

/// What the reading half hands the writing half, in source order.
enum Step {
    /// A batch, ready to write.
    Batch(Box<Prepared>),
    /// Nothing more is committed for now. A slot: `through` is a position
    /// the read that found nothing started after, so every change before
    /// it is in the batches before this step (the checkpoint may move
    /// there once they are applied, though no followed table changed).
    CaughtUp { through: Option<u64> },
    /// The binary log is read up to the cutover's position: every batch
    /// before this step is all there is to apply.
    Reached,
    /// Reading or preparing failed: apply what came before, then stop.
    Failed(EngineError),
}

/// What the reading half needs.
pub(super) struct ReadSide {
    pub source: Source,
    pub by_table: Arc<ByTable>,
    pub keys: Vec<KeyAttr>,
    pub batch_changes: usize,
    /// The binary log: the cutover's position (reading stops there).
    pub binlog_cut: Option<u64>,
    /// Where the checkpoint is when the follow starts.
    pub start: u64,
    /// What the stream is called in messages.
    pub name: String,
}

/// What the writing half needs.
pub(super) struct WriteSide<'a> {
    pub source: &'a Source,
    pub by_table: &'a ByTable,
    pub target: &'a Target<'a>,
    pub checkpoint: &'a mut Checkpoint,
    /// The follow's record (`status` reads it).
    pub record: &'a mut Recorder,
    /// The slot: a cutover, which ends once the batch holding its fence
    /// is applied.
    pub fenced: bool,
    pub until_idle: Option<Duration>,
    pub stop: Option<Arc<StopSignal>>,
    pub progress: &'a RunProgress,
    /// What the stream is called in messages.
    pub name: &'a str,
}

/// Where the writing half got to.
pub(super) struct Applied {
    /// Everything before it is applied (the checkpoint).
    pub position: u64,
    pub counts: ApplyCounts,
}

/// Follows until a stop, an idle period or the cutover: `reader`'s batches
/// are read and prepared by a task of their own while `write` writes the
/// ones before and moves the checkpoint. Returns why it ended, and the
/// reader (to close).
pub(super) async fn run(
    read: ReadSide,
    reader: Reader,
    write: WriteSide<'_>,
    applied: &mut Applied,
) -> (Result<FollowEnd, EngineError>, Option<Reader>) {
    let ahead = permits_total(&reader) as usize;
    let permits = Arc::new(Semaphore::new(ahead));
    let (tx, rx) = mpsc::channel(ahead);
    let reading = tokio::spawn(read_ahead(read, reader, tx, permits.clone()));
    let end = apply_steps(write, rx, &permits, ahead > 1, applied).await;
    // The receiver is gone and the permits closed: the reading task ends
    // after the read in hand, and gives the reader back.
    permits.close();
    let reader = reading.await.ok();
    (end, reader)
}

/// The reading half: reads and prepares batches, at most `permits` ahead
/// of the checkpoint, until the writing half is gone.
async fn read_ahead(
    side: ReadSide,
    mut reader: Reader,
    tx: mpsc::Sender<Step>,
    permits: Arc<Semaphore>,
) -> Reader {
    let binlog = matches!(reader, Reader::Binlog(_));
    // What the next read asks for: `batch_changes`, doubled after each
    // full read of a slot up to `BACKLOG_GROWTH` times as much.
    let mut ask = side.batch_changes;
    loop {
        match permits.acquire().await {
            Ok(p) => p.forget(),
            Err(_) => break,
        }
        if tx.is_closed() {
            break;
        }
        // A cutover whose position is read needs no more reading (the
        // binary log would wait for a transaction that never comes).
        let read_to = reader.read_to().unwrap_or(side.start).max(side.start);
        if side.binlog_cut.is_some_and(|at| read_to >= at) {
            let _ = tx.send(Step::Reached).await;
            break;
        }
        let (steps, full, bytes) = read_step(&side, &mut reader, ask).await;
        ask = match full && !binlog && bytes <= GROWN_READ_BYTES / 2 {
            true => (ask * 2).min(side.batch_changes * BACKLOG_GROWTH),
            false => side.batch_changes,
        };
        let idle = matches!(steps[..], [Step::CaughtUp { .. }]);
        // A cutover's fence is read: nothing after it is applied, so
        // reading on would only decode the slot's WAL again.
        let fenced = steps
            .iter()
            .any(|s| matches!(s, Step::Batch(p) if p.end.fence));
        if idle {
            permits.add_permits(1);
        }
        let mut failed = false;
        for step in steps {
            failed |= matches!(step, Step::Failed(_));
            if tx.send(step).await.is_err() {
                failed = true;
                break;
            }
        }
        if failed || fenced {
            break;
        }
        // The binary log waits for transactions within its read.
        if idle && !binlog {
            tokio::time::sleep(POLL).await;
        }
        // A batch short of the limit took what was committed: reading again
        // at once would mostly find nothing new, and every read of a slot
        // decodes its WAL from the restart point again. The next read waits
        // until what was read is applied, as a follower that keeps up needs
        // no read-ahead.
        if !idle && !full {
            match permits.acquire_many(permits_total(&reader)).await {
                Ok(all) => drop(all),
                Err(_) => break,
            }
        }
    }
    reader
}

/// One read of `reader` made ready to write: a batch, nothing new, or a
/// failure; a batch then a stop when a followed table changed shape or was
/// truncated within what was read. Says whether the read (of at most `ask`
/// messages) came back full, and its size in bytes.
async fn read_step(side: &ReadSide, reader: &mut Reader, ask: usize) -> (Vec<Step>, bool, usize) {
    let started = Instant::now();
    // Taken before the read: a read that finds nothing went at least as far.
    let flushed = reader.flushed(&side.source).await;
    let mut batch = match reader.next(&side.source, ask).await {
        Ok(batch) => batch,
        Err(e) => return (vec![Step::Failed(e)], false, 0),
    };
    // A read ends at the first of them, so at most one is set.
    let stop = match (batch.shape_change.take(), batch.truncate.take()) {
        (Some(change), _) => Some(shape_changed(&side.source, change, &side.name).await),
        (None, Some(truncation)) => Some(truncated(truncation, &side.name)),
        (None, None) => None,
    };
    let Some(end) = BatchEnd::of(&batch) else {
        return match stop {
            Some(e) => (vec![Step::Failed(e)], false, 0),
            None => (vec![Step::CaughtUp { through: flushed }], false, 0),
        };
    };
    let full = stop.is_none() && is_full(&batch, ask);
    let read = started.elapsed();
    let prepared = apply::prepare(&side.source, &side.by_table, &batch, end, &side.keys).await;
    tracing::debug!(
        changes = batch.changes.len(),
        read_ms = read.as_millis() as u64,
        prepare_ms = (started.elapsed() - read).as_millis() as u64,
        "follow: batch read and prepared"
    );
    let mut steps = vec![match prepared {
        Ok(p) => Step::Batch(Box::new(p)),
        Err(e) => Step::Failed(e),
    }];
    steps.extend(stop.map(Step::Failed));
    (steps, full, batch.message_bytes)
}

/// The stop at a followed table whose columns changed in the stream. A
/// new full load lets a follower go on from there only if the table still
/// has the stream's new shape (a follower binds to the table as it is when
/// it starts); else the table changed again since, and only a new run
/// follows it.
async fn shape_changed(source: &Source, change: ShapeChange, name: &str) -> EngineError {
    let now = source.relation_shape(change.oid).await;
    let remedy = match now.is_ok_and(|now| now == change.shape) {
        true => format!(
            "{name} is kept before that transaction: run the full load again (`sql2ddb run MAPPING --if-not-empty append`) so every item has the table's new shape, then follow again to go on from there"
        ),
        false => format!(
            "the table has changed shape again since, so no follower can go on from {name}: drop it (`sql2ddb follow MAPPING --slot SLOT --drop-slot`) and start over with `sql2ddb run MAPPING --follow --if-not-empty truncate` (which deletes the table's items first)"
        ),
    };
    EngineError::unfollowable(
        change.table,
        "ALTER TABLE",
        format!("the transaction committed at {}", format_lsn(change.commit_lsn)),
        format!(
            "{}, and its rows would be mapped with the columns and types the follower read them with (values cast to an old type, new columns left out)",
            change.what
        ),
        remedy,
    )
}

/// The stop at a `TRUNCATE` of followed tables. The changes before its
/// transaction are applied and the slot moved past them; a follower can
/// never go past it (a new full load leaves the items of the removed rows
/// in the table, and the next follower would meet the truncate again), so
/// what is left is to start over into an emptied table.
fn truncated(truncation: Truncation, name: &str) -> EngineError {
    EngineError::unfollowable(
        truncation.tables.join(", "),
        "TRUNCATE",
        format!(
            "the transaction committed at {}",
            format_lsn(truncation.commit_lsn)
        ),
        "a TRUNCATE empties a table without naming its rows, so the follower cannot tell which items to delete",
        format!(
            "{name} is kept before that transaction (every change committed before it is applied), and the items of the rows it removed are still in the DynamoDB table; no follower can go on past it: drop the slot (`sql2ddb follow MAPPING --slot SLOT --drop-slot`), and start over with `sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the DynamoDB table's items first"
        ),
    )
}

/// Batches read ahead at most, the one being written included.
fn permits_total(reader: &Reader) -> u32 {
    match reader.reads_ahead() {
        true => BATCHES_AHEAD as u32,
        false => 1,
    }
}

/// Whether a read came back (nearly) as large as asked: more is likely
/// waiting. A slot counts its messages (two a transaction besides its
/// changes, and relation descriptions), the binary log its row changes.
fn is_full(batch: &ChangeBatch, max_changes: usize) -> bool {
    let messages = batch.changes.len() + 2 * batch.transactions as usize;
    messages >= max_changes - max_changes / 10
}

/// A batch whose writes are acknowledged and whose checkpoint has not moved
/// yet: it moves while the next batch is written.
struct Written {
    end: BatchEnd,
    /// The counts once it was written (what the record says at its end).
    counts: ApplyCounts,
}

/// The writing half: writes each batch, then moves the checkpoint past it.
/// With a reader that reads ahead (`overlap`), the checkpoint of a batch
/// moves while the next batch is written: its writes are acknowledged, and
/// the next batch's writes start only then, so items still change in
/// source order. A reader that starts at the checkpoint (a peeked slot)
/// reads its next batch only once the checkpoint moved.
async fn apply_steps(
    mut side: WriteSide<'_>,
    mut rx: mpsc::Receiver<Step>,
    permits: &Semaphore,
    overlap: bool,
    applied: &mut Applied,
) -> Result<FollowEnd, EngineError> {
    let mut last_change = Instant::now();
    let mut last_note = Instant::now();
    let mut last_confirm: Option<Instant> = None;
    let mut written: Option<Written> = None;
    loop {
        if side.stop.as_ref().is_some_and(|s| s.is_stopped()) {
            confirm(&mut side, applied, written.take()).await?;
            return Ok(FollowEnd::Stopped);
        }
        let step = rx.recv().await;
        if !matches!(step, Some(Step::Batch(_))) {
            confirm(&mut side, applied, written.take()).await?;
        }
        let Some(step) = step else {
            return Err(EngineError::Config(format!(
                "reading {} ended unexpectedly",
                side.name
            )));
        };
        match step {
            Step::Failed(e) => return Err(e),
            Step::Reached => return Ok(FollowEnd::CutOver),
            Step::CaughtUp { through } => {
                confirm_idle(&mut side, applied, through, &mut last_confirm).await?;
                if side
                    .until_idle
                    .is_some_and(|idle| last_change.elapsed() >= idle)
                {
                    return Ok(FollowEnd::Idle);
                }
                side.record.caught_up(side.progress).await;
            }
            Step::Batch(prepared) => {
                if prepared.changes > 0 {
                    last_change = Instant::now();
                }
                let batch = BatchStep {
                    permits,
                    overlap,
                    written: &mut written,
                };
                if apply_batch(&mut side, applied, *prepared, batch).await? {
                    return Ok(FollowEnd::CutOver);
                }
            }
        }
        if last_note.elapsed() >= NOTE_EVERY {
            last_note = Instant::now();
            note(&side, &applied.counts).await?;
        }
    }
}

/// What one batch's step shares with the loop around it.
struct BatchStep<'a> {
    permits: &'a Semaphore,
    /// The checkpoint moves while the next batch is written.
    overlap: bool,
    /// The batch written before, whose checkpoint has not moved yet.
    written: &'a mut Option<Written>,
}

/// Writes one prepared batch while the batch before moves its checkpoint;
/// its own checkpoint moves now, or with the next batch when they overlap.
/// Returns whether the batch ended at the cutover's fence.
async fn apply_batch(
    side: &mut WriteSide<'_>,
    applied: &mut Applied,
    prepared: Prepared,
    step: BatchStep<'_>,
) -> Result<bool, EngineError> {
    let end = prepared.end.clone();
    let (started, changes) = (Instant::now(), prepared.changes);
    let before = step.written.take();
    let (moved, wrote) = tokio::join!(
        commit(side.checkpoint, side.source, before.as_ref()),
        apply::write(side.by_table, prepared, side.target, &mut applied.counts)
    );
    moved?;
    if let Some(before) = before {
        record(side, applied, &before).await;
    }
    wrote?;
    let write_ms = started.elapsed().as_millis() as u64;
    let now = Written {
        end,
        counts: applied.counts.clone(),
    };
    let fence = side.fenced && now.end.fence;
    if step.overlap && !fence {
        tracing::debug!(changes, write_ms, "follow: batch written");
        step.permits.add_permits(1);
        *step.written = Some(now);
    } else {
        confirm(side, applied, Some(now)).await?;
        tracing::debug!(
            changes,
            write_ms,
            checkpoint_ms = started.elapsed().as_millis() as u64 - write_ms,
            "follow: batch written, checkpoint moved"
        );
        step.permits.add_permits(1);
    }
    Ok(fence)
}

/// Moves the checkpoint past `batch` (written), if any.
async fn commit(
    checkpoint: &mut Checkpoint,
    source: &Source,
    batch: Option<&Written>,
) -> Result<(), EngineError> {
    match batch {
        Some(b) => checkpoint.commit(source, &b.end).await,
        None => Ok(()),
    }
}

/// Moves the checkpoint past `batch` (written), if any, and records it.
async fn confirm(
    side: &mut WriteSide<'_>,
    applied: &mut Applied,
    batch: Option<Written>,
) -> Result<(), EngineError> {
    let Some(batch) = batch else {
        return Ok(());
    };
    side.checkpoint.commit(side.source, &batch.end).await?;
    record(side, applied, &batch).await;
    Ok(())
}

/// The checkpoint moved past `batch`: where the follow is applied to, in
/// memory and in its record.
async fn record(side: &mut WriteSide<'_>, applied: &mut Applied, batch: &Written) {
    applied.position = batch.end.ordinal;
    side.record
        .applied(
            side.checkpoint.text(batch.end.ordinal),
            batch.end.last_commit_time,
            &batch.counts,
            side.progress,
        )
        .await;
}

/// Nothing committed is left to apply and no followed table changed up to
/// `through`: the slot is confirmed as far as was read (at most every
/// [`CONFIRM_IDLE_EVERY`]), or the server would keep its WAL while other
/// tables write.
async fn confirm_idle(
    side: &mut WriteSide<'_>,
    applied: &mut Applied,
    through: Option<u64>,
    last_confirm: &mut Option<Instant>,
) -> Result<(), EngineError> {
    let due = last_confirm.is_none_or(|t| t.elapsed() >= CONFIRM_IDLE_EVERY);
    let Some(at) = through.filter(|&at| due && at > applied.position) else {
        return Ok(());
    };
    *last_confirm = Some(Instant::now());
    side.checkpoint
        .commit(side.source, &BatchEnd::at(at))
        .await?;
    applied.position = at;
    let text = side.checkpoint.text(at);
    side.record
        .applied(text, None, &applied.counts, side.progress)
        .await;
    Ok(())
}

/// Where the follower is, how far behind, and (slot) a warning when the
/// slot keeps much WAL.
async fn note(side: &WriteSide<'_>, counts: &ApplyCounts) -> Result<(), EngineError> {
    use sql2ddb_core::shown::{count, thousands};
    let tally = format!(
        "{}, {}, {}, {} rejected",
        count(counts.changes, "change", "changes"),
        count(counts.puts, "put", "puts"),
        count(counts.deletes, "delete", "deletes"),
        thousands(counts.rejected)
    );
    let (source, name) = (side.source, side.name);
    match &*side.checkpoint {
        Checkpoint::Binlog { position, .. } => {
            let current = source.binlog_position().await?;
            side.progress.note(format!(
                "{name}: applied to {position}, the source's binary log at {current}; {tally}"
            ));
        }
        Checkpoint::Slot { slot } => {
            if let Some(s) = source.slot_state(slot).await? {
                let warn = if s.retained_bytes > RETAINED_WARNING_BYTES {
                    format!(
                        "; warning: the slot keeps {} MB of WAL on the source's disk",
                        s.retained_bytes >> 20
                    )
                } else {
                    String::new()
                };
                side.progress.note(format!(
                    "slot {slot}: applied to {}, {} bytes of WAL behind; {tally}{warn}",
                    format_lsn(s.confirmed),
                    s.lag_bytes(),
                ));
            }
        }
    }
    Ok(())
}
