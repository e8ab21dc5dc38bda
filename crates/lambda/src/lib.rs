//! sql2ddb on AWS Lambda: three handlers, each a thin adapter from a Lambda
//! event to an engine job, chosen by `SQL2DDB_HANDLER`.
//!
//! - [`reader`]: reads and enqueues pages like `run --queue` until the time
//!   left is short, then re-invokes its own function with the run's id;
//! - [`worker`]: fed by the work queue; writes each message's batch through
//!   the engine's one write path and reports the failed messages only;
//! - [`finisher`]: fed by the progress table's stream; writes a run's
//!   `DONE` record once its sums add up, and announces it once on SNS.
//!
//! Settings come from the environment ([`Settings::from_env`]); the source
//! URL from an SSM parameter, never from a plain variable; the mapping may
//! be an object in S3 ([`mapping::load`]).

#![warn(missing_docs)]

pub mod finisher;
pub mod mapping;
pub mod reader;
pub mod settings;
pub mod worker;

pub use settings::{HandlerKind, Settings};

/// The error type of the handlers, as the Lambda runtime takes it.
pub type Error = lambda_runtime::Error;

/// A Lambda context's deadline (milliseconds since the Unix epoch) as an
/// instant of this process's clock.
pub fn deadline_of(context: &lambda_runtime::Context) -> std::time::Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let left = std::time::Duration::from_millis(context.deadline.saturating_sub(now_ms));
    std::time::Instant::now() + left
}
