//! What following needs of the server and of each followed table, read
//! from the catalog (or probed with statements that change nothing) before
//! a slot, a publication or an item exists, so that every missing piece can
//! be named at once. The follower's engine words the refusals.

use sqlx::AssertSqlSafe;

use crate::sql::quote_table;
use crate::{Dialect, Pool, Source, SourceError};

/// What a PostgreSQL server and its user offer for a new slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotServer {
    /// The connection's user.
    pub user: String,
    /// `wal_level`.
    pub wal_level: String,
    /// The user has the `REPLICATION` attribute or is a superuser (on
    /// Amazon RDS and Aurora: or is a member of `rds_replication`).
    pub can_replicate: bool,
    /// `max_replication_slots`.
    pub max_slots: i64,
    /// Replication slots in use on the server (all databases).
    pub used_slots: i64,
    /// The user may create a publication in the current database (`CREATE`).
    pub can_create_publication: bool,
    /// A replication slot of that name exists (in any database).
    pub slot_exists: bool,
    /// A publication of that name exists in the current database.
    pub publication_exists: bool,
}

/// A PostgreSQL table as a publication would take it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedTable {
    /// `REPLICA IDENTITY`: `d` default, `f` full, `i` index, `n` nothing.
    pub identity: char,
    /// The index of `REPLICA IDENTITY USING INDEX`.
    pub identity_index: Option<String>,
    /// Its primary key: `None` without one, `Some(false)` when it is
    /// `DEFERRABLE` (then `REPLICA IDENTITY DEFAULT` has no index to use).
    pub primary_key_immediate: Option<bool>,
    /// The user may read it.
    pub can_select: bool,
    /// The user owns it (directly or through a role): publishing it needs that.
    pub owned: bool,
    /// Its owner.
    pub owner: String,
}

const SLOT_SERVER: &str = "SELECT current_user::text, current_setting('wal_level'), \
     COALESCE((SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user), false) \
     OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = 'rds_replication' \
                AND pg_has_role(current_user, r.oid, 'MEMBER')), \
     current_setting('max_replication_slots')::int8, \
     (SELECT count(*) FROM pg_replication_slots)::int8, \
     has_database_privilege(current_database(), 'CREATE'), \
     EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1), \
     EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)";

const PUBLISHED_TABLE: &str = "SELECT c.relreplident::text, \
     (SELECT ic.relname::text FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
      WHERE i.indrelid = c.oid AND i.indisreplident LIMIT 1), \
     (SELECT bool_or(i.indimmediate AND i.indisvalid) FROM pg_index i \
      WHERE i.indrelid = c.oid AND i.indisprimary), \
     has_table_privilege(c.oid, 'SELECT'), pg_has_role(c.relowner, 'USAGE'), \
     pg_get_userbyid(c.relowner)::text \
     FROM pg_class c WHERE c.oid = to_regclass($1)";

type PublishedRow = (String, Option<String>, Option<bool>, bool, bool, String);

impl Source {
    /// PostgreSQL: what the server and the user offer for a slot and a
    /// publication named `name`.
    pub async fn slot_server(&self, name: &str) -> Result<SlotServer, SourceError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Err(SourceError::config("replication slots are PostgreSQL's"));
        };
        let row: (String, String, bool, i64, i64, bool, bool, bool) = sqlx::query_as(SLOT_SERVER)
            .bind(name)
            .fetch_one(pool)
            .await
            .map_err(|e| SourceError::query("read what the server offers for following", e))?;
        Ok(SlotServer {
            user: row.0,
            wal_level: row.1,
            can_replicate: row.2,
            max_slots: row.3,
            used_slots: row.4,
            can_create_publication: row.5,
            slot_exists: row.6,
            publication_exists: row.7,
        })
    }

    /// PostgreSQL: `table` as a publication would take it; `None` when it
    /// does not exist (describing it says so).
    pub async fn published_table(
        &self,
        table: &str,
    ) -> Result<Option<PublishedTable>, SourceError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Err(SourceError::config("publications are PostgreSQL's"));
        };
        let row: Option<PublishedRow> = sqlx::query_as(PUBLISHED_TABLE)
            .bind(quote_table(Dialect::Postgres, table))
            .fetch_optional(pool)
            .await
            .map_err(|e| SourceError::query(format!("read how {table} would be published"), e))?;
        Ok(row.map(|r| PublishedTable {
            identity: r.0.chars().next().unwrap_or('d'),
            identity_index: r.1,
            primary_key_immediate: r.2,
            can_select: r.3,
            owned: r.4,
            owner: r.5,
        }))
    }

    /// PostgreSQL: sets the comment of publication `publication` (a
    /// follower's slot and publication record there which mapping they
    /// belong to).
    pub async fn comment_publication(
        &self,
        publication: &str,
        text: &str,
    ) -> Result<(), SourceError> {
        super::check_slot_name(publication)?;
        let Pool::Postgres(pool) = &self.pool else {
            return Err(SourceError::config("publications are PostgreSQL's"));
        };
        // The server quotes the text itself (%L), whatever its string settings.
        let sql: String = sqlx::query_scalar(
            "SELECT format('COMMENT ON PUBLICATION %I IS %L', $1::text, $2::text)",
        )
        .bind(publication)
        .bind(text)
        .fetch_one(pool)
        .await
        .map_err(|e| SourceError::query(format!("comment publication {publication}"), e))?;
        sqlx::query(AssertSqlSafe(sql))
            .execute(pool)
            .await
            .map_err(|e| SourceError::query(format!("comment publication {publication}"), e))?;
        Ok(())
    }

    /// PostgreSQL: the comment of publication `publication`; `None` when
    /// it has none or does not exist.
    pub async fn publication_comment(
        &self,
        publication: &str,
    ) -> Result<Option<String>, SourceError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Err(SourceError::config("publications are PostgreSQL's"));
        };
        let comment: Option<Option<String>> = sqlx::query_scalar(
            "SELECT obj_description(oid, 'pg_publication') FROM pg_publication WHERE pubname = $1",
        )
        .bind(publication)
        .fetch_optional(pool)
        .await
        .map_err(|e| SourceError::query(format!("read publication {publication}"), e))?;
        Ok(comment.flatten())
    }

    /// MySQL/MariaDB: the global privileges a follower needs that the user
    /// lacks, by name: `REPLICATION SLAVE` (read the binary log as a
    /// replica), `REPLICATION CLIENT` or MariaDB's `BINLOG MONITOR` (its
    /// position), `RELOAD` (the snapshot's brief global read lock).
    /// Privileges held directly and through the session's roles (its
    /// default roles) count alike.
    pub async fn missing_binlog_privileges(&self) -> Result<Vec<&'static str>, SourceError> {
        let Pool::MySql(pool) = &self.pool else {
            return Err(SourceError::config(
                "the binary log is MySQL's and MariaDB's",
            ));
        };
        let failed = |e| SourceError::query("read the user's privileges", e);
        let mut held: Vec<String> = sqlx::query_scalar(
            "SELECT CONVERT(PRIVILEGE_TYPE USING utf8mb4) FROM information_schema.USER_PRIVILEGES \
             WHERE GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
             SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')",
        )
        .fetch_all(pool)
        .await
        .map_err(failed)?;
        // The session's roles: MariaDB's SHOW GRANTS lists the grants of
        // the current role; MySQL's lists them with USING the roles.
        let (version, roles): (String, Option<String>) = sqlx::query_as(
            "SELECT CONVERT(VERSION() USING utf8mb4), CONVERT(CURRENT_ROLE() USING utf8mb4)",
        )
        .fetch_one(pool)
        .await
        .map_err(failed)?;
        let show = match roles.filter(|r| !r.is_empty() && r != "NONE") {
            Some(roles) if !version.contains("MariaDB") => {
                format!("SHOW GRANTS FOR CURRENT_USER() USING {roles}")
            }
            _ => "SHOW GRANTS".to_string(),
        };
        let grants: Vec<String> = sqlx::query_scalar(AssertSqlSafe(show))
            .fetch_all(pool)
            .await
            .map_err(failed)?;
        held.extend(grants.iter().flat_map(|g| global_privileges(g)));
        let has = |p: &str| {
            held.iter()
                .any(|h| h.eq_ignore_ascii_case(p) || h.eq_ignore_ascii_case("ALL PRIVILEGES"))
        };
        let mut missing = Vec::new();
        if !has("REPLICATION SLAVE") {
            missing.push("REPLICATION SLAVE");
        }
        if !["REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"]
            .iter()
            .any(|p| has(p))
        {
            missing.push("REPLICATION CLIENT");
        }
        if !has("RELOAD") {
            missing.push("RELOAD");
        }
        Ok(missing)
    }

    /// MySQL/MariaDB: whether the user may read `table`, by a statement
    /// that reads no row; `true` also when it fails for another reason
    /// (a table that does not exist is named by describing it).
    pub async fn may_select(&self, table: &str) -> Result<bool, SourceError> {
        let Pool::MySql(pool) = &self.pool else {
            return Err(SourceError::config("probed on MySQL and MariaDB only"));
        };
        let sql = format!(
            "SELECT 1 FROM {} LIMIT 0",
            quote_table(Dialect::MySql, table)
        );
        match sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await {
            Ok(_) => Ok(true),
            // ER_TABLEACCESS_DENIED_ERROR, ER_COLUMNACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR
            Err(sqlx::Error::Database(e))
                if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| matches!(e.number(), 1142 | 1143 | 1044)) =>
            {
                Ok(false)
            }
            Err(sqlx::Error::Database(_)) => Ok(true),
            Err(e) => Err(SourceError::query(format!("read {table}"), e)),
        }
    }
}

/// The global privileges (`ON *.*`) a line of `SHOW GRANTS` grants, by
/// name; none for a line on a database or table, or a role's grant.
fn global_privileges(line: &str) -> Vec<String> {
    let Some(rest) = line.strip_prefix("GRANT ") else {
        return Vec::new();
    };
    let Some((privileges, _)) = rest.split_once(" ON *.* TO ") else {
        return Vec::new();
    };
    privileges
        .split(',')
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::global_privileges;

    #[test]
    fn global_grants_are_read_from_show_grants_lines() {
        assert_eq!(
            global_privileges("GRANT RELOAD, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `r_repl`"),
            ["RELOAD", "REPLICATION SLAVE", "BINLOG MONITOR"]
        );
        assert_eq!(
            global_privileges(
                "GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"
            ),
            ["ALL PRIVILEGES"]
        );
        assert!(global_privileges("GRANT SELECT ON `test`.* TO `u`@`%`").is_empty());
        assert!(global_privileges("GRANT `r_repl` TO `u`@`%`").is_empty());
        assert!(global_privileges("SET DEFAULT ROLE `r_repl` FOR `u`@`%`").is_empty());
    }
}
