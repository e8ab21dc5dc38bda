//! Point-in-time reads on PostgreSQL: one connection opens a `REPEATABLE
//! READ` transaction and exports its snapshot; from then on every connection
//! the pool hands out starts a read-only transaction that imports it (`SET
//! TRANSACTION SNAPSHOT`), and rolls it back when returned. So every page,
//! count, child and key read of a run sees the source as it was at one
//! moment, whatever the application writes meanwhile.

use std::sync::{Arc, Mutex, RwLock};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPoolOptions, Postgres};
use sqlx::{AssertSqlSafe, Executor};

use crate::{Pool, Source, SourceError};

/// A snapshot a run reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// PostgreSQL's snapshot id (`pg_export_snapshot()`).
    pub id: String,
    /// The WAL position of the snapshot (`pg_current_wal_lsn()` inside it):
    /// where change data capture starts to follow on from the copy.
    pub lsn: String,
    /// When it was taken, by the server's clock (RFC 3339).
    pub taken_at: String,
}

/// The snapshot shared by a pool's connections, once taken, and the
/// connection whose open transaction keeps it alive.
#[derive(Debug, Default)]
pub(crate) struct SharedSnapshot {
    id: RwLock<Option<String>>,
    holder: Mutex<Option<PoolConnection<Postgres>>>,
}

/// Pool options whose connections import the shared snapshot once there is one.
pub(crate) fn pool_options(max: u32, shared: &Arc<SharedSnapshot>) -> PgPoolOptions {
    let (on_acquire, on_release) = (shared.clone(), shared.clone());
    PgPoolOptions::new()
        .max_connections(max)
        .before_acquire(move |conn, _| {
            let id = on_acquire.id.read().expect("snapshot lock").clone();
            Box::pin(async move {
                if let Some(id) = id {
                    conn.execute(AssertSqlSafe(format!(
                        "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{id}'"
                    )))
                    .await?;
                }
                Ok(true)
            })
        })
        .after_release(move |conn, _| {
            let in_snapshot = on_release.id.read().expect("snapshot lock").is_some();
            Box::pin(async move {
                if in_snapshot {
                    conn.execute("ROLLBACK").await?;
                }
                Ok(true)
            })
        })
}

impl Source {
    /// Takes a point-in-time snapshot that every later read of this source
    /// sees (PostgreSQL; `None` for other sources). It holds one of the
    /// pool's connections until [`Source::close`], so a pool of one
    /// connection cannot take one.
    pub async fn take_snapshot(&self) -> Result<Option<Snapshot>, SourceError> {
        let (Pool::Postgres(pool), Some(shared)) = (&self.pool, &self.snapshot) else {
            return Ok(None);
        };
        if pool.options().get_max_connections() < 2 {
            return Err(SourceError::config(
                "a point-in-time snapshot holds one source connection open for the run: give --source-connections 2 or more, or --snapshot none",
            ));
        }
        let context = "take a snapshot of the source";
        let mut conn = pool
            .acquire()
            .await
            .map_err(|e| SourceError::query(context, e))?;
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| SourceError::query(context, e))?;
        let (id, lsn, taken_at): (String, String, String) = sqlx::query_as(
            "SELECT pg_export_snapshot(), pg_current_wal_lsn()::text, \
             to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| SourceError::query(context, e))?;
        *shared.id.write().expect("snapshot lock") = Some(id.clone());
        *shared.holder.lock().expect("snapshot lock") = Some(conn);
        Ok(Some(Snapshot { id, lsn, taken_at }))
    }

    /// Ends the snapshot's transaction, if one was taken.
    pub(crate) async fn release_snapshot(&self) {
        if let Some(shared) = &self.snapshot {
            let holder = shared.holder.lock().expect("snapshot lock").take();
            drop(holder);
        }
    }
}
