//! A job's error as its user sees it: the message (secrets masked), a hint
//! chosen by the error's kind — where to look, what to run — and the exit
//! code of its kind, in the tradition of sysexits.h. [`exit_code`] is the
//! one table of kind → code; every command goes through it.

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::update::{UpdateReport, UpdateStatus};
use sql2ddb_engine::{
    Cause, DynamoErrorKind as Dynamo, DynamoFailure as Failure, EngineError,
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

/// A run that finished with rows rejected (see the rejects file).
pub(crate) const EXIT_REJECTED: u8 = 2;

/// A job stopped by Ctrl-C or SIGTERM, as a shell reports a process
/// stopped by Ctrl-C.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

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
    if let Some(hint) = hint(e.cause()) {
        eprintln!("hint: {hint}");
    }
    exit_code(e.cause())
}

/// Prints the error a job's report ended on, and the hint of its kind.
pub(crate) fn report_error(error: &str, cause: Option<Cause>) {
    eprintln!("error: {}", redact_secrets(error));
    if let Some(hint) = cause.and_then(hint) {
        eprintln!("hint: {hint}");
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
        (status, _) => run_status_code(status),
    }
}

/// The exit code of a run's status: 0, 2 (rows rejected), 1, 130
/// (interrupted), or 75 (throttled: EX_TEMPFAIL, try again later).
pub(crate) fn run_status_code(status: RunStatus) -> u8 {
    match status {
        RunStatus::Ok | RunStatus::Enqueued => 0,
        RunStatus::Rejected => EXIT_REJECTED,
        RunStatus::Failed => EXIT_FAILURE,
        RunStatus::Interrupted => EXIT_INTERRUPTED,
        RunStatus::Throttled => EXIT_TEMPFAIL,
    }
}

/// The exit code of an update job that ended with its report, as
/// [`run_ended`].
pub(crate) fn update_ended(r: &UpdateReport) -> u8 {
    match (r.status, r.cause) {
        (UpdateStatus::Failed, Some(cause)) => exit_code(cause),
        (status, _) => update_status_code(status),
    }
}

/// The exit code of an update job's status: 0, 1, 130, or 75 when it
/// stopped at `--max-seconds` or on throttling (EX_TEMPFAIL: `--resume`
/// continues it).
pub(crate) fn update_status_code(status: UpdateStatus) -> u8 {
    match status {
        UpdateStatus::Ok => 0,
        UpdateStatus::Failed => EXIT_FAILURE,
        UpdateStatus::Interrupted => EXIT_INTERRUPTED,
        UpdateStatus::TimeUp | UpdateStatus::Throttled => EXIT_TEMPFAIL,
    }
}

/// What to do about an error of `cause`, when there is more to say than
/// the message: chosen by what went wrong (a table the source lacks, a
/// server that cannot be reached, a throttled table), not only by where.
pub(crate) fn hint(cause: Cause) -> Option<&'static str> {
    Some(match cause {
        Cause::Mapping => {
            "the mapping's file, line and field are named above; `sql2ddb check MAPPING` lists every problem without connecting"
        }
        Cause::Source(SourceErrorKind::NotFound) => {
            "the mapping names a table the source does not have (as its user sees it): fix its `from` (with its schema), or `sql2ddb init --source URL` to list the tables"
        }
        Cause::Source(SourceErrorKind::Refused) => {
            "the source refused the statement as written: fix the mapping's query (its SQL, the columns it names) or grant the user what it lacks"
        }
        Cause::Source(SourceErrorKind::Config) => {
            "check the source URL (--source, or the mapping's [source] url): its scheme, host, port, database and options"
        }
        Cause::Source(SourceErrorKind::Decode) => {
            "a value could not be read as its column's type: give the column a setting in [entity.attributes] (docs/types.md), or `sql2ddb plan MAPPING` to see a sample"
        }
        Cause::Source(SourceErrorKind::Unfollowable) | Cause::Unfollowable => {
            "the follower's position is kept before that change: do what the error says, then `sql2ddb follow` again (docs/cdc.md, \"What stops the follower\")"
        }
        Cause::Source(_) => {
            "check the source URL (--source, or the mapping's [source] url), that the database is up and reachable from here, and the user's privileges"
        }
        Cause::Dynamo(Dynamo::Table, _) => {
            "the table differs from the mapping (or is missing): compare its keys and indexes with [target] (`aws dynamodb describe-table`), or set `create = true` to have it created"
        }
        Cause::Dynamo(Dynamo::Config, _) => {
            "check --endpoint (or the mapping's [target] endpoint) and the region (--region or AWS_REGION)"
        }
        Cause::Dynamo(_, Some(Failure::Throttled)) => THROTTLED_HINT,
        Cause::Dynamo(_, Some(Failure::TableFault)) => {
            "the table cannot be written: check the credentials and that they may write this table (dynamodb:BatchWriteItem, UpdateItem); SQL2DDB_LOG=debug shows each call"
        }
        Cause::Dynamo(..) => {
            "check --endpoint (or the mapping's), the region (--region or AWS_REGION) and the credentials; SQL2DDB_LOG=debug shows each call"
        }
        Cause::Queue(Queue::Config) => {
            "check --queue and --sqs-endpoint, and that the queue exists (`sql2ddb queue create NAME`)"
        }
        Cause::Queue(_) => {
            "check that the queue is reachable from here (--sqs-endpoint, the region, the credentials)"
        }
        Cause::Io => "check that the path exists and that this user may read and write there",
        Cause::Entity => {
            "`sql2ddb plan MAPPING` shows how each entity is read and what it makes of a sample"
        }
        Cause::Resume => "`sql2ddb status MAPPING --run RUN_ID` shows what the run recorded",
        _ => return None,
    })
}
