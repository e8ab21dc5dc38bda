//! `status` of a followed run: its follow record (from the run's directory
//! or its progress table, the newer), the source's position now and how far
//! behind the follow is, in position and in time.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sql2ddb_dynamo::progress::ProgressStore;
use sql2ddb_source::cdc::{format_lsn, BinlogPosition};
use sql2ddb_source::Source;

use super::record::{read_file, read_table, FollowRecord, FollowState, FOLLOW_RECORD};
use super::stream::{binlog_start, BINLOG_CHECKPOINT};
use crate::error::EngineError;
use crate::ids::RunId;

/// How long `status` waits for the source to answer.
const SOURCE_WAIT: Duration = Duration::from_secs(15);

/// A record this old, of a follow it says is following, is likely of a
/// follower that was killed: a live one writes at least every
/// [`super::record::HEARTBEAT`].
pub const SILENT_AFTER: Duration = Duration::from_secs(60);

/// Where a followed run stands.
#[derive(Debug, Clone, Serialize)]
pub struct FollowStatus {
    /// The follow's record as last written.
    pub record: FollowRecord,
    /// Where that record was read: the progress table, or the run's file.
    pub recorded_in: String,
    /// Everything before it is applied: the checkpoint itself when it could
    /// be read (the slot's confirmed LSN, the run's `binlog-position`),
    /// else the record's position.
    pub applied: String,
    /// MariaDB: the GTID position of the applied one, from the checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_gtid: Option<String>,
    /// The source now; `None` when it could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceNow>,
    /// Why the source could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_error: Option<String>,
    /// How far behind the source the follow is, in seconds: 0 when it has
    /// applied up to the source's current position; otherwise the time
    /// since the last applied transaction committed or since the follower
    /// last found nothing to apply, whichever is later (the first change
    /// not applied is younger than that). `None` when the source could not
    /// be asked, the follow is cut over, or neither time is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind_seconds: Option<f64>,
    /// Seconds since the record was written.
    pub record_age_seconds: f64,
}

impl FollowStatus {
    /// The record says following, but no record came for [`SILENT_AFTER`].
    pub fn silent(&self) -> bool {
        self.record.state == FollowState::Following
            && self.record_age_seconds >= SILENT_AFTER.as_secs_f64()
    }
}

/// The source, as `status` found it.
#[derive(Debug, Clone, Serialize)]
pub struct SourceNow {
    /// Its current position: the WAL's end (PostgreSQL), the binary log's
    /// `file:position` (MySQL/MariaDB).
    pub position: String,
    /// Whether the applied position is the source's current one.
    pub caught_up: bool,
    /// PostgreSQL: WAL bytes written since the applied position (also of
    /// tables and databases not followed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wal_behind_bytes: Option<u64>,
    /// PostgreSQL: WAL bytes the slot keeps on the source's disk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retained_bytes: Option<u64>,
    /// PostgreSQL: the slot is gone (dropped by a cutover, or by hand).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub slot_missing: bool,
}

/// Where run `run_id`'s follow stands; `None` when the run has no follow
/// record (never followed, or still in its full load). The record is read
/// from `run_dir` and from `store` (the run's progress table), the newer
/// winning; the source at `source_url` is asked where it is now.
pub async fn follow_status(
    run_id: &RunId,
    run_dir: &Path,
    store: Option<&ProgressStore>,
    source_url: Option<&str>,
) -> Result<Option<FollowStatus>, EngineError> {
    let from_file =
        read_file(run_dir)?.map(|r| (r, run_dir.join(FOLLOW_RECORD).display().to_string()));
    let from_table = match store {
        Some(store) => read_table(store, run_id)
            .await?
            .map(|r| (r, format!("progress table {}", store.table()))),
        None => None,
    };
    let newest = [from_file, from_table]
        .into_iter()
        .flatten()
        .max_by_key(|(r, _)| r.updated_at);
    let Some((record, recorded_in)) = newest else {
        return Ok(None);
    };
    let now = Utc::now();
    let mut status = FollowStatus {
        applied: record.position.clone(),
        applied_gtid: None,
        record_age_seconds: seconds(now - record.updated_at),
        record,
        recorded_in,
        source: None,
        source_error: None,
        behind_seconds: None,
    };
    let Some(url) = source_url else {
        status.source_error = Some("no source URL: give the run's mapping".into());
        return Ok(Some(status));
    };
    let asked = tokio::time::timeout(SOURCE_WAIT, ask_source(url, &status.record, run_dir)).await;
    match asked {
        Ok(Ok((applied, gtid, now_at))) => {
            status.applied = applied;
            status.applied_gtid = gtid;
            status.source = Some(now_at);
        }
        Ok(Err(e)) => status.source_error = Some(sql2ddb_core::redact_secrets(&e.to_string())),
        Err(_) => {
            status.source_error = Some(format!(
                "the source did not answer within {} s",
                SOURCE_WAIT.as_secs()
            ))
        }
    }
    status.behind_seconds = behind(
        &status.record,
        status.source.as_ref().map(|s| s.caught_up),
        now,
    );
    Ok(Some(status))
}

/// The applied position (the checkpoint's, else the record's) and the
/// source's own, from the source.
async fn ask_source(
    url: &str,
    record: &FollowRecord,
    run_dir: &Path,
) -> Result<(String, Option<String>, SourceNow), EngineError> {
    let source = Source::connect(url, 1).await?;
    let result = async {
        match &record.slot {
            Some(slot) => Ok(match source.slot_state(slot).await? {
                Some(s) => (
                    format_lsn(s.confirmed),
                    None,
                    SourceNow {
                        position: format_lsn(s.current),
                        caught_up: s.current <= s.confirmed,
                        wal_behind_bytes: Some(s.lag_bytes()),
                        retained_bytes: Some(s.retained_bytes),
                        slot_missing: false,
                    },
                ),
                None => (
                    record.position.clone(),
                    None,
                    SourceNow {
                        position: format_lsn(source.current_wal_lsn().await?),
                        caught_up: false,
                        wal_behind_bytes: None,
                        retained_bytes: None,
                        slot_missing: true,
                    },
                ),
            }),
            None => {
                let current = source.binlog_position().await?;
                let applied = match run_dir.join(BINLOG_CHECKPOINT).is_file() {
                    true => binlog_start(run_dir)?,
                    false => BinlogPosition::parse(&record.position)?,
                };
                Ok((
                    applied.to_string(),
                    applied.gtid.clone(),
                    SourceNow {
                        position: current.to_string(),
                        caught_up: current.ordinal() <= applied.ordinal(),
                        wal_behind_bytes: None,
                        retained_bytes: None,
                        slot_missing: false,
                    },
                ))
            }
        }
    }
    .await;
    source.close().await;
    result
}

/// Seconds behind the source (see [`FollowStatus::behind_seconds`]).
fn behind(record: &FollowRecord, caught_up: Option<bool>, now: DateTime<Utc>) -> Option<f64> {
    if record.state == FollowState::CutOver {
        return None;
    }
    match caught_up? {
        true => Some(0.0),
        false => {
            let since = record.last_commit_at.max(record.caught_up_at)?;
            Some(seconds(now - since))
        }
    }
}

fn seconds(d: chrono::TimeDelta) -> f64 {
    (d.num_milliseconds().max(0) as f64 / 100.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::super::record::RecordedCounts;
    use super::*;

    fn record(state: FollowState, commit: Option<i64>, caught_up: Option<i64>) -> FollowRecord {
        let now = Utc::now();
        let ago = |s: i64| now - chrono::TimeDelta::seconds(s);
        FollowRecord {
            run_id: "r".parse().unwrap(),
            state,
            slot: None,
            position: "mysql-bin.000001:4".into(),
            started_at: ago(100),
            applied_at: None,
            last_commit_at: commit.map(ago),
            caught_up_at: caught_up.map(ago),
            counts: RecordedCounts::default(),
            updated_at: now,
            error: None,
        }
    }

    #[test]
    fn behind_counts_from_the_later_of_the_last_commit_and_the_last_catch_up() {
        let now = Utc::now();
        let stopped = record(FollowState::Stopped, Some(30), Some(12));
        let b = behind(&stopped, Some(false), now).unwrap();
        assert!((11.5..13.0).contains(&b), "{b}");
        let committed_later = record(FollowState::Following, Some(5), Some(40));
        let b = behind(&committed_later, Some(false), now).unwrap();
        assert!((4.5..6.0).contains(&b), "{b}");
        assert_eq!(behind(&stopped, Some(true), now), Some(0.0), "caught up");
        assert_eq!(behind(&stopped, None, now), None, "source not asked");
        let unknown = record(FollowState::Following, None, None);
        assert_eq!(behind(&unknown, Some(false), now), None);
        let cut = record(FollowState::CutOver, Some(1), None);
        assert_eq!(behind(&cut, Some(false), now), None, "no longer following");
    }
}
