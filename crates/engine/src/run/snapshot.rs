//! The run's snapshot of its source: connecting as the snapshot needs,
//! taking it, and saying what the copy is consistent with.

use std::sync::Arc;

use sql2ddb_source::Source;

use super::options::{RunOptions, SnapshotMode};
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::report::SnapshotReport;

/// Connects to the source (ready for a snapshot when one is asked for) and
/// takes the run's snapshot.
pub(super) async fn connect(
    url: &str,
    opts: &RunOptions,
) -> Result<(Arc<Source>, SnapshotReport), EngineError> {
    let source = match opts.snapshot {
        SnapshotMode::Consistent => {
            Source::connect_for_snapshot(url, opts.source_connections).await?
        }
        SnapshotMode::None => Source::connect(url, opts.source_connections).await?,
    };
    let snapshot = take(&source, opts).await?;
    Ok((Arc::new(source), snapshot))
}

/// Takes the run's snapshot of its source, as asked, and says what the copy
/// is consistent with.
async fn take(source: &Source, opts: &RunOptions) -> Result<SnapshotReport, EngineError> {
    let taken = match opts.snapshot {
        SnapshotMode::Consistent => source.take_snapshot().await?,
        SnapshotMode::None => None,
    };
    let Some(s) = taken else {
        return Ok(SnapshotReport {
            kind: "none".into(),
            note: match opts.snapshot {
                SnapshotMode::None => "not point-in-time (--snapshot none): rows written during the run may or may not be in the copy".into(),
                SnapshotMode::Consistent => "not point-in-time: the source gave no snapshot; rows written during the run may or may not be in the copy".into(),
            },
            ..SnapshotReport::default()
        });
    };
    tracing::info!(id = %s.id, "reading one snapshot of the source");
    let (lsn, binlog) = match s.kind {
        "postgres" => (s.position, None),
        _ => (None, s.position),
    };
    Ok(SnapshotReport {
        kind: s.kind.into(),
        id: Some(s.id),
        lsn,
        binlog,
        gtid: s.gtid,
        taken_at: Some(s.taken_at),
        earlier: Vec::new(),
        note: "every read of this run saw the source as it was at taken_at; change data capture can start at its position".into(),
    })
}

/// Says on stderr which snapshot the run reads (and, resumed, that an
/// earlier attempt read another).
pub(super) fn announce(s: &SnapshotReport, progress: &RunProgress) {
    let (Some(id), Some(at)) = (&s.id, &s.taken_at) else {
        progress.note(format!("snapshot none: {}", s.note));
        return;
    };
    let position = match (&s.lsn, &s.binlog) {
        (Some(lsn), _) => format!(", WAL position {lsn}"),
        (None, Some(b)) => format!(", binary log {b}"),
        (None, None) => String::new(),
    };
    progress.note(format!(
        "snapshot {id} at {}{position}: every read of this run sees the source as it was then",
        sql2ddb_core::shown::time_text(at)
    ));
    if let Some(e) = s.earlier.last() {
        let at = e.taken_at.as_deref().map_or(
            "an unknown time".to_string(),
            sql2ddb_core::shown::time_text,
        );
        let position = e
            .lsn
            .as_ref()
            .or(e.binlog.as_ref())
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        progress.note(format!("resumed: the run's earlier attempt read another snapshot, taken at {at}{position}; rows it wrote are as they were then"));
    }
}
