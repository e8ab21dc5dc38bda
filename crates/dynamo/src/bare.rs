//! The bare SDK client, for what sql2ddb's own API deliberately does not
//! offer: tests and benchmarks that look at a table directly (put an item
//! as another writer would, read one back without going through the code
//! under test), and the benchmark's yardstick of plain SDK writes.
//!
//! Only built with the `bare-sdk` feature, which the workspace's test
//! support (`sql2ddb-testkit`) turns on; no shipped crate does. It keeps
//! this crate the only one that depends on the DynamoDB SDK.

use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};

pub use crate::convert::{from_sdk, item_from_sdk, item_to_sdk, to_sdk};
pub use aws_sdk_dynamodb::types::AttributeValue;
pub use aws_sdk_dynamodb::{config, error, operation, primitives, types, Client, Config};

/// A bare SDK client of the DynamoDB-compatible server at `url` (us-east-1,
/// placeholder credentials, no SDK retries, as sql2ddb's own client).
pub fn client(url: &str) -> Client {
    let config = Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(Credentials::new("local", "local", None, None, "testkit"))
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_attempt_timeout(Duration::from_secs(30))
                .build(),
        )
        .build();
    Client::from_conf(config)
}
