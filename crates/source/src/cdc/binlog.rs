//! Change data capture from MySQL/MariaDB: the binary log in row format,
//! read as a replica reads it (`mysql_async`'s binlog stream, registered
//! with its own server id), from a `file:position` on.
//!
//! Row events (`WRITE/UPDATE/DELETE_ROWS`, after their `TABLE_MAP`) become
//! the same [`RowChange`]s the PostgreSQL reader gives, grouped into
//! committed transactions (ended by `XID`, a `COMMIT` query, or a DDL
//! statement, which commits by itself), in commit order. Each transaction's
//! changes carry where it ends; the follower keeps that position as its
//! checkpoint once their writes are acknowledged (the server keeps no
//! position for us, unlike a PostgreSQL slot).
//!
//! What a follower cannot carry stops the reader before the transaction
//! that holds it ([`SourceError::Unfollowable`]): a change of a followed
//! table logged as a statement, a row image without every column, a
//! `TRUNCATE` or DDL of a followed table ([`super::binlog_sql`] reads the
//! statements), a row event whose columns are not those bound
//! ([`super::binlog_tables`]).
//!
//! Where the server logs GTIDs the position also carries the GTID position
//! after that transaction ([`Gtids`]). MariaDB: a reader given one starts
//! from it, as a GTID replica does, so a follower goes on from where it
//! stood on any server of the replication group (after a failover, or on a
//! server whose files are named otherwise), and the `file:position` it
//! reports is that server's. MySQL (`gtid_mode = ON`): the GTID set is
//! kept the same way, and read from when the server no longer has the
//! position's file.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mysql_async::binlog::events::EventData;
use mysql_async::BinlogStream;

mod query;
mod rows;
mod start;

use super::binlog_tables::{bound_text, parse_bound, BoundColumn, TableColumns};
use super::gtid::{gtid_event, mysql_source, Gtids, MARIADB_GTID_EVENT};
use super::position::BinlogPosition;
use super::{ChangeBatch, RowChange};
use crate::{Source, SourceError};
use start::{binlog_opts, prepare_mariadb, start_gtids, stream_request};

/// The server id the reader of run `run_id` registers with unless told
/// otherwise: a replica's id must differ from the source's and from every
/// other replica's (two readers with one id disconnect each other), so each
/// run has its own, the same at every restart. A hash of the run id into
/// 4,000,000,000..4,290,000,000, far above the small ids servers are given.
pub fn replica_server_id(run_id: &str) -> u32 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let hash = run_id.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    4_000_000_000 + hash % 290_000_000
}

/// The rotate event's type code: its header's position is in the file it
/// leaves.
const ROTATE: u8 = 4;

/// Seconds from the Unix epoch to 2000-01-01, the origin of
/// [`ChangeBatch::last_commit_time`].
const EPOCH_2000: i64 = 946_684_800;

/// The id a MySQL table goes by in [`RowChange::oid`]: a hash of
/// `schema.table` (the binary log's table ids change with every restart).
pub fn table_id(schema: &str, table: &str) -> u32 {
    // FNV-1a: stable across builds, unlike the standard hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in schema.bytes().chain([b'.']).chain(table.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The GTID of the transaction being read: recorded in the reader's GTID
/// position only once it commits, so a follower that stops inside it keeps
/// the position before it.
enum PendingGtid {
    Maria {
        domain: u32,
        server: u32,
        sequence: u64,
    },
    Mysql {
        source: String,
        number: u64,
    },
}

impl std::fmt::Display for PendingGtid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PendingGtid::Maria {
                domain,
                server,
                sequence,
            } => write!(f, "{domain}-{server}-{sequence}"),
            PendingGtid::Mysql { source, number } => write!(f, "{source}:{number}"),
        }
    }
}

/// A reader of the binary log from a position on.
pub struct BinlogReader {
    stream: BinlogStream,
    /// `(schema, table)` of the followed tables, with their columns once read.
    tables: HashMap<(String, String), Option<TableColumns>>,
    /// The file being read (from the stream's rotate events).
    file: String,
    /// Changes of the transaction being read.
    pending: Vec<RowChange>,
    /// Whether a transaction has begun and not committed.
    in_transaction: bool,
    /// The end of the last event read.
    read_to: Option<BinlogPosition>,
    /// The GTID position after the last transaction read, when followed
    /// (MariaDB; MySQL with `gtid_mode = ON` and a known start).
    gtids: Option<Gtids>,
    /// Started from a GTID position: the file is named by the first rotate
    /// event, whose raw name is held here until the format description
    /// says whether a checksum ends it.
    unnamed: Option<Vec<u8>>,
    /// The GTID of the transaction being read.
    gtid_now: Option<PendingGtid>,
    /// Where the event being read starts in its file.
    event_start: u64,
    /// A change the follower cannot carry, met after the transactions of
    /// the batch returned last: the next read returns it.
    stopped: Option<SourceError>,
    /// Followed tables whose columns now (listed) are not those bound.
    altered: HashMap<(String, String), String>,
}

impl BinlogReader {
    /// Connects as a replica with id `server_id` and asks for the binary log
    /// from `from` on; only changes of `tables` (`table` or
    /// `schema.table`) are kept. Needs the REPLICATION SLAVE privilege.
    pub async fn open(
        source: &Source,
        url: &str,
        server_id: u32,
        from: &BinlogPosition,
        tables: &[String],
    ) -> Result<Self, SourceError> {
        source.check_binlog_settings().await?;
        let mut followed = HashMap::new();
        for t in tables {
            followed.insert(source.qualified_table(t).await?, None);
        }
        let mut conn = mysql_async::Conn::new(binlog_opts(url)?)
            .await
            .map_err(|e| SourceError::config(format!("connect to read the binary log: {e}")))?;
        let (gtids, by_gtid) = start_gtids(source, from).await?;
        if let Some(Gtids::Maria(g)) = &gtids {
            prepare_mariadb(&mut conn, g, by_gtid).await?;
        }
        let request = stream_request(server_id, from, &gtids, by_gtid)?;
        let stream = conn.get_binlog_stream(request).await.map_err(|e| {
            let at = match (by_gtid, &gtids) {
                (true, Some(g)) => format!("GTID position {g}"),
                _ => from.to_string(),
            };
            SourceError::config(format!(
                "read the binary log from {at} as replica server id {server_id} (needs the REPLICATION SLAVE privilege, and the log must still be on the server): {e}"
            ))
        })?;
        Ok(BinlogReader {
            stream,
            tables: followed,
            file: from.file.clone(),
            pending: Vec::new(),
            in_transaction: false,
            read_to: None,
            gtids,
            unnamed: by_gtid.then(Vec::new),
            gtid_now: None,
            event_start: 0,
            stopped: None,
            altered: HashMap::new(),
        })
    }

    /// Where the reader is, for messages: the file, or before the server
    /// named it, the GTID position asked for.
    fn place(&self) -> String {
        match (&self.unnamed, &self.gtids) {
            (Some(_), Some(g)) => format!("GTID position {g}"),
            _ => self.file.clone(),
        }
    }

    /// Where a batch ends: the position, with the GTID position when it is
    /// followed (a transaction's GTID is recorded once it commits, so the
    /// GTIDs are those of the batches).
    fn finish(&self, mut batch: ChangeBatch) -> ChangeBatch {
        if let (Some(end), Some(g)) = (&mut batch.end, &self.gtids) {
            end.gtid = (!g.is_empty()).then(|| g.to_string());
        }
        batch
    }

    /// Binds the columns every followed table's row events are decoded
    /// with: those `saved` names (what this returned on the run's first
    /// follow, so the columns the events were written with), the table's
    /// present columns for one it does not name. Returns the text to keep
    /// for the next follow.
    pub async fn bind_columns(
        &mut self,
        source: &Source,
        saved: Option<&str>,
    ) -> Result<String, SourceError> {
        let mut saved = saved.map(parse_bound).transpose()?.unwrap_or_default();
        let keys: Vec<(String, String)> = self.tables.keys().cloned().collect();
        for (s, t) in keys {
            let now = source.table_columns(&s, &t).await?;
            let columns = match saved.remove(&format!("{s}.{t}")) {
                Some(bound) if bound != now.columns => {
                    // Altered since: its earlier events cannot be mapped as
                    // the table is read now.
                    self.altered
                        .insert((s.clone(), t.clone()), now.names.join(", "));
                    TableColumns::new(bound)
                }
                Some(bound) => TableColumns::new(bound),
                None => now,
            };
            self.tables.insert((s, t), Some(columns));
        }
        let mut bound: Vec<(String, &[BoundColumn])> = self
            .tables
            .iter()
            .filter_map(|((s, t), c)| Some((format!("{s}.{t}"), c.as_ref()?.columns.as_slice())))
            .collect();
        bound.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(bound_text(&bound))
    }

    /// The committed transactions that come within `wait` (a transaction
    /// begun is always read to its end), stopping at the first commit past
    /// `max_changes` row changes. [`ChangeBatch::end`] is where the last
    /// one ends.
    ///
    /// A change the follower cannot carry (a statement-format change, a
    /// partial row image, a `TRUNCATE` or DDL of a followed table, a row
    /// event whose columns are not those bound) ends the batch before its
    /// transaction; the next read returns [`SourceError::Unfollowable`].
    pub async fn next_batch(
        &mut self,
        source: &Source,
        max_changes: usize,
        wait: Duration,
    ) -> Result<ChangeBatch, SourceError> {
        if let Some(stop) = self.stopped.take() {
            return Err(stop);
        }
        let deadline = Instant::now() + wait;
        let mut batch = ChangeBatch::default();
        loop {
            let Some(event) = self.next_event(deadline).await? else {
                return Ok(self.finish(batch));
            };
            let header = event.header();
            let end = u64::from(header.log_pos());
            self.event_start = end.saturating_sub(u64::from(header.event_size()));
            let committed = match self.event(source, &event).await {
                Ok(c) => c,
                Err(e @ SourceError::Unfollowable(_)) => return self.stop(batch, e),
                Err(e) => return Err(e),
            };
            if end > 0 && header.event_type_raw() != ROTATE {
                self.read_to = Some(BinlogPosition {
                    file: self.file.clone(),
                    pos: end,
                    gtid: None,
                });
            }
            if committed && end > 0 {
                self.commit(end, header.timestamp(), &mut batch);
                if batch.changes.len() >= max_changes || Instant::now() >= deadline {
                    return Ok(self.finish(batch));
                }
            }
        }
    }

    /// The next event; `None` when none came by `deadline` outside a
    /// transaction (a transaction begun is read to its end).
    async fn next_event(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<mysql_async::binlog::events::Event>, SourceError> {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = if self.in_transaction {
            self.stream.next().await
        } else {
            match tokio::time::timeout(left, self.stream.next()).await {
                Ok(e) => e,
                Err(_) => return Ok(None),
            }
        };
        match event {
            Some(Ok(e)) => Ok(Some(e)),
            Some(Err(e)) => Err(SourceError::config(format!(
                "read the binary log at {}: {e}",
                self.place()
            ))),
            None => Err(SourceError::config(
                "the source closed the binary log stream",
            )),
        }
    }

    /// The transaction read commits at `end`: its changes join the batch.
    fn commit(&mut self, end: u64, timestamp: u32, batch: &mut ChangeBatch) {
        self.in_transaction = false;
        match (self.gtid_now.take(), &mut self.gtids) {
            (
                Some(PendingGtid::Maria {
                    domain,
                    server,
                    sequence,
                }),
                Some(Gtids::Maria(g)),
            ) => g.record(domain, server, sequence),
            (Some(PendingGtid::Mysql { source, number }), Some(Gtids::Mysql(set))) => {
                set.add(&source, number)
            }
            _ => {}
        }
        let end = BinlogPosition {
            file: self.file.clone(),
            pos: end,
            gtid: None,
        };
        let ordinal = end.ordinal();
        for mut c in self.pending.drain(..) {
            c.commit_end = ordinal;
            batch.changes.push(c);
        }
        batch.end_lsn = Some(ordinal);
        batch.end = Some(end);
        batch.last_commit_time = Some((i64::from(timestamp) - EPOCH_2000) * 1_000_000);
        batch.transactions += 1;
    }

    /// Stops before the transaction being read: the batch holds those
    /// before it and, when there are any, is returned first (`stop` comes
    /// with the next read).
    fn stop(&mut self, batch: ChangeBatch, stop: SourceError) -> Result<ChangeBatch, SourceError> {
        self.pending.clear();
        self.gtid_now = None;
        self.in_transaction = false;
        if batch.end.is_none() {
            return Err(stop);
        }
        // Read no further than the batch: a cutover's position past it is
        // not reached.
        self.read_to = batch.end.clone();
        self.stopped = Some(stop);
        Ok(self.finish(batch))
    }

    /// A GTID event: the GTID of the transaction it begins.
    fn gtid(&mut self, event: &mysql_async::binlog::events::Event, data: &Option<EventData<'_>>) {
        if event.header().event_type_raw() == MARIADB_GTID_EVENT {
            if let (Some(Gtids::Maria(_)), Some(gtid)) = (&self.gtids, gtid_event(event.data())) {
                self.gtid_now = Some(PendingGtid::Maria {
                    domain: gtid.domain,
                    server: event.header().server_id(),
                    sequence: gtid.sequence,
                });
                // A transaction begins (a standalone one is its one
                // statement, which follows at once).
                self.in_transaction = true;
            }
        }
        if let (Some(Gtids::Mysql(_)), Some(EventData::GtidEvent(gtid))) = (&self.gtids, &data) {
            let tag = gtid.tag().map(|t| t.to_string());
            self.gtid_now = Some(PendingGtid::Mysql {
                source: mysql_source(gtid.sid(), tag.as_deref()),
                number: gtid.gno(),
            });
            self.in_transaction = true;
        }
    }

    /// Reads one event: whether it commits the transaction being read.
    async fn event(
        &mut self,
        source: &Source,
        event: &mysql_async::binlog::events::Event,
    ) -> Result<bool, SourceError> {
        let header = event.header();
        let data = event.read_data().map_err(|e| {
            SourceError::config(format!("decode a binary log event in {}: {e}", self.file))
        })?;
        self.gtid(event, &data);
        Ok(match data {
            // The rotate the server sends first (position 0) repeats the
            // file asked for, and comes before the format description that
            // says whether a checksum ends it: from a GTID position, its
            // name is read once that is known.
            Some(EventData::RotateEvent(r)) if header.log_pos() == 0 => {
                if let Some(raw) = &mut self.unnamed {
                    *raw = r.name_raw().to_vec();
                }
                self.read_to = Some(BinlogPosition {
                    file: self.file.clone(),
                    pos: r.position(),
                    gtid: None,
                });
                false
            }
            Some(EventData::FormatDescriptionEvent(fde)) => {
                if let Some(mut raw) = self.unnamed.take().filter(|r| !r.is_empty()) {
                    use mysql_async::binlog::BinlogChecksumAlg;
                    let crc = matches!(
                        fde.footer().get_checksum_alg(),
                        Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))
                    );
                    if crc && event.checksum().is_some() && raw.len() > 4 {
                        raw.truncate(raw.len() - 4);
                    }
                    self.file = String::from_utf8_lossy(&raw).into_owned();
                }
                false
            }
            Some(EventData::RotateEvent(r)) => {
                self.file = r.name().to_string();
                self.read_to = Some(BinlogPosition {
                    file: self.file.clone(),
                    pos: r.position(),
                    gtid: None,
                });
                false
            }
            Some(EventData::XidEvent(_)) => true,
            Some(EventData::QueryEvent(q)) => self.query(&q.schema(), &q.query())?,
            Some(EventData::TableMapEvent(_)) => {
                self.in_transaction = true;
                false
            }
            Some(EventData::RowsEvent(rows)) => {
                self.in_transaction = true;
                self.rows(source, &rows).await?;
                false
            }
            _ => false,
        })
    }

    async fn columns(
        &mut self,
        source: &Source,
        schema: &str,
        table: &str,
    ) -> Result<&TableColumns, SourceError> {
        let key = (schema.to_string(), table.to_string());
        if self.tables.get(&key).is_some_and(|c| c.is_none()) {
            let read = source.table_columns(schema, table).await?;
            self.tables.insert(key.clone(), Some(read));
        }
        Ok(self.tables[&key].as_ref().expect("read above"))
    }

    /// The end of the last event read: every transaction that committed
    /// before it is in the batches returned (a batch never ends inside a
    /// transaction).
    pub fn read_to(&self) -> Option<&BinlogPosition> {
        self.read_to.as_ref()
    }

    /// Ends the replica connection.
    pub async fn close(self) {
        let _ = self.stream.close().await;
    }
}

/// What to do about a statement-format change.
const REMEDY_STATEMENT: &str = "make every session that writes the table log rows (SET GLOBAL binlog_format = 'ROW', in the server's configuration too, and no session setting binlog_format otherwise), then load the table again: a new full load of the mapping (`sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the table's items first) follows from its own snapshot on";

/// What to do about a partial row image.
const REMEDY_IMAGE: &str = "make every session that writes the table log full row images (SET GLOBAL binlog_row_image = 'FULL', in the server's configuration too, and no session setting binlog_row_image otherwise), then load the table again: a new full load of the mapping (`sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the table's items first) follows from its own snapshot on";

/// What to do about a truncate.
const REMEDY_RELOAD: &str = "load the table again: a new full load of the mapping (`sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the table's items first) copies it as it is now and follows from its own snapshot on";

/// What to do about a change of a followed table's definition.
const REMEDY_DDL: &str = "check the mapping against the table as it is now (`sql2ddb check MAPPING`), then load it again: a new full load of the mapping (`sql2ddb run MAPPING --follow --if-not-empty truncate`, which deletes the table's items first) reads its new columns and follows from its own snapshot on";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_sqlx_options_and_keep_tls() {
        let opts = binlog_opts("mariadb://root:pw@127.0.0.1:3306/test?ssl-mode=required").unwrap();
        assert_eq!(opts.db_name(), Some("test"));
        assert!(opts.ssl_opts().is_some());
        let plain = binlog_opts("mysql://root@127.0.0.1/test?ssl-mode=disabled").unwrap();
        assert!(plain.ssl_opts().is_none());
    }

    #[test]
    fn each_run_reads_as_a_replica_of_its_own_the_same_at_every_restart() {
        let a = replica_server_id("20261206T230000-a1b2");
        assert_eq!(a, replica_server_id("20261206T230000-a1b2"));
        assert_ne!(a, replica_server_id("20261206T230000-a1b3"));
        let ids: std::collections::HashSet<u32> = (0..1000)
            .map(|i| replica_server_id(&format!("run-{i}")))
            .collect();
        assert!(ids.len() >= 998, "{} distinct ids of 1000", ids.len());
        assert!(ids
            .iter()
            .all(|id| (4_000_000_000..4_290_000_000).contains(id)));
    }
}
