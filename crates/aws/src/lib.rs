//! What the DynamoDB, SQS and S3 clients of sql2ddb share, without their
//! SDKs: the one AWS configuration of a process ([`AwsContext`]) from which
//! each service's configuration is made with the one region rule, the
//! readable text of a failed call ([`message::sdk_message`]), and the one
//! retry engine ([`Retrier`], with its parameters, [`RetryPolicy`]).
//!
//! Who retries what: a call has one owner of its retries, never two stacked.
//! DynamoDB's client has the SDK's retries off and every call goes through
//! [`Retrier::run`]. SQS's client keeps the SDK's standard retry for every
//! call but `ReceiveMessage`, whose SDK retry is off for the call and which
//! the engine retries; the engine also re-sends the entries a successful
//! `SendMessageBatch` reports failed (a retry of part of a call). The wait
//! for a replication slot's read-ahead copy goes through it too. S3 keeps
//! the SDK's standard retry alone.

#![warn(missing_docs)]

pub mod config;
pub mod message;
pub mod retry;

pub use aws_config::SdkConfig;
pub use config::{AwsContext, MissingRegion, SdkRetry, ServiceOptions, EMULATOR_REGION};
pub use message::{sdk_message, BODY_EXCERPT_CHARS};
pub use retry::{
    Attempt, Clock, GaveUp, Jitter, Refusals, Retrier, RetryPolicy, SeededJitter, Spent, Tally,
    ThreadJitter, TokioClock, DEFAULT_RETRY_BUDGET,
};
