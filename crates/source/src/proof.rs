//! Proof that an entity's key is unique and never NULL.
//!
//! Keyset paging (`WHERE (k) > (:last)`) reads every row exactly once only
//! when no two rows share a key and no key is NULL: rows sharing the last key
//! of a page are stepped over, and a NULL key is never "after" anything. A
//! table proves it from its catalog (a primary key or a unique index within
//! the key columns, and every key column `NOT NULL`); a query entity has no
//! catalog, so its rows are checked.

use crate::fetch::fetch_texts_and_i64;
use crate::sql::{self, column_ref, quote_table, split_table};
use crate::{Dialect, Pool, Relation, Shape, Source, SourceError};

/// How (or why not) an entity's key was proven unique and non-NULL; see
/// [`Source::prove_unique_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyProof {
    /// The table's primary key lies within the key columns, all `NOT NULL`.
    PrimaryKey,
    /// A unique index (no predicate, no expressions) lies within the key
    /// columns, all `NOT NULL`.
    UniqueIndex {
        /// The index's name.
        name: String,
    },
    /// A unique index lies within the key, but some of its columns may hold
    /// NULL (not declared `NOT NULL`; a SQLite primary key over non-INTEGER
    /// columns, for one): none did when the rows were checked.
    UniqueWithoutNulls {
        /// The index's name.
        name: String,
    },
    /// A query entity: its rows were counted and hold no NULL and no
    /// duplicate key (true when checked; the query may return other rows later).
    Checked {
        /// Rows the query returned when checked.
        rows: u64,
    },
    /// The key could not be proven: paging by it may skip rows.
    NotProven {
        /// What is wrong: a nullable column, no covering unique index, or an
        /// example duplicate or NULL key.
        reason: String,
    },
}

impl KeyProof {
    /// Whether the key was proven unique and non-NULL.
    pub fn is_proven(&self) -> bool {
        !matches!(self, KeyProof::NotProven { .. })
    }
}

/// A unique index as the catalog describes it.
struct UniqueIndex {
    name: String,
    primary: bool,
    columns: Vec<String>,
}

/// What a table's catalog says: its unique indexes (only those without a
/// predicate or an expression) and its columns that can hold NULL.
struct Catalog {
    indexes: Vec<UniqueIndex>,
    nullable: Vec<String>,
}

const PG_UNIQUE_INDEXES: &str = "SELECT c.relname::text, i.indisprimary, \
       array_agg(a.attname::text ORDER BY k.ord) \
     FROM pg_index i \
     JOIN pg_class c ON c.oid = i.indexrelid \
     CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indisvalid \
       AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts \
     GROUP BY c.relname, i.indisprimary";

const PG_NULLABLE: &str = "SELECT a.attname::text FROM pg_attribute a \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
       AND NOT a.attnotnull";

// COLUMN_NAME is NULL for a functional key part (MySQL 8).
const MY_UNIQUE_INDEXES: &str = "SELECT CONVERT(INDEX_NAME USING utf8mb4), \
       CONVERT(COLUMN_NAME USING utf8mb4) \
     FROM information_schema.STATISTICS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0 \
     ORDER BY INDEX_NAME, SEQ_IN_INDEX";

const MY_NULLABLE: &str = "SELECT CONVERT(COLUMN_NAME USING utf8mb4) \
     FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND IS_NULLABLE = 'YES'";

impl Source {
    /// Proves that `key` (empty = the shape's primary key) is unique and
    /// never NULL in the entity, so keyset paging reads every row once.
    ///
    /// A table is proven from the catalog: every key column is declared
    /// `NOT NULL` and a primary key or a unique index without predicate or
    /// expressions has all its columns among the key columns
    /// ([`KeyProof::PrimaryKey`], [`KeyProof::UniqueIndex`]). A SQLite
    /// `INTEGER PRIMARY KEY` (the rowid) is never NULL; other SQLite primary
    /// key columns of a rowid table can hold NULL unless declared `NOT NULL`.
    /// A query entity is checked by running it: no row with a NULL key column
    /// and no key value twice ([`KeyProof::Checked`]). Otherwise
    /// [`KeyProof::NotProven`] says what is wrong; an error is returned only
    /// when the database could not be asked.
    pub async fn prove_unique_key(
        &self,
        from: &Relation<'_>,
        shape: &Shape,
        key: &[String],
    ) -> Result<KeyProof, SourceError> {
        let key: Vec<String> = if key.is_empty() {
            shape.primary_key.clone()
        } else {
            key.to_vec()
        };
        if key.is_empty() {
            return Ok(KeyProof::NotProven {
                reason: format!(
                    "{} has no primary key and no key was given",
                    from.display_name()
                ),
            });
        }
        for k in &key {
            if !shape.columns.iter().any(|c| &c.name == k) {
                return Err(SourceError::config(format!(
                    "key column {k} is not a column of {}",
                    from.display_name()
                )));
            }
        }
        match from {
            Relation::Table(name) => {
                let catalog = self.catalog(name).await?;
                let nullable: Vec<String> = key
                    .iter()
                    .filter(|k| catalog.nullable.contains(k))
                    .cloned()
                    .collect();
                let covering = catalog
                    .indexes
                    .iter()
                    .find(|i| !i.columns.is_empty() && i.columns.iter().all(|c| key.contains(c)));
                match covering {
                    // Unique, but NULL is allowed: the rows say whether one is there
                    // (SQLite's primary keys over non-INTEGER columns, for one).
                    Some(index) if !nullable.is_empty() => {
                        let nulls = self.null_keys(from, &nullable).await?;
                        Ok(match nulls {
                            0 => KeyProof::UniqueWithoutNulls {
                                name: index.name.clone(),
                            },
                            n => KeyProof::NotProven {
                                reason: format!(
                                    "key column(s) {} of {name} can hold NULL (not declared NOT NULL) and {n} row(s) do; keyset paging never reads rows whose key is NULL",
                                    nullable.join(", ")
                                ),
                            },
                        })
                    }
                    _ => Ok(judge(name, &key, &catalog)),
                }
            }
            Relation::Query(_) => self.check_query_key(from, &key).await,
        }
    }

    async fn catalog(&self, name: &str) -> Result<Catalog, SourceError> {
        let context = format!("read the unique indexes of {name}");
        let err = |e| SourceError::query(&context, e);
        let (schema, table) = split_table(name);
        match &self.pool {
            Pool::Postgres(p) => {
                let qualified = quote_table(Dialect::Postgres, name);
                let rows: Vec<(String, bool, Vec<String>)> = sqlx::query_as(PG_UNIQUE_INDEXES)
                    .bind(&qualified)
                    .fetch_all(p)
                    .await
                    .map_err(err)?;
                let nullable = sqlx::query_scalar(PG_NULLABLE)
                    .bind(&qualified)
                    .fetch_all(p)
                    .await
                    .map_err(err)?;
                let indexes = rows
                    .into_iter()
                    .map(|(name, primary, columns)| UniqueIndex {
                        name,
                        primary,
                        columns,
                    })
                    .collect();
                Ok(Catalog { indexes, nullable })
            }
            Pool::MySql(p) => {
                let rows: Vec<(String, Option<String>)> = sqlx::query_as(MY_UNIQUE_INDEXES)
                    .bind(schema)
                    .bind(table)
                    .fetch_all(p)
                    .await
                    .map_err(err)?;
                let nullable = sqlx::query_scalar(MY_NULLABLE)
                    .bind(schema)
                    .bind(table)
                    .fetch_all(p)
                    .await
                    .map_err(err)?;
                let mut indexes: Vec<UniqueIndex> = Vec::new();
                let mut expression: Vec<String> = Vec::new();
                for (index, column) in rows {
                    let Some(column) = column else {
                        expression.push(index);
                        continue;
                    };
                    match indexes.last_mut() {
                        Some(last) if last.name == index => last.columns.push(column),
                        _ => indexes.push(UniqueIndex {
                            primary: index == "PRIMARY",
                            name: index,
                            columns: vec![column],
                        }),
                    }
                }
                indexes.retain(|i| !expression.contains(&i.name));
                Ok(Catalog { indexes, nullable })
            }
            Pool::Sqlite(p) => sqlite_catalog(p, schema, table).await.map_err(err),
        }
    }

    async fn check_query_key(
        &self,
        from: &Relation<'_>,
        key: &[String],
    ) -> Result<KeyProof, SourceError> {
        let d = self.dialect();
        let relation = sql::relation(d, from)?;
        let refs: Vec<String> = key.iter().map(|k| column_ref(d, k)).collect();
        let context = format!("check that the key of {} is unique", from.display_name());
        let nulls = self.null_keys(from, key).await?;
        let columns = key.join(", ");
        if nulls > 0 {
            return Ok(KeyProof::NotProven {
                reason: format!(
                    "{nulls} row(s) of the query have a NULL in the key ({columns}); \
                     keyset paging never reads rows whose key is NULL"
                ),
            });
        }
        // The duplicate's key as text, for the message.
        let as_text: Vec<String> = refs
            .iter()
            .map(|r| match d {
                Dialect::Postgres => format!("{r}::text"),
                Dialect::MySql => format!("CAST({r} AS CHAR)"),
                Dialect::Sqlite => format!("quote({r})"),
            })
            .collect();
        let dup_sql = format!(
            "SELECT {}, count(*) FROM {relation} GROUP BY {} HAVING count(*) > 1 LIMIT 1",
            as_text.join(", "),
            refs.join(", ")
        );
        let n = key.len();
        let duplicate = match &self.pool {
            Pool::Postgres(p) => fetch_texts_and_i64(p, &context, dup_sql, n).await?,
            Pool::MySql(p) => fetch_texts_and_i64(p, &context, dup_sql, n).await?,
            Pool::Sqlite(p) => fetch_texts_and_i64(p, &context, dup_sql, n).await?,
        };
        if let Some((values, count)) = duplicate {
            let example: Vec<String> = key
                .iter()
                .zip(values)
                .map(|(k, v)| format!("{k} = {}", v.unwrap_or_else(|| "NULL".into())))
                .collect();
            return Ok(KeyProof::NotProven {
                reason: format!(
                    "the key ({columns}) is not unique in the query's rows: {} appears {count} times; \
                     keyset paging would skip rows sharing a key",
                    example.join(", ")
                ),
            });
        }
        let rows = self.count(from).await?;
        Ok(KeyProof::Checked { rows })
    }
}

impl Source {
    /// Rows of the entity with a NULL in any of `columns`.
    async fn null_keys(&self, from: &Relation<'_>, columns: &[String]) -> Result<i64, SourceError> {
        let d = self.dialect();
        let relation = sql::relation(d, from)?;
        let any_null: Vec<String> = columns
            .iter()
            .map(|k| format!("{} IS NULL", column_ref(d, k)))
            .collect();
        let sql = format!(
            "SELECT count(*) FROM {relation} WHERE {}",
            any_null.join(" OR ")
        );
        let context = format!("look for NULL keys in {}", from.display_name());
        self.fetch_i64(&context, sql).await
    }
}

/// The verdict on a table's key from its catalog.
fn judge(table: &str, key: &[String], catalog: &Catalog) -> KeyProof {
    let columns = key.join(", ");
    let nullable: Vec<&str> = key
        .iter()
        .filter(|k| catalog.nullable.contains(k))
        .map(String::as_str)
        .collect();
    let covering: Vec<&UniqueIndex> = catalog
        .indexes
        .iter()
        .filter(|i| !i.columns.is_empty() && i.columns.iter().all(|c| key.contains(c)))
        .collect();
    let mut problems = Vec::new();
    if !nullable.is_empty() {
        problems.push(format!(
            "key column(s) {} of {table} can hold NULL (not declared NOT NULL), and keyset paging never reads rows whose key is NULL",
            nullable.join(", ")
        ));
    }
    if covering.is_empty() {
        problems.push(format!(
            "no primary key or unique index of {table} (without predicate or expression) lies within the key ({columns}), so the key may repeat and rows sharing a key would be skipped between pages"
        ));
    }
    if !problems.is_empty() {
        return KeyProof::NotProven {
            reason: problems.join("; "),
        };
    }
    match covering.iter().find(|i| i.primary) {
        Some(_) => KeyProof::PrimaryKey,
        None => KeyProof::UniqueIndex {
            name: covering[0].name.clone(),
        },
    }
}

/// A SQLite table's unique indexes and nullable columns, from its pragmas.
async fn sqlite_catalog(
    pool: &sqlx::SqlitePool,
    schema: Option<&str>,
    table: &str,
) -> Result<Catalog, sqlx::Error> {
    let schema = schema.unwrap_or("main");
    // (name, declared type, notnull, pk position)
    let columns: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1, ?2) ORDER BY cid",
    )
    .bind(table)
    .bind(schema)
    .fetch_all(pool)
    .await?;
    // (name, unique, origin, partial)
    let list: Vec<(String, i64, String, i64)> = sqlx::query_as(
        "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1, ?2) ORDER BY seq",
    )
    .bind(table)
    .bind(schema)
    .fetch_all(pool)
    .await?;
    let without_rowid: bool = sqlx::query_scalar(
        "SELECT wr <> 0 FROM pragma_table_list(?1, ?2) WHERE name = ?1 AND schema = ?2",
    )
    .bind(table)
    .bind(schema)
    .fetch_optional(pool)
    .await
    .ok()
    .flatten()
    .unwrap_or(false);
    let pk: Vec<&(String, String, i64, i64)> = columns.iter().filter(|c| c.3 > 0).collect();
    let rowid_alias =
        !without_rowid && pk.len() == 1 && pk[0].1.trim().eq_ignore_ascii_case("INTEGER");
    let mut indexes = Vec::new();
    if rowid_alias {
        indexes.push(UniqueIndex {
            name: "rowid".into(),
            primary: true,
            columns: vec![pk[0].0.clone()],
        });
    }
    for (name, unique, origin, partial) in list {
        if unique == 0 || partial != 0 {
            continue;
        }
        // name is NULL for an expression (cid -2).
        let parts: Vec<(Option<String>, i64)> =
            sqlx::query_as("SELECT name, cid FROM pragma_index_info(?1, ?2) ORDER BY seqno")
                .bind(&name)
                .bind(schema)
                .fetch_all(pool)
                .await?;
        if parts.iter().any(|(n, cid)| n.is_none() || *cid < 0) {
            continue;
        }
        indexes.push(UniqueIndex {
            name,
            primary: origin == "pk",
            columns: parts.into_iter().filter_map(|(n, _)| n).collect(),
        });
    }
    // The rowid alias and the primary key of a WITHOUT ROWID table are never
    // NULL; other columns only when declared NOT NULL.
    let nullable = columns
        .iter()
        .filter(|(_, _, notnull, pk)| {
            let never_null = *notnull != 0 || (*pk > 0 && (without_rowid || rowid_alias));
            !never_null
        })
        .map(|c| c.0.clone())
        .collect();
    Ok(Catalog { indexes, nullable })
}
