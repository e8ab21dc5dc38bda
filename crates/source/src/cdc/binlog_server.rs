//! What the binary log reader asks the server by SQL: whether it writes
//! the log as a follower needs, where the log ends, and the columns of the
//! followed tables (row images carry no names).

use sqlx::mysql::MySqlPool;

use super::binlog_tables::{BoundColumn, TableColumns};
use super::gtid::MariaGtids;
use super::position::BinlogPosition;
use crate::sql::split_table;
use crate::{Pool, Source, SourceError};

impl Source {
    fn binlog_pool(&self) -> Result<&MySqlPool, SourceError> {
        match &self.pool {
            Pool::MySql(p) => Ok(p),
            _ => Err(SourceError::config(
                "the binary log is read from MySQL and MariaDB sources only",
            )),
        }
    }

    /// Checks that the server writes what a follower needs: the binary log
    /// on, in row format, with full row images; names every setting missing.
    pub async fn check_binlog_settings(&self) -> Result<(), SourceError> {
        let problems = self.binlog_setting_problems().await?;
        match problems.is_empty() {
            true => Ok(()),
            false => Err(SourceError::config(problems.join("; "))),
        }
    }

    /// What the server's binary log settings (global values) lack for a
    /// follower, each with how to set it; empty when nothing.
    pub async fn binlog_setting_problems(&self) -> Result<Vec<String>, SourceError> {
        let pool = self.binlog_pool()?;
        let (log_bin, format, image): (String, String, String) = sqlx::query_as(
            "SELECT CAST(@@GLOBAL.log_bin AS CHAR), CAST(@@GLOBAL.binlog_format AS CHAR), \
             CAST(@@GLOBAL.binlog_row_image AS CHAR)",
        )
        .fetch_one(pool)
        .await
        .map_err(|e| SourceError::query("read the binary log settings", e))?;
        let mut problems = binlog_settings(&log_bin, &format, &image);
        // MariaDB's compressed events are not read by the decoder.
        let compressed: Option<String> =
            sqlx::query_scalar("SELECT CAST(@@GLOBAL.log_bin_compress AS CHAR)")
                .fetch_one(pool)
                .await
                .ok();
        if compressed.is_some_and(|c| matches!(c.to_ascii_uppercase().as_str(), "1" | "ON")) {
            problems.push(
                "following changes cannot read a compressed binary log: SET GLOBAL log_bin_compress = OFF".into(),
            );
        }
        Ok(problems)
    }

    /// The binary log's current end (`SHOW MASTER STATUS`, or `SHOW BINARY
    /// LOG STATUS` on MySQL 8.4 and later).
    pub async fn binlog_position(&self) -> Result<BinlogPosition, SourceError> {
        use sqlx::Row;
        let pool = self.binlog_pool()?;
        let mut row = sqlx::query("SHOW MASTER STATUS").fetch_optional(pool).await;
        if row.is_err() {
            row = sqlx::query("SHOW BINARY LOG STATUS")
                .fetch_optional(pool)
                .await;
        }
        let row = row
            .map_err(|e| {
                SourceError::query(
                    "read the binary log position (needs the REPLICATION CLIENT privilege)",
                    e,
                )
            })?
            .ok_or_else(|| SourceError::config("the binary log is off on the source"))?;
        let file: String = row
            .try_get(0)
            .map_err(|e| SourceError::query("read the binary log position", e))?;
        let pos: u64 = row
            .try_get(1)
            .map_err(|e| SourceError::query("read the binary log position", e))?;
        Ok(BinlogPosition {
            file,
            pos,
            gtid: None,
        })
    }

    /// MariaDB: the GTID position of the binary log's end
    /// (`@@gtid_binlog_pos`); `None` on MySQL, which has no such variable.
    pub async fn mariadb_gtid_pos(&self) -> Result<Option<MariaGtids>, SourceError> {
        let pool = self.binlog_pool()?;
        let pos: Result<Option<String>, _> =
            sqlx::query_scalar("SELECT CAST(@@GLOBAL.gtid_binlog_pos AS CHAR)")
                .fetch_one(pool)
                .await;
        match pos {
            Ok(p) => Ok(Some(MariaGtids::parse(&p.unwrap_or_default())?)),
            // ER_UNKNOWN_SYSTEM_VARIABLE: not MariaDB.
            Err(sqlx::Error::Database(e))
                if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| e.number() == 1193) =>
            {
                Ok(None)
            }
            Err(e) => Err(SourceError::query("read the GTID position", e)),
        }
    }

    /// MySQL: whether the server logs GTIDs (`gtid_mode = ON`).
    pub async fn mysql_gtid_mode_on(&self) -> Result<bool, SourceError> {
        let mode: Option<String> = sqlx::query_scalar("SELECT CAST(@@GLOBAL.gtid_mode AS CHAR)")
            .fetch_one(self.binlog_pool()?)
            .await
            .ok()
            .flatten();
        Ok(mode.is_some_and(|m| m.eq_ignore_ascii_case("ON")))
    }

    /// Whether the server still has binary log file `file` (`SHOW BINARY
    /// LOGS`).
    pub async fn has_binlog_file(&self, file: &str) -> Result<bool, SourceError> {
        use sqlx::Row;
        let rows = sqlx::query("SHOW BINARY LOGS")
            .fetch_all(self.binlog_pool()?)
            .await
            .map_err(|e| {
                SourceError::query(
                    "list the binary log files (needs the REPLICATION CLIENT privilege)",
                    e,
                )
            })?;
        Ok(rows
            .iter()
            .any(|r| r.try_get::<String, _>(0).is_ok_and(|name| name == file)))
    }

    /// MariaDB: the GTID position at `at` in the server's own files
    /// (`BINLOG_GTID_POS`); `None` when the server cannot tell (the file is
    /// not one of its own).
    pub async fn binlog_gtid_pos(
        &self,
        at: &BinlogPosition,
    ) -> Result<Option<MariaGtids>, SourceError> {
        let pool = self.binlog_pool()?;
        let pos: Option<String> = sqlx::query_scalar("SELECT CAST(BINLOG_GTID_POS(?, ?) AS CHAR)")
            .bind(&at.file)
            .bind(at.pos)
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query(format!("read the GTID position at {at}"), e))?;
        pos.map(|p| MariaGtids::parse(&p)).transpose()
    }

    /// `table` (`table` or `schema.table`) with its schema: the
    /// connection's database when the mapping names none.
    pub async fn qualified_table(&self, table: &str) -> Result<(String, String), SourceError> {
        let (schema, name) = split_table(table);
        let schema = match schema {
            Some(s) => s.to_string(),
            None => sqlx::query_scalar::<_, Option<String>>("SELECT DATABASE()")
                .fetch_one(self.binlog_pool()?)
                .await
                .map_err(|e| SourceError::query("read the current database", e))?
                .ok_or_else(|| {
                    SourceError::config(format!(
                        "table {table} names no database and the source URL gives none"
                    ))
                })?,
        };
        Ok((schema, name.to_string()))
    }

    pub(super) async fn table_columns(
        &self,
        schema: &str,
        table: &str,
    ) -> Result<TableColumns, SourceError> {
        let pool = self.binlog_pool()?;
        let qualified = format!("{schema}.{table}");
        let shape = self.describe(&crate::Relation::Table(&qualified)).await?;
        let charsets: Vec<(String, Option<String>)> = sqlx::query_as(
            "SELECT CONVERT(COLUMN_NAME USING utf8mb4), CONVERT(CHARACTER_SET_NAME USING utf8mb4) \
             FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? \
             ORDER BY ORDINAL_POSITION",
        )
        .bind(schema)
        .bind(table)
        .fetch_all(pool)
        .await
        .map_err(|e| SourceError::query(format!("describe {qualified}"), e))?;
        let columns = shape
            .columns
            .into_iter()
            .map(|c| {
                let charset = charsets
                    .iter()
                    .find(|(n, _)| *n == c.name)
                    .and_then(|(_, cs)| cs.clone());
                BoundColumn {
                    name: c.name,
                    sql_type: c.sql_type,
                    charset,
                }
            })
            .collect();
        Ok(TableColumns::new(columns))
    }
}

/// Character values converted per statement, well under the server's
/// 65,535 placeholders.
const CONVERSIONS_PER_STATEMENT: usize = 1_000;

impl Source {
    /// Text of character values in the server's other character sets
    /// (`(charset, bytes)`, as a row image holds them), converted to UTF-8
    /// by the server itself: exactly what the full load's reads give for
    /// the same bytes, whatever the character set.
    pub(super) async fn utf8_of(
        &self,
        values: &[(&str, &[u8])],
    ) -> Result<Vec<String>, SourceError> {
        let pool = self.binlog_pool()?;
        let mut out = Vec::with_capacity(values.len());
        for chunk in values.chunks(CONVERSIONS_PER_STATEMENT) {
            let mut select = Vec::with_capacity(chunk.len());
            for (charset, _) in chunk {
                // A name from information_schema; checked, as it is spliced.
                if charset.is_empty()
                    || !charset
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(SourceError::config(format!(
                        "unexpected character set name {charset:?}"
                    )));
                }
                select.push(format!(
                    "CAST(CONVERT(? USING {charset}) AS CHAR CHARACTER SET utf8mb4)"
                ));
            }
            let sql = format!("SELECT {}", select.join(", "));
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (_, bytes) in chunk {
                query = query.bind(*bytes);
            }
            let row = query.fetch_one(pool).await.map_err(|e| {
                SourceError::query("convert character values of the binary log to UTF-8", e)
            })?;
            for i in 0..chunk.len() {
                use sqlx::Row;
                let text: Option<String> = row.try_get(i).map_err(|e| {
                    SourceError::query("convert character values of the binary log to UTF-8", e)
                })?;
                out.push(text.unwrap_or_default());
            }
        }
        Ok(out)
    }
}

/// What a follower needs of the server's binary log settings
/// (`@@log_bin`, `@@binlog_format`, `@@binlog_row_image`) and lacks, each
/// named with how to set it.
fn binlog_settings(log_bin: &str, format: &str, image: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let on = matches!(log_bin.to_ascii_uppercase().as_str(), "1" | "ON");
    if !on {
        problems.push(
            "following changes needs the binary log: start the server with log_bin (and a server_id), binlog_format = ROW and binlog_row_image = FULL, then restart it".to_string(),
        );
    }
    if !format.eq_ignore_ascii_case("ROW") {
        problems.push(format!(
            "following changes needs binlog_format = ROW (the server has {format}): SET GLOBAL binlog_format = 'ROW' and put it in the server's configuration (sessions started before keep their format)"
        ));
    }
    if !image.eq_ignore_ascii_case("FULL") {
        problems.push(format!(
            "following changes needs binlog_row_image = FULL (the server has {image}): SET GLOBAL binlog_row_image = 'FULL' and put it in the server's configuration"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binlog_settings_are_named_with_how_to_set_them() {
        assert!(binlog_settings("1", "ROW", "FULL").is_empty());
        assert!(binlog_settings("ON", "row", "full").is_empty());
        let off = binlog_settings("0", "ROW", "FULL").join("\n");
        assert!(off.contains("log_bin") && off.contains("restart"), "{off}");
        let mixed = binlog_settings("1", "MIXED", "FULL").join("\n");
        assert!(
            mixed.contains("binlog_format = ROW") && mixed.contains("MIXED"),
            "{mixed}"
        );
        let minimal = binlog_settings("1", "ROW", "MINIMAL").join("\n");
        assert!(
            minimal.contains("binlog_row_image = FULL") && minimal.contains("SET GLOBAL"),
            "{minimal}"
        );
        // Every setting missing is named at once.
        let all = binlog_settings("0", "STATEMENT", "MINIMAL");
        assert_eq!(all.len(), 3, "{all:?}");
    }
}
