//! Table admin: make sure the target table exists with the mapping's keys.

use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
};
use aws_sdk_dynamodb::Client;
use sql2ddb_core::KeyAttr;

use crate::error::{sdk_message, DynamoError};

/// How long to wait for a new table to become ACTIVE.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(300);

fn scalar(kind: &str) -> ScalarAttributeType {
    match kind {
        "N" => ScalarAttributeType::N,
        "B" => ScalarAttributeType::B,
        _ => ScalarAttributeType::S,
    }
}

fn describe_keys(keys: &[KeyAttr]) -> String {
    keys.iter()
        .map(|k| format!("{} ({})", k.name, k.kind))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `table` exists with exactly `keys` (partition key first) as
/// its key schema; creates it (on-demand billing) when missing and `create`
/// is set, and waits until it is ACTIVE. Returns whether it was created.
pub async fn ensure_table(
    client: &Client,
    table: &str,
    keys: &[KeyAttr],
    create: bool,
) -> Result<bool, DynamoError> {
    let call_err = |operation: &'static str, message: String| DynamoError::Call {
        operation,
        table: table.to_string(),
        message,
    };
    match client.describe_table().table_name(table).send().await {
        Ok(out) => {
            let desc = out
                .table
                .unwrap_or_else(|| aws_sdk_dynamodb::types::TableDescription::builder().build());
            let types: std::collections::HashMap<&str, &str> = desc
                .attribute_definitions()
                .iter()
                .map(|d| (d.attribute_name(), d.attribute_type().as_str()))
                .collect();
            let found: Vec<KeyAttr> = desc
                .key_schema()
                .iter()
                .map(|k| KeyAttr {
                    name: k.attribute_name().to_string(),
                    kind: types
                        .get(k.attribute_name())
                        .copied()
                        .unwrap_or("?")
                        .to_string(),
                })
                .collect();
            // The key schema lists HASH first, then RANGE.
            if found != keys {
                return Err(DynamoError::KeySchemaMismatch {
                    table: table.to_string(),
                    expected: describe_keys(keys),
                    found: describe_keys(&found),
                });
            }
            Ok(false)
        }
        Err(e) => {
            let missing = e
                .as_service_error()
                .map(|s| s.is_resource_not_found_exception())
                .unwrap_or(false);
            if !missing {
                return Err(call_err("DescribeTable", sdk_message(&e)));
            }
            if !create {
                return Err(DynamoError::TableMissing {
                    table: table.to_string(),
                });
            }
            let mut req = client
                .create_table()
                .table_name(table)
                .billing_mode(BillingMode::PayPerRequest);
            for (i, k) in keys.iter().enumerate() {
                let key_type = if i == 0 {
                    KeyType::Hash
                } else {
                    KeyType::Range
                };
                req = req
                    .key_schema(
                        KeySchemaElement::builder()
                            .attribute_name(&k.name)
                            .key_type(key_type)
                            .build()
                            .expect("name and type are set"),
                    )
                    .attribute_definitions(
                        AttributeDefinition::builder()
                            .attribute_name(&k.name)
                            .attribute_type(scalar(&k.kind))
                            .build()
                            .expect("name and type are set"),
                    );
            }
            req.send()
                .await
                .map_err(|e| call_err("CreateTable", sdk_message(&e)))?;
            wait_active(client, table).await?;
            Ok(true)
        }
    }
}

async fn wait_active(client: &Client, table: &str) -> Result<(), DynamoError> {
    let start = tokio::time::Instant::now();
    loop {
        let out = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| DynamoError::Call {
                operation: "DescribeTable",
                table: table.to_string(),
                message: sdk_message(&e),
            })?;
        if out.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return Ok(());
        }
        if start.elapsed() > CREATE_TIMEOUT {
            return Err(DynamoError::Call {
                operation: "CreateTable",
                table: table.to_string(),
                message: format!("table not ACTIVE after {CREATE_TIMEOUT:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
