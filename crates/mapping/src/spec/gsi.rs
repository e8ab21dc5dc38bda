//! The raw `[[target.gsi]]` and `billing` shapes under `[target]`.

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_spanned::Spanned;

use super::shared::RawKey;

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
