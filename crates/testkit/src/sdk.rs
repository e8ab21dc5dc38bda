//! The bare DynamoDB SDK, for what sql2ddb's own API deliberately does not
//! offer: tests and benchmarks that look at a table directly (put an item
//! as another writer would, read one back), and the yardstick of
//! [`crate::sdk_load`]. sql2ddb itself reaches DynamoDB only through
//! `sql2ddb-dynamo`.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::primitives::Blob;
pub use aws_sdk_dynamodb::types::AttributeValue;
pub use aws_sdk_dynamodb::{types, Client};
use sql2ddb_core::{AttrValue, Item};

/// A bare SDK client of the DynamoDB-compatible server at `url` (us-east-1,
/// placeholder credentials, no SDK retries, as sql2ddb's own client).
pub fn client(url: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
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

/// Converts one value to the SDK's type.
pub fn to_sdk(v: &AttrValue) -> AttributeValue {
    match v {
        AttrValue::S(s) => AttributeValue::S(s.clone()),
        AttrValue::N(n) => AttributeValue::N(n.clone()),
        AttrValue::B(b) => AttributeValue::B(Blob::new(b.clone())),
        AttrValue::Bool(b) => AttributeValue::Bool(*b),
        AttrValue::Null => AttributeValue::Null(true),
        AttrValue::L(l) => AttributeValue::L(l.iter().map(to_sdk).collect()),
        AttrValue::M(m) => {
            AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect())
        }
        AttrValue::SS(s) => AttributeValue::Ss(s.clone()),
        AttrValue::NS(s) => AttributeValue::Ns(s.clone()),
        AttrValue::BS(s) => AttributeValue::Bs(s.iter().map(|b| Blob::new(b.clone())).collect()),
    }
}

/// Converts an item to the SDK's map.
pub fn item_to_sdk(item: &Item) -> HashMap<String, AttributeValue> {
    item.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect()
}

/// Converts an SDK value back (unknown future variants become `Null`).
pub fn from_sdk(v: &AttributeValue) -> AttrValue {
    match v {
        AttributeValue::S(s) => AttrValue::S(s.clone()),
        AttributeValue::N(n) => AttrValue::N(n.clone()),
        AttributeValue::B(b) => AttrValue::B(b.as_ref().to_vec()),
        AttributeValue::Bool(b) => AttrValue::Bool(*b),
        AttributeValue::L(l) => AttrValue::L(l.iter().map(from_sdk).collect()),
        AttributeValue::M(m) => {
            AttrValue::M(m.iter().map(|(k, v)| (k.clone(), from_sdk(v))).collect())
        }
        AttributeValue::Ss(s) => AttrValue::SS(s.clone()),
        AttributeValue::Ns(s) => AttrValue::NS(s.clone()),
        AttributeValue::Bs(s) => AttrValue::BS(s.iter().map(|b| b.as_ref().to_vec()).collect()),
        _ => AttrValue::Null,
    }
}

/// Converts an SDK item back to ours.
pub fn item_from_sdk(item: &HashMap<String, AttributeValue>) -> Item {
    item.iter().map(|(k, v)| (k.clone(), from_sdk(v))).collect()
}
