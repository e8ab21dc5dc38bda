//! Point-in-time reads: every page, count, child and key read of a run sees
//! the source as it was at one moment, whatever the application writes
//! meanwhile.
//!
//! PostgreSQL: one connection opens a `REPEATABLE READ` transaction and
//! exports its snapshot; from then on every connection the pool hands out
//! starts a read-only transaction that imports it (`SET TRANSACTION
//! SNAPSHOT`), and rolls it back when returned.
//!
//! MySQL/MariaDB (mydumper's method): one connection takes a brief global
//! read lock (`FLUSH TABLES WITH READ LOCK`), every other connection of the
//! pool starts `START TRANSACTION WITH CONSISTENT SNAPSHOT` and keeps it for
//! the run, the binary-log position is read, and the lock is released.
//!
//! SQLite: the pool has one connection, which opens a read transaction that
//! stays open for the run; every read shares that connection.

use std::sync::{Arc, Mutex, RwLock};

use sqlx::mysql::{MySql, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgPoolOptions, Postgres};
use sqlx::sqlite::SqlitePoolOptions;
use sqlx::{AssertSqlSafe, Executor};

use crate::{Pool, Source, SourceError};

/// A snapshot a run reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// `postgres`, `mysql` or `sqlite`.
    pub kind: &'static str,
    /// PostgreSQL's snapshot id (`pg_export_snapshot()`); MySQL: the
    /// binary-log position, or `consistent` when the binary log is off;
    /// SQLite: `read-transaction`.
    pub id: String,
    /// Where change data capture starts to follow on from the copy:
    /// PostgreSQL's WAL position (`pg_current_wal_lsn()` inside the
    /// snapshot), MySQL's `binlog file:position` (absent when the binary log
    /// is off).
    pub position: Option<String>,
    /// MySQL with GTIDs: the executed GTID set at the snapshot
    /// (`@@gtid_executed`); MariaDB: the binary log's GTID position
    /// (`@@gtid_binlog_pos`), where a follower starts.
    pub gtid: Option<String>,
    /// When it was taken, by the server's clock (RFC 3339).
    pub taken_at: String,
}

/// The snapshot shared by a pool's connections, once taken, and the
/// connection whose open transaction keeps it alive.
#[derive(Debug, Default)]
pub(crate) struct SharedSnapshot {
    id: RwLock<Option<String>>,
    holder: Mutex<Option<Holder>>,
}

/// The connection that keeps a snapshot: PostgreSQL's exporting transaction,
/// MySQL's lock connection (kept out of the pool, which is full of snapshot
/// connections).
#[derive(Debug)]
enum Holder {
    Postgres(#[allow(dead_code)] PoolConnection<Postgres>),
    MySql(#[allow(dead_code)] PoolConnection<MySql>),
}

/// MySQL pool options: connections live for the run (a snapshot lives in
/// its connection), and once the snapshot is taken a new connection — which
/// could not be in it — is refused rather than read from. Checked when a
/// connection is opened, so reads pay nothing for it.
pub(crate) fn mysql_pool_options(max: u32, shared: &Arc<SharedSnapshot>) -> MySqlPoolOptions {
    let on_connect = shared.clone();
    MySqlPoolOptions::new()
        .max_connections(max)
        .idle_timeout(None)
        .max_lifetime(None)
        .after_connect(move |_, _| refuse_after_snapshot(&on_connect))
}

/// SQLite pool options for a snapshot: one connection, kept for the run
/// (its open read transaction is the snapshot); a new connection, which
/// could not see it, is refused.
pub(crate) fn sqlite_pool_options(shared: &Arc<SharedSnapshot>) -> SqlitePoolOptions {
    let on_connect = shared.clone();
    SqlitePoolOptions::new()
        .max_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .after_connect(move |_, _| refuse_after_snapshot(&on_connect))
}

/// An `after_connect` hook's answer: an error once the snapshot is taken.
fn refuse_after_snapshot(
    shared: &SharedSnapshot,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), sqlx::Error>> + Send>> {
    let taken = shared.id.read().expect("snapshot lock").is_some();
    Box::pin(async move {
        if taken {
            return Err(sqlx::Error::Protocol(
                "a source connection was lost after the run's snapshot was taken, and a new one cannot see the snapshot: run again".into(),
            ));
        }
        Ok(())
    })
}

/// Pool options whose connections import the shared snapshot once there is
/// one: an idle connection when it is handed out, and a connection opened
/// after the snapshot was taken when it connects (the pool hands a new
/// connection out without `before_acquire`).
pub(crate) fn pool_options(max: u32, shared: &Arc<SharedSnapshot>) -> PgPoolOptions {
    let (on_connect, on_acquire, on_release) = (shared.clone(), shared.clone(), shared.clone());
    PgPoolOptions::new()
        .max_connections(max)
        .after_connect(move |conn, _| {
            let id = on_connect.id.read().expect("snapshot lock").clone();
            Box::pin(async move { import_snapshot(conn, id).await })
        })
        .before_acquire(move |conn, _| {
            let id = on_acquire.id.read().expect("snapshot lock").clone();
            Box::pin(async move { import_snapshot(conn, id).await.map(|()| true) })
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

/// Starts a read-only transaction on `conn` that sees snapshot `id`, if any.
async fn import_snapshot(
    conn: &mut sqlx::PgConnection,
    id: Option<String>,
) -> Result<(), sqlx::Error> {
    if let Some(id) = id {
        conn.execute(AssertSqlSafe(format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '{id}'"
        )))
        .await?;
    }
    Ok(())
}

impl Source {
    /// Takes a point-in-time snapshot that every later read of this source
    /// sees. PostgreSQL and MySQL: it holds one of the pool's connections
    /// until [`Source::close`], so a pool of one connection cannot take one.
    /// SQLite: `None` unless opened with [`Source::connect_for_snapshot`].
    pub async fn take_snapshot(&self) -> Result<Option<Snapshot>, SourceError> {
        let Some(shared) = &self.snapshot else {
            return Ok(None);
        };
        match &self.pool {
            Pool::Postgres(pool) => {
                let (conn, snapshot) = postgres_snapshot(pool).await?;
                *shared.id.write().expect("snapshot lock") = Some(snapshot.id.clone());
                *shared.holder.lock().expect("snapshot lock") = Some(Holder::Postgres(conn));
                Ok(Some(snapshot))
            }
            Pool::MySql(pool) => {
                let (conn, snapshot) = mysql_snapshot(pool).await?;
                *shared.id.write().expect("snapshot lock") = Some(snapshot.id.clone());
                *shared.holder.lock().expect("snapshot lock") = Some(Holder::MySql(conn));
                Ok(Some(snapshot))
            }
            Pool::Sqlite(pool) => {
                let snapshot = sqlite_snapshot(pool).await?;
                *shared.id.write().expect("snapshot lock") = Some(snapshot.id.clone());
                Ok(Some(snapshot))
            }
        }
    }

    /// Ends the snapshot's transaction, if one was taken.
    pub(crate) fn release_snapshot(&self) {
        if let Some(shared) = &self.snapshot {
            let holder = shared.holder.lock().expect("snapshot lock").take();
            drop(holder);
        }
    }
}

const ONE_CONNECTION: &str = "a point-in-time snapshot holds one source connection open for the run: give --source-connections 2 or more, or --snapshot none";

/// PostgreSQL: the exporting transaction's connection and its snapshot.
async fn postgres_snapshot(
    pool: &sqlx::PgPool,
) -> Result<(PoolConnection<Postgres>, Snapshot), SourceError> {
    if pool.options().get_max_connections() < 2 {
        return Err(SourceError::config(ONE_CONNECTION));
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
    let snapshot = Snapshot {
        kind: "postgres",
        id,
        position: Some(lsn),
        gtid: None,
        taken_at,
    };
    Ok((conn, snapshot))
}

/// MySQL/MariaDB: every connection of the pool but one starts a consistent
/// snapshot under a brief global read lock taken by that one, which is
/// returned (kept out of the pool for the run).
async fn mysql_snapshot(
    pool: &sqlx::MySqlPool,
) -> Result<(PoolConnection<MySql>, Snapshot), SourceError> {
    let max = pool.options().get_max_connections();
    if max < 2 {
        return Err(SourceError::config(ONE_CONNECTION));
    }
    let context = "take a snapshot of the source";
    let err = |e| SourceError::query(context, e);
    let mut lock = pool.acquire().await.map_err(err)?;
    let mut readers = Vec::with_capacity(max as usize - 1);
    for _ in 1..max {
        readers.push(pool.acquire().await.map_err(err)?);
    }
    if let Err(e) = lock.execute("FLUSH TABLES WITH READ LOCK").await {
        return Err(SourceError::config(format!(
            "a consistent snapshot of MySQL/MariaDB takes a brief global read lock (FLUSH TABLES WITH READ LOCK), which needs the RELOAD privilege ({e}): grant it (GRANT RELOAD ON *.* TO …), or run with --snapshot none (each read then sees the source as it is at that moment)"
        )));
    }
    for r in &mut readers {
        r.execute(
            "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
             START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
        )
        .await
        .map_err(err)?;
    }
    let binlog = master_status(&mut lock).await;
    let gtid: Option<String> = sqlx::query_scalar("SELECT CAST(@@GLOBAL.gtid_executed AS CHAR)")
        .fetch_one(&mut *lock)
        .await
        .ok()
        .or(
            sqlx::query_scalar("SELECT CAST(@@GLOBAL.gtid_binlog_pos AS CHAR)")
                .fetch_one(&mut *lock)
                .await
                .ok(),
        )
        .filter(|g: &String| !g.is_empty());
    let taken_at: String =
        sqlx::query_scalar("SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%dT%H:%i:%s.%fZ')")
            .fetch_one(&mut *lock)
            .await
            .map_err(err)?;
    lock.execute("UNLOCK TABLES").await.map_err(err)?;
    drop(readers);
    let position = binlog.map(|(file, pos)| format!("{file}:{pos}"));
    let snapshot = Snapshot {
        kind: "mysql",
        id: position.clone().unwrap_or_else(|| "consistent".into()),
        position,
        gtid,
        taken_at,
    };
    Ok((lock, snapshot))
}

/// SQLite: the pool's one connection starts a read transaction, left open
/// when the connection goes back to the pool.
async fn sqlite_snapshot(pool: &sqlx::SqlitePool) -> Result<Snapshot, SourceError> {
    let context = "take a snapshot of the source";
    let err = |e| SourceError::query(context, e);
    let mut conn = pool.acquire().await.map_err(err)?;
    conn.execute("BEGIN").await.map_err(err)?;
    // The read transaction starts at its first read.
    let taken_at: String = sqlx::query_scalar(
        "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM (SELECT count(*) FROM sqlite_schema)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(err)?;
    Ok(Snapshot {
        kind: "sqlite",
        id: "read-transaction".into(),
        position: None,
        gtid: None,
        taken_at,
    })
}

/// `SHOW MASTER STATUS`: the binary log's file and position, when it is on.
async fn master_status(conn: &mut PoolConnection<MySql>) -> Option<(String, u64)> {
    use sqlx::Row;
    let row = sqlx::query("SHOW MASTER STATUS")
        .fetch_optional(&mut **conn)
        .await
        .ok()??;
    let file: String = row.try_get(0).ok()?;
    let pos: u64 = row.try_get(1).ok()?;
    Some((file, pos))
}
