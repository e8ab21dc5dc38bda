//! A job's error as its user sees it: the message (secrets masked), then a
//! hint chosen by the error's kind — where to look, what to run. Every
//! kind exits 1, the code each command documents for a failed job.

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{EngineError, ErrorKind};

/// Prints `e` and the hint of its kind on stderr; the exit code.
pub(crate) fn fail_job(e: &EngineError) -> u8 {
    eprintln!("error: {}", redact_secrets(&e.to_string()));
    if let Some(hint) = hint(e.kind()) {
        eprintln!("hint: {hint}");
    }
    1
}

/// What to do about an error of `kind`, when there is more to say than
/// the message.
pub(crate) fn hint(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::Mapping => {
            "the mapping's file, line and field are named above; `sql2ddb check MAPPING` lists every problem without connecting"
        }
        ErrorKind::Source => {
            "check the source URL (--source, or the mapping's [source] url), that the database is up and reachable from here, and the user's privileges"
        }
        ErrorKind::Dynamo => {
            "check --endpoint (or the mapping's), the region (--region or AWS_REGION) and the credentials; SQL2DDB_LOG=debug shows each call"
        }
        ErrorKind::Queue => {
            "check --queue and --sqs-endpoint, and that the queue exists (`sql2ddb queue create NAME`)"
        }
        ErrorKind::Io => "check that the path exists and that this user may write there",
        ErrorKind::Entity => {
            "`sql2ddb plan MAPPING` shows how each entity is read and what it makes of a sample"
        }
        ErrorKind::Resume => "`sql2ddb status MAPPING --run RUN_ID` shows what the run recorded",
        _ => return None,
    })
}
