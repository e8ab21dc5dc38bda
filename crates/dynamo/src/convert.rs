//! Our `Item` ↔ the SDK's `AttributeValue`.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use sql2ddb_core::{AttrValue, Item};

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
