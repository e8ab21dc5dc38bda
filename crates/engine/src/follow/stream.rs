//! Where a follower's changes come from, and where its checkpoint lives:
//! a PostgreSQL logical slot (the slot is the checkpoint, advanced on the
//! server) or the MySQL/MariaDB binary log (the position after the last
//! applied transaction, kept in the run's directory).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sql2ddb_source::cdc::{format_lsn, BinlogPosition, BinlogReader, ChangeBatch, Relations};
use sql2ddb_source::Source;

use crate::error::EngineError;

/// The file in a run's directory that holds the binary log position the
/// follower has applied up to (`file:position`).
pub const BINLOG_CHECKPOINT: &str = "binlog-position";

/// How long an idle binary log read waits for a transaction.
const BINLOG_WAIT: Duration = Duration::from_millis(200);

/// A follower's source of changes.
pub(super) enum Stream {
    /// A PostgreSQL logical replication slot (and its publication, of the
    /// same name).
    Slot { slot: String, relations: Relations },
    /// The binary log, from the position in `checkpoint` on.
    Binlog {
        reader: Box<BinlogReader>,
        checkpoint: PathBuf,
        position: BinlogPosition,
    },
}

impl Stream {
    /// The next batch of whole committed transactions (empty when none came).
    pub(super) async fn next(
        &mut self,
        source: &Source,
        max_changes: usize,
    ) -> Result<ChangeBatch, EngineError> {
        Ok(match self {
            Stream::Slot { slot, relations } => {
                source
                    .peek_changes(slot, slot, max_changes, relations)
                    .await?
            }
            Stream::Binlog { reader, .. } => {
                reader.next_batch(source, max_changes, BINLOG_WAIT).await?
            }
        })
    }

    /// Moves the checkpoint past `batch`, whose writes are all acknowledged.
    pub(super) async fn commit(
        &mut self,
        source: &Source,
        batch: &ChangeBatch,
    ) -> Result<(), EngineError> {
        match self {
            Stream::Slot { slot, .. } => {
                if let Some(end) = batch.end_lsn {
                    source.advance_slot(slot, end).await?;
                }
            }
            Stream::Binlog {
                checkpoint,
                position,
                ..
            } => {
                if let Some(end) = &batch.end {
                    write_checkpoint(checkpoint, end)?;
                    *position = end.clone();
                }
            }
        }
        Ok(())
    }

    /// A position printed as the source writes it.
    pub(super) fn text(&self, ordinal: u64) -> String {
        match self {
            Stream::Slot { .. } => format_lsn(ordinal),
            Stream::Binlog { position, .. } => match position.ordinal() == ordinal {
                true => position.to_string(),
                false => format!("binary log ordinal {ordinal}"),
            },
        }
    }

    /// The binary log: the end of the last event read (every transaction
    /// before it is applied once the last batch is).
    pub(super) fn read_to(&self) -> Option<u64> {
        match self {
            Stream::Slot { .. } => None,
            Stream::Binlog { reader, .. } => reader.read_to().map(BinlogPosition::ordinal),
        }
    }

    /// Ends the stream's connection, if it has its own.
    pub(super) async fn close(self) {
        if let Stream::Binlog { reader, .. } = self {
            reader.close().await;
        }
    }
}

/// The binary log position a run's follower goes on from: its checkpoint,
/// or, before the first one, the position its full load's snapshot
/// recorded (in the run's `report.json`).
pub fn binlog_start(run_dir: &Path) -> Result<BinlogPosition, EngineError> {
    let checkpoint = run_dir.join(BINLOG_CHECKPOINT);
    match std::fs::read_to_string(&checkpoint) {
        Ok(text) => return Ok(BinlogPosition::parse(&text)?),
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
    let binlog = json
        .pointer("/snapshot/binlog")
        .and_then(|b| b.as_str())
        .ok_or_else(|| {
            EngineError::Config(format!(
                "the run's snapshot recorded no binary log position ({}): the binary log was off, or the run did not take a consistent snapshot; run the full load again with --follow",
                report.display()
            ))
        })?;
    Ok(BinlogPosition::parse(binlog)?)
}

/// Writes `position` to `path` durably: a new file synced, then renamed
/// over the old one, so a crash leaves one or the other whole.
pub fn write_checkpoint(path: &Path, position: &BinlogPosition) -> Result<(), EngineError> {
    use std::io::Write;
    let io = |e| EngineError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    writeln!(f, "{position}").map_err(io)?;
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
}
