//! Where a reader starts in the binary log, and how it asks the server
//! for it: the connection's options from the source URL, the start's GTID
//! position, MariaDB's session settings, and the stream request.

use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStreamRequest, Conn, Opts, OptsBuilder, SslOpts};

use crate::cdc::gtid::{Gtids, MariaGtids, MysqlGtids};
use crate::cdc::position::BinlogPosition;
use crate::{Source, SourceError};

/// A source URL as `mysql_async` takes it: the scheme `mysql`, no sqlx
/// options; `ssl-mode` other than disabled/preferred asks for TLS.
pub(super) fn binlog_opts(url: &str) -> Result<Opts, SourceError> {
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

/// Where `from` stands in GTIDs, and whether reading starts from them.
/// MariaDB: the position's own, or the server's reading of its file and
/// offset; reading starts from it. MySQL: the set the position carries;
/// reading starts from it only when the server does not have the
/// position's file (a failover).
pub(super) async fn start_gtids(
    source: &Source,
    from: &BinlogPosition,
) -> Result<(Option<Gtids>, bool), SourceError> {
    Ok(if source.mariadb_gtid_pos().await?.is_some() {
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
    })
}

/// MariaDB's session settings for a reader at GTID position `g`: GTID
/// events as they are (not turned into `BEGIN`), and, when reading starts
/// from the GTID position (`by_gtid`), the server finds the place in its
/// own files.
pub(super) async fn prepare_mariadb(
    conn: &mut Conn,
    g: &MariaGtids,
    by_gtid: bool,
) -> Result<(), SourceError> {
    let mut setup = vec!["SET @mariadb_slave_capability = 4".to_string()];
    if by_gtid {
        setup.push(format!("SET @slave_connect_state = '{g}'"));
        setup.push("SET @slave_gtid_strict_mode = 1".into());
        setup.push("SET @slave_gtid_ignore_duplicates = 0".into());
    }
    for sql in setup {
        conn.query_drop(&sql).await.map_err(|e| {
            SourceError::config(format!("prepare to read the binary log ({sql}): {e}"))
        })?;
    }
    Ok(())
}

/// The request for the binary log as replica `server_id`: from the GTID
/// position when reading starts there, else from `from`'s file and offset.
pub(super) fn stream_request<'a>(
    server_id: u32,
    from: &'a BinlogPosition,
    gtids: &Option<Gtids>,
    by_gtid: bool,
) -> Result<BinlogStreamRequest<'a>, SourceError> {
    Ok(match (gtids, by_gtid) {
        (Some(Gtids::Maria(_)), true) => BinlogStreamRequest::new(server_id),
        (Some(Gtids::Mysql(set)), true) => BinlogStreamRequest::new(server_id)
            .with_gtid()
            .with_gtid_set(set.sids()?),
        _ => BinlogStreamRequest::new(server_id)
            .with_filename(from.file.as_bytes())
            .with_pos(from.pos),
    })
}
