//! A loopback server for the calls' tests: it answers every request as it
//! is told and hands each request it received to the test.

#![allow(dead_code)] // each test binary uses its own part

pub use sql2ddb_testkit::support::{answering_server, Answer, Captured, Requests};

/// The answer with nothing unprocessed.
pub fn all_processed(_: &Captured) -> Answer {
    Answer::json(200, r#"{"UnprocessedItems":{}}"#)
}

/// A loopback server that answers every `BatchWriteItem` with nothing
/// unprocessed.
pub async fn capture_server() -> (String, Requests) {
    answering_server(all_processed).await
}

/// sql2ddb's handle of the DynamoDB-compatible server at `url` and a bare
/// SDK client of the same configuration, to look at tables directly.
pub fn both(url: &str) -> (sql2ddb_dynamo::Dynamo, aws_sdk_dynamodb::Client) {
    let config = aws_types::SdkConfig::builder()
        .region(aws_types::region::Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("local", "local", None, None, "test"),
            ),
        )
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .build();
    (
        sql2ddb_dynamo::Dynamo::from_config(&config),
        aws_sdk_dynamodb::Client::new(&config),
    )
}

/// Converts one value to the SDK's type.
pub fn to_sdk(v: &sql2ddb_core::AttrValue) -> aws_sdk_dynamodb::types::AttributeValue {
    match v {
        sql2ddb_core::AttrValue::S(s) => aws_sdk_dynamodb::types::AttributeValue::S(s.clone()),
        sql2ddb_core::AttrValue::N(n) => aws_sdk_dynamodb::types::AttributeValue::N(n.clone()),
        sql2ddb_core::AttrValue::B(b) => aws_sdk_dynamodb::types::AttributeValue::B(
            aws_sdk_dynamodb::primitives::Blob::new(b.clone()),
        ),
        sql2ddb_core::AttrValue::Bool(b) => aws_sdk_dynamodb::types::AttributeValue::Bool(*b),
        sql2ddb_core::AttrValue::Null => aws_sdk_dynamodb::types::AttributeValue::Null(true),
        sql2ddb_core::AttrValue::L(l) => {
            aws_sdk_dynamodb::types::AttributeValue::L(l.iter().map(to_sdk).collect())
        }
        sql2ddb_core::AttrValue::M(m) => aws_sdk_dynamodb::types::AttributeValue::M(
            m.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect(),
        ),
        sql2ddb_core::AttrValue::SS(s) => aws_sdk_dynamodb::types::AttributeValue::Ss(s.clone()),
        sql2ddb_core::AttrValue::NS(s) => aws_sdk_dynamodb::types::AttributeValue::Ns(s.clone()),
        sql2ddb_core::AttrValue::BS(s) => aws_sdk_dynamodb::types::AttributeValue::Bs(
            s.iter()
                .map(|b| aws_sdk_dynamodb::primitives::Blob::new(b.clone()))
                .collect(),
        ),
    }
}

/// Converts an item to the SDK's map.
pub fn item_to_sdk(
    item: &sql2ddb_core::Item,
) -> std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> {
    item.iter().map(|(k, v)| (k.clone(), to_sdk(v))).collect()
}
