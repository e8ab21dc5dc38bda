//! Replicated tuples (text values) turned into rows exactly as a page read
//! gives them: the server casts each text to its column's type and the
//! page's own select list and decoders read the result, so a followed row
//! maps to the same item as the full load's copy of it.

use sql2ddb_core::{Row, SqlValue};

use super::TupleValue;
use crate::sql::{quote_ident, ALIAS};
use crate::{Dialect, PageQuery, Source, SourceError, MAX_BIND_VALUES};

/// Most tuples cast in one statement.
const TUPLES_PER_STATEMENT: usize = 500;

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
        // Position of each of the entity's columns within the tuples.
        let at: Vec<Option<usize>> = q
            .columns
            .iter()
            .map(|c| columns.iter().position(|n| *n == c.name))
            .collect();
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
        let complete = |t: &[TupleValue]| {
            at.iter().all(|i| {
                i.and_then(|i| t.get(i))
                    .is_some_and(|v| !matches!(v, TupleValue::Unchanged))
            })
        };
        let mut out: Vec<Option<Row>> = vec![None; tuples.len()];
        let wanted: Vec<usize> = (0..tuples.len()).filter(|&i| complete(tuples[i])).collect();
        let per_statement =
            (MAX_BIND_VALUES / q.columns.len().max(1)).clamp(1, TUPLES_PER_STATEMENT);
        for chunk in wanted.chunks(per_statement) {
            let mut values: Vec<SqlValue> = Vec::new();
            let mut rows_sql = Vec::with_capacity(chunk.len());
            for (n, &t) in chunk.iter().enumerate() {
                let mut cells: Vec<String> = q
                    .columns
                    .iter()
                    .zip(&at)
                    .map(|(c, i)| match &tuples[t][i.expect("complete tuple")] {
                        TupleValue::Text(s) => {
                            values.push(SqlValue::Text(s.clone()));
                            format!("CAST(${} AS {})", values.len(), c.sql_type)
                        }
                        TupleValue::Value(v) => {
                            values.push(v.clone());
                            format!("CAST(${} AS {})", values.len(), c.sql_type)
                        }
                        _ => format!("CAST(NULL AS {})", c.sql_type),
                    })
                    .collect();
                cells.push(n.to_string());
                rows_sql.push(format!("({})", cells.join(", ")));
            }
            let mut names: Vec<String> = q
                .columns
                .iter()
                .map(|c| quote_ident(Dialect::Postgres, &c.name))
                .collect();
            // The rows come back in the order they were given.
            names.push(ORDINAL.into());
            let sql = format!(
                "SELECT {} FROM (VALUES {}) AS {ALIAS}({}) ORDER BY {ALIAS}.{ORDINAL}",
                q.select.join(", "),
                rows_sql.join(", "),
                names.join(", ")
            );
            let bound: Vec<&SqlValue> = values.iter().collect();
            let rows = self
                .fetch(&q.entity, &q.columns, &q.decoders, &sql, &bound)
                .await?;
            for (&t, row) in chunk.iter().zip(rows) {
                out[t] = Some(row);
            }
        }
        Ok(out)
    }
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
