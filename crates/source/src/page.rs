//! Keyset pages: the prebuilt statements of one entity read in key order,
//! and the per-dialect plan (select list, cursor casts, decoders) behind them.

use sql2ddb_core::{Column, Row, SqlValue};

use crate::column_plan::ColumnPlan;
use crate::sql::{self, Bind, RangeSql, Statement};
use crate::{mysql, postgres, sqlite, Dialect, Relation, Shape, Source, SourceError};

/// Prebuilt statements for reading one entity page by page.
#[derive(Debug, Clone)]
pub struct PageQuery {
    pub(crate) dialect: Dialect,
    pub(crate) entity: String,
    pub(crate) columns: Vec<Column>,
    pub(crate) key_indices: Vec<usize>,
    page_size: usize,
    /// The entity's `FROM` item, aliased `t`.
    pub(crate) relation: String,
    /// Select-list expressions, one per column.
    pub(crate) select: Vec<String>,
    /// Key column references (`t."k"`), in key order.
    pub(crate) key_refs: Vec<String>,
    /// Per key column: text before and after a placeholder (a cast).
    pub(crate) params: Vec<(String, String)>,
    statements: RangeSql,
    /// The statements that count the rows of a key range.
    counts: RangeSql,
    pub(crate) decoders: Decoders,
}

/// Per-column decoding plans, one kind per dialect.
#[derive(Debug, Clone)]
pub(crate) enum Decoders {
    Postgres(Vec<postgres::Kind>),
    MySql(Vec<mysql::Kind>),
    Sqlite(Vec<sqlite::Hint>),
}

impl Decoders {
    /// The decoders of the columns at `indices`, in that order.
    pub(crate) fn pick(&self, indices: &[usize]) -> Decoders {
        match self {
            Decoders::Postgres(k) => Decoders::Postgres(indices.iter().map(|&i| k[i]).collect()),
            Decoders::MySql(k) => Decoders::MySql(indices.iter().map(|&i| k[i]).collect()),
            Decoders::Sqlite(h) => Decoders::Sqlite(indices.iter().map(|&i| h[i]).collect()),
        }
    }
}

/// What a dialect contributes to a [`PageQuery`].
pub(crate) struct DialectPlan {
    /// Select-list expressions, one per column.
    pub(crate) select: Vec<String>,
    /// Per key column: text before and after the placeholder (a cast).
    pub(crate) params: Vec<(String, String)>,
    pub(crate) decoders: Decoders,
}

impl DialectPlan {
    /// The dialect's plan for reading `columns`, with cursor values bound for
    /// the columns at `key_indices`.
    pub(crate) fn new(
        dialect: Dialect,
        columns: &[Column],
        key_indices: &[usize],
    ) -> Result<DialectPlan, SourceError> {
        Ok(match dialect {
            Dialect::Postgres => {
                Self::of(postgres::plan(columns, key_indices)?, Decoders::Postgres)
            }
            Dialect::MySql => Self::of(mysql::plan(columns, key_indices)?, Decoders::MySql),
            Dialect::Sqlite => Self::of(sqlite::plan(columns, key_indices)?, Decoders::Sqlite),
        })
    }

    fn of<D>(plan: ColumnPlan<D>, decoders: fn(Vec<D>) -> Decoders) -> DialectPlan {
        DialectPlan {
            select: plan.select,
            params: plan.params,
            decoders: decoders(plan.decoders),
        }
    }
}

/// Position of column `name` in `shape`; the error names it as `what`
/// (`key column`, `column`) and lists the entity's columns.
pub(crate) fn column_index(
    shape: &Shape,
    entity: &str,
    what: &str,
    name: &str,
) -> Result<usize, SourceError> {
    shape
        .columns
        .iter()
        .position(|c| c.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
            SourceError::config(format!(
                "{what} {name} is not a column of {entity} (columns: {})",
                names.join(", ")
            ))
        })
}

impl PageQuery {
    /// The cursor values of a row: its key columns, in key order.
    pub fn key_of(&self, row: &Row) -> Vec<SqlValue> {
        self.key_indices.iter().map(|&i| row[i].clone()).collect()
    }

    /// The columns every row holds, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Positions of the key columns within a row.
    pub fn key_indices(&self) -> &[usize] {
        &self.key_indices
    }

    /// Most rows a page holds.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// The statement for pages after a cursor, for logs and `plan` output.
    pub fn sql(&self) -> &str {
        &self.statements.after.sql
    }

    /// The statement and cursor values of one page read: rows after `after`
    /// (exclusive) up to `until` (inclusive), either bound optional.
    pub(crate) fn statement<'q>(
        &'q self,
        after: Option<&'q [SqlValue]>,
        until: Option<&'q [SqlValue]>,
    ) -> (&'q str, Vec<&'q SqlValue>) {
        bound_statement(&self.statements, after, until)
    }

    /// The statement and cursor values that count the rows a page read over
    /// the same range would return: after `after`, up to `until`.
    pub(crate) fn count_statement<'q>(
        &'q self,
        after: Option<&'q [SqlValue]>,
        until: Option<&'q [SqlValue]>,
    ) -> (&'q str, Vec<&'q SqlValue>) {
        bound_statement(&self.counts, after, until)
    }
}

/// The statement of `range` for the bounds given, and its values in
/// placeholder order.
fn bound_statement<'q>(
    range: &'q RangeSql,
    after: Option<&'q [SqlValue]>,
    until: Option<&'q [SqlValue]>,
) -> (&'q str, Vec<&'q SqlValue>) {
    let st: &Statement = match (after.is_some(), until.is_some()) {
        (false, false) => &range.first,
        (true, false) => &range.after,
        (false, true) => &range.until,
        (true, true) => &range.between,
    };
    let values = st
        .binds
        .iter()
        .filter_map(|b| match *b {
            Bind::After(i) => after.map(|a| &a[i]),
            Bind::Until(i) => until.map(|u| &u[i]),
        })
        .collect();
    (&st.sql, values)
}

impl Source {
    /// Builds the page statements for an entity read in `key` order, at most
    /// `page_size` rows a page. An empty `key` means the table's primary key;
    /// a query entity must name its key. Every key column must be one of the
    /// shape's columns.
    pub fn page_query(
        &self,
        from: &Relation<'_>,
        shape: &Shape,
        key: &[String],
        page_size: usize,
    ) -> Result<PageQuery, SourceError> {
        let entity = from.display_name().to_string();
        let key: Vec<String> =
            match (key.is_empty(), from) {
                (false, _) => key.to_vec(),
                (true, Relation::Query(_)) => return Err(SourceError::config(
                    "a query entity needs `key = [...]`: the columns that order and page its rows",
                )),
                (true, Relation::Table(_)) if shape.primary_key.is_empty() => {
                    return Err(SourceError::config(format!(
                        "table {entity} has no primary key: set `key = [...]` for it"
                    )))
                }
                (true, Relation::Table(_)) => shape.primary_key.clone(),
            };
        if page_size == 0 {
            return Err(SourceError::config("page size must be at least 1"));
        }
        let key_indices = key
            .iter()
            .map(|k| column_index(shape, &entity, "key column", k))
            .collect::<Result<Vec<_>, _>>()?;
        let dialect = self.dialect();
        let plan = DialectPlan::new(dialect, &shape.columns, &key_indices)?;
        let key_refs: Vec<String> = key.iter().map(|k| sql::column_ref(dialect, k)).collect();
        let relation = sql::relation(dialect, from)?;
        let param = |i: usize, placeholder: &str| {
            format!("{}{placeholder}{}", plan.params[i].0, plan.params[i].1)
        };
        let statements = sql::page_sql(
            dialect,
            &relation,
            &plan.select,
            &key_refs,
            param,
            page_size,
        );
        let counts = sql::count_range_sql(dialect, &relation, &key_refs, param);
        Ok(PageQuery {
            dialect,
            entity,
            columns: shape.columns.clone(),
            key_indices,
            page_size,
            relation,
            select: plan.select,
            key_refs,
            params: plan.params,
            statements,
            counts,
            decoders: plan.decoders,
        })
    }

    /// The next page: at most `page_size` rows strictly after `after` (the key
    /// values of the last row of the previous page; `None` = from the start),
    /// in key order. An empty page means the end. The same as
    /// [`Source::read_range`] with no upper bound.
    pub async fn read_page(
        &self,
        q: &PageQuery,
        after: Option<&[SqlValue]>,
    ) -> Result<Vec<Row>, SourceError> {
        self.read_range(q, after, None).await
    }
}
