//! Rows read back by key, for replaying rejected rows: one statement per
//! batch of keys (`WHERE (k1, k2) IN (…)`), never one per key.

use sql2ddb_core::{Row, SqlValue};

use crate::children::check_keys;
use crate::sql::in_condition;
use crate::sqlite_keys::renderings;
use crate::{Dialect, PageQuery, Source, SourceError, MAX_BIND_VALUES, MAX_PARENTS_PER_QUERY};

impl Source {
    /// The rows of `q`'s entity whose key equals one of `keys` (key values in
    /// key order, as [`PageQuery::key_of`] gives them), in no particular
    /// order; a key that matches no row (deleted since) is simply absent, and
    /// a key asked twice returns its row once.
    ///
    /// Keys are read in batches of at most [`MAX_PARENTS_PER_QUERY`] keys and
    /// [`MAX_BIND_VALUES`] bound values per statement. In SQLite a date,
    /// timestamp or JSON key value is matched against each text it may be
    /// stored as, and only rows whose key reads back as a requested value are
    /// returned. A key with the wrong number of values or a NULL is an error.
    pub async fn read_keys(
        &self,
        q: &PageQuery,
        keys: &[Vec<SqlValue>],
    ) -> Result<Vec<Row>, SourceError> {
        self.check_dialect(q.dialect, "page query")?;
        let width = q.key_refs.len();
        check_keys(keys, width, &q.entity, "key", "the key")?;
        // A key asked twice, in two statements, would return its row twice.
        let mut seen = std::collections::HashSet::new();
        let unique: Vec<Vec<SqlValue>> = keys
            .iter()
            .filter(|k| seen.insert(format!("{k:?}")))
            .cloned()
            .collect();
        let keys = unique.as_slice();
        let mut rows = Vec::new();
        match q.dialect {
            Dialect::Postgres | Dialect::MySql => {
                let per_statement = (MAX_BIND_VALUES / width.max(1)).min(MAX_PARENTS_PER_QUERY);
                for chunk in keys.chunks(per_statement.max(1)) {
                    let sql = in_sql(q, chunk.len());
                    let values: Vec<&SqlValue> = chunk.iter().flatten().collect();
                    rows.extend(
                        self.fetch(&q.entity, &q.columns, &q.decoders, &sql, &values)
                            .await?,
                    );
                }
            }
            Dialect::Sqlite => {
                // Each key as every combination of the texts its values may
                // be stored as (one tuple for keys of plain values).
                let expanded: Vec<Vec<Vec<SqlValue>>> =
                    keys.iter().map(|k| stored_forms(k)).collect();
                let mut start = 0;
                while start < expanded.len() {
                    let (mut end, mut tuples) = (start, 0);
                    while end < expanded.len() && end - start < MAX_PARENTS_PER_QUERY {
                        let n = expanded[end].len();
                        if end > start && (tuples + n) * width > MAX_BIND_VALUES {
                            break;
                        }
                        tuples += n;
                        end += 1;
                    }
                    let chunk = &expanded[start..end];
                    let sql = in_sql(q, tuples);
                    let values: Vec<&SqlValue> = chunk.iter().flatten().flatten().collect();
                    let found = self
                        .fetch(&q.entity, &q.columns, &q.decoders, &sql, &values)
                        .await?;
                    // Another text of a value may read back as another value
                    // (`2024-1-2` as text): keep the rows whose key was asked.
                    rows.extend(
                        found
                            .into_iter()
                            .filter(|r| keys[start..end].contains(&q.key_of(r))),
                    );
                    start = end;
                }
            }
        }
        Ok(rows)
    }
}

/// `SELECT … WHERE (k1, k2) IN (…)` for `n` key tuples.
fn in_sql(q: &PageQuery, n: usize) -> String {
    format!(
        "SELECT {} FROM {} WHERE {}",
        q.select.join(", "),
        q.relation,
        in_condition(q.dialect, &q.key_refs, &q.params, n)
    )
}

/// Every combination of the texts a key's values may be stored as (SQLite).
fn stored_forms(key: &[SqlValue]) -> Vec<Vec<SqlValue>> {
    let mut tuples: Vec<Vec<SqlValue>> = vec![Vec::new()];
    for v in key {
        let forms: Vec<SqlValue> = match renderings(v) {
            forms if forms.is_empty() => vec![v.clone()],
            forms => forms.into_iter().map(SqlValue::Text).collect(),
        };
        tuples = tuples
            .into_iter()
            .flat_map(|t| {
                forms.iter().map(move |f| {
                    let mut t = t.clone();
                    t.push(f.clone());
                    t
                })
            })
            .collect();
    }
    tuples
}
