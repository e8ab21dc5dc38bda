//! An update run's checkpoint, `checkpoint.json` in its run directory: for
//! each read segment, where its next page starts (DynamoDB's
//! `LastEvaluatedKey`), whether it reached its end, and its counts so far.
//!
//! A segment records its state once the writes of a page are finished, so a
//! run stopped at any moment (Ctrl-C, `--max-seconds`, a crash) continues
//! with `--resume` from the page after the last one recorded: a page cut
//! short by a crash is read and written again, which is harmless (idempotent
//! updates are the same twice, non-idempotent ones carry the run's marker).
//! The file is replaced whole (written aside, then renamed), never half written.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sql2ddb_core::Item;

use super::report::UpdateProgress;
use crate::error::EngineError;
use crate::ids::RunId;

/// Counts of a segment (or of a page, or of one item's write).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    pub scanned: u64,
    pub matched: u64,
    pub updated: u64,
    pub skipped: u64,
    pub failed: u64,
    pub pages: u64,
    pub retries: u64,
    pub throttled: u64,
    pub read_milli_units: u64,
    pub write_milli_units: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, o: &Counts) {
        self.scanned += o.scanned;
        self.matched += o.matched;
        self.updated += o.updated;
        self.skipped += o.skipped;
        self.failed += o.failed;
        self.pages += o.pages;
        self.retries += o.retries;
        self.throttled += o.throttled;
        self.read_milli_units += o.read_milli_units;
        self.write_milli_units += o.write_milli_units;
    }

    /// Adds these counts to the live counters.
    pub(crate) fn publish(&self, p: &UpdateProgress) {
        let add = UpdateProgress::add;
        add(&p.scanned, self.scanned);
        add(&p.matched, self.matched);
        add(&p.updated, self.updated);
        add(&p.skipped, self.skipped);
        add(&p.failed, self.failed);
        add(&p.pages, self.pages);
        add(&p.retries, self.retries);
        add(&p.throttled, self.throttled);
        add(&p.read_milli_units, self.read_milli_units);
        add(&p.write_milli_units, self.write_milli_units);
    }
}

/// Where one segment stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SegmentState {
    /// The key the next page starts after; `None` before the first page.
    pub next: Option<Item>,
    /// The segment read its last page.
    pub done: bool,
    /// Its counts, every attempt of the run together.
    pub counts: Counts,
}

/// The whole checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    /// The job's `name`, `table` and read, to refuse resuming another job.
    pub job: String,
    pub table: String,
    pub read: String,
    pub segments: Vec<SegmentState>,
}

impl Checkpoint {
    /// The checkpoint of a run that has not read anything yet.
    pub(crate) fn new(job: &str, table: &str, read: &str, segments: usize) -> Checkpoint {
        Checkpoint {
            job: job.into(),
            table: table.into(),
            read: read.into(),
            segments: vec![SegmentState::default(); segments],
        }
    }

    /// Reads the checkpoint of run `run_id` in `run_dir`, checking it is
    /// this job's.
    pub(crate) fn load(
        run_dir: &Path,
        run_id: &RunId,
        expect: &Checkpoint,
    ) -> Result<Checkpoint, EngineError> {
        let path = run_dir.join(FILE);
        let refuse = |message: String| EngineError::Resume {
            run_id: run_id.clone(),
            message,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            refuse(format!(
                "cannot be resumed: {}: {e} (give the --runs-dir it ran with)",
                path.display()
            ))
        })?;
        let found: Checkpoint = serde_json::from_str(&text).map_err(|e| {
            refuse(format!(
                "cannot be resumed: {} is not a checkpoint: {e}",
                path.display()
            ))
        })?;
        let same = found.job == expect.job
            && found.table == expect.table
            && found.read == expect.read
            && found.segments.len() == expect.segments.len();
        if !same {
            return Err(refuse(format!(
                "was job {} on table {} ({}, {} segments), not job {} on {} ({}): resume it with its own job file",
                found.job,
                found.table,
                found.read,
                found.segments.len(),
                expect.job,
                expect.table,
                expect.read
            )));
        }
        Ok(found)
    }

    /// Every segment's counts together.
    pub(crate) fn totals(&self) -> Counts {
        let mut all = Counts::default();
        self.segments.iter().for_each(|s| all.add(&s.counts));
        all
    }
}

const FILE: &str = "checkpoint.json";

/// The checkpoint file, updated by the segments as they advance.
pub(crate) struct CheckpointFile {
    path: PathBuf,
    state: Mutex<Checkpoint>,
}

impl CheckpointFile {
    pub(crate) fn new(run_dir: &Path, checkpoint: Checkpoint) -> Self {
        CheckpointFile {
            path: run_dir.join(FILE),
            state: Mutex::new(checkpoint),
        }
    }

    /// Segment `index`'s state when it starts.
    pub(crate) fn segment(&self, index: usize) -> SegmentState {
        self.state.lock().expect("checkpoint lock").segments[index].clone()
    }

    /// Records segment `index`'s new state and rewrites the file.
    pub(crate) fn record(&self, index: usize, segment: SegmentState) -> Result<(), EngineError> {
        let mut state = self.state.lock().expect("checkpoint lock");
        state.segments[index] = segment;
        self.write(&state)
    }

    /// Writes the file as it stands: at the start, so that a run stopped
    /// before it finished a page (throttled past its budget, killed) can
    /// be resumed too.
    pub(crate) fn save(&self) -> Result<(), EngineError> {
        self.write(&self.state.lock().expect("checkpoint lock"))
    }

    fn write(&self, state: &Checkpoint) -> Result<(), EngineError> {
        let json = serde_json::to_vec(state).expect("a checkpoint serialises");
        let aside = self.path.with_extension("json.new");
        let io = |e: std::io::Error| EngineError::io(&self.path, e);
        std::fs::write(&aside, json).map_err(io)?;
        std::fs::rename(&aside, &self.path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::AttrValue;

    use super::*;

    #[test]
    fn a_recorded_checkpoint_loads_for_its_own_job_only() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = Checkpoint::new("close", "shop", "scan, 2 segments", 2);
        let file = CheckpointFile::new(dir.path(), fresh.clone());
        let next = Item::from([("PK".to_string(), AttrValue::S("C#1".into()))]);
        let state = SegmentState {
            next: Some(next),
            done: false,
            counts: Counts {
                scanned: 10,
                matched: 4,
                updated: 3,
                skipped: 1,
                ..Counts::default()
            },
        };
        file.record(1, state.clone()).unwrap();
        let loaded = Checkpoint::load(dir.path(), &"r1".parse().unwrap(), &fresh).unwrap();
        assert_eq!(loaded.segments[1], state);
        assert_eq!(loaded.totals().matched, 4);
        let other = Checkpoint::new("close", "shop", "scan, 3 segments", 3);
        let e = Checkpoint::load(dir.path(), &"r1".parse().unwrap(), &other).unwrap_err();
        assert!(
            e.to_string().contains("resume it with its own job file"),
            "{e}"
        );
        let e =
            Checkpoint::load(&dir.path().join("nope"), &"r2".parse().unwrap(), &fresh).unwrap_err();
        assert!(e.to_string().contains("run r2 cannot be resumed"), "{e}");
        // Saved before any page: it resumes from the start.
        let started = tempfile::tempdir().unwrap();
        CheckpointFile::new(started.path(), fresh.clone())
            .save()
            .unwrap();
        assert_eq!(
            Checkpoint::load(started.path(), &"r3".parse().unwrap(), &fresh).unwrap(),
            fresh
        );
    }
}
