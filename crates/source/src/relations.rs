//! What kind of relation a name is, for `sql2ddb init`: a table, a view, a
//! materialized view, a PostgreSQL table read through its partitions or
//! inheritance children, or a partition (never mapped on its own: its rows
//! are read with its parent's).

use crate::sql::split_table;
use crate::{Dialect, Source, SourceError};

/// The kind of relation a name in the catalog is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RelationKind {
    /// A base table (on PostgreSQL possibly partitioned, or the parent of
    /// inheritance children: reading it reads theirs).
    #[default]
    Table,
    /// A view: no key and no row address.
    View,
    /// A PostgreSQL materialized view: no key, but a row address (`ctid`).
    MaterializedView,
}

impl Source {
    /// The views (and PostgreSQL materialized views) of the current schema,
    /// database or file, by name. `init` maps them only when `--tables`
    /// names them: a view usually repeats rows of tables mapped already.
    pub async fn view_names(&self) -> Result<Vec<String>, SourceError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name",
            Dialect::Postgres => {
                "SELECT CAST(c.relname AS TEXT) FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind IN ('v', 'm') ORDER BY 1"
            }
            Dialect::MySql => {
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_type = 'VIEW' ORDER BY 1"
            }
        };
        let rows = self.text_rows("list the views", sql, &[], 1).await?;
        Ok(rows.into_iter().filter_map(|mut r| r.remove(0)).collect())
    }

    /// The kind of relation `name` (`table` or `schema.table`) is, and on
    /// PostgreSQL how many partitions or inheritance children reading it
    /// reads too. A partition or an inheritance child is an error that names
    /// its parent: its rows are read with the parent's, so mapping both
    /// would write them twice.
    pub async fn relation_kind(&self, name: &str) -> Result<(RelationKind, u64), SourceError> {
        let (schema, table) = split_table(name);
        let d = self.dialect();
        let sql = match d {
            Dialect::Sqlite => "SELECT type, '0', NULL, NULL FROM sqlite_master WHERE name = ?1",
            Dialect::MySql => {
                "SELECT CAST(table_type AS CHAR), '0', NULL, NULL FROM information_schema.tables \
                 WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?"
            }
            Dialect::Postgres => {
                "SELECT CAST(c.relkind AS TEXT), \
                 CAST((SELECT count(*) FROM pg_catalog.pg_inherits i WHERE i.inhparent = c.oid) AS TEXT), \
                 CAST(p.relname AS TEXT), CAST(c.relispartition AS TEXT) \
                 FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 LEFT JOIN pg_catalog.pg_inherits pi ON pi.inhrelid = c.oid \
                 LEFT JOIN pg_catalog.pg_class p ON p.oid = pi.inhparent \
                 WHERE n.nspname = COALESCE($1, current_schema()) AND c.relname = $2 \
                 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 3 LIMIT 1"
            }
        };
        let binds: Vec<Option<&str>> = match d {
            Dialect::Sqlite => vec![Some(table)],
            _ => vec![schema, Some(table)],
        };
        let context = format!("read what {name} is");
        let rows = self.text_rows(&context, sql, &binds, 4).await?;
        let Some(row) = rows.into_iter().next() else {
            return Err(SourceError::config(format!(
                "table or view {name} not found"
            )));
        };
        let kind = row[0].as_deref().unwrap_or_default().to_ascii_lowercase();
        let children = row[1].as_deref().and_then(|c| c.parse().ok()).unwrap_or(0);
        if let Some(parent) = &row[2] {
            let parent = match schema {
                Some(s) => format!("{s}.{parent}"),
                None => parent.clone(),
            };
            let what = match row[3].as_deref() {
                Some("true") => "a partition",
                _ => "an inheritance child",
            };
            return Err(SourceError::config(format!(
                "{name} is {what} of {parent}: reading {parent} reads its rows, so mapping both would \
                 write them twice. Map {parent} (name it in --tables); to map these rows alone, \
                 use a query entity: query = \"SELECT * FROM ONLY {name}\""
            )));
        }
        let kind = match kind.as_str() {
            "view" | "v" | "system view" => RelationKind::View,
            "m" => RelationKind::MaterializedView,
            _ => RelationKind::Table,
        };
        Ok((kind, children))
    }
}
