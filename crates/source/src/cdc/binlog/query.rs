//! Statements in the binary log (query events): a transaction's begin and
//! commit, and what stops the reader before it: a change of a followed
//! table logged as a statement, a `TRUNCATE` or DDL of a followed table.

use super::{BinlogReader, REMEDY_DDL, REMEDY_RELOAD, REMEDY_STATEMENT};
use crate::cdc::binlog_sql::{classify, may_name, Statement};
use crate::{SourceError, UnfollowableChange};

impl BinlogReader {
    /// A statement in the log, run in `schema`: whether it commits the
    /// transaction being read.
    pub(super) fn query(&mut self, schema: &str, sql: &str) -> Result<bool, SourceError> {
        // MariaDB's stand-in for an event a replica may not know
        // (annotations, GTIDs) is a comment.
        if sql.trim_start().starts_with('#') {
            return Ok(false);
        }
        Ok(match classify(sql) {
            Statement::Begin => {
                self.in_transaction = true;
                false
            }
            Statement::Commit => true,
            // A statement-format change of another table: its transaction
            // ends with its own COMMIT.
            s @ Statement::Dml { .. } => {
                self.statement(schema, &s)?;
                false
            }
            // DDL commits by itself.
            s => {
                self.statement(schema, &s)?;
                true
            }
        })
    }

    /// Where the event being read is, for messages: `file:pos`, and the
    /// GTID of its transaction when there is one.
    pub(super) fn at_event(&self) -> String {
        match &self.gtid_now {
            Some(g) => format!("{}:{} (GTID {g})", self.place(), self.event_start),
            None => format!("{}:{}", self.place(), self.event_start),
        }
    }

    /// The stop before the event being read, a change of `table` the
    /// follower cannot carry.
    pub(super) fn unfollowable(
        &self,
        table: &str,
        event: String,
        reason: String,
        remedy: &str,
    ) -> SourceError {
        SourceError::Unfollowable(Box::new(UnfollowableChange {
            table: table.to_string(),
            event,
            position: self.at_event(),
            reason,
            remedy: remedy.to_string(),
        }))
    }

    /// A statement in the log, run in `schema`: a change of rows written as
    /// a statement, a `TRUNCATE` or DDL of a followed table stops the
    /// follower before it.
    fn statement(&self, schema: &str, statement: &Statement) -> Result<(), SourceError> {
        let (event, names, reason, remedy) = match statement {
            Statement::Dml { verb, names } => (
                format!("a statement-format {verb}"),
                names,
                "the server logged this change as an SQL statement (binlog_format = STATEMENT or MIXED in the session that made it), not as rows, so the rows it changed are not known".to_string(),
                REMEDY_STATEMENT,
            ),
            Statement::Truncate { names } => (
                "TRUNCATE".to_string(),
                names,
                "a TRUNCATE empties the table without a row event, so its items cannot be deleted one by one".to_string(),
                REMEDY_RELOAD,
            ),
            Statement::Ddl { verb, names } => (
                verb.clone(),
                names,
                "the table's definition changes, and the row events after it no longer have the columns the follower decodes with".to_string(),
                REMEDY_DDL,
            ),
            Statement::DropSchema { schema: dropped } => {
                return match self.tables.keys().find(|(s, _)| s.eq_ignore_ascii_case(dropped)) {
                    Some((s, t)) => Err(self.unfollowable(
                        &format!("{s}.{t}"),
                        "DROP DATABASE".into(),
                        format!("database {dropped}, and the table in it, is dropped"),
                        REMEDY_DDL,
                    )),
                    None => Ok(()),
                };
            }
            _ => return Ok(()),
        };
        match self
            .tables
            .keys()
            .find(|(s, t)| names.iter().any(|n| may_name(n, schema, s, t)))
        {
            Some((s, t)) => Err(self.unfollowable(&format!("{s}.{t}"), event, reason, remedy)),
            None => Ok(()),
        }
    }
}
