//! Where a follower's changes come from ([`Reader`]) and where its
//! checkpoint lives ([`Checkpoint`]): a PostgreSQL logical slot (the slot is
//! the checkpoint, advanced on the server; it is read through a temporary
//! copy, ahead of the applied position) or the MySQL/MariaDB binary log
//! (the position after the last applied transaction, kept in the run's
//! directory).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sql2ddb_source::cdc::{
    format_lsn, BinlogPosition, BinlogReader, ChangeBatch, Gtids, Relations, SlotReader,
};
use sql2ddb_source::Source;

use crate::error::EngineError;

/// The file in a run's directory that holds the binary log position the
/// follower has applied up to (`file:position`, then on MariaDB a line
/// `gtid DOMAIN-SERVER-SEQUENCE,…`).
pub const BINLOG_CHECKPOINT: &str = "binlog-position";

/// The file in a run's directory that holds the columns the follower
/// decodes each followed table's row events with, bound on its first
/// follow (row events carry no names: a table altered while the follower
/// was stopped must not have its earlier events read with its new columns).
pub const BINLOG_COLUMNS: &str = "binlog-columns.json";

/// How long an idle binary log read waits for a transaction.
const BINLOG_WAIT: Duration = Duration::from_millis(200);

/// A follower's source of changes.
pub(super) enum Reader {
    /// A temporary copy of the slot, read ahead of the slot's position.
    Copy(SlotReader),
    /// The slot itself, peeked: its next batch can only be read once the
    /// one before is applied and the slot advanced past it.
    Peek { slot: String, relations: Relations },
    /// The binary log, read as a replica.
    Binlog(Box<BinlogReader>),
}

impl Reader {
    /// The next batch of whole committed transactions (empty when none came).
    pub(super) async fn next(
        &mut self,
        source: &Source,
        max_changes: usize,
    ) -> Result<ChangeBatch, EngineError> {
        Ok(match self {
            Reader::Copy(copy) => copy.next_batch(max_changes).await?,
            Reader::Peek { slot, relations } => {
                source
                    .peek_changes(slot, slot, max_changes, relations)
                    .await?
            }
            Reader::Binlog(reader) => reader
                .next_batch(source, max_changes, BINLOG_WAIT)
                .await
                .map_err(stopped)?,
        })
    }

    /// A slot: the WAL position flushed now, which a read started after
    /// this reaches at least (`None` for the binary log, or when it cannot
    /// be read: the checkpoint then waits for a change to move).
    pub(super) async fn flushed(&self, source: &Source) -> Option<u64> {
        match self {
            Reader::Copy(_) | Reader::Peek { .. } => source.flushed_wal_lsn().await.ok(),
            Reader::Binlog(_) => None,
        }
    }

    /// The relations a slot's reads describe (what they watch for);
    /// `None` for the binary log.
    pub(super) fn relations_mut(&mut self) -> Option<&mut Relations> {
        match self {
            Reader::Copy(copy) => Some(copy.relations_mut()),
            Reader::Peek { relations, .. } => Some(relations),
            Reader::Binlog(_) => None,
        }
    }

    /// Whether a batch can be read before the ones read earlier are
    /// applied (a peeked slot starts at its applied position every time).
    pub(super) fn reads_ahead(&self) -> bool {
        !matches!(self, Reader::Peek { .. })
    }

    /// The binary log: the end of the last event read (every transaction
    /// before it is in the batches read).
    pub(super) fn read_to(&self) -> Option<u64> {
        match self {
            Reader::Binlog(reader) => reader.read_to().map(BinlogPosition::ordinal),
            _ => None,
        }
    }

    /// Ends the reader's connection, if it has its own (the slot's copy is
    /// dropped).
    pub(super) async fn close(self) {
        match self {
            Reader::Copy(copy) => copy.close().await,
            Reader::Binlog(reader) => reader.close().await,
            Reader::Peek { .. } => {}
        }
    }
}

/// A source's stop before a change it cannot carry, as the engine's one
/// error for it; other errors as they are.
fn stopped(e: sql2ddb_source::SourceError) -> EngineError {
    match e {
        sql2ddb_source::SourceError::Unfollowable(change) => {
            let sql2ddb_source::UnfollowableChange {
                table,
                event,
                position,
                reason,
                remedy,
            } = *change;
            EngineError::unfollowable(table, event, position, reason, remedy)
        }
        e => e.into(),
    }
}

/// Where a batch ends: where the checkpoint goes once it is applied.
#[derive(Debug, Clone)]
pub(super) struct BatchEnd {
    /// The slot's LSN, or the binary log position's ordinal.
    pub ordinal: u64,
    /// The binary log position.
    pub binlog: Option<BinlogPosition>,
    /// When the batch's last transaction was committed on the source
    /// ([`ChangeBatch::last_commit_time`]).
    pub last_commit_time: Option<i64>,
    /// The cutover's fence is in the batch ([`ChangeBatch::fence_seen`]).
    pub fence: bool,
}

impl BatchEnd {
    /// Where `batch` ends; `None` when it is empty.
    pub(super) fn of(batch: &ChangeBatch) -> Option<BatchEnd> {
        Some(BatchEnd {
            ordinal: batch.end_lsn?,
            binlog: batch.end.clone(),
            last_commit_time: batch.last_commit_time,
            fence: batch.fence_seen,
        })
    }

    /// A slot position reached by a read that found no change.
    pub(super) fn at(lsn: u64) -> BatchEnd {
        BatchEnd {
            ordinal: lsn,
            binlog: None,
            last_commit_time: None,
            fence: false,
        }
    }
}

/// A follower's checkpoint: everything before it is applied.
pub(super) enum Checkpoint {
    /// The slot (its confirmed position).
    Slot { slot: String },
    /// The binary log position in `path`.
    Binlog {
        path: PathBuf,
        position: BinlogPosition,
    },
}

impl Checkpoint {
    /// Moves the checkpoint to `end`, once every write of the changes before
    /// it is acknowledged: the one place a follower's checkpoint moves.
    pub(super) async fn commit(
        &mut self,
        source: &Source,
        end: &BatchEnd,
    ) -> Result<(), EngineError> {
        match self {
            Checkpoint::Slot { slot } => source.advance_slot(slot, end.ordinal).await?,
            Checkpoint::Binlog { path, position } => {
                if let Some(at) = &end.binlog {
                    // The file is synced: off the runtime's threads.
                    let (file, next) = (path.clone(), at.clone());
                    tokio::task::spawn_blocking(move || write_checkpoint(&file, &next))
                        .await
                        .map_err(|e| EngineError::Io {
                            path: path.clone(),
                            source: std::io::Error::other(e),
                        })??;
                    *position = at.clone();
                }
            }
        }
        Ok(())
    }

    /// A position printed as the source writes it.
    pub(super) fn text(&self, ordinal: u64) -> String {
        match self {
            Checkpoint::Slot { .. } => format_lsn(ordinal),
            Checkpoint::Binlog { position, .. } => match position.ordinal() == ordinal {
                true => position.to_string(),
                false => format!("binary log ordinal {ordinal}"),
            },
        }
    }
}

/// The binary log position a run's follower goes on from: its checkpoint,
/// or, before the first one, the position its full load's snapshot
/// recorded (in the run's `report.json`); for a resumed full load, its
/// first attempt's, since the items that attempt wrote miss every change
/// from there.
pub fn binlog_start(run_dir: &Path) -> Result<BinlogPosition, EngineError> {
    let checkpoint = run_dir.join(BINLOG_CHECKPOINT);
    match std::fs::read_to_string(&checkpoint) {
        Ok(text) => return Ok(BinlogPosition::parse_checkpoint(&text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(EngineError::Io {
                path: checkpoint,
                source: e,
            })
        }
    }
    let report = run_dir.join("report.json");
    let text = std::fs::read_to_string(&report).map_err(|e| {
        EngineError::Config(format!(
            "no binary log position for this run: neither {} nor {} can be read ({e}); follow the run that `run --follow` started, from its runs directory",
            checkpoint.display(),
            report.display()
        ))
    })?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        EngineError::Config(format!("{} is not a run report: {e}", report.display()))
    })?;
    // A resumed full load: its first attempt's snapshot, the earliest
    // position whose changes may be missing from the items written since.
    let (snapshot, which) = match json.pointer("/snapshot/earlier/0") {
        Some(first) => (first, "its first attempt's snapshot"),
        None => (&json["snapshot"], "the run's snapshot"),
    };
    let binlog = snapshot
        .get("binlog")
        .and_then(|b| b.as_str())
        .ok_or_else(|| {
            EngineError::Config(format!(
                "{which} recorded no binary log position ({}): the binary log was off, or the run did not take a consistent snapshot; run the full load again with --follow --if-not-empty append",
                report.display()
            ))
        })?;
    let mut start = BinlogPosition::parse(binlog)?;
    // The GTID position at the snapshot (MariaDB's, or MySQL's set).
    start.gtid = snapshot
        .get("gtid")
        .and_then(|g| g.as_str())
        .filter(|g| Gtids::parse(g).is_ok_and(|g| !g.is_empty()))
        .map(|g| g.split_whitespace().collect());
    Ok(start)
}

/// Binds the columns `reader` decodes row events with: those the run's
/// directory keeps from its first follow, and keeps them there.
pub(super) async fn bind_columns(
    reader: &mut BinlogReader,
    source: &Source,
    run_dir: &Path,
) -> Result<(), EngineError> {
    let path = run_dir.join(BINLOG_COLUMNS);
    let saved = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(EngineError::io(path, e)),
    };
    let bound = reader.bind_columns(source, saved.as_deref()).await?;
    if saved.as_deref() != Some(bound.as_str()) {
        write_durably(&path, bound.as_bytes())?;
    }
    Ok(())
}

/// Writes `position` to `path` durably: a new file synced, then renamed
/// over the old one, so a crash leaves one or the other whole.
pub fn write_checkpoint(path: &Path, position: &BinlogPosition) -> Result<(), EngineError> {
    write_durably(path, position.checkpoint_text().as_bytes())
}

/// Writes `bytes` to `path`: a new file synced, then renamed over the old
/// one.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    use std::io::Write;
    let io = |e| EngineError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_wins_over_the_snapshot_position() {
        let dir = tempfile::tempdir().unwrap();
        let err = binlog_start(dir.path()).unwrap_err();
        assert!(err.to_string().contains("no binary log position"), "{err}");
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "mysql-bin.000003:120"}}"#,
        )
        .unwrap();
        assert_eq!(
            binlog_start(dir.path()).unwrap().to_string(),
            "mysql-bin.000003:120"
        );
        let at = BinlogPosition::parse("mysql-bin.000004:4").unwrap();
        write_checkpoint(&dir.path().join(BINLOG_CHECKPOINT), &at).unwrap();
        assert_eq!(binlog_start(dir.path()).unwrap(), at);
    }

    #[test]
    fn a_resumed_full_load_is_followed_from_its_first_attempts_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "b.000003:9000", "gtid": "0-1-90", "earlier": [
                {"kind": "mysql", "binlog": "b.000003:120", "gtid": "0-1-17"},
                {"kind": "mysql", "binlog": "b.000003:4000", "gtid": "0-1-50"}]}}"#,
        )
        .unwrap();
        let start = binlog_start(dir.path()).unwrap();
        assert_eq!(start.to_string(), "b.000003:120");
        assert_eq!(start.gtid.as_deref(), Some("0-1-17"));
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "b.000003:9000", "earlier": [{"kind": "none"}]}}"#,
        )
        .unwrap();
        let err = binlog_start(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("its first attempt's snapshot recorded no binary log position"),
            "{err}"
        );
    }

    #[test]
    fn a_gtid_position_is_kept_from_the_snapshot_and_in_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        // MySQL's GTID set, as `@@gtid_executed` writes it (a newline after
        // each comma).
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "b.000003:120", "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,\n00000000-0000-0000-0000-000000000002:1-3"}}"#,
        )
        .unwrap();
        assert_eq!(
            binlog_start(dir.path()).unwrap().gtid.as_deref(),
            Some(
                "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,00000000-0000-0000-0000-000000000002:1-3"
            )
        );
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "b.000003:120", "gtid": "not a GTID"}}"#,
        )
        .unwrap();
        assert_eq!(binlog_start(dir.path()).unwrap().gtid, None);
        std::fs::write(
            dir.path().join("report.json"),
            r#"{"snapshot": {"binlog": "b.000003:120", "gtid": "0-1-17"}}"#,
        )
        .unwrap();
        let start = binlog_start(dir.path()).unwrap();
        assert_eq!(start.gtid.as_deref(), Some("0-1-17"));
        let mut at = BinlogPosition::parse("b.000004:900").unwrap();
        at.gtid = Some("0-1-20,1-2-3".into());
        let path = dir.path().join(BINLOG_CHECKPOINT);
        write_checkpoint(&path, &at).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "b.000004:900\ngtid 0-1-20,1-2-3\n"
        );
        assert_eq!(binlog_start(dir.path()).unwrap(), at);
        std::fs::write(&path, "b.000004:900\nposition 7\n").unwrap();
        let err = binlog_start(dir.path()).unwrap_err().to_string();
        assert!(err.contains("unexpected line"), "{err}");
    }
}
