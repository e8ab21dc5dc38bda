//! Removing one item by its key: what a deleted source row (or the old key
//! of a row whose key changed) becomes when changes are followed.

use sql2ddb_core::{Item, KeyAttr};

use crate::client::Dynamo;
use crate::convert::to_sdk;
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::retry::retried;
use crate::writer::RetryPolicy;

/// Deletes the item of `table` whose key attributes (`keys`, partition key
/// first) are those of `key`, with `DeleteItem`, unconditionally: deleting
/// an item that is not there succeeds, so a replayed delete is harmless.
/// Throttling, 5xx and transport errors are retried with `policy`.
pub async fn delete_item(
    dynamo: &Dynamo,
    table: &str,
    keys: &[KeyAttr],
    key: &Item,
    policy: &RetryPolicy,
) -> Result<(), DynamoError> {
    let sdk_key: std::collections::HashMap<_, _> = keys
        .iter()
        .filter_map(|k| Some((k.name.clone(), to_sdk(key.get(&k.name)?))))
        .collect();
    if sdk_key.len() != keys.len() {
        return Err(DynamoError::Call {
            operation: "DeleteItem",
            table: table.to_string(),
            message: "the key to delete lacks a key attribute of the table".into(),
            failure: Some(Failure::ItemRejected),
        });
    }
    let req = dynamo
        .sdk()
        .delete_item()
        .table_name(table)
        .set_key(Some(sdk_key));
    retried(policy, "DeleteItem", || req.clone().send())
        .await
        .map(|_| ())
        .map_err(|e| e.into_error("DeleteItem", table))
}
