//! Pointer writes: one conditional `UpdateItem` per candidate, no read first.
//!
//! The condition `attribute_not_exists(#v) OR #v < :new` (`>` for a min
//! pointer) makes the write monotonic and idempotent: racing writers and
//! replayed batches can only move the pointer forward, and a
//! `ConditionalCheckFailedException` is the expected answer when a value at
//! least as far along is already there.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use sql2ddb_core::{KeyAttr, PointerUpdate};

use crate::client::Dynamo;
use crate::convert::to_sdk;
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::retry::retried;
use crate::writer::RetryPolicy;

/// What became of one pointer write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerOutcome {
    /// The pointer now holds the candidate's value (it was missing or behind).
    Written,
    /// The pointer already holds this value or one further along: nothing changed.
    AlreadyNewer,
}

/// Writes one pointer candidate into `table`, whose key attributes are `keys`
/// (partition key first), with `UpdateItem`:
/// `SET #v = :new, #a0 = :a0, …` on condition
/// `attribute_not_exists(#v) OR #v < :new` (`>` for a min pointer).
///
/// Throttling, 5xx and transport errors are retried with `policy`'s capped
/// exponential backoff and full jitter; a conditional check failure is
/// [`PointerOutcome::AlreadyNewer`], never an error. Call it only once the
/// item the candidate points at has been written.
pub async fn write_pointer(
    dynamo: &Dynamo,
    table: &str,
    keys: &[KeyAttr],
    update: &PointerUpdate,
    policy: &RetryPolicy,
) -> Result<PointerOutcome, DynamoError> {
    let client = dynamo.sdk();
    let fail = |message, failure| pointer_error("UpdateItem", table, update, message, failure);
    let key = pointer_key(keys, update).map_err(|m| fail(m, None))?;
    let mut names = HashMap::from([("#v".to_string(), update.attribute.clone())]);
    let mut values = HashMap::from([(":new".to_string(), to_sdk(&update.value))]);
    let mut sets = vec!["#v = :new".to_string()];
    for (i, (name, value)) in update
        .attributes
        .iter()
        .filter(|(name, _)| **name != update.attribute)
        .enumerate()
    {
        names.insert(format!("#a{i}"), name.clone());
        values.insert(format!(":a{i}"), to_sdk(value));
        sets.push(format!("#a{i} = :a{i}"));
    }
    // The newest row whole: what it holds NULL is removed, not kept from
    // an older row.
    let mut removes = Vec::new();
    for (i, name) in update
        .cleared
        .iter()
        .filter(|n| **n != update.attribute && !update.attributes.contains_key(*n))
        .filter(|n| !keys.iter().any(|k| k.name == **n))
        .enumerate()
    {
        names.insert(format!("#r{i}"), name.clone());
        removes.push(format!("#r{i}"));
    }
    let op = if update.is_max { "<" } else { ">" };
    let condition = format!("attribute_not_exists(#v) OR #v {op} :new");
    let expression = match removes.is_empty() {
        true => format!("SET {}", sets.join(", ")),
        false => format!("SET {} REMOVE {}", sets.join(", "), removes.join(", ")),
    };
    let req = client
        .update_item()
        .table_name(table)
        .set_key(Some(key))
        .update_expression(&expression)
        .condition_expression(&condition)
        .set_expression_attribute_names(Some(names))
        .set_expression_attribute_values(Some(values));
    match retried(policy, "UpdateItem", || req.clone().send()).await {
        Ok(_) => Ok(PointerOutcome::Written),
        // A value at least as far along is there: another writer's, a
        // replayed batch's, or this very write's whose first answer was lost.
        Err(e)
            if e.error
                .as_service_error()
                .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
        {
            Ok(PointerOutcome::AlreadyNewer)
        }
        Err(e) => Err(fail(e.message(), Some(e.failure))),
    }
}

/// The error of a call on a pointer item, named after the pointer.
fn pointer_error(
    operation: &'static str,
    table: &str,
    update: &PointerUpdate,
    message: String,
    failure: Option<Failure>,
) -> DynamoError {
    DynamoError::Call {
        operation,
        table: table.to_string(),
        message: format!("pointer {}: {message}", update.name),
        failure,
    }
}

/// The pointer item's key: its partition key value, and its sort key value
/// exactly when the table has a sort key.
fn pointer_key(
    keys: &[KeyAttr],
    update: &PointerUpdate,
) -> Result<HashMap<String, AttributeValue>, String> {
    let (pk, sk) = match keys {
        [pk] => (pk, None),
        [pk, sk] => (pk, Some(sk)),
        _ => {
            return Err(format!(
                "a table has 1 or 2 key attributes, not {}",
                keys.len()
            ))
        }
    };
    let mut key = HashMap::from([(pk.name.clone(), to_sdk(&update.pk))]);
    match (sk, &update.sk) {
        (Some(attr), Some(v)) => {
            key.insert(attr.name.clone(), to_sdk(v));
        }
        (None, None) => {}
        (Some(attr), None) => {
            return Err(format!("the table's sort key {} has no value", attr.name))
        }
        (None, Some(_)) => {
            return Err("a sort key value is given, but the table has no sort key".into())
        }
    }
    Ok(key)
}

/// The value a pointer item holds now (strongly consistent read), for the
/// report; `None` when the item or its attribute does not exist.
pub async fn read_pointer(
    dynamo: &Dynamo,
    table: &str,
    keys: &[KeyAttr],
    update: &PointerUpdate,
) -> Result<Option<sql2ddb_core::AttrValue>, DynamoError> {
    let client = dynamo.sdk();
    let fail = |message, failure| pointer_error("GetItem", table, update, message, failure);
    let key = pointer_key(keys, update).map_err(|m| fail(m, None))?;
    let req = client
        .get_item()
        .table_name(table)
        .set_key(Some(key))
        .consistent_read(true);
    let out = retried(&RetryPolicy::default(), "GetItem", || req.clone().send())
        .await
        .map_err(|e| fail(e.message(), Some(e.failure)))?;
    Ok(out
        .item()
        .and_then(|item| item.get(&update.attribute))
        .map(crate::convert::from_sdk))
}
