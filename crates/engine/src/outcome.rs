//! What became of one page once a destination took it: the figures every
//! writer reports and every record and report adds up.

/// What became of one batch.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// Rows whose item is in the table.
    pub written: u64,
    /// Rows DynamoDB refused (validation): rejected.
    pub rejected: u64,
    /// Rows still unwritten when the retry budget ran out.
    pub failed: u64,
    /// Bytes written, by DynamoDB's size rules.
    pub bytes: u64,
    /// Write units billed.
    pub write_units: u64,
    /// Calls retried.
    pub retries: u64,
    /// Of `written`, keys of an update batch left alone because the item no
    /// longer met the job's `where` when it was written.
    pub skipped: u64,
}
