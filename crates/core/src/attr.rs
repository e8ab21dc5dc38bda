//! DynamoDB attribute values and items, and their DynamoDB-JSON encoding.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{json, Value as Json};

/// A DynamoDB item: attribute name → value.
pub type Item = BTreeMap<String, AttrValue>;

/// What the checks of an item read of it: a value by name, and every
/// attribute with its name. An [`Item`] is one; so is an item built in an
/// entity's layout, whose names are shared by every row (the mapping's fast
/// path), which is checked by the same code without becoming a map.
pub trait Attrs {
    /// The value of attribute `name`, if the item has it.
    fn attr(&self, name: &str) -> Option<&AttrValue>;
    /// Every attribute of the item, with its name.
    fn each(&self) -> impl Iterator<Item = (&str, &AttrValue)>;
}

impl Attrs for Item {
    fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.get(name)
    }

    fn each(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// A DynamoDB attribute value. Numbers are kept as their decimal text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AttrValue {
    /// String.
    S(String),
    /// Number, as normalised decimal text.
    N(String),
    /// Binary.
    B(Vec<u8>),
    /// Boolean.
    Bool(bool),
    /// Null.
    Null,
    /// List.
    L(Vec<AttrValue>),
    /// Map.
    M(BTreeMap<String, AttrValue>),
    /// String set (never empty).
    SS(Vec<String>),
    /// Number set (never empty).
    NS(Vec<String>),
    /// Binary set (never empty).
    BS(Vec<Vec<u8>>),
}

impl AttrValue {
    /// DynamoDB-JSON (`{"S": "x"}`), binary as base64, as the wire protocol and the CLI show it.
    pub fn to_dynamo_json(&self) -> Json {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        match self {
            AttrValue::S(s) => json!({ "S": s }),
            AttrValue::N(n) => json!({ "N": n }),
            AttrValue::B(b) => json!({ "B": b64(b) }),
            AttrValue::Bool(b) => json!({ "BOOL": b }),
            AttrValue::Null => json!({ "NULL": true }),
            AttrValue::L(l) => {
                json!({ "L": l.iter().map(AttrValue::to_dynamo_json).collect::<Vec<_>>() })
            }
            AttrValue::M(m) => json!({ "M": map_to_dynamo_json(m) }),
            AttrValue::SS(s) => json!({ "SS": s }),
            AttrValue::NS(s) => json!({ "NS": s }),
            AttrValue::BS(s) => json!({ "BS": s.iter().map(|b| b64(b)).collect::<Vec<_>>() }),
        }
    }

    /// Short type name as DynamoDB writes it (`S`, `N`, `M`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            AttrValue::S(_) => "S",
            AttrValue::N(_) => "N",
            AttrValue::B(_) => "B",
            AttrValue::Bool(_) => "BOOL",
            AttrValue::Null => "NULL",
            AttrValue::L(_) => "L",
            AttrValue::M(_) => "M",
            AttrValue::SS(_) => "SS",
            AttrValue::NS(_) => "NS",
            AttrValue::BS(_) => "BS",
        }
    }
}

/// An item (or map) as a DynamoDB-JSON object.
pub fn map_to_dynamo_json(m: &BTreeMap<String, AttrValue>) -> Json {
    Json::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), v.to_dynamo_json()))
            .collect(),
    )
}
