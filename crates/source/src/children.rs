//! Child rows of a page of parents, for embeds: one statement per page
//! (`WHERE (k1, k2) IN ((…), (…))`), never one per parent, ordered by the
//! parent key and then the embed's `order_by`, so memory stays bounded by the
//! page and the caller can group the rows by parent.

use std::collections::HashMap;

use sql2ddb_core::{normalize_number, Column, Row, SqlValue};

use crate::page::{column_index, Decoders, DialectPlan};
use crate::sql::{self, column_ref};
use crate::{Dialect, Relation, Shape, Source, SourceError};

/// Most parents whose children one statement reads; a larger page is read in
/// several statements.
pub const MAX_PARENTS_PER_QUERY: usize = 5000;
/// Most bound values one statement carries: under SQLite's 32766 and the
/// 65535 of PostgreSQL and MySQL.
pub const MAX_BIND_VALUES: usize = 30_000;

/// Prebuilt statement parts for reading the children of one embed.
#[derive(Debug, Clone)]
pub struct ChildQuery {
    dialect: Dialect,
    entity: String,
    columns: Vec<Column>,
    parent_key_indices: Vec<usize>,
    /// `SELECT … FROM … AS t WHERE `.
    head: String,
    /// ` ORDER BY parent key…, order_by…`.
    tail: String,
    /// The parent key column references, `t."k"`.
    key_refs: Vec<String>,
    /// Per parent key column: text before and after the placeholder (a cast).
    params: Vec<(String, String)>,
    decoders: Decoders,
    parents_per_query: usize,
}

impl ChildQuery {
    /// The columns every child row holds, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Positions of `names` within a child row (e.g. the embed's own key, for
    /// nested embeds); `None` if one is not a column.
    pub fn column_indices(&self, names: &[String]) -> Option<Vec<usize>> {
        names
            .iter()
            .map(|n| self.columns.iter().position(|c| &c.name == n))
            .collect()
    }

    /// The parent key values a child row holds, in parent key order.
    pub fn parent_key_of(&self, row: &Row) -> Vec<SqlValue> {
        self.parent_key_indices
            .iter()
            .map(|&i| row[i].clone())
            .collect()
    }

    /// Reads at most `n` parents per statement (tests use small numbers to
    /// exercise the splitting); at least 1, never above the bind limits.
    pub fn with_parents_per_query(mut self, n: usize) -> Self {
        self.parents_per_query = n.clamp(1, self.max_parents());
        self
    }

    fn max_parents(&self) -> usize {
        (MAX_BIND_VALUES / self.key_refs.len().max(1)).min(MAX_PARENTS_PER_QUERY)
    }

    /// The statement for `parents` parents, for logs and `plan` output.
    pub fn sql(&self, parents: usize) -> String {
        let condition = sql::in_condition(self.dialect, &self.key_refs, &self.params, parents);
        format!("{}{condition}{}", self.head, self.tail)
    }

    /// Groups child rows by parent: one vector per entry of `parent_keys`, in
    /// that order, each in the order the rows were read. Keys are compared by
    /// value (numbers numerically, so `5` matches `5.00`); a row whose key
    /// matches no parent is an error rather than a lost child.
    pub fn group(
        &self,
        parent_keys: &[Vec<SqlValue>],
        rows: Vec<Row>,
    ) -> Result<Vec<Vec<Row>>, SourceError> {
        let mut exact: HashMap<Vec<String>, Vec<usize>> = HashMap::new();
        let mut loose: HashMap<Vec<String>, Vec<usize>> = HashMap::new();
        for (i, k) in parent_keys.iter().enumerate() {
            exact.entry(canonical(k)).or_default().push(i);
            loose.entry(folded(k)).or_default().push(i);
        }
        let mut out: Vec<Vec<Row>> = vec![Vec::new(); parent_keys.len()];
        for row in rows {
            let key = self.parent_key_of(&row);
            // A case-insensitive or trailing-space-padding collation matched
            // what text equality does not: fall back to folded text.
            let parents = exact
                .get(&canonical(&key))
                .or_else(|| loose.get(&folded(&key)))
                .ok_or_else(|| {
                    SourceError::query(
                        format!("group the children of {}", self.entity),
                        format!(
                            "a child row's parent key {key:?} matches none of the parent keys read (do the key columns have other types?)"
                        ),
                    )
                })?;
            let (last, rest) = parents.split_last().expect("at least one parent");
            for &p in rest {
                out[p].push(row.clone());
            }
            out[*last].push(row);
        }
        Ok(out)
    }
}

/// Every key has `width` values and none is NULL; the errors name a key
/// `what` (`key`, `parent key`) and the key's columns `columns`.
pub(crate) fn check_keys(
    keys: &[Vec<SqlValue>],
    width: usize,
    entity: &str,
    what: &str,
    columns: &str,
) -> Result<(), SourceError> {
    for k in keys {
        if k.len() != width {
            return Err(SourceError::config(format!(
                "a {what} of {entity} has {} values, {columns} has {width} columns",
                k.len()
            )));
        }
        if k.iter().any(SqlValue::is_null) {
            return Err(SourceError::config(format!(
                "a {what} of {entity} holds NULL: {k:?}"
            )));
        }
    }
    Ok(())
}

/// A key as text that compares numbers by value.
fn canonical(key: &[SqlValue]) -> Vec<String> {
    key.iter()
        .map(|v| match v {
            SqlValue::Int(_) | SqlValue::UInt(_) | SqlValue::Decimal(_) | SqlValue::Float(_) => {
                let text = v.to_text().unwrap_or_default();
                format!("n:{}", normalize_number(&text).unwrap_or(text))
            }
            SqlValue::Bytes(b) => format!("b:{b:?}"),
            other => format!("t:{}", other.to_text().unwrap_or_default()),
        })
        .collect()
}

fn folded(key: &[SqlValue]) -> Vec<String> {
    canonical(key)
        .into_iter()
        .map(|s| s.trim_end().to_lowercase())
        .collect()
}

impl Source {
    /// Builds the statement that reads the children of `from` (whose columns
    /// are `shape`) for a page of parents: `parent_key` are the child columns
    /// holding the parent's key, in the parent key's order; `order_by` orders
    /// the children of one parent.
    pub fn child_query(
        &self,
        from: &Relation<'_>,
        shape: &Shape,
        parent_key: &[String],
        order_by: &[String],
    ) -> Result<ChildQuery, SourceError> {
        let entity = from.display_name().to_string();
        if parent_key.is_empty() {
            return Err(SourceError::config(format!(
                "children of {entity}: parent_key names no column"
            )));
        }
        let parent_key_indices = parent_key
            .iter()
            .map(|k| column_index(shape, &entity, "column", k))
            .collect::<Result<Vec<_>, _>>()?;
        for c in order_by {
            column_index(shape, &entity, "column", c)?;
        }
        let dialect = self.dialect();
        let plan = DialectPlan::new(dialect, &shape.columns, &parent_key_indices)?;
        let key_refs: Vec<String> = parent_key.iter().map(|k| column_ref(dialect, k)).collect();
        let order: Vec<String> = key_refs
            .iter()
            .cloned()
            .chain(order_by.iter().map(|c| column_ref(dialect, c)))
            .collect();
        let mut q = ChildQuery {
            dialect,
            entity,
            columns: shape.columns.clone(),
            parent_key_indices,
            head: format!(
                "SELECT {} FROM {} WHERE ",
                plan.select.join(", "),
                sql::relation(dialect, from)?
            ),
            tail: format!(" ORDER BY {}", order.join(", ")),
            key_refs,
            params: plan.params,
            decoders: plan.decoders,
            parents_per_query: 0,
        };
        q.parents_per_query = q.max_parents();
        Ok(q)
    }

    /// The children of the parents whose keys are `parent_keys` (in parent
    /// key order, as a keyset page gives them): one statement per
    /// [`MAX_PARENTS_PER_QUERY`] parents, rows ordered by parent key and then
    /// `order_by`. A NULL key value is an error.
    pub async fn read_children(
        &self,
        q: &ChildQuery,
        parent_keys: &[Vec<SqlValue>],
    ) -> Result<Vec<Row>, SourceError> {
        self.check_dialect(q.dialect, "child query")?;
        check_keys(
            parent_keys,
            q.key_refs.len(),
            &q.entity,
            "parent key",
            "parent_key",
        )?;
        let mut rows = Vec::new();
        for chunk in parent_keys.chunks(q.parents_per_query) {
            let sql = q.sql(chunk.len());
            let values: Vec<&SqlValue> = chunk.iter().flatten().collect();
            rows.extend(
                self.fetch(&q.entity, &q.columns, &q.decoders, &sql, &values)
                    .await?,
            );
        }
        Ok(rows)
    }

    /// The child rows whose parent key matches no row of `parent` (whose
    /// key columns are `parent_key`, in the order of the child's
    /// `parent_key`), or holds NULL: rows that reading the children of every
    /// parent never reads. One statement, ordered like the children.
    pub async fn read_orphans(
        &self,
        q: &ChildQuery,
        parent: &Relation<'_>,
        parent_key: &[String],
    ) -> Result<Vec<Row>, SourceError> {
        self.check_dialect(q.dialect, "child query")?;
        if parent_key.len() != q.key_refs.len() {
            return Err(SourceError::config(format!(
                "children of {}: parent_key has {} columns, the parent's key {}",
                q.entity,
                q.key_refs.len(),
                parent_key.len()
            )));
        }
        let d = q.dialect;
        let parent_sql = match parent {
            Relation::Table(name) => sql::quote_table(d, name),
            Relation::Query(query) => format!("({})", sql::query_body(query)?),
        };
        let matches: Vec<String> = parent_key
            .iter()
            .zip(&q.key_refs)
            .map(|(k, child)| format!("p.{} = {child}", sql::quote_ident(d, k)))
            .collect();
        let sql = format!(
            "{}NOT EXISTS (SELECT 1 FROM {parent_sql} AS p WHERE {}){}",
            q.head,
            matches.join(" AND "),
            q.tail
        );
        self.fetch(&q.entity, &q.columns, &q.decoders, &sql, &[])
            .await
    }

    /// [`Source::read_children`], grouped with [`ChildQuery::group`]: one
    /// vector of rows per parent key, in the order of `parent_keys`.
    pub async fn read_children_grouped(
        &self,
        q: &ChildQuery,
        parent_keys: &[Vec<SqlValue>],
    ) -> Result<Vec<Vec<Row>>, SourceError> {
        let rows = self.read_children(q, parent_keys).await?;
        q.group(parent_keys, rows)
    }
}
