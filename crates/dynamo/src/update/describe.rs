//! DescribeTable, as an update job needs it: the key attributes, the
//! secondary indexes with their keys and projections, the table's size.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{KeySchemaElement, Projection};
use sql2ddb_core::KeyAttr;

use super::{retrying, Attempt, Gate};
use crate::client::Dynamo;
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::writer::RetryPolicy;

/// The key attributes of a table and its indexes, from DescribeTable.
#[derive(Debug, Clone, Default)]
pub struct TableDescription {
    /// Key attributes, partition key first (types from the attribute definitions).
    pub keys: Vec<KeyAttr>,
    /// Secondary indexes (global and local).
    pub indexes: Vec<IndexDescription>,
    /// Items, as DynamoDB last computed it (about every six hours on AWS).
    pub item_count: u64,
    /// Bytes, likewise.
    pub size_bytes: u64,
}

/// One secondary index.
#[derive(Debug, Clone)]
pub struct IndexDescription {
    /// Name.
    pub name: String,
    /// Key attribute names, partition key first.
    pub keys: Vec<String>,
    /// `None`: every attribute; `Some(list)`: the keys and these only.
    pub projected: Option<Vec<String>>,
}

/// Describes `table`: keys, indexes, size. Throttling, 5xx and dropped
/// connections are retried with `policy`, as every call of the module.
pub async fn describe(
    dynamo: &Dynamo,
    table: &str,
    policy: &RetryPolicy,
) -> Result<TableDescription, DynamoError> {
    let client = dynamo.sdk();
    let (mut retries, mut throttled) = (0, 0);
    let call = || async {
        client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| match e.as_service_error() {
                Some(s) if s.is_resource_not_found_exception() => {
                    Attempt::Failed(Failure::TableFault, "the table does not exist".into())
                }
                _ => Attempt::of(e),
            })
    };
    let op = "DescribeTable";
    let (r, t) = (&mut retries, &mut throttled);
    let out = retrying(policy, Gate::default(), table, op, r, t, call).await?;
    Ok(match out.table {
        Some(desc) => description(&desc),
        None => TableDescription::default(),
    })
}

/// What a job needs of DescribeTable's answer: the table's keys, its
/// indexes' keys and projections, its size.
fn description(desc: &aws_sdk_dynamodb::types::TableDescription) -> TableDescription {
    let types: HashMap<&str, &str> = desc
        .attribute_definitions()
        .iter()
        .map(|d| (d.attribute_name(), d.attribute_type().as_str()))
        .collect();
    let key_names = |schema: &[KeySchemaElement]| {
        let mut keys: Vec<(bool, String)> = schema
            .iter()
            .map(|k| {
                (
                    k.key_type().as_str() != "HASH",
                    k.attribute_name().to_string(),
                )
            })
            .collect();
        keys.sort_by_key(|(range, _)| *range);
        keys.into_iter().map(|(_, k)| k).collect::<Vec<_>>()
    };
    let keys = key_names(desc.key_schema())
        .into_iter()
        .filter_map(|name| {
            let kind = types.get(name.as_str())?.parse().ok()?;
            Some(KeyAttr { name, kind })
        })
        .collect();
    let projected =
        |p: Option<&Projection>| match p.and_then(|p| p.projection_type()).map(|t| t.as_str()) {
            Some("KEYS_ONLY") => Some(Vec::new()),
            Some("INCLUDE") => p.map(|p| p.non_key_attributes().to_vec()),
            _ => None,
        };
    let mut indexes: Vec<IndexDescription> = desc
        .global_secondary_indexes()
        .iter()
        .map(|g| IndexDescription {
            name: g.index_name().unwrap_or_default().to_string(),
            keys: key_names(g.key_schema()),
            projected: projected(g.projection()),
        })
        .collect();
    indexes.extend(
        desc.local_secondary_indexes()
            .iter()
            .map(|l| IndexDescription {
                name: l.index_name().unwrap_or_default().to_string(),
                keys: key_names(l.key_schema()),
                projected: projected(l.projection()),
            }),
    );
    TableDescription {
        keys,
        indexes,
        item_count: desc.item_count().unwrap_or(0).max(0) as u64,
        size_bytes: desc.table_size_bytes().unwrap_or(0).max(0) as u64,
    }
}
