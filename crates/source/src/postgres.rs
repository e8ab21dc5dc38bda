//! PostgreSQL: introspection through the catalog, decoding by the column's type.

mod decode;

pub(crate) use decode::decode_text;

use sql2ddb_core::Column;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Column as _, Connection, Statement};

use crate::column_plan::ColumnPlan;
use crate::fetch::prepare_query;
use crate::sql::{self, column_ref};
use crate::{Dialect, Relation, Shape, SourceError};

/// How one column is selected and decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Int2,
    Int4,
    Int8,
    /// Selected as `::text`.
    Numeric,
    Float4,
    Float8,
    /// Any text type, read raw so `char(n)` keeps its padding.
    Text,
    Bool,
    Bytea,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Uuid,
    /// json / jsonb, selected as `::text` and parsed (exact numbers).
    Json,
    /// An array, selected as `to_jsonb(…)::text`.
    Array(Elem),
    /// Anything else (enums, domains, interval, …), selected as `::text`.
    Other,
}

/// Element type of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    Int,
    Numeric,
    Float,
    Text,
    Bool,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Bytea,
    Json,
    Other,
}

/// Classifies a `format_type` name (`integer`, `numeric(10,2)`, `text[]`, …).
pub(crate) fn kind_of(sql_type: &str) -> Kind {
    if let Some(elem) = sql_type.strip_suffix("[]") {
        let elem = match kind_of(elem) {
            Kind::Int2 | Kind::Int4 | Kind::Int8 => Elem::Int,
            Kind::Numeric => Elem::Numeric,
            Kind::Float4 | Kind::Float8 => Elem::Float,
            Kind::Text | Kind::Uuid => Elem::Text,
            Kind::Bool => Elem::Bool,
            Kind::Date => Elem::Date,
            Kind::Time => Elem::Time,
            Kind::Timestamp => Elem::Timestamp,
            Kind::TimestampTz => Elem::TimestampTz,
            Kind::Bytea => Elem::Bytea,
            Kind::Json => Elem::Json,
            Kind::Array(_) | Kind::Other => Elem::Other,
        };
        return Kind::Array(elem);
    }
    // Strip a type modifier: `numeric(10,2)`, `time(3) without time zone`.
    let base: String = match (sql_type.find('('), sql_type.find(')')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &sql_type[..open], &sql_type[close + 1..])
        }
        _ => sql_type.to_string(),
    };
    match base.as_str() {
        "smallint" => Kind::Int2,
        "integer" => Kind::Int4,
        "bigint" => Kind::Int8,
        "numeric" => Kind::Numeric,
        "real" => Kind::Float4,
        "double precision" => Kind::Float8,
        "text" | "character varying" | "character" | "bpchar" | "name" => Kind::Text,
        s if s == "citext" || s.ends_with(".citext") => Kind::Text,
        "boolean" => Kind::Bool,
        "bytea" => Kind::Bytea,
        "date" => Kind::Date,
        "time without time zone" => Kind::Time,
        "timestamp without time zone" => Kind::Timestamp,
        "timestamp with time zone" => Kind::TimestampTz,
        "uuid" => Kind::Uuid,
        "json" | "jsonb" => Kind::Json,
        _ => Kind::Other,
    }
}

pub(crate) async fn connect(url: &str, pool: PgPoolOptions) -> Result<PgPool, SourceError> {
    let opts: PgConnectOptions = url
        .parse()
        .map_err(|e| SourceError::config(format!("invalid PostgreSQL URL {url}: {e}")))?;
    // One direct connection first: the pool retries a refused connection until
    // its acquire timeout, a direct attempt fails at once with the real reason.
    let conn = sqlx::PgConnection::connect_with(&opts)
        .await
        .map_err(|e| SourceError::connect(url, e))?;
    let _ = conn.close().await;
    pool.connect_with(opts)
        .await
        .map_err(|e| SourceError::connect(url, e))
}

// A domain is read as its base type (a domain over integer is a number,
// not text), as a query's columns are described.
const TABLE_COLUMNS: &str = "SELECT a.attname::text, CASE WHEN t.typtype = 'd' \
     THEN format_type(t.typbasetype, t.typtypmod) ELSE format_type(a.atttypid, a.atttypmod) END \
     FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
     WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
     ORDER BY a.attnum";

const PRIMARY_KEY: &str = "SELECT a.attname::text \
     FROM pg_index i \
     CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) \
     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
     WHERE i.indrelid = to_regclass($1) AND i.indisprimary \
     ORDER BY k.ord";

// Without a type modifier, format_type names bpchar `character`, which as a
// cast means char(1): use the unbounded internal name instead.
const TYPE_NAMES: &str =
    "SELECT CASE WHEN u.o = 1042 THEN 'bpchar' ELSE format_type(u.o::oid, NULL) END \
     FROM unnest($1::int8[]) WITH ORDINALITY AS u(o, n) ORDER BY u.n";

pub(crate) async fn describe(pool: &PgPool, from: &Relation<'_>) -> Result<Shape, SourceError> {
    let context = format!("describe {}", from.display_name());
    match from {
        Relation::Table(name) => {
            let qualified = sql::quote_table(Dialect::Postgres, name);
            let rows: Vec<(String, String)> = sqlx::query_as(TABLE_COLUMNS)
                .bind(&qualified)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            if rows.is_empty() {
                return Err(SourceError::not_found(format!(
                    "table {name} does not exist (or is not visible to this user)"
                )));
            }
            let primary_key: Vec<String> = sqlx::query_scalar(PRIMARY_KEY)
                .bind(&qualified)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            Ok(Shape {
                columns: rows
                    .into_iter()
                    .map(|(name, sql_type)| Column { name, sql_type })
                    .collect(),
                primary_key,
            })
        }
        Relation::Query(query) => {
            let stmt = prepare_query(pool, Dialect::Postgres, from, query).await?;
            let oids: Vec<i64> = stmt
                .columns()
                .iter()
                .map(|c| c.type_info().oid().map_or(0, |o| i64::from(o.0)))
                .collect();
            let names: Vec<String> = sqlx::query_scalar(TYPE_NAMES)
                .bind(&oids)
                .fetch_all(pool)
                .await
                .map_err(|e| SourceError::query(&context, e))?;
            Ok(Shape {
                columns: stmt
                    .columns()
                    .iter()
                    .zip(names)
                    .map(|(c, sql_type)| Column {
                        name: c.name().to_string(),
                        sql_type,
                    })
                    .collect(),
                primary_key: Vec::new(),
            })
        }
    }
}

pub(crate) fn plan(
    columns: &[Column],
    key_indices: &[usize],
) -> Result<ColumnPlan<Kind>, SourceError> {
    let kinds: Vec<Kind> = columns.iter().map(|c| kind_of(&c.sql_type)).collect();
    let select = columns
        .iter()
        .zip(&kinds)
        .map(|(c, kind)| {
            let col = column_ref(Dialect::Postgres, &c.name);
            match kind {
                Kind::Numeric | Kind::Json | Kind::Other => format!("{col}::text"),
                Kind::Array(_) => format!("to_jsonb({col})::text"),
                _ => col,
            }
        })
        .collect();
    let mut params = Vec::with_capacity(key_indices.len());
    for &i in key_indices {
        if matches!(kinds[i], Kind::Array(_) | Kind::Json) {
            return Err(SourceError::config(format!(
                "key column {} is of type {}, which cannot order pages; choose another key",
                columns[i].name, columns[i].sql_type
            )));
        }
        // Cast every cursor value to the key column's own type, so a text-bound
        // numeric, uuid or enum compares as that type.
        params.push(("CAST(".to_string(), format!(" AS {})", columns[i].sql_type)));
    }
    Ok(ColumnPlan {
        select,
        params,
        decoders: kinds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_format_type_names() {
        assert_eq!(kind_of("numeric(60,20)"), Kind::Numeric);
        assert_eq!(kind_of("character(5)"), Kind::Text);
        assert_eq!(kind_of("timestamp(3) with time zone"), Kind::TimestampTz);
        assert_eq!(kind_of("integer[]"), Kind::Array(Elem::Int));
        assert_eq!(kind_of("character varying(10)[]"), Kind::Array(Elem::Text));
        assert_eq!(kind_of("mood"), Kind::Other);
        assert_eq!(kind_of("\"Mood\"[]"), Kind::Array(Elem::Other));
    }
}
