//! `sql2ddb run`: read each entity page by page, map rows to items, queue the
//! batches, write them with a pool of writers, count everything.
//!
//! A run goes through named stages, each in a file of its own: open
//! ([`context`]: options, run directory, source, [`crate::Resources`],
//! progress store), [`prepare`] (entities, key rules, counts, segments, the
//! table), [`execute`] (read and write, or enqueue), and [`settle`] (the
//! report). The data flows one way: segment readers ([`read`]) map rows and
//! hand pages on ([`handoff`]) to the writers ([`drain`]), which write them
//! through the one sink ([`crate::sink`]) to the run's destination.
//!
//! The stages import what they share (the options, the prepared entities,
//! the context) from the files that define it; this file only ties the
//! stages together, and no stage imports it.

use std::sync::Arc;
use std::time::Instant;

use sql2ddb_mapping::Plan;

mod context;
mod counts;
mod drain;
pub(crate) mod embed;
mod ending;
mod execute;
pub(crate) mod expected;
mod handoff;
mod keys;
mod options;
mod prepare;
mod prepared;
mod read;
mod replay;
mod sample;
mod settle;
mod snapshot;
mod tracking;

pub use crate::ids::new_run_id;
pub use options::{RunOptions, SnapshotMode, DEFAULT_SOURCE_CONNECTIONS, REPORT_WAIT};
pub use sample::{EntitySample, Sampler};
// What `check --source` binds with: the same steps as a run's.
pub(crate) use prepare::{check_binding, check_key, describe, Described};
// What the verifier's reading side ([`expected`]) takes from the stages.
use context::{Context, Purpose};
use prepared::Prepared;

use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::report::RunReport;

/// Runs a migration.
///
/// Which failures are returned and which are reported: a run that cannot
/// start returns `Err`, with nothing written and no report — bad options,
/// an unreadable rejects file to replay, a source or DynamoDB endpoint that
/// cannot be reached, a resume that is refused, or a mapping that does not
/// fit its source (a column, key or template that does not fit, a key not
/// proven unique, templates that collapse rows). A failure of a service
/// once it answered — a source query, the table check or creation, the
/// queue — and any failure while reading and writing end the run with
/// status `failed`, the error in the report, and the report written.
pub async fn run(
    plan: &Plan,
    opts: &RunOptions,
    progress: Arc<RunProgress>,
) -> Result<RunReport, EngineError> {
    let started = Instant::now();
    let mut ctx = Context::open(plan, opts, Purpose::Load).await?;
    snapshot::announce(&ctx.report.snapshot, &progress);
    let ending = ending::Ending::new(opts.stop.clone(), opts.shutdown_grace);
    let prepared = match ctx.prepare(plan, opts, &progress).await {
        Ok((prepared, checkpoints)) => {
            if let Err(e) = ctx
                .execute(plan, opts, &prepared, checkpoints, &ending)
                .await
            {
                ctx.fail(&e);
            }
            prepared
        }
        Err(e) if is_reported(&e) => {
            ctx.fail(&e);
            Vec::new()
        }
        Err(e) => {
            ctx.source.close().await;
            ctx.resources.close().await;
            return Err(e);
        }
    };
    ctx.settle(opts, &prepared, started).await
}

/// Whether an error while preparing ends in the report (a service failed)
/// rather than being returned (the run could not start as asked).
fn is_reported(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Source(_) | EngineError::Dynamo(_) | EngineError::Queue(_)
    )
}

#[cfg(test)]
mod tests {
    //! The rule of [`run`] for failures, without servers: the SQLite example
    //! as the source, and a DynamoDB endpoint nobody listens on.

    use super::*;
    use crate::error::ErrorKind;
    use crate::report::RunStatus;

    fn plan(template: &str) -> Plan {
        let text = format!(
            "version = 1\n[source]\nurl = \"sqlite://../../examples/shop.db\"\n[target]\ntable = \"shop_t\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"customer\"\nfrom = \"customers\"\npk = \"{template}\"\n"
        );
        Plan::parse(&text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    fn options(runs: &std::path::Path) -> RunOptions {
        RunOptions {
            runs_dir: runs.to_path_buf(),
            // Nothing listens on port 1: every DynamoDB call fails at once.
            endpoint: Some("http://127.0.0.1:1".into()),
            ..RunOptions::default()
        }
    }

    #[tokio::test]
    async fn a_mapping_that_does_not_fit_its_source_is_returned() {
        let runs = tempfile::tempdir().unwrap();
        let err = run(
            &plan("C#{no_such_column}"),
            &options(runs.path()),
            RunProgress::new(),
        )
        .await
        .expect_err("the template names a column the table lacks");
        assert_eq!(err.kind(), ErrorKind::Mapping, "{err}");
        assert!(err.to_string().contains("no_such_column"), "{err}");
    }

    #[tokio::test]
    async fn a_service_failure_ends_in_the_report() {
        let runs = tempfile::tempdir().unwrap();
        let report = run(
            &plan("C#{customer_id}"),
            &options(runs.path()),
            RunProgress::new(),
        )
        .await
        .expect("a DynamoDB failure is reported, not returned");
        assert_eq!(report.status, RunStatus::Failed);
        let error = report.error.clone().expect("the error is in the report");
        assert!(error.starts_with("DynamoDB:"), "{error}");
        // Its kind too: nobody listens, so the call failed on the way.
        assert_eq!(
            report.cause,
            Some(crate::Cause::Dynamo(
                sql2ddb_dynamo::ErrorKind::Call,
                Some(sql2ddb_dynamo::Failure::Transient)
            )),
            "{error}"
        );
        let saved = std::path::Path::new(&report.run_dir).join("report.json");
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
        assert_eq!(saved["status"], "failed");
    }

    #[tokio::test]
    async fn a_run_handed_an_update_jobs_destination_is_refused_before_it_starts() {
        let runs = tempfile::tempdir().unwrap();
        let opts = RunOptions {
            destination: crate::sink::Destination::Updates,
            ..options(runs.path())
        };
        let err = run(&plan("C#{customer_id}"), &opts, RunProgress::new())
            .await
            .expect_err("a run's pages are never an update job's");
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert!(err.to_string().contains("never to an update job"), "{err}");
        // Refused before anything was made: no run directory.
        assert_eq!(std::fs::read_dir(runs.path()).unwrap().count(), 0);
    }
}
