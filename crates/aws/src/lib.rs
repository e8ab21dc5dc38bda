//! What the DynamoDB, SQS and S3 clients of sql2ddb share, without their
//! SDKs: the one AWS configuration of a process ([`AwsContext`]) from which
//! each service's configuration is made with the one region rule, the
//! readable text of a failed call ([`message::sdk_message`]), and the retry
//! parameters of a loop that owns its retries ([`RetryPolicy`]).

#![warn(missing_docs)]

pub mod config;
pub mod message;
pub mod retry;

pub use aws_config::SdkConfig;
pub use config::{AwsContext, MissingRegion, SdkRetry, ServiceOptions, EMULATOR_REGION};
pub use message::{sdk_message, BODY_EXCERPT_CHARS};
pub use retry::{Refusals, RetryPolicy, Spent, DEFAULT_RETRY_BUDGET};
