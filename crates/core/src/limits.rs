//! DynamoDB's per-item limits, checked before any call so that one bad row is
//! rejected alone instead of failing its whole batch.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::attr::{AttrValue, Attrs};
use crate::number::number_size;

/// Largest item DynamoDB stores, by its own size rules.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Items per `BatchWriteItem` call.
pub const MAX_BATCH_ITEMS: usize = 25;
/// Bytes per `BatchWriteItem` request.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Deepest nesting of lists and maps.
pub const MAX_NESTING: usize = 32;
/// Longest partition key value in bytes.
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
/// Longest sort key value in bytes.
pub const MAX_SORT_KEY_BYTES: usize = 1024;

/// Why an item cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ItemProblem {
    /// Over 400 KB by DynamoDB's size rules.
    #[error("item is {size} bytes by DynamoDB's size rules, over the 400 KB (409600 bytes) limit")]
    TooLarge {
        /// Computed size.
        size: usize,
    },
    /// A key attribute is missing.
    #[error("key attribute {attr} is missing")]
    MissingKey {
        /// Key attribute name.
        attr: String,
    },
    /// A key attribute is an empty string or binary.
    #[error("key attribute {attr} is empty (DynamoDB forbids empty key values)")]
    EmptyKey {
        /// Key attribute name.
        attr: String,
    },
    /// A key attribute longer than DynamoDB allows.
    #[error("key attribute {attr} is {size} bytes, over DynamoDB's limit of {limit}")]
    KeyTooLong {
        /// Key attribute name.
        attr: String,
        /// Its size.
        size: usize,
        /// The limit for this key.
        limit: usize,
    },
    /// A key attribute of another type than the table's key schema.
    #[error("key attribute {attr} is of type {found}, the table's key is {expected}")]
    KeyType {
        /// Key attribute name.
        attr: String,
        /// Type in the table's key schema.
        expected: String,
        /// Type produced by the mapping.
        found: String,
    },
    /// Lists and maps nested deeper than 32 levels.
    #[error("attribute {attr} nests {depth} levels deep, over DynamoDB's limit of 32")]
    TooDeep {
        /// Top-level attribute.
        attr: String,
        /// Depth found.
        depth: usize,
    },
    /// An empty set (DynamoDB has none).
    #[error("attribute {attr} holds an empty set (DynamoDB has no empty sets)")]
    EmptySet {
        /// Top-level attribute.
        attr: String,
    },
}

/// One key attribute of a table: its name and DynamoDB type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAttr {
    /// Attribute name.
    pub name: String,
    /// Its type.
    pub kind: KeyType,
}

impl KeyAttr {
    /// A key attribute named `name` of type `kind`.
    pub fn new(name: impl Into<String>, kind: KeyType) -> Self {
        KeyAttr {
            name: name.into(),
            kind,
        }
    }
}

/// The type of a key attribute: DynamoDB allows only these three. It
/// serialises and displays as DynamoDB writes it: `"S"`, `"N"`, `"B"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KeyType {
    /// String.
    S,
    /// Number.
    N,
    /// Binary.
    B,
}

impl KeyType {
    /// `S`, `N` or `B`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyType::S => "S",
            KeyType::N => "N",
            KeyType::B => "B",
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A text that is not `S`, `N` or `B`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0:?} is not a key attribute type (S, N or B)")]
pub struct UnknownKeyType(pub String);

impl FromStr for KeyType {
    type Err = UnknownKeyType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "S" => Ok(KeyType::S),
            "N" => Ok(KeyType::N),
            "B" => Ok(KeyType::B),
            other => Err(UnknownKeyType(other.to_string())),
        }
    }
}

/// Size of a value by DynamoDB's rules (without its attribute name).
pub fn value_size(v: &AttrValue) -> usize {
    match v {
        AttrValue::S(s) => s.len(),
        AttrValue::N(n) => number_size(n),
        AttrValue::B(b) => b.len(),
        AttrValue::Bool(_) | AttrValue::Null => 1,
        AttrValue::L(l) => 3 + l.iter().map(|e| value_size(e) + 1).sum::<usize>(),
        AttrValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| k.len() + value_size(e) + 1)
                .sum::<usize>()
        }
        AttrValue::SS(s) => s.iter().map(String::len).sum(),
        AttrValue::NS(s) => s.iter().map(|n| number_size(n)).sum(),
        AttrValue::BS(s) => s.iter().map(Vec::len).sum(),
    }
}

/// Size of an item by DynamoDB's rules: names plus values.
pub fn item_size<A: Attrs + ?Sized>(item: &A) -> usize {
    item.each().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn depth(v: &AttrValue) -> usize {
    match v {
        AttrValue::L(l) => 1 + l.iter().map(depth).max().unwrap_or(0),
        AttrValue::M(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn has_empty_set(v: &AttrValue) -> bool {
    match v {
        AttrValue::SS(s) | AttrValue::NS(s) => s.is_empty(),
        AttrValue::BS(s) => s.is_empty(),
        AttrValue::L(l) => l.iter().any(has_empty_set),
        AttrValue::M(m) => m.values().any(has_empty_set),
        _ => false,
    }
}

/// Checks an item against DynamoDB's limits for a table with the given keys
/// (partition key first). Returns the item's size in bytes.
pub fn check_item<A: Attrs + ?Sized>(item: &A, keys: &[KeyAttr]) -> Result<usize, ItemProblem> {
    for (i, key) in keys.iter().enumerate() {
        let value = item
            .attr(&key.name)
            .ok_or_else(|| ItemProblem::MissingKey {
                attr: key.name.clone(),
            })?;
        let size = match value {
            AttrValue::S(s) => s.len(),
            AttrValue::B(b) => b.len(),
            AttrValue::N(_) => 1,
            _ => 0,
        };
        if value.type_name() != key.kind.as_str() {
            return Err(ItemProblem::KeyType {
                attr: key.name.clone(),
                expected: key.kind.to_string(),
                found: value.type_name().to_string(),
            });
        }
        if size == 0 {
            return Err(ItemProblem::EmptyKey {
                attr: key.name.clone(),
            });
        }
        let limit = if i == 0 {
            MAX_PARTITION_KEY_BYTES
        } else {
            MAX_SORT_KEY_BYTES
        };
        if size > limit {
            return Err(ItemProblem::KeyTooLong {
                attr: key.name.clone(),
                size,
                limit,
            });
        }
    }
    for (name, value) in item.each() {
        let d = depth(value);
        if d > MAX_NESTING {
            return Err(ItemProblem::TooDeep {
                attr: name.to_string(),
                depth: d,
            });
        }
        if has_empty_set(value) {
            return Err(ItemProblem::EmptySet {
                attr: name.to_string(),
            });
        }
    }
    let size = item_size(item);
    if size > MAX_ITEM_BYTES {
        return Err(ItemProblem::TooLarge { size });
    }
    Ok(size)
}

/// Write units DynamoDB bills for a put of an item of `size` bytes (1 KB rounding, at least 1).
pub fn write_units(size: usize) -> u64 {
    size.div_ceil(1024).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attr::Item;

    fn keys() -> Vec<KeyAttr> {
        vec![
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::S),
        ]
    }

    fn item(pairs: &[(&str, AttrValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn sizes_follow_dynamodb_rules() {
        let it = item(&[
            ("PK", AttrValue::S("abc".into())),
            ("n", AttrValue::N("123".into())),
            (
                "l",
                AttrValue::L(vec![AttrValue::Bool(true), AttrValue::S("xy".into())]),
            ),
            ("m", AttrValue::M(item(&[("a", AttrValue::Null)]))),
        ]);
        // PK:2+3, n:1+3, l:1+3+(1+1)+(2+1), m:1+3+(1+1+1)
        assert_eq!(item_size(&it), 5 + 4 + 9 + 7);
    }

    #[test]
    fn key_problems() {
        let ok = item(&[
            ("PK", AttrValue::S("a".into())),
            ("SK", AttrValue::S("b".into())),
        ]);
        assert!(check_item(&ok, &keys()).is_ok());
        let empty = item(&[
            ("PK", AttrValue::S(String::new())),
            ("SK", AttrValue::S("b".into())),
        ]);
        assert_eq!(
            check_item(&empty, &keys()),
            Err(ItemProblem::EmptyKey { attr: "PK".into() })
        );
        let missing = item(&[("PK", AttrValue::S("a".into()))]);
        assert_eq!(
            check_item(&missing, &keys()),
            Err(ItemProblem::MissingKey { attr: "SK".into() })
        );
        let typed = item(&[
            ("PK", AttrValue::N("1".into())),
            ("SK", AttrValue::S("b".into())),
        ]);
        assert!(matches!(
            check_item(&typed, &keys()),
            Err(ItemProblem::KeyType { .. })
        ));
    }

    #[test]
    fn too_large_and_too_deep() {
        let big = item(&[
            ("PK", AttrValue::S("a".into())),
            ("SK", AttrValue::S("b".into())),
            ("blob", AttrValue::B(vec![0; MAX_ITEM_BYTES])),
        ]);
        assert!(matches!(
            check_item(&big, &keys()),
            Err(ItemProblem::TooLarge { .. })
        ));
        let mut deep = AttrValue::Null;
        for _ in 0..33 {
            deep = AttrValue::L(vec![deep]);
        }
        let deep = item(&[
            ("PK", AttrValue::S("a".into())),
            ("SK", AttrValue::S("b".into())),
            ("d", deep),
        ]);
        assert!(matches!(
            check_item(&deep, &keys()),
            Err(ItemProblem::TooDeep { depth: 33, .. })
        ));
    }

    #[test]
    fn key_types_read_and_write_as_dynamodb_spells_them() {
        for (text, kind) in [("S", KeyType::S), ("N", KeyType::N), ("B", KeyType::B)] {
            assert_eq!(text.parse::<KeyType>(), Ok(kind));
            assert_eq!(kind.to_string(), text);
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{text}\""));
        }
        assert!("s".parse::<KeyType>().is_err());
    }

    #[test]
    fn write_units_round_up() {
        assert_eq!(write_units(1), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
    }
}
