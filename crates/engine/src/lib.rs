//! The jobs of sql2ddb: `check` (validate a mapping, no IO) and `run`
//! (migrate: read pages → map → queue → write → count), with the run report.

#![warn(missing_docs)]

pub mod check;
pub mod checkpoint;
pub mod deep;
pub mod error;
pub mod export;
mod fleet;
pub mod follow;
pub mod get;
mod ids;
pub mod if_not_empty;
pub mod init;
mod outcome;
pub mod plan;
pub mod progress;
pub mod queues;
mod recorder;
pub mod rejects;
pub mod report;
pub mod resources;
pub mod run;
pub mod runs;
pub mod serverless;
pub mod settings;
pub mod sink;
pub mod stop;
pub mod target;
mod tasks;
pub mod timeline;
pub mod update;
pub mod verify;
pub mod worker;

pub use check::source::{check_source, SourceCheck};
pub use check::{check, CheckFailure, CheckSummary};
pub use error::{Cause, EngineError, ErrorKind, Unfollowable};
pub use ids::{new_run_id, RunId};
pub use if_not_empty::IfNotEmpty;
pub use progress::{EntityProgress, RunProgress};
pub use report::{
    EmbedReport, EntityReport, PacingReport, PointerReport, RunReport, RunStatus, SnapshotReport,
    WriterReport,
};
pub use resources::{job_context, Job, JobContext, ResourceOptions, Resources};
pub use run::{run, RunOptions, SnapshotMode};
pub use settings::{WriterFlags, WriterSettings};
pub use sql2ddb_aws::{AwsContext, SdkConfig};
/// The progress table of runs, as `status` and `verify` read it.
pub use sql2ddb_dynamo::progress::ProgressStore;
/// The kinds a [`Cause`] carries, as the crates that raise them tell.
pub use sql2ddb_dynamo::{ErrorKind as DynamoErrorKind, Failure as DynamoFailure};
pub use sql2ddb_queue::ErrorKind as QueueErrorKind;
pub use sql2ddb_source::SourceErrorKind;
pub use stop::StopSignal;
