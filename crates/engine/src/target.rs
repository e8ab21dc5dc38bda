//! What a fresh load does with a destination that already holds data: the
//! table of `run`, the files of `export` (AWS DMS calls it the target
//! preparation mode).
//!
//! Writing into a table that holds items rewrites every item of the same
//! key without a word: a second `run` undoes what an `update` changed since
//! the first. So a run that starts a fresh load looks first, and a table
//! with items is refused unless the options say what to do with them
//! ([`IfNotEmpty`], resolved once and handed to every path that starts a
//! load: `run`, `run --follow`, `run --queue`, the serverless reader). A
//! resumed run and a replay of rejects write into their own run's table
//! and are not asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sql2ddb_core::shown::count;
use sql2ddb_dynamo::{count_items, empty_table, Dynamo, Emptying, ItemCount};
use sql2ddb_mapping::Plan;

use crate::error::EngineError;
use crate::if_not_empty::{IfNotEmpty, NotEmpty};
use crate::progress::RunProgress;
use crate::resources::{Job, Resources};
use crate::run::RunOptions;

/// What a run does with its table before its first write, decided once
/// from the options and what the table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TablePlan {
    /// Write into it as it is: absent or empty, the run's own (a resume, a
    /// replay of rejects), a dry run, or `append`.
    AsItIs,
    /// Delete its items first (`truncate`): it held `held`.
    Empty {
        /// What the count found.
        held: ItemCount,
    },
}

/// Whether the options start a fresh load into the table, the one kind of
/// run that is asked about what the table holds.
fn fresh_load(opts: &RunOptions) -> bool {
    !(opts.dry_run || opts.resume || opts.only_rejects.is_some())
}

/// Decides what the run does with its table: counts its items (a bounded
/// count) unless the options make that moot, and refuses a table that
/// holds items when the options say `fail`.
pub(crate) async fn decide(
    plan: &Plan,
    opts: &RunOptions,
    client: &Dynamo,
) -> Result<TablePlan, EngineError> {
    if !fresh_load(opts) || opts.if_not_empty == IfNotEmpty::Append {
        return Ok(TablePlan::AsItIs);
    }
    let table = &plan.target.table;
    let retry = opts.writer_settings(plan).retry;
    let held = match count_items(client, table, &retry).await? {
        Some(held) if !held.is_empty() => held,
        _ => return Ok(TablePlan::AsItIs),
    };
    match opts.if_not_empty {
        IfNotEmpty::Truncate => Ok(TablePlan::Empty { held }),
        _ => Err(EngineError::NotEmpty(Box::new(NotEmpty {
            target: format!("table {table}"),
            held: held.describe(),
            append: "write into it as it is (items of the same key are replaced, the others kept)",
            truncate:
                "delete its items first (the table, its indexes and settings are kept), then load",
        }))),
    }
}

/// What `run` checks before it starts, for a caller that must act before
/// the run (create a replication slot for `run --follow`): a table that
/// holds items is refused here as the run would refuse it.
pub async fn check_table(plan: &Plan, opts: &RunOptions) -> Result<(), EngineError> {
    let endpoint = opts.endpoint.as_deref().or(plan.target.endpoint.as_deref());
    // The embedded endpoint's table is a new run's own, so empty.
    if endpoint == Some("local") || !fresh_load(opts) {
        return Ok(());
    }
    let resources = Resources::open(Some(plan), &opts.resource_options(), Job::Status).await?;
    let decided = decide(plan, opts, resources.client()).await;
    resources.close().await;
    decided.map(|_| ())
}

/// How often the emptying of a table is announced.
const EMPTYING_NOTE_EVERY: Duration = Duration::from_secs(2);

/// Deletes every item of the run's table (`truncate`), announcing its
/// progress; returns how many items were deleted.
pub(crate) async fn empty(
    plan: &Plan,
    opts: &RunOptions,
    client: &Dynamo,
    held: ItemCount,
    progress: &RunProgress,
) -> Result<u64, EngineError> {
    let table = &plan.target.table;
    let settings = opts.writer_settings(plan);
    let keys = plan.key_attrs();
    let limiter = settings
        .max_wcu
        .map(sql2ddb_dynamo::WriteCapacityLimiter::new);
    progress.note(format!(
        "table {table} holds {}: deleting them first (--if-not-empty truncate)",
        held.describe()
    ));
    let deleted = AtomicU64::new(0);
    let emptying = empty_table(
        client,
        Emptying {
            table,
            keys: &keys,
            segments: settings.concurrency as u32,
            retry: settings.retry,
            limiter: limiter.as_ref(),
            units_per_delete: 1 + plan.target.gsis.len() as u64,
        },
        &deleted,
    );
    tokio::pin!(emptying);
    let done = loop {
        tokio::select! {
            done = &mut emptying => break done?,
            _ = tokio::time::sleep(EMPTYING_NOTE_EVERY) => progress.note(format!(
                "table {table}: {} deleted",
                count(deleted.load(Ordering::Relaxed), "item", "items")
            )),
        }
    };
    progress.note(format!(
        "table {table} emptied: {} deleted; loading",
        count(done, "item", "items")
    ));
    Ok(done)
}
