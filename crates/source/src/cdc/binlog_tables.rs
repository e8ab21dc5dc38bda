//! The columns a follower decodes a followed table's row events with, and
//! the check that an event was written with those columns.
//!
//! Row events carry no column names: a value is known by its place. A
//! follower that decoded events with the columns a table has *now* would,
//! after an `ALTER TABLE` made while it was stopped, put the values of the
//! events written before it into other columns. So the columns are bound
//! once (the first follow of a run), kept beside the checkpoint and used
//! again on every restart; a DDL statement on a followed table stops the
//! follower before it, so they stay those of every event it reads. Each
//! event's table map is compared with them too (count and types; names
//! when the server logs them, `binlog_row_metadata = FULL`).

use std::collections::HashMap;
use std::sync::Arc;

use mysql_async::binlog::events::{OptionalMetadataField, TableMapEvent};

use super::binlog_values::ColumnDecoder;
use crate::SourceError;

/// One column as bound: its name, `COLUMN_TYPE` and character set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BoundColumn {
    pub(super) name: String,
    pub(super) sql_type: String,
    pub(super) charset: Option<String>,
}

/// The columns of a followed table, by ordinal position.
pub(super) struct TableColumns {
    pub(super) names: Arc<Vec<String>>,
    pub(super) decoders: Vec<ColumnDecoder>,
    pub(super) columns: Vec<BoundColumn>,
}

impl TableColumns {
    /// The decoders of `columns`.
    pub(super) fn new(columns: Vec<BoundColumn>) -> Self {
        TableColumns {
            names: Arc::new(columns.iter().map(|c| c.name.clone()).collect()),
            decoders: columns
                .iter()
                .map(|c| ColumnDecoder::new(&c.sql_type, c.charset.as_deref()))
                .collect(),
            columns,
        }
    }

    /// How the columns of `tme` differ from these, for a message; `None`
    /// when they may be the same (types are compared by family: the
    /// table map does not say everything `COLUMN_TYPE` does).
    pub(super) fn differs(&self, tme: &TableMapEvent<'_>) -> Option<String> {
        let count = tme.columns_count() as usize;
        if count != self.columns.len() {
            return Some(format!(
                "the event has {count} columns, the follower's {} ({})",
                self.columns.len(),
                self.names.join(", ")
            ));
        }
        for (i, c) in self.columns.iter().enumerate() {
            let raw = tme.get_raw_column_type(i).ok().flatten().map(|t| t as u8);
            let (Some(logged), Some(bound)) =
                (raw.and_then(logged_family), bound_family(&c.sql_type))
            else {
                continue;
            };
            if logged != bound && !(bound == "json" && logged == "blob") {
                return Some(format!(
                    "column {} ({}) is a {logged} column in the event",
                    i + 1,
                    c.name
                ));
            }
        }
        let names = logged_names(tme)?;
        (names != *self.names).then(|| {
            format!(
                "the event's columns are {}, the follower's {}",
                names.join(", "),
                self.names.join(", ")
            )
        })
    }
}

/// Column names a table map carries (`binlog_row_metadata = FULL`).
fn logged_names(tme: &TableMapEvent<'_>) -> Option<Vec<String>> {
    for field in tme.iter_optional_meta() {
        if let Ok(OptionalMetadataField::ColumnName(names)) = field {
            return names
                .iter_names()
                .map(|n| n.ok().map(|n| n.name().into_owned()))
                .collect();
        }
    }
    None
}

/// The family of a binary log column type (`MYSQL_TYPE_*`).
fn logged_family(t: u8) -> Option<&'static str> {
    Some(match t {
        1 => "tinyint",
        2 => "smallint",
        9 => "mediumint",
        3 => "int",
        8 => "bigint",
        4 => "float",
        5 => "double",
        0 | 246 => "decimal",
        7 | 17 => "timestamp",
        10 | 14 => "date",
        11 | 19 => "time",
        12 | 18 => "datetime",
        13 => "year",
        16 => "bit",
        15 | 247 | 248 | 253 | 254 => "string",
        249..=252 => "blob",
        245 => "json",
        255 => "geometry",
        _ => return None,
    })
}

/// The family of a `COLUMN_TYPE`, as the binary log writes it; `None` for
/// a type whose logged form is not known here (MariaDB's `UUID`, `INET6`…),
/// which any logged type fits.
fn bound_family(sql_type: &str) -> Option<&'static str> {
    let t = sql_type.trim().to_ascii_lowercase();
    let base = t
        .split(|c: char| c == '(' || c.is_whitespace())
        .next()
        .unwrap_or_default();
    Some(match base {
        "tinyint" | "bool" | "boolean" => "tinyint",
        "smallint" => "smallint",
        "mediumint" => "mediumint",
        "int" | "integer" => "int",
        "bigint" => "bigint",
        "float" => "float",
        "double" | "real" => "double",
        "decimal" | "numeric" | "dec" | "fixed" => "decimal",
        "timestamp" => "timestamp",
        "date" => "date",
        "time" => "time",
        "datetime" => "datetime",
        "year" => "year",
        "bit" => "bit",
        "char" | "varchar" | "binary" | "varbinary" | "enum" | "set" => "string",
        "tinytext" | "text" | "mediumtext" | "longtext" | "tinyblob" | "blob" | "mediumblob"
        | "longblob" | "long" => "blob",
        "json" => "json",
        "geometry" | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
        | "multipolygon" | "geometrycollection" => "geometry",
        _ => return None,
    })
}

/// The bound columns of tables (`schema.table` → columns) as kept beside
/// the checkpoint.
pub(super) fn bound_text(tables: &[(String, &[BoundColumn])]) -> String {
    let mut map = serde_json::Map::new();
    for (name, columns) in tables {
        let columns: Vec<serde_json::Value> = columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.sql_type, "charset": c.charset}))
            .collect();
        map.insert(name.clone(), serde_json::Value::Array(columns));
    }
    serde_json::to_string_pretty(&serde_json::Value::Object(map)).expect("JSON of strings")
}

/// Reads what [`bound_text`] wrote.
pub(super) fn parse_bound(text: &str) -> Result<HashMap<String, Vec<BoundColumn>>, SourceError> {
    let bad = |why: &str| SourceError::config(format!("the follower's bound columns: {why}"));
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(&e.to_string()))?;
    let object = json.as_object().ok_or_else(|| bad("not a JSON object"))?;
    let mut out = HashMap::new();
    for (table, columns) in object {
        let columns = columns
            .as_array()
            .ok_or_else(|| bad("a table's columns are not a list"))?
            .iter()
            .map(|c| {
                let text = |k: &str| c.get(k).and_then(|v| v.as_str()).map(String::from);
                Ok(BoundColumn {
                    name: text("name").ok_or_else(|| bad("a column without a name"))?,
                    sql_type: text("type").ok_or_else(|| bad("a column without a type"))?,
                    charset: text("charset"),
                })
            })
            .collect::<Result<Vec<_>, SourceError>>()?;
        out.insert(table.clone(), columns);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_columns_are_kept_and_read_back() {
        let columns = vec![
            BoundColumn {
                name: "id".into(),
                sql_type: "int(11)".into(),
                charset: None,
            },
            BoundColumn {
                name: "my name".into(),
                sql_type: "varchar(20)".into(),
                charset: Some("latin1".into()),
            },
        ];
        let text = bound_text(&[("db.t".into(), &columns)]);
        assert_eq!(parse_bound(&text).unwrap()["db.t"], columns);
        assert!(parse_bound("[]").is_err());
        assert!(parse_bound(r#"{"db.t": [{"type": "int"}]}"#).is_err());
    }

    #[test]
    fn families_of_logged_and_bound_types_agree() {
        for (sql, logged) in [
            ("int(11)", 3u8),
            ("int(10) unsigned", 3),
            ("bigint(20)", 8),
            ("tinyint(1)", 1),
            ("varchar(20)", 15),
            ("char(3)", 254),
            ("enum('a','b')", 254),
            ("text", 252),
            ("decimal(10,2)", 246),
            ("datetime(6)", 18),
            ("timestamp", 17),
            ("date", 10),
        ] {
            assert_eq!(bound_family(sql), logged_family(logged), "{sql}");
        }
        assert_ne!(bound_family("int(11)"), logged_family(15));
        assert_ne!(bound_family("varchar(3)"), logged_family(252));
        assert_eq!(bound_family("vector(3)"), None);
    }
}
