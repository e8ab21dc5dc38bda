//! What the DynamoDB and SQS clients of sql2ddb share, without either SDK:
//! loading the AWS configuration ([`config::load`]) with the one region
//! rule, the readable text of a failed call ([`message::sdk_message`]), and
//! the retry parameters of a loop that owns its retries ([`RetryPolicy`]).

#![warn(missing_docs)]

pub mod config;
pub mod message;
pub mod retry;

pub use config::{load, ConfigOptions, MissingRegion, SdkRetry, EMULATOR_REGION};
pub use message::{sdk_message, BODY_EXCERPT_CHARS};
pub use retry::RetryPolicy;
