//! `[[target.gsi]]` and `billing`: the table's global secondary indexes and
//! how a created table is billed; and the map-time check of index key
//! attributes (an item without one is fine, a sparse index; a wrong type is not).

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_spanned::Spanned;
use sql2ddb_core::limits::{MAX_PARTITION_KEY_BYTES, MAX_SORT_KEY_BYTES};
use sql2ddb_core::{AttrValue, Attrs, KeyAttr, KeyType};

use crate::error::MappingError;
use crate::load::{is_table_or_index_name, Loader};
use crate::spec::RawKey;

/// Most global secondary indexes a DynamoDB table may have.
pub const MAX_GSIS: usize = 20;
/// Most non-key attributes all `include` projections of a table may name together.
pub const MAX_PROJECTED_ATTRIBUTES: usize = 100;

/// One `[[target.gsi]]`: a global secondary index of the target table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gsi {
    /// Index name.
    pub name: String,
    /// The index's partition key.
    pub pk: KeyAttr,
    /// The index's sort key, if any.
    pub sk: Option<KeyAttr>,
    /// Which attributes the index holds.
    pub projection: GsiProjection,
}

impl Gsi {
    /// Partition key, then the sort key if any.
    pub fn keys(&self) -> Vec<KeyAttr> {
        std::iter::once(self.pk.clone())
            .chain(self.sk.clone())
            .collect()
    }
}

/// `projection = "all" | "keys_only" | { include = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GsiProjection {
    /// Every attribute (the default).
    #[default]
    All,
    /// Only key attributes.
    KeysOnly,
    /// Key attributes and these.
    Include(Vec<String>),
}

/// `billing = "on-demand" | { read = N, write = N }` under `[target]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Billing {
    /// Pay per request (the default).
    #[default]
    OnDemand,
    /// Provisioned capacity, for the table and each of its indexes.
    Provisioned {
        /// Read capacity units.
        read: u64,
        /// Write capacity units.
        write: u64,
    },
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[target.gsi]] table with name and pk"
)]
pub(crate) struct RawGsi {
    pub name: Spanned<String>,
    pub pk: Spanned<RawKey>,
    pub sk: Option<Spanned<RawKey>>,
    pub projection: Option<Spanned<RawProjection>>,
}

pub(crate) enum RawProjection {
    All,
    KeysOnly,
    Include(Spanned<Vec<Spanned<String>>>),
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { include = [\"attr\"] }"
)]
struct RawInclude {
    include: Spanned<Vec<Spanned<String>>>,
}

pub(crate) enum RawBilling {
    OnDemand,
    Provisioned {
        read: Spanned<i64>,
        write: Spanned<i64>,
    },
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { read = 5, write = 5 }"
)]
struct RawProvisioned {
    read: Spanned<i64>,
    write: Spanned<i64>,
}

// Hand-written rather than `#[serde(untagged)]`, which loses spans and messages.
impl<'de> Deserialize<'de> for RawProjection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawProjection;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"all\", \"keys_only\" or a table like { include = [\"attr\"] }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawProjection, E> {
                match s {
                    "all" => Ok(RawProjection::All),
                    "keys_only" => Ok(RawProjection::KeysOnly),
                    _ => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawProjection, M::Error> {
                RawInclude::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(|r| RawProjection::Include(r.include))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawBilling {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBilling;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"on-demand\" or a table like { read = 5, write = 5 }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RawBilling, E> {
                match s {
                    "on-demand" => Ok(RawBilling::OnDemand),
                    _ => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, m: M) -> Result<RawBilling, M::Error> {
                RawProvisioned::deserialize(de::value::MapAccessDeserializer::new(m)).map(|r| {
                    RawBilling::Provisioned {
                        read: r.read,
                        write: r.write,
                    }
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Loader<'_, '_> {
    /// `[[target.gsi]]`, checked against each other and the table's keys.
    pub(crate) fn gsis(
        &self,
        raw: &[Spanned<RawGsi>],
        pk: &KeyAttr,
        sk: Option<&KeyAttr>,
    ) -> Result<Vec<Gsi>, MappingError> {
        if let Some(extra) = raw.get(MAX_GSIS) {
            return Err(self.invalid(
                &extra.span(),
                format!("a table has at most {MAX_GSIS} global secondary indexes"),
            ));
        }
        // Each key attribute has one type, wherever it is a key.
        let mut types: HashMap<String, KeyType> = std::iter::once(pk)
            .chain(sk)
            .map(|k| (k.name.clone(), k.kind))
            .collect();
        let mut gsis: Vec<Gsi> = Vec::with_capacity(raw.len());
        let mut projected = 0;
        for g in raw {
            let g = g.get_ref();
            let name = g.name.get_ref();
            if !is_table_or_index_name(name) {
                return Err(self.invalid(
                    &g.name.span(),
                    format!(
                        "{name:?} is not a DynamoDB index name (3 to 255 of a-z, A-Z, 0-9, _ . -)"
                    ),
                ));
            }
            if gsis.iter().any(|x| &x.name == name) {
                return Err(self.invalid(&g.name.span(), format!("duplicate index name {name:?}")));
            }
            let keys = self.gsi_keys(g, &mut types)?;
            let projection = self.projection(g, &mut projected)?;
            let mut keys = keys.into_iter();
            gsis.push(Gsi {
                name: name.clone(),
                pk: keys.next().expect("pk is required"),
                sk: keys.next(),
                projection,
            });
        }
        Ok(gsis)
    }

    /// An index's key attributes (pk, then sk), each with one type across
    /// the table (`types` holds the types seen so far).
    fn gsi_keys(
        &self,
        g: &RawGsi,
        types: &mut HashMap<String, KeyType>,
    ) -> Result<Vec<KeyAttr>, MappingError> {
        let name = g.name.get_ref();
        let mut keys = Vec::with_capacity(2);
        for k in std::iter::once(&g.pk).chain(&g.sk) {
            let k = k.get_ref();
            let attr = KeyAttr {
                name: k.name.get_ref().clone(),
                kind: k.kind,
            };
            if attr.name.is_empty() {
                return Err(self.invalid(&k.name.span(), "key attribute name is empty".into()));
            }
            if keys.iter().any(|x: &KeyAttr| x.name == attr.name) {
                return Err(self.invalid(
                    &k.name.span(),
                    format!(
                        "index {name:?} has sort key and partition key both named {:?}",
                        attr.name
                    ),
                ));
            }
            match types.get(&attr.name) {
                Some(kind) if *kind != attr.kind => {
                    return Err(self.invalid(
                        &k.name.span(),
                        format!(
                            "key attribute {:?} is of type {kind} elsewhere in [target]; one attribute has one type",
                            attr.name
                        ),
                    ))
                }
                _ => {
                    types.insert(attr.name.clone(), attr.kind);
                }
            }
            keys.push(attr);
        }
        Ok(keys)
    }

    /// An index's `projection`; `projected` counts the included attributes
    /// of all indexes so far.
    fn projection(&self, g: &RawGsi, projected: &mut usize) -> Result<GsiProjection, MappingError> {
        Ok(match g.projection.as_ref().map(Spanned::get_ref) {
            None | Some(RawProjection::All) => GsiProjection::All,
            Some(RawProjection::KeysOnly) => GsiProjection::KeysOnly,
            Some(RawProjection::Include(list)) => {
                if list.get_ref().is_empty() {
                    return Err(self.invalid(
                        &list.span(),
                        "include is empty: name attributes, or use projection = \"keys_only\""
                            .into(),
                    ));
                }
                let mut attrs: Vec<String> = Vec::with_capacity(list.get_ref().len());
                for a in list.get_ref() {
                    if a.get_ref().is_empty() || attrs.contains(a.get_ref()) {
                        return Err(self.invalid(
                            &a.span(),
                            format!("include lists {:?} twice or empty", a.get_ref()),
                        ));
                    }
                    attrs.push(a.get_ref().clone());
                }
                *projected += attrs.len();
                if *projected > MAX_PROJECTED_ATTRIBUTES {
                    return Err(self.invalid(
                        &list.span(),
                        format!("the indexes of a table may include at most {MAX_PROJECTED_ATTRIBUTES} attributes together"),
                    ));
                }
                GsiProjection::Include(attrs)
            }
        })
    }

    /// `billing = …`, on-demand when absent.
    pub(crate) fn billing(
        &self,
        raw: Option<&Spanned<RawBilling>>,
    ) -> Result<Billing, MappingError> {
        Ok(match raw.map(Spanned::get_ref) {
            None | Some(RawBilling::OnDemand) => Billing::OnDemand,
            Some(RawBilling::Provisioned { read, write }) => Billing::Provisioned {
                read: self.positive(read, "billing.read", i64::MAX as usize)? as u64,
                write: self.positive(write, "billing.write", i64::MAX as usize)? as u64,
            },
        })
    }
}

/// Key attributes of the indexes that are not the table's own keys (those
/// are checked by `check_item`): name, type, the first index using it, and
/// whether it is that index's partition key.
#[derive(Debug, Clone)]
pub(crate) struct IndexKey {
    pub attr: KeyAttr,
    pub index: String,
    pub partition: bool,
}

/// The index key attributes to check on every item.
pub(crate) fn index_keys(gsis: &[Gsi], table_keys: &[KeyAttr]) -> Vec<IndexKey> {
    let mut out: Vec<IndexKey> = Vec::new();
    for g in gsis {
        for (i, k) in g.keys().into_iter().enumerate() {
            if table_keys.iter().any(|t| t.name == k.name)
                || out.iter().any(|o| o.attr.name == k.name)
            {
                continue;
            }
            out.push(IndexKey {
                attr: k,
                index: g.name.clone(),
                partition: i == 0,
            });
        }
    }
    out
}

/// Checks the index key attributes an item carries: a missing one leaves the
/// item out of that index (sparse), but one of another type, empty or too
/// long would fail the whole write. Returns (attribute, reason).
pub(crate) fn check_index_keys<A: Attrs + ?Sized>(
    item: &A,
    keys: &[IndexKey],
) -> Result<(), (String, String)> {
    for k in keys {
        let Some(v) = item.attr(&k.attr.name) else {
            continue;
        };
        let role = if k.partition { "partition" } else { "sort" };
        if v.type_name() != k.attr.kind.as_str() {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is of type {}, but it is the {role} key of index {}, of type {}",
                    k.attr.name,
                    v.type_name(),
                    k.index,
                    k.attr.kind
                ),
            ));
        }
        let size = match v {
            AttrValue::S(s) => s.len(),
            AttrValue::B(b) => b.len(),
            _ => 1,
        };
        if size == 0 {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is empty, but it is the {role} key of index {} (DynamoDB forbids empty key values)",
                    k.attr.name, k.index
                ),
            ));
        }
        let limit = if k.partition {
            MAX_PARTITION_KEY_BYTES
        } else {
            MAX_SORT_KEY_BYTES
        };
        if size > limit {
            return Err((
                k.attr.name.clone(),
                format!(
                    "attribute {} is {size} bytes, over DynamoDB's limit of {limit} for the {role} key of index {}",
                    k.attr.name, k.index
                ),
            ));
        }
    }
    Ok(())
}
