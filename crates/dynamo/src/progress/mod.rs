//! The progress store: how a run proves it is complete by counting.
//!
//! One DynamoDB table of its own (default `<target>-sql2ddb-progress`), one
//! partition per run (`PK = RUN#<id>`), and in it:
//! - `RUN`: the run's description ([`RunMeta`]), written when it starts, with
//!   the digest of the mapping's items (so a resume can refuse a changed mapping);
//! - `BATCH#<entity>#<segment>#<page>#<part>`: one item per batch a writer
//!   finished, with its rows, items, rejects and failures, and what writing
//!   it cost ([`BatchCost`]);
//! - `CURSOR#<entity>#<segment>`: a segment's keyset cursor and how many pages
//!   it has handed on, updated as the segment advances;
//! - `TOTAL#<entity>#<segment>`: a segment's final row count, written when the
//!   reader reaches its end;
//! - `DONE`: written once, by the first check that finds every row accounted
//!   for ([`DoneCounts`]);
//! - `FOLLOW`: where the run's follow of the source's changes stands (its
//!   applied position, state and counts, as JSON the engine defines),
//!   rewritten now and then while it follows;
//! - `FLEET#<member>`: a worker of the run's fleet, rewritten at each of its
//!   beats, so the workers share the run's write-capacity cap and learn of
//!   each other's throttling ([`FleetBeat`]).
//!
//! There is no shared counter: racing writers would corrupt it. Every record
//! has a deterministic key, so a redelivered batch rewrites its own record
//! instead of counting twice, and the engine's verification adds the records up.
//!
//! Each call is retried by the one retry engine (the client's own retries
//! are off); a record that still fails leaves its message
//! unacknowledged, so the batch is delivered again, and a cursor update that
//! still fails stops the reader, which resumes from the last cursor. Every
//! write is idempotent: written twice (a retry whose first answer was lost),
//! a record is the same record.

mod done;
mod fleet;
mod follow;
mod records;
mod store;

pub use done::{DoneCounts, DoneState};
pub use fleet::FleetBeat;
pub use records::{
    BatchCost, BatchRecord, EntityMeta, RunMeta, RunProgress, SegmentBounds, SegmentCursor,
    SegmentTotal, SnapshotMark,
};
pub use store::ProgressStore;

/// The progress table of a target table, unless the user names another.
pub fn default_table(target: &str) -> String {
    format!("{target}-sql2ddb-progress")
}
