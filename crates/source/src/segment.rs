//! Parallel reads: an entity's key range cut into segments that are read
//! concurrently, each with its own keyset cursor.
//!
//! A segment holds the keys `k` with `after < k <= until` (in the key's own
//! order, a tuple order for composite keys), either bound open. The first
//! segment has no lower bound and the last no upper bound, so together they
//! cover every key, including keys added or out of the sampled range while
//! the read runs; consecutive segments share a bound, so none overlap.
//!
//! How the bounds are chosen:
//!
//! - a single integer key: `MIN`/`MAX`, then `n` ranges of equal width
//!   (gaps in the keys make some segments lighter, never wrong);
//! - any other key (text, composite, dates…): `NTILE(n) OVER (ORDER BY key)`
//!   and the last key of each tile, so each segment holds about as many rows
//!   as the others (PostgreSQL, MariaDB ≥ 10.2, MySQL ≥ 8, SQLite ≥ 3.25).
//!
//! Fewer distinct bounds than `n` (a small table) give fewer segments; an
//! empty table gives one segment.

use std::borrow::Cow;

use sql2ddb_core::{Column, Row, SqlValue};
use sqlx::{AssertSqlSafe, Row as _};

use crate::page::Decoders;
use crate::sql::quote_ident;
use crate::{mysql, postgres, sqlite, Dialect, PageQuery, Pool, Source, SourceError};

/// Rows per segment that [`default_read_parallelism`] aims at.
pub const ROWS_PER_SEGMENT: u64 = 100_000;

/// Most segments [`default_read_parallelism`] chooses.
pub const MAX_DEFAULT_READ_PARALLELISM: u32 = 8;

/// One part of an entity's key range: the keys `k` with `after < k <= until`
/// (`None` = unbounded on that side). Read it with [`Source::read_range`],
/// advancing `after` to the last key of each page and keeping `until`.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Position of the segment in key order, from 0.
    pub index: u32,
    /// Exclusive lower bound: key values in key order.
    pub after: Option<Vec<SqlValue>>,
    /// Inclusive upper bound: key values in key order.
    pub until: Option<Vec<SqlValue>>,
}

/// Segments for a table of `rows` rows when neither the mapping nor the
/// command line says: one per started [`ROWS_PER_SEGMENT`] rows, at least 1
/// and at most [`MAX_DEFAULT_READ_PARALLELISM`] (so a table of up to 100,000
/// rows is read by one cursor, 250,000 rows by 3, a million by 8).
pub fn default_read_parallelism(rows: u64) -> u32 {
    let segments = rows.div_ceil(ROWS_PER_SEGMENT);
    segments.clamp(1, u64::from(MAX_DEFAULT_READ_PARALLELISM)) as u32
}

/// Key values of one bound, borrowed or rewritten.
type Bound<'b> = Cow<'b, [SqlValue]>;

/// Column name of the tile number in the `NTILE` statement.
const TILE: &str = "sql2ddb_tile";
/// Column name of the position within a tile, from its last row.
const FROM_LAST: &str = "sql2ddb_from_last";

impl Source {
    /// Cuts the entity of `q` into at most `n` segments of its key range (see
    /// the module documentation for how); `n = 0` is taken as 1. The segments
    /// are in key order, numbered from 0, and cover every key exactly once.
    pub async fn split(&self, q: &PageQuery, n: u32) -> Result<Vec<Segment>, SourceError> {
        self.check_dialect(q.dialect, "page query")?;
        let n = n.max(1);
        if n == 1 {
            return Ok(vec![Segment {
                index: 0,
                after: None,
                until: None,
            }]);
        }
        let bounds = match self.integer_range(q).await? {
            Some((lo, hi)) => even_bounds(lo, hi, n),
            None => self.tile_bounds(q, n).await?,
        };
        Ok(segments(bounds))
    }

    /// At most `page_size` rows with keys after `after` (exclusive) and up to
    /// `until` (inclusive), in key order; `None` leaves that side open. An
    /// empty page, or one shorter than `page_size`, means the range is done.
    pub async fn read_range(
        &self,
        q: &PageQuery,
        after: Option<&[SqlValue]>,
        until: Option<&[SqlValue]>,
    ) -> Result<Vec<Row>, SourceError> {
        let (after, until) = self.bound_values(q, after, until).await?;
        let (sql, values) = q.statement(after.as_deref(), until.as_deref());
        self.fetch(&q.entity, &q.columns, &q.decoders, sql, &values)
            .await
    }

    /// The number of rows with keys after `after` (exclusive) and up to
    /// `until` (inclusive), `None` leaving that side open: the rows
    /// [`Source::read_range`] returns page after page over that range (for a
    /// [`Segment`], its share of [`Source::count`]).
    pub async fn count_range(
        &self,
        q: &PageQuery,
        after: Option<&[SqlValue]>,
        until: Option<&[SqlValue]>,
    ) -> Result<u64, SourceError> {
        let (after, until) = self.bound_values(q, after, until).await?;
        let (sql, values) = q.count_statement(after.as_deref(), until.as_deref());
        let n = self.fetch_count(&q.entity, sql, &values).await?;
        Ok(n.max(0) as u64)
    }

    /// The bounds of a range read as they are bound: checked against the key,
    /// and (SQLite) rewritten to the text the table stores.
    async fn bound_values<'b>(
        &self,
        q: &PageQuery,
        after: Option<&'b [SqlValue]>,
        until: Option<&'b [SqlValue]>,
    ) -> Result<(Option<Bound<'b>>, Option<Bound<'b>>), SourceError> {
        self.check_dialect(q.dialect, "page query")?;
        for (what, bound) in [("cursor", after), ("upper bound", until)] {
            if let Some(values) = bound {
                if values.len() != q.key_indices.len() {
                    return Err(SourceError::config(format!(
                        "{what} of {} has {} values, the key has {} columns",
                        q.entity,
                        values.len(),
                        q.key_indices.len()
                    )));
                }
            }
        }
        // SQLite orders dates and JSON by their stored text: bind that text.
        let (Pool::Sqlite(p), Decoders::Sqlite(h)) = (&self.pool, &q.decoders) else {
            return Ok((after.map(Cow::Borrowed), until.map(Cow::Borrowed)));
        };
        let hints: Vec<sqlite::Hint> = q.key_indices.iter().map(|&i| h[i]).collect();
        let mut bounds = [None, None];
        for (slot, bound) in bounds.iter_mut().zip([after, until]) {
            if let Some(values) = bound {
                *slot = Some(Cow::Owned(
                    crate::sqlite_keys::stored_key_values(
                        p,
                        &q.relation,
                        &q.key_refs,
                        &hints,
                        values,
                    )
                    .await?,
                ));
            }
        }
        let [after, until] = bounds;
        Ok((after, until))
    }

    /// `MIN` and `MAX` of a single integer key; `None` when the key is of
    /// another kind, or the table is empty, or (SQLite) holds other values.
    async fn integer_range(&self, q: &PageQuery) -> Result<Option<(i128, i128)>, SourceError> {
        let [key] = q.key_indices.as_slice() else {
            return Ok(None);
        };
        let integer = match &q.decoders {
            Decoders::Postgres(kinds) => matches!(
                kinds[*key],
                postgres::Kind::Int2 | postgres::Kind::Int4 | postgres::Kind::Int8
            ),
            Decoders::MySql(kinds) => kinds[*key] == mysql::Kind::Int,
            // SQLite's integer affinity; the values themselves are checked below.
            Decoders::Sqlite(hints) => {
                hints[*key] == sqlite::Hint::None
                    && q.columns[*key]
                        .sql_type
                        .to_ascii_uppercase()
                        .contains("INT")
            }
        };
        if !integer {
            return Ok(None);
        }
        let k = &q.key_refs[0];
        let rel = &q.relation;
        let context = format!("find the key range of {}", q.entity);
        let query_error = |e| SourceError::query(&context, e);
        let (lo, hi): (Option<String>, Option<String>) = match &self.pool {
            Pool::Postgres(p) => {
                let sql = format!("SELECT min({k})::text, max({k})::text FROM {rel}");
                sqlx::query_as(AssertSqlSafe(sql))
                    .fetch_one(p)
                    .await
                    .map_err(query_error)?
            }
            Pool::MySql(p) => {
                let sql =
                    format!("SELECT CAST(MIN({k}) AS CHAR), CAST(MAX({k}) AS CHAR) FROM {rel}");
                sqlx::query_as(AssertSqlSafe(sql))
                    .fetch_one(p)
                    .await
                    .map_err(query_error)?
            }
            Pool::Sqlite(p) => {
                // Text sorts after every number in SQLite: a text key makes
                // max() text, and the NTILE bounds are used instead.
                let sql = format!(
                    "SELECT CAST(min({k}) AS TEXT), CAST(max({k}) AS TEXT), \
                     typeof(min({k})), typeof(max({k})) FROM {rel}"
                );
                let row = sqlx::query(AssertSqlSafe(sql))
                    .fetch_one(p)
                    .await
                    .map_err(query_error)?;
                let types: (String, String) = (row.get(2), row.get(3));
                if types != ("integer".into(), "integer".into()) {
                    return Ok(None);
                }
                (row.get(0), row.get(1))
            }
        };
        Ok(match (lo, hi) {
            (Some(lo), Some(hi)) => lo.parse().ok().zip(hi.parse().ok()),
            _ => None,
        })
    }

    /// The last key of each of `n` tiles of the key order but the last tile, in key order.
    async fn tile_bounds(&self, q: &PageQuery, n: u32) -> Result<Vec<Vec<SqlValue>>, SourceError> {
        let d = q.dialect;
        let key_columns: Vec<Column> = q
            .key_indices
            .iter()
            .map(|&i| q.columns[i].clone())
            .collect();
        let key_decoders = q.decoders.pick(&q.key_indices);
        let key_select: Vec<&str> = q
            .key_indices
            .iter()
            .map(|&i| q.select[i].as_str())
            .collect();
        let sql = tile_sql(d, &q.relation, &q.key_refs, &key_columns, &key_select, n);
        let context = format!("segment bounds of {}", q.entity);
        let mut bounds = self
            .fetch(&context, &key_columns, &key_decoders, &sql, &[])
            .await?;
        // The last tile ends at the greatest key: the last segment stays open instead.
        bounds.pop();
        Ok(bounds)
    }
}

/// The statement returning the last key of each `NTILE(n)` tile, in key order.
///
/// Only the key columns go through the window functions, so the sort stays
/// narrow; the outer select decodes them as the page statements do.
fn tile_sql(
    d: Dialect,
    relation: &str,
    key_refs: &[String],
    key_columns: &[Column],
    key_select: &[&str],
    n: u32,
) -> String {
    let names: Vec<String> = key_columns
        .iter()
        .map(|c| quote_ident(d, &c.name))
        .collect();
    let inner_select: Vec<String> = key_refs
        .iter()
        .zip(&names)
        .map(|(r, name)| format!("{r} AS {name}"))
        .collect();
    let tiled_desc: Vec<String> = names.iter().map(|c| format!("x.{c} DESC")).collect();
    let order = key_refs.join(", ");
    format!(
        "SELECT {select} FROM (\
           SELECT x.*, ROW_NUMBER() OVER (PARTITION BY x.{TILE} ORDER BY {desc}) AS {FROM_LAST} FROM (\
             SELECT {inner}, NTILE({n}) OVER (ORDER BY {order}) AS {TILE} FROM {relation}\
           ) AS x\
         ) AS t WHERE t.{FROM_LAST} = 1 ORDER BY {order}",
        select = key_select.join(", "),
        desc = tiled_desc.join(", "),
        inner = inner_select.join(", "),
    )
}

/// `n - 1` inner bounds cutting `lo..=hi` into `n` ranges of equal width
/// (fewer when the range holds fewer than `n` values).
fn even_bounds(lo: i128, hi: i128, n: u32) -> Vec<Vec<SqlValue>> {
    let width = hi - lo + 1;
    let n = i128::from(n).min(width).max(1);
    (1..n)
        .map(|i| vec![integer(lo + width * i / n - 1)])
        .collect()
}

fn integer(v: i128) -> SqlValue {
    match i64::try_from(v) {
        Ok(i) => SqlValue::Int(i),
        Err(_) => SqlValue::UInt(u64::try_from(v).unwrap_or(u64::MAX)),
    }
}

/// Segments from inner bounds in key order: one more segment than bounds,
/// the first and the last open. Repeated bounds (a key that is not unique)
/// are merged.
fn segments(mut bounds: Vec<Vec<SqlValue>>) -> Vec<Segment> {
    bounds.dedup();
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut after: Option<Vec<SqlValue>> = None;
    for b in bounds {
        out.push(Segment {
            index: out.len() as u32,
            after: after.take(),
            until: Some(b.clone()),
        });
        after = Some(b);
    }
    out.push(Segment {
        index: out.len() as u32,
        after,
        until: None,
    });
    out
}
