//! Replicated tuples (text values) turned into rows exactly as a page read
//! gives them, so a followed row maps to the same item as the full load's
//! copy of it. A value whose page read is its text, or whose text is
//! canonical (integers, `boolean`, `uuid`, `numeric`, `json`, text types,
//! anything the page selects `::text`), is decoded in the process; a tuple
//! holding another (floats, dates and times, `bytea`, arrays) is cast by
//! the server, and the page's own select list and decoders read the result.
//!
//! The texts the server casts travel as one array per column (`unnest`),
//! not one bound value per cell: the statement is the same whatever the
//! number of tuples, so it is parsed and planned once per connection, and a
//! batch of changes takes a statement or two instead of one per 500 tuples
//! with thousands of parameters each.

use sql2ddb_core::{Row, SqlValue};

use super::TupleValue;
use crate::page::Decoders;
use crate::postgres::{decode_text, Kind};
use crate::sql::{quote_ident, ALIAS};
use crate::{Dialect, PageQuery, Source, SourceError};

/// Most tuples cast in one statement.
const TUPLES_PER_STATEMENT: usize = 5_000;

/// The column that numbers the tuples of a statement; it is not selected,
/// so it only has to differ from the entity's own column names.
const ORDINAL: &str = "\"sql2ddb ordinal\"";

impl Source {
    /// The rows of `q`'s entity that `tuples` hold (values in the order of
    /// `columns`, as the slot sent them), decoded as [`Source::read_page`]
    /// decodes; `None` for a tuple that lacks a value (an unchanged TOASTed
    /// value, a column the slot does not send): read that row by its key
    /// instead.
    pub async fn rows_of_tuples(
        &self,
        q: &PageQuery,
        columns: &[String],
        tuples: &[&[TupleValue]],
    ) -> Result<Vec<Option<Row>>, SourceError> {
        self.check_dialect(q.dialect, "page query")?;
        let at = column_positions(q, columns);
        match q.dialect {
            Dialect::Postgres => {}
            // The binary log reader decoded its values as the page reader does.
            Dialect::MySql => return Ok(tuples.iter().map(|t| decoded_row(&at, t)).collect()),
            Dialect::Sqlite => {
                return Err(SourceError::config(
                    "replicated tuples come from PostgreSQL and MySQL/MariaDB only",
                ))
            }
        }
        let kinds = match &q.decoders {
            Decoders::Postgres(kinds) => kinds.as_slice(),
            _ => &[],
        };
        let (mut out, wanted) = decode_in_process(&at, kinds, tuples);
        let sql = unnest_select(q);
        for chunk in wanted.chunks(TUPLES_PER_STATEMENT) {
            let rows = self.cast_tuples(q, &sql, &at, tuples, chunk).await?;
            for (&t, row) in chunk.iter().zip(rows) {
                out[t] = Some(row);
            }
        }
        Ok(out)
    }

    /// The rows the server casts tuples `chunk` (indices into `tuples`,
    /// each complete) into with `sql` ([`unnest_select`]), in that order.
    async fn cast_tuples(
        &self,
        q: &PageQuery,
        sql: &str,
        at: &[Option<usize>],
        tuples: &[&[TupleValue]],
        chunk: &[usize],
    ) -> Result<Vec<Row>, SourceError> {
        let values = column_arrays(at, tuples, chunk)?;
        let bound: Vec<&SqlValue> = values.iter().collect();
        let rows = self
            .fetch(&q.entity, &q.columns, &q.decoders, sql, &bound)
            .await?;
        if rows.len() != chunk.len() {
            return Err(SourceError::config(format!(
                "{} tuples of {} were cast into {} rows",
                chunk.len(),
                q.entity,
                rows.len()
            )));
        }
        Ok(rows)
    }
}

/// Position of each of `q`'s columns within tuples that carry `columns`.
fn column_positions(q: &PageQuery, columns: &[String]) -> Vec<Option<usize>> {
    q.columns
        .iter()
        .map(|c| columns.iter().position(|n| *n == c.name))
        .collect()
}

/// Whether `tuple` holds a value for every column (none missing, none an
/// unchanged TOASTed value).
fn is_complete(at: &[Option<usize>], tuple: &[TupleValue]) -> bool {
    at.iter().all(|i| {
        i.and_then(|i| tuple.get(i))
            .is_some_and(|v| !matches!(v, TupleValue::Unchanged))
    })
}

/// The rows of the complete tuples whose every value decodes in the
/// process, and the indices of the complete tuples the server must cast
/// instead (a float, a date, an array…); an incomplete tuple is neither.
fn decode_in_process(
    at: &[Option<usize>],
    kinds: &[Kind],
    tuples: &[&[TupleValue]],
) -> (Vec<Option<Row>>, Vec<usize>) {
    let mut out: Vec<Option<Row>> = vec![None; tuples.len()];
    let mut wanted: Vec<usize> = Vec::new();
    for i in (0..tuples.len()).filter(|&i| is_complete(at, tuples[i])) {
        match text_row(at, kinds, tuples[i]) {
            Some(row) => out[i] = Some(row),
            None => wanted.push(i),
        }
    }
    (out, wanted)
}

/// Per column, the texts of tuples `chunk` as one `text[]` literal, the
/// values [`unnest_select`] binds.
fn column_arrays(
    at: &[Option<usize>],
    tuples: &[&[TupleValue]],
    chunk: &[usize],
) -> Result<Vec<SqlValue>, SourceError> {
    let mut arrays: Vec<String> = vec![String::from("{"); at.len()];
    for (n, &t) in chunk.iter().enumerate() {
        for (array, i) in arrays.iter_mut().zip(at) {
            if n > 0 {
                array.push(',');
            }
            match &tuples[t][i.expect("complete tuple")] {
                TupleValue::Text(text) => push_element(array, text),
                TupleValue::Null => array.push_str("NULL"),
                TupleValue::Value(_) | TupleValue::Unchanged => {
                    return Err(SourceError::config(
                        "a PostgreSQL tuple holds a value that is not text",
                    ))
                }
            }
        }
    }
    Ok(arrays
        .into_iter()
        .map(|mut a| {
            a.push('}');
            SqlValue::Text(a)
        })
        .collect())
}

/// The statement that casts the texts of `q`'s columns, bound as one
/// `text[]` literal per column, to the columns' types and reads them with
/// the page's own select list, in the order the tuples were given.
fn unnest_select(q: &PageQuery) -> String {
    let cells: Vec<String> = q
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "CAST(u.c{i} AS {}) AS {}",
                c.sql_type,
                quote_ident(Dialect::Postgres, &c.name)
            )
        })
        .collect();
    let arrays: Vec<String> = (1..=q.columns.len())
        .map(|n| format!("CAST(${n} AS text[])"))
        .collect();
    let names: Vec<String> = (0..q.columns.len()).map(|i| format!("c{i}")).collect();
    format!(
        "SELECT {} FROM (SELECT {}, u.n AS {ORDINAL} FROM unnest({}) WITH ORDINALITY AS u({}, n)) AS {ALIAS} ORDER BY {ALIAS}.{ORDINAL}",
        q.select.join(", "),
        cells.join(", "),
        arrays.join(", "),
        names.join(", ")
    )
}

/// Appends `text` to an array literal as one quoted element: exact for any
/// text (quotes and backslashes escaped, `NULL` or braces inside kept as
/// text).
fn push_element(array: &mut String, text: &str) {
    array.push('"');
    for ch in text.chars() {
        if ch == '"' || ch == '\\' {
            array.push('\\');
        }
        array.push(ch);
    }
    array.push('"');
}

/// The row a complete PostgreSQL tuple holds, its texts decoded in the
/// process by the page's decoders (`kinds`, in the entity's column order);
/// `None` when a value needs the server's cast.
fn text_row(at: &[Option<usize>], kinds: &[Kind], tuple: &[TupleValue]) -> Option<Row> {
    if kinds.len() != at.len() {
        return None;
    }
    at.iter()
        .zip(kinds)
        .map(|(i, &kind)| match tuple.get((*i)?)? {
            TupleValue::Text(text) => decode_text(text, kind),
            TupleValue::Null => Some(SqlValue::Null),
            TupleValue::Value(_) | TupleValue::Unchanged => None,
        })
        .collect()
}

/// The row a tuple of decoded values holds (in the entity's column order);
/// `None` when a value is missing: the row is read again by its key.
fn decoded_row(at: &[Option<usize>], tuple: &[TupleValue]) -> Option<Row> {
    at.iter()
        .map(|i| match tuple.get((*i)?)? {
            TupleValue::Value(v) => Some(v.clone()),
            TupleValue::Null => Some(SqlValue::Null),
            TupleValue::Text(_) | TupleValue::Unchanged => None,
        })
        .collect()
}
