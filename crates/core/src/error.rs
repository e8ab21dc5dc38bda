//! Text that does not read as what it claims to be.

/// An encoded item that is not DynamoDB JSON, a queue message's item text
/// that is not one JSON object, typed JSON that does not read back as a
/// column value: the message says what was expected and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FormatError(pub String);

impl From<FormatError> for String {
    fn from(e: FormatError) -> String {
        e.0
    }
}
