//! The catalog, read for `sql2ddb init`: tables, columns with their types and
//! sizes, primary keys and foreign keys (PostgreSQL and MySQL through
//! `information_schema`, SQLite through its `pragma_*` table functions).

use sqlx::AssertSqlSafe;

use crate::relations::RelationKind;
use crate::stats::text_at;
use crate::{sql::split_table, Dialect, Pool, Source, SourceError};

/// One table as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaTable {
    /// The name as given to `--tables` (`table` or `schema.table`).
    pub name: String,
    /// Columns in table order.
    pub columns: Vec<SchemaColumn>,
    /// Primary key columns in key order (empty: none).
    pub primary_key: Vec<String>,
    /// Foreign keys, in the catalog's order.
    pub foreign_keys: Vec<ForeignKey>,
    /// Unique indexes and constraints other than the primary key: their
    /// columns in index order.
    pub unique: Vec<Vec<String>>,
    /// A table or a view.
    pub kind: RelationKind,
    /// PostgreSQL: the partitions or inheritance children whose rows reading
    /// this table reads too.
    pub children: u64,
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaColumn {
    /// Column name.
    pub name: String,
    /// The declared type as the catalog spells it (`numeric`, `tinyint(1)`, `TEXT`…).
    pub sql_type: String,
    /// Whether it may hold NULL.
    pub nullable: bool,
    /// Decimal digits of a numeric type, when declared.
    pub precision: Option<u64>,
    /// Most characters (or bytes) of a string or binary type, when declared.
    pub max_length: Option<u64>,
}

/// A foreign key: `columns` of this table reference `ref_columns` of `ref_table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    /// Columns of this table, in key order.
    pub columns: Vec<String>,
    /// The referenced table, as the catalog names it (no schema).
    pub ref_table: String,
    /// The referenced columns, in key order.
    pub ref_columns: Vec<String>,
    /// Whether deleting the referenced row deletes this one (`ON DELETE
    /// CASCADE`): the referenced row owns it.
    pub on_delete_cascade: bool,
}

/// The schema part of `schema.table`, or the current one, per dialect.
fn schema_expr(dialect: Dialect, placeholder: &str) -> String {
    match dialect {
        Dialect::Postgres => format!("COALESCE({placeholder}, current_schema())"),
        _ => format!("COALESCE({placeholder}, DATABASE())"),
    }
}

impl Source {
    /// The base tables of the current schema (PostgreSQL), database (MySQL)
    /// or file (SQLite), by name; on PostgreSQL neither partitions nor
    /// inheritance children (their rows are read through their parent).
    pub async fn table_names(&self) -> Result<Vec<String>, SourceError> {
        let sql = match self.dialect() {
            Dialect::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table' \
                AND name NOT LIKE 'sqlite_%' ORDER BY name"
                .to_string(),
            // Partitions and inheritance children are read through their
            // parent: listed, every row of theirs would be written twice.
            Dialect::Postgres => "SELECT CAST(c.relname AS TEXT) FROM pg_catalog.pg_class c \
                JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid) \
                ORDER BY 1"
                .to_string(),
            d => format!(
                "SELECT CAST(table_name AS {}) FROM information_schema.tables \
                 WHERE table_schema = {} AND table_type = 'BASE TABLE' ORDER BY 1",
                text_type(d),
                schema_expr(d, "NULL")
            ),
        };
        let rows = self.text_rows("list the tables", &sql, &[], 1).await?;
        Ok(rows.into_iter().filter_map(|mut r| r.remove(0)).collect())
    }

    /// The existing table a missing `name` (`table` or `schema.table`) most
    /// likely stands for, in the same schema; `None` when none is close
    /// (or the tables cannot be listed).
    pub(crate) async fn similar_table(&self, name: &str) -> Option<String> {
        let (schema, table) = crate::sql::split_table(name);
        let names = match (schema, self.dialect()) {
            (Some(s), d @ (Dialect::Postgres | Dialect::MySql)) => {
                let sql = format!(
                    "SELECT CAST(table_name AS {}) FROM information_schema.tables \
                     WHERE table_schema = {}",
                    text_type(d),
                    match d {
                        Dialect::Postgres => "$1",
                        _ => "?",
                    }
                );
                let rows = self
                    .text_rows("list the tables", &sql, &[Some(s)], 1)
                    .await
                    .ok()?;
                rows.into_iter().filter_map(|mut r| r.remove(0)).collect()
            }
            _ => self.table_names().await.ok()?,
        };
        let near = sql2ddb_core::suggest::closest(table, names.iter().map(String::as_str))?;
        Some(match schema {
            Some(s) => format!("{s}.{near}"),
            None => near.to_string(),
        })
    }

    /// The catalog's description of table `name` (`table` or `schema.table`);
    /// a table that does not exist is an error naming it.
    pub async fn schema_table(&self, name: &str) -> Result<SchemaTable, SourceError> {
        let (kind, children) = self.relation_kind(name).await?;
        let (schema, table) = split_table(name);
        let d = self.dialect();
        let binds: Vec<Option<&str>> = match d {
            Dialect::Sqlite => vec![Some(table)],
            _ => vec![schema, Some(table)],
        };
        let (p1, p2) = match d {
            Dialect::Postgres => ("$1", "$2"),
            _ => ("?", "?"),
        };
        let t = text_type(d);
        let columns_sql = match d {
            Dialect::Sqlite => {
                // A primary key column is never NULL only when it is the
                // rowid (a lone INTEGER key) or the table is WITHOUT ROWID:
                // SQLite lets any other key column hold NULL.
                "SELECT name, type, CASE WHEN \"notnull\" <> 0 THEN 'NO' \
                WHEN pk > 0 AND (SELECT wr FROM pragma_table_list(?1) WHERE name = ?1) <> 0 THEN 'NO' \
                WHEN pk > 0 AND upper(trim(type)) = 'INTEGER' \
                 AND (SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1 THEN 'NO' \
                ELSE 'YES' END, NULL, NULL FROM pragma_table_info(?1) ORDER BY cid"
                    .to_string()
            }
            _ => format!(
                "SELECT CAST(column_name AS {t}), CAST({} AS {t}), CAST(is_nullable AS {t}), \
                 CAST(numeric_precision AS {t}), CAST(character_maximum_length AS {t}) \
                 FROM information_schema.columns WHERE table_schema = {} AND table_name = {p2} \
                 ORDER BY ordinal_position",
                if d == Dialect::MySql {
                    "column_type"
                } else {
                    "data_type"
                },
                schema_expr(d, p1)
            ),
        };
        // information_schema leaves PostgreSQL's materialized views out.
        let columns_sql = match (d, kind) {
            (Dialect::Postgres, RelationKind::MaterializedView) => MATVIEW_COLUMNS.to_string(),
            _ => columns_sql,
        };
        let context = format!("read the columns of {name}");
        let columns: Vec<SchemaColumn> = self
            .text_rows(&context, &columns_sql, &binds, 5)
            .await?
            .into_iter()
            .map(|r| SchemaColumn {
                name: r[0].clone().unwrap_or_default(),
                sql_type: r[1].clone().unwrap_or_default(),
                nullable: r[2].as_deref() == Some("YES"),
                precision: r[3].as_deref().and_then(|v| v.parse().ok()),
                max_length: r[4].as_deref().and_then(|v| v.parse().ok()),
            })
            .collect();
        if columns.is_empty() {
            return Err(SourceError::config(format!("table {name} not found")));
        }
        let primary_key = self.primary_key_of(name, &binds, p1, p2).await?;
        let foreign_keys = self.foreign_keys_of(name, &binds, p1, p2).await?;
        let unique = self.unique_of(name, &binds, p1, p2).await?;
        Ok(SchemaTable {
            name: name.to_string(),
            columns,
            primary_key,
            foreign_keys,
            unique,
            kind,
            children,
        })
    }

    async fn primary_key_of(
        &self,
        name: &str,
        binds: &[Option<&str>],
        p1: &str,
        p2: &str,
    ) -> Result<Vec<String>, SourceError> {
        let d = self.dialect();
        let sql = match d {
            Dialect::Sqlite => "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk".to_string(),
            _ => format!(
                "SELECT CAST(kcu.column_name AS {t}) FROM information_schema.table_constraints tc \
                 JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = tc.constraint_name \
                 AND kcu.table_schema = tc.table_schema AND kcu.table_name = tc.table_name \
                 WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = {} AND tc.table_name = {p2} \
                 ORDER BY kcu.ordinal_position",
                schema_expr(d, p1),
                t = text_type(d)
            ),
        };
        let context = format!("read the primary key of {name}");
        let rows = self.text_rows(&context, &sql, binds, 1).await?;
        Ok(rows.into_iter().filter_map(|mut r| r.remove(0)).collect())
    }

    async fn foreign_keys_of(
        &self,
        name: &str,
        binds: &[Option<&str>],
        p1: &str,
        p2: &str,
    ) -> Result<Vec<ForeignKey>, SourceError> {
        let d = self.dialect();
        let t = text_type(d);
        let sql = match d {
            Dialect::Sqlite => "SELECT CAST(id AS TEXT), \"from\", \"table\", \"to\", on_delete \
                FROM pragma_foreign_key_list(?) ORDER BY id, seq"
                .to_string(),
            Dialect::MySql => format!(
                "SELECT CAST(k.constraint_name AS {t}), CAST(k.column_name AS {t}), \
                 CAST(k.referenced_table_name AS {t}), CAST(k.referenced_column_name AS {t}), \
                 CAST(r.delete_rule AS {t}) \
                 FROM information_schema.key_column_usage k \
                 JOIN information_schema.referential_constraints r \
                 ON r.constraint_schema = k.table_schema AND r.constraint_name = k.constraint_name \
                 AND r.table_name = k.table_name \
                 WHERE k.table_schema = {} \
                 AND k.table_name = {p2} AND k.referenced_table_name IS NOT NULL \
                 ORDER BY k.constraint_name, k.ordinal_position",
                schema_expr(d, p1)
            ),
            Dialect::Postgres => format!(
                "SELECT CAST(kcu.constraint_name AS {t}), CAST(kcu.column_name AS {t}), \
                 CAST(ccu.table_name AS {t}), CAST(ccu.column_name AS {t}), \
                 CAST(rc.delete_rule AS {t}) \
                 FROM information_schema.referential_constraints rc \
                 JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = rc.constraint_name \
                 AND kcu.constraint_schema = rc.constraint_schema \
                 JOIN information_schema.key_column_usage ccu ON ccu.constraint_name = rc.unique_constraint_name \
                 AND ccu.constraint_schema = rc.unique_constraint_schema \
                 AND ccu.ordinal_position = kcu.position_in_unique_constraint \
                 WHERE kcu.table_schema = {} AND kcu.table_name = {p2} \
                 ORDER BY 1, kcu.ordinal_position",
                schema_expr(d, p1)
            ),
        };
        let context = format!("read the foreign keys of {name}");
        let rows = self.text_rows(&context, &sql, binds, 5).await?;
        let mut out: Vec<(String, ForeignKey)> = Vec::new();
        for r in rows {
            let [id, col, table, ref_col, rule] =
                [&r[0], &r[1], &r[2], &r[3], &r[4]].map(|v| v.clone().unwrap_or_default());
            match out.iter_mut().find(|(i, _)| *i == id) {
                Some((_, fk)) => {
                    fk.columns.push(col);
                    fk.ref_columns.push(ref_col);
                }
                None => out.push((
                    id,
                    ForeignKey {
                        columns: vec![col],
                        ref_table: table,
                        ref_columns: vec![ref_col],
                        on_delete_cascade: rule.eq_ignore_ascii_case("CASCADE"),
                    },
                )),
            }
        }
        Ok(out.into_iter().map(|(_, fk)| fk).collect())
    }

    async fn unique_of(
        &self,
        name: &str,
        binds: &[Option<&str>],
        p1: &str,
        p2: &str,
    ) -> Result<Vec<Vec<String>>, SourceError> {
        let d = self.dialect();
        let t = text_type(d);
        let (sql, binds): (String, Vec<Option<&str>>) = match d {
            Dialect::Sqlite => (
                "SELECT il.name, ii.name FROM pragma_index_list(?) AS il, \
                 pragma_index_info(il.name) AS ii WHERE il.\"unique\" = 1 AND il.origin <> 'pk' \
                 ORDER BY il.seq, ii.seqno"
                    .to_string(),
                binds.to_vec(),
            ),
            Dialect::MySql => (
                format!(
                    "SELECT CAST(index_name AS {t}), CAST(column_name AS {t}) \
                     FROM information_schema.statistics WHERE table_schema = {} \
                     AND table_name = {p2} AND non_unique = 0 AND index_name <> 'PRIMARY' \
                     ORDER BY index_name, seq_in_index",
                    schema_expr(d, p1)
                ),
                binds.to_vec(),
            ),
            Dialect::Postgres => (
                "SELECT CAST(i.relname AS TEXT), CAST(a.attname AS TEXT) FROM pg_index x \
                 JOIN pg_class i ON i.oid = x.indexrelid \
                 JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n) ON true \
                 JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum \
                 WHERE x.indrelid = to_regclass($1) AND x.indisunique AND NOT x.indisprimary \
                 ORDER BY 1, k.n"
                    .to_string(),
                vec![Some(name)],
            ),
        };
        let quoted;
        let binds = match d {
            Dialect::Postgres => {
                quoted = crate::sql::quote_table(d, name);
                vec![Some(quoted.as_str())]
            }
            _ => binds,
        };
        let context = format!("read the unique indexes of {name}");
        let rows = self.text_rows(&context, &sql, &binds, 2).await?;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in rows {
            let (index, column) = (
                r[0].clone().unwrap_or_default(),
                r[1].clone().unwrap_or_default(),
            );
            match out.iter_mut().find(|(i, _)| *i == index) {
                Some((_, cols)) => cols.push(column),
                None => out.push((index, vec![column])),
            }
        }
        Ok(out.into_iter().map(|(_, cols)| cols).collect())
    }

    /// Rows of `width` text values that `sql` returns with `binds` bound.
    pub(crate) async fn text_rows(
        &self,
        context: &str,
        sql: &str,
        binds: &[Option<&str>],
        width: usize,
    ) -> Result<Vec<Vec<Option<String>>>, SourceError> {
        macro_rules! read {
            ($pool:expr) => {{
                let mut q = sqlx::query(AssertSqlSafe(sql.to_string()));
                for b in binds {
                    q = q.bind(b.map(str::to_string));
                }
                let rows = q
                    .fetch_all($pool)
                    .await
                    .map_err(|e| SourceError::query(context, e))?;
                rows.iter()
                    .map(|row| {
                        (0..width)
                            .map(|i| text_at(row, i).map_err(|e| SourceError::query(context, e)))
                            .collect::<Result<Vec<_>, _>>()
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

/// The columns of a PostgreSQL materialized view, as `information_schema`
/// would describe them were it listed there.
const MATVIEW_COLUMNS: &str = "SELECT CAST(a.attname AS TEXT), format_type(a.atttypid, NULL), \
     CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END, \
     CAST(information_schema._pg_numeric_precision(a.atttypid, a.atttypmod) AS TEXT), \
     CAST(information_schema._pg_char_max_length(a.atttypid, a.atttypmod) AS TEXT) \
     FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = COALESCE($1, current_schema()) AND c.relname = $2 \
     AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

/// The text type a value is cast to.
fn text_type(d: Dialect) -> &'static str {
    match d {
        Dialect::MySql => "CHAR",
        Dialect::Postgres | Dialect::Sqlite => "TEXT",
    }
}
