//! Pointer items against the source: the value each pointer item must hold
//! is the max (or min) over every source row the mapping turns into an
//! item, taken from the pointer candidates of the pages as `run` makes them.
//! One entry per pointer item is held (a fixed key: one; a key template with
//! placeholders: one per rendered key).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value as Json};
use sql2ddb_core::pointer::compare_values;
use sql2ddb_core::{AttrValue, KeyAttr, PointerUpdate};
use sql2ddb_dynamo::{read_pointer, Client};

use super::canon::canonical;
use crate::error::EngineError;

/// One pointer item, checked.
#[derive(Debug, Clone, Serialize)]
pub struct PointerCheck {
    /// The pointer's name.
    pub name: String,
    /// The pointer item's key, as DynamoDB JSON.
    pub key: Json,
    /// The attribute holding the value.
    pub attribute: String,
    /// The max (or min) over the source.
    pub expected: Json,
    /// What the item holds (`None`: no item, or no such attribute).
    pub actual: Option<Json>,
    /// Whether the item holds the expected value.
    pub ok: bool,
}

/// The furthest candidate of each pointer item seen so far.
#[derive(Default)]
pub struct PointerMax {
    best: BTreeMap<String, PointerUpdate>,
}

impl PointerMax {
    /// Takes one candidate.
    pub fn offer(&mut self, update: PointerUpdate) {
        let at = format!(
            "{}\u{1f}{}\u{1f}{}",
            update.name,
            canonical(&update.pk).to_dynamo_json(),
            update
                .sk
                .as_ref()
                .map(|s| canonical(s).to_dynamo_json())
                .unwrap_or_default()
        );
        match self.best.get(&at) {
            Some(old) if !update.supersedes(old) => {}
            _ => {
                self.best.insert(at, update);
            }
        }
    }

    /// Reads each pointer item (strongly consistent) and compares its value.
    pub async fn check(
        self,
        client: &Client,
        table: &str,
        keys: &[KeyAttr],
    ) -> Result<Vec<PointerCheck>, EngineError> {
        let mut checks = Vec::with_capacity(self.best.len());
        for update in self.best.into_values() {
            let actual = read_pointer(client, table, keys, &update).await?;
            let ok = actual.as_ref().is_some_and(|a| same(a, &update.value));
            let mut key = Map::new();
            key.insert(keys[0].name.clone(), update.pk.to_dynamo_json());
            if let (Some(attr), Some(sk)) = (keys.get(1), &update.sk) {
                key.insert(attr.name.clone(), sk.to_dynamo_json());
            }
            checks.push(PointerCheck {
                name: update.name.clone(),
                key: Json::Object(key),
                attribute: update.attribute.clone(),
                expected: update.value.to_dynamo_json(),
                actual: actual.as_ref().map(AttrValue::to_dynamo_json),
                ok,
            });
        }
        Ok(checks)
    }
}

/// Equal as DynamoDB compares them.
fn same(a: &AttrValue, b: &AttrValue) -> bool {
    let (a, b) = (canonical(a), canonical(b));
    match compare_values(&a, &b) {
        Some(o) => o == Ordering::Equal,
        None => a == b,
    }
}
