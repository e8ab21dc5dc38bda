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
//! Where the server logs GTIDs the position also carries the GTID position
//! after that transaction ([`Gtids`]). MariaDB: a reader given one starts
//! from it, as a GTID replica does, so a follower goes on from where it
//! stood on any server of the replication group (after a failover, or on a
//! server whose files are named otherwise), and the `file:position` it
//! reports is that server's. MySQL (`gtid_mode = ON`): the GTID set is
//! kept the same way, and read from when the server no longer has the
//! position's file.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mysql_async::binlog::events::{EventData, RowsEventData};
use mysql_async::{BinlogStream, BinlogStreamRequest, Opts, OptsBuilder, SslOpts};

use super::binlog_values::ColumnDecoder;
use super::gtid::{gtid_event, mysql_source, Gtids, MariaGtids, MysqlGtids, MARIADB_GTID_EVENT};
use super::position::BinlogPosition;
use super::{ChangeBatch, ChangeOp, RowChange, TupleValue};
use crate::{Source, SourceError};

/// The server id the reader registers with unless told otherwise: a
/// replica's id must differ from the source's and from every other
/// replica's.
pub const DEFAULT_SERVER_ID: u32 = 4_231_117;

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

/// The columns of a followed table, by ordinal position.
pub(super) struct TableColumns {
    pub(super) names: Arc<Vec<String>>,
    pub(super) decoders: Vec<ColumnDecoder>,
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
}

/// A source URL as `mysql_async` takes it: the scheme `mysql`, no sqlx
/// options; `ssl-mode` other than disabled/preferred asks for TLS.
fn binlog_opts(url: &str) -> Result<Opts, SourceError> {
    let bad = |e: String| SourceError::config(format!("invalid MySQL URL: {e}"));
    let rest = url
        .split_once("://")
        .map(|(_, r)| r)
        .ok_or_else(|| bad("no scheme".into()))?;
    let (base, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let tls = query.is_some_and(|q| {
        q.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            k.eq_ignore_ascii_case("ssl-mode")
                && !matches!(v.to_ascii_lowercase().as_str(), "disabled" | "preferred")
        })
    });
    let opts = Opts::from_url(&format!("mysql://{base}")).map_err(|e| bad(e.to_string()))?;
    let mut builder = OptsBuilder::from_opts(opts);
    if tls {
        builder = builder.ssl_opts(SslOpts::default());
    }
    Ok(builder.into())
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
        // Where `from` stands in GTIDs. MariaDB: the position's own, or the
        // server's reading of its file and offset; reading starts from it.
        // MySQL: the set the position carries; reading starts from it only
        // when the server does not have the position's file (a failover).
        let (gtids, by_gtid) = if source.mariadb_gtid_pos().await?.is_some() {
            let gtids = match &from.gtid {
                Some(g) => Some(MariaGtids::parse(g)?),
                None => source.binlog_gtid_pos(from).await?,
            };
            let by_gtid = from.gtid.is_some() && gtids.as_ref().is_some_and(|g| !g.is_empty());
            (gtids.map(Gtids::Maria), by_gtid)
        } else if source.mysql_gtid_mode_on().await? {
            let gtids = from
                .gtid
                .as_deref()
                .and_then(|g| MysqlGtids::parse(g).ok())
                .filter(|g| !g.is_empty());
            let by_gtid = gtids.is_some() && !source.has_binlog_file(&from.file).await?;
            (gtids.map(Gtids::Mysql), by_gtid)
        } else {
            (None, false)
        };
        if let Some(Gtids::Maria(g)) = &gtids {
            // GTID events as they are (not turned into `BEGIN`), and, from
            // a GTID position, the server finds the place in its own files.
            let mut setup = vec!["SET @mariadb_slave_capability = 4".to_string()];
            if by_gtid {
                setup.push(format!("SET @slave_connect_state = '{g}'"));
                setup.push("SET @slave_gtid_strict_mode = 1".into());
                setup.push("SET @slave_gtid_ignore_duplicates = 0".into());
            }
            for sql in setup {
                use mysql_async::prelude::Queryable;
                conn.query_drop(&sql).await.map_err(|e| {
                    SourceError::config(format!("prepare to read the binary log ({sql}): {e}"))
                })?;
            }
        }
        let request = match (&gtids, by_gtid) {
            (Some(Gtids::Maria(_)), true) => BinlogStreamRequest::new(server_id),
            (Some(Gtids::Mysql(set)), true) => BinlogStreamRequest::new(server_id)
                .with_gtid()
                .with_gtid_set(set.sids()?),
            _ => BinlogStreamRequest::new(server_id)
                .with_filename(from.file.as_bytes())
                .with_pos(from.pos),
        };
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
    /// followed (every transaction read is in a batch by then, so the
    /// GTIDs read are those of the batches).
    fn finish(&self, mut batch: ChangeBatch) -> ChangeBatch {
        if let (Some(end), Some(g)) = (&mut batch.end, &self.gtids) {
            end.gtid = (!g.is_empty()).then(|| g.to_string());
        }
        batch
    }

    /// The committed transactions that come within `wait` (a transaction
    /// begun is always read to its end), stopping at the first commit past
    /// `max_changes` row changes. [`ChangeBatch::end`] is where the last
    /// one ends.
    pub async fn next_batch(
        &mut self,
        source: &Source,
        max_changes: usize,
        wait: Duration,
    ) -> Result<ChangeBatch, SourceError> {
        let deadline = Instant::now() + wait;
        let mut batch = ChangeBatch::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = if self.in_transaction {
                self.stream.next().await
            } else {
                match tokio::time::timeout(left, self.stream.next()).await {
                    Ok(e) => e,
                    Err(_) => return Ok(self.finish(batch)),
                }
            };
            let event = match event {
                Some(Ok(e)) => e,
                Some(Err(e)) => {
                    return Err(SourceError::config(format!(
                        "read the binary log at {}: {e}",
                        self.place()
                    )))
                }
                None => {
                    return Err(SourceError::config(
                        "the source closed the binary log stream",
                    ))
                }
            };
            let header = event.header();
            let data = event.read_data().map_err(|e| {
                SourceError::config(format!("decode a binary log event in {}: {e}", self.file))
            })?;
            if header.event_type_raw() == MARIADB_GTID_EVENT {
                if let (Some(Gtids::Maria(g)), Some(gtid)) =
                    (&mut self.gtids, gtid_event(event.data()))
                {
                    g.record(gtid.domain, header.server_id(), gtid.sequence);
                    // A transaction begins (a standalone one is its one
                    // statement, which follows at once).
                    self.in_transaction = true;
                }
            }
            if let (Some(Gtids::Mysql(set)), Some(EventData::GtidEvent(gtid))) =
                (&mut self.gtids, &data)
            {
                let tag = gtid.tag().map(|t| t.to_string());
                set.add(&mysql_source(gtid.sid(), tag.as_deref()), gtid.gno());
                self.in_transaction = true;
            }
            let committed = match data {
                // The rotate the server sends first (position 0) repeats
                // the file asked for, and comes before the format
                // description that says whether a checksum ends it: from a
                // GTID position, its name is read once that is known.
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
                Some(EventData::QueryEvent(q)) => {
                    let sql = q.query();
                    let word = sql.split_whitespace().next().unwrap_or("");
                    if word.starts_with('#') {
                        // MariaDB's stand-in for an event a replica may not
                        // know (annotations, GTIDs): a comment.
                        false
                    } else if word.eq_ignore_ascii_case("BEGIN") {
                        self.in_transaction = true;
                        false
                    } else if word.eq_ignore_ascii_case("COMMIT") {
                        true
                    } else {
                        self.statement(source, &q.schema(), &sql).await?;
                        true
                    }
                }
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
            };
            if header.log_pos() > 0 && header.event_type_raw() != ROTATE {
                self.read_to = Some(BinlogPosition {
                    file: self.file.clone(),
                    pos: u64::from(header.log_pos()),
                    gtid: None,
                });
            }
            if committed && header.log_pos() > 0 {
                self.in_transaction = false;
                let end = BinlogPosition {
                    file: self.file.clone(),
                    pos: u64::from(header.log_pos()),
                    gtid: None,
                };
                let ordinal = end.ordinal();
                for mut c in self.pending.drain(..) {
                    c.commit_end = ordinal;
                    batch.changes.push(c);
                }
                batch.end_lsn = Some(ordinal);
                batch.end = Some(end);
                batch.last_commit_time =
                    Some((i64::from(header.timestamp()) - EPOCH_2000) * 1_000_000);
                batch.transactions += 1;
                if batch.changes.len() >= max_changes || Instant::now() >= deadline {
                    return Ok(self.finish(batch));
                }
            }
        }
    }

    /// A statement in the log: `TRUNCATE` of a followed table becomes a
    /// truncate change; any DDL makes the tables' columns read again.
    async fn statement(
        &mut self,
        source: &Source,
        schema: &str,
        sql: &str,
    ) -> Result<(), SourceError> {
        let words: Vec<&str> = sql.split_whitespace().take(3).collect();
        let first = words
            .first()
            .map(|w| w.to_ascii_uppercase())
            .unwrap_or_default();
        if first == "TRUNCATE" {
            let name = match words.get(1) {
                Some(w) if w.eq_ignore_ascii_case("TABLE") => words.get(2),
                other => other,
            };
            if let Some(name) = name {
                let name = name.trim_end_matches(';').replace('`', "");
                let (s, t) = match name.split_once('.') {
                    Some((s, t)) => (s.to_string(), t.to_string()),
                    None => (schema.to_string(), name.clone()),
                };
                if self.tables.contains_key(&(s.clone(), t.clone())) {
                    let columns = self.columns(source, &s, &t).await?.names.clone();
                    self.pending.push(RowChange {
                        oid: table_id(&s, &t),
                        table: format!("{s}.{t}"),
                        columns,
                        op: ChangeOp::Truncate,
                        old: None,
                        new: None,
                        commit_end: 0,
                    });
                }
            }
        } else if matches!(first.as_str(), "ALTER" | "CREATE" | "DROP" | "RENAME") {
            for columns in self.tables.values_mut() {
                *columns = None;
            }
        }
        Ok(())
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

    async fn rows(&mut self, source: &Source, rows: &RowsEventData<'_>) -> Result<(), SourceError> {
        let Some(tme) = self.stream.get_tme(rows.table_id()) else {
            return Err(SourceError::config(format!(
                "a row event in {} came before its table map",
                self.file
            )));
        };
        let (schema, table) = (
            tme.database_name().to_string(),
            tme.table_name().to_string(),
        );
        let key = (schema.clone(), table.clone());
        if !self.tables.contains_key(&key) {
            return Ok(());
        }
        let count = tme.columns_count() as usize;
        let mut fresh = false;
        loop {
            let columns = self.columns(source, &schema, &table).await?;
            if columns.names.len() == count {
                break;
            }
            if fresh {
                return Err(SourceError::config(format!(
                    "table {schema}.{table} has {} columns but its changes in the binary log have {count}: its shape changed while it was followed; run the full load again",
                    columns.names.len()
                )));
            }
            self.tables.insert(key.clone(), None);
            fresh = true;
        }
        let tme = self
            .stream
            .get_tme(rows.table_id())
            .expect("looked up above");
        let columns = self.tables[&key].as_ref().expect("read above");
        let op = match rows {
            RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_) => {
                ChangeOp::Insert
            }
            RowsEventData::DeleteRowsEventV1(_) | RowsEventData::DeleteRowsEvent(_) => {
                ChangeOp::Delete
            }
            _ => ChangeOp::Update,
        };
        let image = |row: Option<mysql_async::binlog::row::BinlogRow>| {
            row.map(|r| {
                columns
                    .decoders
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.decode(r.as_ref(i)))
                    .collect::<Vec<TupleValue>>()
            })
        };
        // The library's decoding may panic on a value it gets wrong (an
        // arithmetic overflow): an error naming the table, not a crash.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rows.rows(tme).collect::<Vec<_>>()
        }))
        .map_err(|_| {
            SourceError::config(format!(
                "a row of {schema}.{table} in {} cannot be decoded (the binary log library failed on one of its values)",
                self.file
            ))
        })?;
        for row in decoded {
            let (before, after) = row.map_err(|e| {
                SourceError::config(format!(
                    "decode a row of {schema}.{table} in {}: {e}",
                    self.file
                ))
            })?;
            self.pending.push(RowChange {
                oid: table_id(&schema, &table),
                table: format!("{schema}.{table}"),
                columns: columns.names.clone(),
                op,
                old: image(before),
                new: image(after),
                commit_end: 0,
            });
        }
        Ok(())
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
}
