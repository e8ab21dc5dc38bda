//! What `sql2ddb plan` asks a source before anything is written: the
//! catalog's row estimate, and the groups of rows that share the values of
//! some columns (the columns a key template reads), largest first.
//!
//! Group values come back as the source's own text of each value (a cast to
//! text in SQL), so a group of any column types is read the same way.

use sqlx::{AssertSqlSafe, Row as _};

use crate::sql::{self, quote_ident, split_table};
use crate::{Dialect, Pool, Relation, Source, SourceError};

/// Rows that share the values of the grouped columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueGroup {
    /// The text of each grouped column's value, in the order asked (`None`: NULL).
    pub values: Vec<Option<String>>,
    /// Rows in the group.
    pub rows: u64,
}

/// Groups of more than one row: how many, the rows in them, and the largest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Duplicates {
    /// Distinct value tuples held by more than one row.
    pub groups: u64,
    /// Rows in those groups.
    pub rows: u64,
    /// The largest groups, largest first.
    pub examples: Vec<ValueGroup>,
}

impl Source {
    /// The catalog's estimate of the rows of a table (PostgreSQL
    /// `pg_class.reltuples`, MySQL `information_schema.tables.table_rows`):
    /// `None` for a query entity, for SQLite (which keeps no such figure
    /// unless analysed) and for a table the catalog has no estimate of yet.
    pub async fn estimate_rows(&self, from: &Relation<'_>) -> Result<Option<u64>, SourceError> {
        let Relation::Table(name) = from else {
            return Ok(None);
        };
        let context = format!("estimate the rows of {name}");
        let n: Option<i64> = match &self.pool {
            Pool::Postgres(p) => {
                // Reading a partitioned table or an inheritance parent reads
                // its partitions' or children's rows too: their estimates are
                // summed (a partitioned table keeps none of its own). One of
                // them never analysed (-1) leaves the whole without one.
                let sql = "WITH RECURSIVE tree(oid) AS (SELECT to_regclass($1)::oid \
                     UNION ALL SELECT i.inhrelid FROM pg_inherits i JOIN tree t ON i.inhparent = t.oid) \
                     SELECT CASE WHEN bool_or(c.reltuples < 0) THEN -1 \
                     ELSE CAST(sum(c.reltuples) AS BIGINT) END \
                     FROM tree JOIN pg_class c ON c.oid = tree.oid WHERE c.relkind <> 'p'";
                let quoted = sql::quote_table(Dialect::Postgres, name);
                sqlx::query_scalar::<_, Option<i64>>(sql)
                    .bind(quoted)
                    .fetch_optional(p)
                    .await
                    .map_err(|e| SourceError::query(&context, e))?
                    .flatten()
            }
            Pool::MySql(p) => {
                let (schema, table) = split_table(name);
                let sql = "SELECT CAST(table_rows AS SIGNED) FROM information_schema.tables \
                           WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?";
                sqlx::query_scalar::<_, Option<i64>>(sql)
                    .bind(schema)
                    .bind(table)
                    .fetch_optional(p)
                    .await
                    .map_err(|e| SourceError::query(&context, e))?
                    .flatten()
            }
            Pool::Sqlite(_) => None,
        };
        // PostgreSQL says -1 for a table never vacuumed or analysed.
        Ok(n.filter(|n| *n >= 0).map(|n| n as u64))
    }

    /// The `limit` largest groups of rows by the values of `columns`
    /// (`GROUP BY`, exact), largest first; ties in key order of the values.
    /// Rows with a NULL in one of `columns` are left out: they make no key
    /// (see [`Source::rows_with_null`]). No columns: one group of every row.
    pub async fn largest_groups(
        &self,
        from: &Relation<'_>,
        columns: &[String],
        limit: usize,
    ) -> Result<Vec<ValueGroup>, SourceError> {
        let rel = sql::relation(self.dialect(), from)?;
        let sql = match columns.is_empty() {
            true => format!("SELECT count(*) FROM {rel}"),
            false => {
                let (select, group) = self.group_parts(columns);
                let filter = self.not_null(columns);
                format!(
                    "SELECT {select}, count(*) AS n FROM {rel} WHERE {filter} GROUP BY {group} \
                     ORDER BY n DESC, {group} LIMIT {}",
                    limit.max(1)
                )
            }
        };
        let context = format!("group the rows of {}", from.display_name());
        self.fetch_groups(&context, sql, columns.len()).await
    }

    /// Rows that share the values of `columns` with another row (`GROUP BY
    /// … HAVING count(*) > 1`): counts, and up to `limit` examples. Rows
    /// with a NULL in one of `columns` make no key, so they share none.
    pub async fn duplicates(
        &self,
        from: &Relation<'_>,
        columns: &[String],
        limit: usize,
    ) -> Result<Duplicates, SourceError> {
        let rel = sql::relation(self.dialect(), from)?;
        let context = format!("find rows sharing a key in {}", from.display_name());
        if columns.is_empty() {
            let all = self
                .fetch_i64(&context, format!("SELECT count(*) FROM {rel}"))
                .await?
                .max(0) as u64;
            return Ok(match all > 1 {
                true => Duplicates {
                    groups: 1,
                    rows: all,
                    examples: vec![ValueGroup {
                        values: Vec::new(),
                        rows: all,
                    }],
                },
                false => Duplicates::default(),
            });
        }
        let (select, group) = self.group_parts(columns);
        let filter = self.not_null(columns);
        let having = format!(
            "SELECT count(*) AS n FROM {rel} WHERE {filter} GROUP BY {group} HAVING count(*) > 1"
        );
        let groups = self
            .fetch_i64(&context, format!("SELECT count(*) FROM ({having}) AS d"))
            .await?
            .max(0) as u64;
        let bigint = match self.dialect() {
            Dialect::MySql => "SIGNED",
            Dialect::Postgres | Dialect::Sqlite => "BIGINT",
        };
        let rows = self
            .fetch_i64(
                &context,
                format!("SELECT CAST(COALESCE(sum(d.n), 0) AS {bigint}) FROM ({having}) AS d"),
            )
            .await?
            .max(0) as u64;
        let examples = match groups {
            0 => Vec::new(),
            _ => {
                let sql = format!(
                    "SELECT {select}, count(*) AS n FROM {rel} WHERE {filter} GROUP BY {group} \
                     HAVING count(*) > 1 ORDER BY n DESC, {group} LIMIT {}",
                    limit.max(1)
                );
                self.fetch_groups(&context, sql, columns.len()).await?
            }
        };
        Ok(Duplicates {
            groups,
            rows,
            examples,
        })
    }

    /// Rows with a NULL in at least one of `columns` (exact): rows whose
    /// key template cannot be filled, which a run rejects. None for no
    /// columns.
    pub async fn rows_with_null(
        &self,
        from: &Relation<'_>,
        columns: &[String],
    ) -> Result<u64, SourceError> {
        if columns.is_empty() {
            return Ok(0);
        }
        let rel = sql::relation(self.dialect(), from)?;
        let d = self.dialect();
        let any_null: Vec<String> = columns
            .iter()
            .map(|c| format!("{} IS NULL", sql::column_ref(d, c)))
            .collect();
        let context = format!(
            "count the rows of {} with a NULL key column",
            from.display_name()
        );
        let sql = format!("SELECT count(*) FROM {rel} WHERE {}", any_null.join(" OR "));
        Ok(self.fetch_i64(&context, sql).await?.max(0) as u64)
    }

    /// `c1 IS NOT NULL AND …` for `columns`.
    fn not_null(&self, columns: &[String]) -> String {
        let d = self.dialect();
        columns
            .iter()
            .map(|c| format!("{} IS NOT NULL", sql::column_ref(d, c)))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// The select list (each column cast to text) and the `GROUP BY` list.
    fn group_parts(&self, columns: &[String]) -> (String, String) {
        let d = self.dialect();
        let refs: Vec<String> = columns.iter().map(|c| sql::column_ref(d, c)).collect();
        let text = |r: &String| match d {
            Dialect::MySql => format!("CAST({r} AS CHAR)"),
            Dialect::Postgres | Dialect::Sqlite => format!("CAST({r} AS TEXT)"),
        };
        let select: Vec<String> = refs
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{} AS {}", text(r), quote_ident(d, &format!("g{i}"))))
            .collect();
        (select.join(", "), refs.join(", "))
    }

    /// Rows of `width` text values then one count, as [`ValueGroup`]s.
    async fn fetch_groups(
        &self,
        context: &str,
        sql: String,
        width: usize,
    ) -> Result<Vec<ValueGroup>, SourceError> {
        macro_rules! read {
            ($pool:expr) => {{
                let rows = sqlx::query(AssertSqlSafe(sql))
                    .fetch_all($pool)
                    .await
                    .map_err(|e| SourceError::query(context, e))?;
                rows.iter()
                    .map(|row| {
                        let mut values = Vec::with_capacity(width);
                        for i in 0..width {
                            values
                                .push(text_at(row, i).map_err(|e| SourceError::query(context, e))?);
                        }
                        let n: i64 = row
                            .try_get(width)
                            .map_err(|e| SourceError::query(context, e))?;
                        Ok(ValueGroup {
                            values,
                            rows: n.max(0) as u64,
                        })
                    })
                    .collect()
            }};
        }
        match &self.pool {
            Pool::Postgres(p) => read!(p),
            Pool::MySql(p) => read!(p),
            Pool::Sqlite(p) => read!(p),
        }
    }
}

/// Column `i` of a row as text: a string, or (MySQL may answer a cast with
/// a binary string; SQLite a count with an integer) bytes or an integer.
pub(crate) fn text_at<R>(row: &R, i: usize) -> Result<Option<String>, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<Vec<u8>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    if let Ok(v) = row.try_get::<Option<String>, _>(i) {
        return Ok(v);
    }
    if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
        return Ok(v.map(|n| n.to_string()));
    }
    let bytes: Option<Vec<u8>> = row.try_get(i)?;
    Ok(bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
}
