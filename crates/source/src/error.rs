//! The crate's one error type. Every message is redacted at construction, so a
//! password in a connection URL can never reach a log or a terminal.

use sql2ddb_core::redact_secrets;

/// What went wrong, coarsely, for callers that branch on it (exit codes, retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceErrorKind {
    /// The URL, entity or key given to the source is wrong; fix the configuration.
    Config,
    /// The server could not be reached or refused the login.
    Connect,
    /// A table (or SQLite file) does not exist.
    NotFound,
    /// The server rejected or failed a statement (or the connection broke
    /// under it).
    Query,
    /// The server refused a statement as it is written: bad SQL, a column or
    /// table it does not have, a missing privilege, a value out of range.
    /// Retrying does not help; the mapping's query or the grants need fixing.
    Refused,
    /// A value could not be decoded from what the server sent.
    Decode,
    /// A change data capture stream holds a change the follower cannot
    /// carry; it stopped before it.
    Unfollowable,
}

/// An error of the source readers. Messages never contain a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A malformed or unsupported connection URL, or a bad entity definition.
    #[error("{0}")]
    Config(String),
    /// Connecting failed.
    #[error("cannot connect to {url}: {message}")]
    Connect {
        /// The URL, redacted.
        url: String,
        /// The driver's message, redacted.
        message: String,
    },
    /// A table or a SQLite file is missing.
    #[error("{0}")]
    NotFound(String),
    /// A statement failed.
    #[error("{context}: {message}")]
    Query {
        /// What was being done (`describe orders`, `read page of orders`).
        context: String,
        /// The server's message, redacted.
        message: String,
    },
    /// The server refused a statement as written ([`SourceErrorKind::Refused`]).
    #[error("{context}: {message}")]
    Refused {
        /// What was being done.
        context: String,
        /// The server's message, redacted.
        message: String,
    },
    /// A value could not be decoded.
    #[error("cannot decode column {column}: {message}")]
    Decode {
        /// Column name.
        column: String,
        /// Why.
        message: String,
    },
    /// A change data capture stream holds a change the follower cannot
    /// carry (a statement-format event, a partial row image, a truncate, a
    /// schema change): the reader stopped before its transaction.
    #[error("{0}")]
    Unfollowable(Box<UnfollowableChange>),
}

/// A change a follower cannot carry, and where it is
/// ([`SourceError::Unfollowable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot follow {event} on table {table} at {position}: {reason}; {remedy}")]
pub struct UnfollowableChange {
    /// The table, `schema.table`.
    pub table: String,
    /// The change, as the stream names it.
    pub event: String,
    /// Where it is (`file:pos`, with its GTID when there is one).
    pub position: String,
    /// Why it cannot be carried.
    pub reason: String,
    /// The one thing to do.
    pub remedy: String,
}

impl SourceError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> SourceErrorKind {
        match self {
            SourceError::Config(_) => SourceErrorKind::Config,
            SourceError::Connect { .. } => SourceErrorKind::Connect,
            SourceError::NotFound(_) => SourceErrorKind::NotFound,
            SourceError::Query { .. } => SourceErrorKind::Query,
            SourceError::Refused { .. } => SourceErrorKind::Refused,
            SourceError::Decode { .. } => SourceErrorKind::Decode,
            SourceError::Unfollowable(_) => SourceErrorKind::Unfollowable,
        }
    }

    pub(crate) fn config(message: impl AsRef<str>) -> Self {
        SourceError::Config(redact_secrets(message.as_ref()))
    }

    pub(crate) fn not_found(message: impl AsRef<str>) -> Self {
        SourceError::NotFound(redact_secrets(message.as_ref()))
    }

    pub(crate) fn connect(url: &str, err: impl std::fmt::Display) -> Self {
        SourceError::Connect {
            url: redact_secrets(url),
            message: redact_secrets(&err.to_string()),
        }
    }

    pub(crate) fn query(context: impl AsRef<str>, err: impl std::fmt::Display) -> Self {
        SourceError::Query {
            context: redact_secrets(context.as_ref()),
            message: redact_secrets(&err.to_string()),
        }
    }

    pub(crate) fn decode(column: &str, err: impl std::fmt::Display) -> Self {
        SourceError::Decode {
            column: column.to_string(),
            message: redact_secrets(&err.to_string()),
        }
    }
}

impl SourceError {
    /// The same error, with a line of advice after its message.
    pub(crate) fn with_advice(self, advice: &str) -> SourceError {
        let advice = redact_secrets(advice);
        match self {
            SourceError::Config(m) => SourceError::Config(format!("{m}\n  {advice}")),
            SourceError::Connect { url, message } => SourceError::Connect {
                url,
                message: format!("{message}\n  {advice}"),
            },
            other => other,
        }
    }

    /// The same error, naming the mapping's entity it happened for
    /// (`entity orders_q: describe query: …`): a [`Relation::Query`](crate::Relation::Query)
    /// has no name of its own, so the caller that knows it adds it.
    pub fn for_entity(self, entity: &str) -> SourceError {
        let name = redact_secrets(entity);
        match self {
            SourceError::Config(m) => SourceError::Config(format!("entity {name}: {m}")),
            SourceError::NotFound(m) => SourceError::NotFound(format!("entity {name}: {m}")),
            SourceError::Query { context, message } => SourceError::Query {
                context: format!("entity {name}: {context}"),
                message,
            },
            SourceError::Refused { context, message } => SourceError::Refused {
                context: format!("entity {name}: {context}"),
                message,
            },
            other => other,
        }
    }

    /// A failed statement that wraps the text of a query entity: the server's
    /// message, and where the server points into the statement (PostgreSQL's
    /// position, MySQL's `near '…' at line n`) as line and column of `query`
    /// with the line and a caret.
    pub(crate) fn query_in(
        context: impl AsRef<str>,
        err: sqlx::Error,
        statement: &str,
        query: &str,
    ) -> Self {
        let mut message = err.to_string();
        if let Some(at) = error_offset(&err, statement).and_then(|o| locate(o, statement, query)) {
            message.push_str(&at);
        }
        let (context, message) = (redact_secrets(context.as_ref()), redact_secrets(&message));
        match refused(&err) {
            true => SourceError::Refused { context, message },
            false => SourceError::Query { context, message },
        }
    }
}

/// Whether the server refused the statement as written, rather than failing
/// to run it: SQLSTATE classes 42 (syntax, unknown name, privilege), 22
/// (data exception) and 0A (not supported) on PostgreSQL and MySQL; on
/// SQLite, any error but a busy or locked database.
fn refused(err: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = err else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
        let primary = code.parse::<u32>().map(|c| c & 0xff).unwrap_or(0);
        return !matches!(primary, 5 | 6);
    }
    ["42", "22", "0A"]
        .iter()
        .any(|class| code.starts_with(class))
}

/// The byte offset in `statement` where the server says the error is.
fn error_offset(err: &sqlx::Error, statement: &str) -> Option<usize> {
    let db = err.as_database_error()?;
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        let sqlx::postgres::PgErrorPosition::Original(chars) = pg.position()? else {
            return None;
        };
        // 1-based, in characters.
        return statement
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(statement.len()))
            .nth(chars.checked_sub(1)?);
    }
    // MySQL / MariaDB: "… near 'rest of the statement' at line 2".
    let message = db.message();
    let start = message.find("near '")? + "near '".len();
    let end = message.rfind("' at line ")?;
    let line: usize = message[end + "' at line ".len()..].trim().parse().ok()?;
    let near = message.get(start..end)?;
    let line_start = if line <= 1 {
        0
    } else {
        statement.match_indices('\n').nth(line - 2)?.0 + 1
    };
    if near.is_empty() {
        return Some(statement.len());
    }
    // The quoted text may be cut short; search from the start of that line.
    statement[line_start..]
        .find(near)
        .map(|i| line_start + i)
        .or_else(|| statement.find(near))
}

/// `offset` (bytes into `statement`) as `at line L, column C of the query`
/// with the line and a caret, when it falls inside the query's text.
fn locate(offset: usize, statement: &str, query: &str) -> Option<String> {
    let body = query
        .trim()
        .trim_end_matches(|c: char| c == ';' || c.is_whitespace());
    let body_at = statement.find(body)?;
    let in_body = offset.checked_sub(body_at)?;
    if in_body > body.len() {
        return None;
    }
    // Offset of the body within the query as written (leading whitespace).
    let lead = query.find(body)?;
    let at = lead + in_body;
    let before = query.get(..at)?;
    let line_no = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    let line = query[line_start..].lines().next().unwrap_or("");
    // Tabs stay tabs under the caret, so it lines up whatever the tab width.
    let pad: String = before[line_start..]
        .chars()
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    Some(format!(
        "\n  at line {line_no}, column {column} of the query:\n    {line}\n    {pad}^"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_an_offset_in_the_query() {
        let query = "\nSELECT a\n\tFORM b;";
        let statement = "SELECT * FROM (SELECT a\n\tFORM b) AS t LIMIT 0";
        let offset = statement.find("b)").unwrap();
        assert_eq!(
            locate(offset, statement, query).unwrap(),
            "\n  at line 3, column 7 of the query:\n    \tFORM b;\n    \t     ^"
        );
        // Outside the query (in the wrapper): no location.
        assert_eq!(locate(statement.len(), statement, query), None);
    }
}
