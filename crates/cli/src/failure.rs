//! A job's error as its user sees it: the message (secrets masked), a hint
//! chosen by the error's kind — where to look, what to run — and the exit
//! code of its kind, in the tradition of sysexits.h. [`exit_code`] is the
//! one table of kind → code; every command goes through it.

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::update::{UpdateReport, UpdateStatus};
use sql2ddb_engine::{
    Cause, DynamoErrorKind as Dynamo, DynamoFailure as Failure, EngineError, ErrorKind,
    QueueErrorKind as Queue, RunReport, RunStatus, SourceErrorKind,
};

/// A job that failed for a reason of its own: rows not written, rows
/// missing, a run that cannot be resumed as asked, a worker that failed.
pub(crate) const EXIT_FAILURE: u8 = 1;

/// EX_UNAVAILABLE: the source, DynamoDB or the queue could not be reached,
/// or refused (a login, a statement, a call).
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;

/// EX_IOERR: a local file or directory could not be read or written.
pub(crate) const EXIT_IOERR: u8 = 74;

/// EX_TEMPFAIL: DynamoDB kept saying to slow down past the retry budget:
/// nothing is at fault, try later.
pub(crate) const EXIT_TEMPFAIL: u8 = 75;

/// EX_DATAERR: a follower met a change on the source that it cannot carry
/// (a statement-format event, a partial row image, a schema change, a
/// truncate) and stopped before it, its position kept.
pub(crate) const EXIT_DATAERR: u8 = 65;

/// EX_CONFIG: the mapping (or job file) is invalid, does not fit its source
/// or its table, or the settings do not fit together.
pub(crate) const EXIT_CONFIG: u8 = 78;

/// The exit code of an error of `cause`.
pub(crate) fn exit_code(cause: Cause) -> u8 {
    match cause {
        Cause::Mapping | Cause::Entity | Cause::Config => EXIT_CONFIG,
        Cause::Source(kind) => match kind {
            // A URL that is wrong, a table the source does not have, a
            // statement the source refuses as written (the mapping's query).
            SourceErrorKind::Config | SourceErrorKind::NotFound | SourceErrorKind::Refused => {
                EXIT_CONFIG
            }
            SourceErrorKind::Connect | SourceErrorKind::Query => EXIT_UNAVAILABLE,
            _ => EXIT_FAILURE,
        },
        Cause::Dynamo(kind, failure) => match (kind, failure) {
            // A table missing or other than the mapping says; an endpoint
            // that is not a URL, no region.
            (Dynamo::Table | Dynamo::Config, _) => EXIT_CONFIG,
            (_, Some(Failure::Throttled)) => EXIT_TEMPFAIL,
            _ => EXIT_UNAVAILABLE,
        },
        Cause::Queue(kind) => match kind {
            Queue::Call => EXIT_UNAVAILABLE,
            Queue::Config => EXIT_CONFIG,
            _ => EXIT_FAILURE,
        },
        Cause::Io => EXIT_IOERR,
        Cause::Unfollowable => EXIT_DATAERR,
        _ => EXIT_FAILURE,
    }
}

/// Prints `e` and the hint of its kind on stderr; the exit code of its kind.
pub(crate) fn fail_job(e: &EngineError) -> u8 {
    eprintln!("error: {}", redact_secrets(&e.to_string()));
    if let Some(hint) = hint_of(e.cause()) {
        eprintln!("hint: {hint}");
    }
    exit_code(e.cause())
}

/// Prints the error a job's report ended on, and the hint of its kind.
pub(crate) fn report_error(error: &str, cause: Option<Cause>) {
    eprintln!("error: {}", redact_secrets(error));
    if let Some(hint) = cause.and_then(hint_of) {
        eprintln!("hint: {hint}");
    }
}

/// What to do about an error of `cause`: a table that kept throttling has
/// a hint of its own, other errors their kind's.
pub(crate) fn hint_of(cause: Cause) -> Option<&'static str> {
    match cause {
        Cause::Dynamo(_, Some(Failure::Throttled)) => Some(THROTTLED_HINT),
        _ => hint(cause.kind()),
    }
}

/// What to do when the table kept throttling past the retry budget.
const THROTTLED_HINT: &str = "the table could not take the load for the whole retry budget: its write capacity (provisioned units, an on-demand table still warming up) or one partition key taking most writes (`sql2ddb plan MAPPING --capacity` names hot partitions); nothing was counted as rejected for it. Continue later, lower --concurrency or --max-wcu, or give a longer --retry-budget";

/// The exit code of a run (or an export) that ended with its report: its
/// status's, unless it failed on an error whose kind has a code of its own
/// (not for rows not written or not read: 1).
pub(crate) fn run_ended(r: &RunReport) -> u8 {
    match (r.status, r.cause) {
        (RunStatus::Failed, Some(cause)) => exit_code(cause),
        (status, _) => status.exit_code() as u8,
    }
}

/// The exit code of an update job that ended with its report, as
/// [`run_ended`].
pub(crate) fn update_ended(r: &UpdateReport) -> u8 {
    match (r.status, r.cause) {
        (UpdateStatus::Failed, Some(cause)) => exit_code(cause),
        (status, _) => status.exit_code() as u8,
    }
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
        ErrorKind::Io => "check that the path exists and that this user may read and write there",
        ErrorKind::Entity => {
            "`sql2ddb plan MAPPING` shows how each entity is read and what it makes of a sample"
        }
        ErrorKind::Resume => "`sql2ddb status MAPPING --run RUN_ID` shows what the run recorded",
        ErrorKind::Unfollowable => {
            "the follower's position is kept before that change: do what the error says, then `sql2ddb follow` again (docs/cdc.md, \"What stops the follower\")"
        }
        _ => return None,
    })
}
