//! What a follow records of itself for `status`: its state, the position it
//! has applied up to, when, and what it applied. Kept in the run's
//! directory ([`FOLLOW_RECORD`]) and, when the run keeps a progress table,
//! in the run's `FOLLOW` record there too, so `status` on another machine
//! sees it.
//!
//! The record is rewritten after a checkpoint at most once a second
//! ([`RECORD_EVERY`]), while idle at most every [`HEARTBEAT`], and once more
//! when the follow ends. It only reports: the checkpoint stays the slot
//! (PostgreSQL) or `binlog-position` (MySQL/MariaDB). A record that cannot
//! be written is a warning, not a reason to stop following.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_dynamo::Dynamo;

use super::plan::ApplyCounts;
use crate::error::EngineError;
use crate::ids::RunId;
use crate::progress::RunProgress;

/// The file in a run's directory that holds its follow record (JSON).
pub const FOLLOW_RECORD: &str = "follow.json";

/// Least time between two records written after checkpoints.
pub const RECORD_EVERY: Duration = Duration::from_secs(1);

/// Least time between two records written while nothing changes.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Where a follow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowState {
    /// A follower is applying the source's changes.
    Following,
    /// Stopped by a stop request (Ctrl-C, SIGTERM); it can go on.
    Stopped,
    /// Stopped after no change came for `--follow-until-idle`; it can go on.
    Idle,
    /// Cut over: the source's changes up to the cutover are applied;
    /// (PostgreSQL) the slot is dropped once the table equals the source,
    /// and kept when it does not.
    CutOver,
    /// Stopped on an error; it goes on from the checkpoint when followed again.
    Failed,
}

impl FollowState {
    /// The state in words.
    pub fn text(self) -> &'static str {
        match self {
            FollowState::Following => "following",
            FollowState::Stopped => "stopped",
            FollowState::Idle => "stopped (no change for the idle period)",
            FollowState::CutOver => "cut over",
            FollowState::Failed => "stopped by an error",
        }
    }
}

/// What a follow applied, as recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCounts {
    /// Row changes applied.
    pub changes: u64,
    /// Items put.
    pub puts: u64,
    /// Items deleted.
    pub deletes: u64,
    /// Rows rejected.
    pub rejected: u64,
}

impl From<&ApplyCounts> for RecordedCounts {
    fn from(c: &ApplyCounts) -> Self {
        RecordedCounts {
            changes: c.changes,
            puts: c.puts,
            deletes: c.deletes,
            rejected: c.rejected,
        }
    }
}

/// A follow's record, as `status` reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowRecord {
    /// The run followed.
    pub run_id: RunId,
    /// Where the follow stands.
    pub state: FollowState,
    /// PostgreSQL: the replication slot read; `None` for MySQL/MariaDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// Everything before it is applied: an LSN (`16/B374D848`) or a binary
    /// log `file:position`.
    pub position: String,
    /// When this follow started.
    pub started_at: DateTime<Utc>,
    /// When the checkpoint last moved to `position`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<DateTime<Utc>>,
    /// When the last applied transaction committed on the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_commit_at: Option<DateTime<Utc>>,
    /// When the follower last found nothing more to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caught_up_at: Option<DateTime<Utc>>,
    /// What this follow applied since `started_at`.
    pub counts: RecordedCounts,
    /// When the record was written.
    pub updated_at: DateTime<Utc>,
    /// Why the follow stopped, when it failed (secrets redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a follow records itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordTarget {
    /// The run's id (the progress table's partition).
    pub run_id: RunId,
    /// The run's directory ([`FOLLOW_RECORD`] goes there).
    pub run_dir: PathBuf,
    /// The run's progress table, when it keeps one.
    pub progress_table: Option<String>,
}

impl RecordTarget {
    /// Run `run_id` of `runs_dir`, with the progress table its report
    /// names (none when the report is absent or names none).
    pub fn of_run(runs_dir: &Path, run_id: &RunId) -> RecordTarget {
        let run_dir = runs_dir.join(run_id);
        let progress_table = std::fs::read_to_string(run_dir.join("report.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|r| r.get("progress_table")?.as_str().map(str::to_string));
        RecordTarget {
            run_id: run_id.clone(),
            run_dir,
            progress_table,
        }
    }

    /// The run of `runs_dir` (a directory named as a run, with a run
    /// report) whose id `is_run` accepts, if one is there: a PostgreSQL
    /// follow named by its slot finds its run this way.
    pub fn find(runs_dir: &Path, is_run: impl Fn(&RunId) -> bool) -> Option<RecordTarget> {
        let entries = std::fs::read_dir(runs_dir).ok()?;
        let run = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join("report.json").is_file())
            .filter_map(|e| RunId::try_from(e.file_name().into_string().ok()?).ok())
            .find(|run| is_run(run))?;
        Some(RecordTarget::of_run(runs_dir, &run))
    }
}

/// The record read from a run's directory; `None` when there is none.
pub fn read_file(run_dir: &Path) -> Result<Option<FollowRecord>, EngineError> {
    let path = run_dir.join(FOLLOW_RECORD);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::io(path, e)),
    };
    parse(&text, &path.display().to_string()).map(Some)
}

/// The record read from a run's `FOLLOW` record in `store`; `None` when
/// there is none (also when the table does not exist).
pub async fn read_table(
    store: &ProgressStore,
    run_id: &RunId,
) -> Result<Option<FollowRecord>, EngineError> {
    match store.follow_record(run_id).await {
        Ok(Some(text)) => {
            let place = format!("the FOLLOW record of the progress table {}", store.table());
            parse(&text, &place).map(Some)
        }
        Ok(None) => Ok(None),
        Err(_) if matches!(store.exists().await, Ok(false)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn parse(text: &str, place: &str) -> Result<FollowRecord, EngineError> {
    serde_json::from_str(text)
        .map_err(|e| EngineError::Config(format!("{place} is not a follow record: {e}")))
}

/// A source commit time (microseconds since 2000-01-01 UTC) as a time.
pub(super) fn commit_time(micros: i64) -> Option<DateTime<Utc>> {
    const EPOCH_2000_MICROS: i64 = 946_684_800_000_000;
    DateTime::from_timestamp_micros(micros.checked_add(EPOCH_2000_MICROS)?)
}

/// Keeps a follow's record; does nothing without a [`RecordTarget`].
pub(super) struct Recorder {
    /// The record and the file it is written to; `None` without a target.
    record: Option<(FollowRecord, PathBuf)>,
    store: Option<ProgressStore>,
    written: Instant,
    /// The record holds news not yet written.
    dirty: bool,
    warned: bool,
}

impl Recorder {
    /// Starts the record of a follow from `position` (written at once).
    pub(super) async fn start(
        target: Option<&RecordTarget>,
        dynamo: &Dynamo,
        slot: Option<&str>,
        position: String,
        progress: &RunProgress,
    ) -> Recorder {
        let now = Utc::now();
        let record = target.map(|t| {
            let record = FollowRecord {
                run_id: t.run_id.clone(),
                state: FollowState::Following,
                slot: slot.map(str::to_string),
                position,
                started_at: now,
                applied_at: None,
                last_commit_at: None,
                caught_up_at: None,
                counts: RecordedCounts::default(),
                updated_at: now,
                error: None,
            };
            (record, t.run_dir.join(FOLLOW_RECORD))
        });
        let mut recorder = Recorder {
            record,
            store: target.and_then(|t| {
                let table = t.progress_table.as_ref()?;
                Some(ProgressStore::new(dynamo.clone(), table.clone()))
            }),
            written: Instant::now(),
            dirty: true,
            warned: false,
        };
        recorder.write(progress).await;
        recorder
    }

    /// The checkpoint moved to `position`, past a batch whose last
    /// transaction was committed at `last_commit_time` (the source's clock).
    pub(super) async fn applied(
        &mut self,
        position: String,
        last_commit_time: Option<i64>,
        counts: &ApplyCounts,
        progress: &RunProgress,
    ) {
        let Some((record, _)) = &mut self.record else {
            return;
        };
        let now = Utc::now();
        record.position = position;
        record.applied_at = Some(now);
        if let Some(at) = last_commit_time.and_then(commit_time) {
            record.last_commit_at = Some(at);
        }
        record.counts = counts.into();
        self.dirty = true;
        if self.written.elapsed() >= RECORD_EVERY {
            self.write(progress).await;
        }
    }

    /// Nothing more to read for now.
    pub(super) async fn caught_up(&mut self, progress: &RunProgress) {
        let Some((record, _)) = &mut self.record else {
            return;
        };
        record.caught_up_at = Some(Utc::now());
        let since = self.written.elapsed();
        if (self.dirty && since >= RECORD_EVERY) || since >= HEARTBEAT {
            self.write(progress).await;
        }
    }

    /// The follow ended, at `position`, in state `end` (or on an error).
    pub(super) async fn finish(
        &mut self,
        end: Result<FollowState, &EngineError>,
        position: String,
        counts: &ApplyCounts,
        progress: &RunProgress,
    ) {
        let Some((record, _)) = &mut self.record else {
            return;
        };
        let (state, error) = match end {
            Ok(state) => (state, None),
            Err(e) => (
                FollowState::Failed,
                Some(sql2ddb_core::redact_secrets(&e.to_string())),
            ),
        };
        record.state = state;
        record.error = error;
        record.position = position;
        record.counts = counts.into();
        self.write(progress).await;
    }

    async fn write(&mut self, progress: &RunProgress) {
        let Some((record, file)) = &mut self.record else {
            return;
        };
        record.updated_at = Utc::now();
        self.written = Instant::now();
        self.dirty = false;
        let json = serde_json::to_string(&record).expect("a follow record serialises");
        let mut failed = write_file(file, &json).err().map(|e| e.to_string());
        if let Some(store) = &self.store {
            if let Err(e) = store.record_follow(&record.run_id, &json).await {
                failed = Some(format!("progress table {}: {e}", store.table()));
            }
        }
        if let Some(why) = failed.filter(|_| !self.warned) {
            self.warned = true;
            progress.note(format!(
                "warning: the follow's position could not be recorded for `status` ({}); following goes on, the checkpoint is unaffected",
                sql2ddb_core::redact_secrets(&why)
            ));
        }
    }
}

/// Writes `json` to `path` whole: a new file, renamed over the old one.
fn write_file(path: &Path, json: &str) -> Result<(), EngineError> {
    let io = |e| EngineError::io(path, e);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_time_counts_from_2000() {
        let at = commit_time(0).unwrap();
        assert_eq!(at.to_rfc3339(), "2000-01-01T00:00:00+00:00");
        let later = commit_time(1_500_000).unwrap();
        assert_eq!((later - at).num_milliseconds(), 1_500);
    }

    #[test]
    fn a_follow_is_recorded_in_its_run_with_the_run_s_progress_table() {
        let dir = tempfile::tempdir().unwrap();
        let run = "20240501T100000Z-3f2a1c";
        let run_dir = dir.path().join(run);
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::create_dir_all(dir.path().join("other")).unwrap();
        std::fs::write(
            run_dir.join("report.json"),
            r#"{"run_id": "x", "progress_table": "shop-sql2ddb-progress"}"#,
        )
        .unwrap();
        let target = RecordTarget::find(dir.path(), |r| r.starts_with("2024")).unwrap();
        assert_eq!(target.run_id, run);
        assert_eq!(target.run_dir, run_dir);
        assert_eq!(
            target.progress_table.as_deref(),
            Some("shop-sql2ddb-progress")
        );
        // A directory without a run report is no run.
        assert_eq!(RecordTarget::find(dir.path(), |r| r == "other"), None);
        assert_eq!(
            RecordTarget::of_run(dir.path(), &"gone".parse().unwrap()).progress_table,
            None
        );
    }

    #[test]
    fn a_record_reads_back_from_its_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_file(dir.path()).unwrap(), None);
        let now = Utc::now();
        let record = FollowRecord {
            run_id: "r".parse().unwrap(),
            state: FollowState::Idle,
            slot: None,
            position: "mysql-bin.000003:120".into(),
            started_at: now,
            applied_at: Some(now),
            last_commit_at: None,
            caught_up_at: Some(now),
            counts: RecordedCounts {
                changes: 3,
                puts: 2,
                deletes: 1,
                rejected: 0,
            },
            updated_at: now,
            error: None,
        };
        let path = dir.path().join(FOLLOW_RECORD);
        write_file(&path, &serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(read_file(dir.path()).unwrap(), Some(record));
        std::fs::write(&path, "{").unwrap();
        let err = read_file(dir.path()).unwrap_err();
        assert!(err.to_string().contains("is not a follow record"), "{err}");
    }
}
