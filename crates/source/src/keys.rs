//! Rows read back by key, for replaying rejected rows: one statement per
//! batch of keys (`WHERE (k1, k2) IN (…)`), never one per key.

use sql2ddb_core::{Row, SqlValue};

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
        if q.dialect != self.dialect() {
            return Err(SourceError::config("page query built for another dialect"));
        }
        let width = q.key_refs.len();
        for k in keys {
            if k.len() != width {
                return Err(SourceError::config(format!(
                    "a key of {} has {} values, the key has {width} columns",
                    q.entity,
                    k.len()
                )));
            }
            if k.iter().any(SqlValue::is_null) {
                return Err(SourceError::config(format!(
                    "a key of {} holds NULL: {k:?}",
                    q.entity
                )));
            }
        }
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
                    let sql = tuple_in_sql(q, chunk.len());
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
                    let sql = sqlite_in_sql(q, tuples);
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

/// `SELECT … WHERE (k1, k2) IN ((…), …)` for `n` keys (PostgreSQL, MySQL).
fn tuple_in_sql(q: &PageQuery, n: usize) -> String {
    let mut count = 0;
    let mut param = |i: usize| {
        count += 1;
        let p = match q.dialect {
            Dialect::Postgres => format!("${count}"),
            Dialect::MySql | Dialect::Sqlite => "?".to_string(),
        };
        format!("{}{p}{}", q.params[i].0, q.params[i].1)
    };
    let width = q.key_refs.len();
    let condition = if width == 1 {
        let list: Vec<String> = (0..n).map(|_| param(0)).collect();
        format!("{} IN ({})", q.key_refs[0], list.join(", "))
    } else {
        let tuples: Vec<String> = (0..n)
            .map(|_| {
                let values: Vec<String> = (0..width).map(&mut param).collect();
                format!("({})", values.join(", "))
            })
            .collect();
        format!("({}) IN ({})", q.key_refs.join(", "), tuples.join(", "))
    };
    format!(
        "SELECT {} FROM {} WHERE {condition}",
        q.select.join(", "),
        q.relation
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

/// `SELECT … WHERE k IN (…)` or `(k1, k2) IN (VALUES (…), …)` for `n` key
/// tuples (SQLite takes a row value `IN` only from a subquery).
fn sqlite_in_sql(q: &PageQuery, n: usize) -> String {
    let width = q.key_refs.len();
    let condition = if width == 1 {
        format!("{} IN ({})", q.key_refs[0], vec!["?"; n].join(", "))
    } else {
        let tuple = format!("({})", vec!["?"; width].join(", "));
        format!(
            "({}) IN (VALUES {})",
            q.key_refs.join(", "),
            vec![tuple; n].join(", ")
        )
    };
    format!(
        "SELECT {} FROM {} WHERE {condition}",
        q.select.join(", "),
        q.relation
    )
}
