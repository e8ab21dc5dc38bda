//! The serde form of [`AttrValue`]: DynamoDB JSON (`{"S": "x"}`, `{"N": "1.5"}`,
//! `{"B": "<base64>"}`, `{"NULL": true}`, …), the same shape as
//! [`AttrValue::to_dynamo_json`], so work batches travel through a queue and
//! read back exactly, numbers as their decimal text and binary as base64.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::attr::AttrValue;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64<E: de::Error>(text: &str) -> Result<Vec<u8>, E> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| E::custom(format!("binary value is not valid base64: {e}")))
}

impl Serialize for AttrValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self {
            AttrValue::S(s) => map.serialize_entry("S", s)?,
            AttrValue::N(n) => map.serialize_entry("N", n)?,
            AttrValue::B(b) => map.serialize_entry("B", &b64(b))?,
            AttrValue::Bool(b) => map.serialize_entry("BOOL", b)?,
            AttrValue::Null => map.serialize_entry("NULL", &true)?,
            AttrValue::L(l) => map.serialize_entry("L", l)?,
            AttrValue::M(m) => map.serialize_entry("M", m)?,
            AttrValue::SS(s) => map.serialize_entry("SS", s)?,
            AttrValue::NS(s) => map.serialize_entry("NS", s)?,
            AttrValue::BS(s) => {
                map.serialize_entry("BS", &s.iter().map(|b| b64(b)).collect::<Vec<_>>())?
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for AttrValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(AttrValueVisitor)
    }
}

struct AttrValueVisitor;

/// A DynamoDB JSON type key.
#[derive(Clone, Copy, Deserialize)]
enum Kind {
    S,
    N,
    B,
    #[serde(rename = "BOOL")]
    Bool,
    #[serde(rename = "NULL")]
    Null,
    L,
    M,
    SS,
    NS,
    BS,
}

impl<'de> Visitor<'de> for AttrValueVisitor {
    type Value = AttrValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a DynamoDB JSON attribute value with exactly one type key, like {\"S\": \"x\"}",
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AttrValue, A::Error> {
        // The type key read as an identifier: no string allocated per value.
        let Some(kind) = map.next_key::<Kind>()? else {
            return Err(de::Error::custom(
                "empty attribute value: expected one type key",
            ));
        };
        let value = match kind {
            Kind::S => AttrValue::S(map.next_value()?),
            Kind::N => AttrValue::N(map.next_value()?),
            Kind::B => AttrValue::B(unb64(&map.next_value::<String>()?)?),
            Kind::Bool => AttrValue::Bool(map.next_value()?),
            Kind::Null => {
                if !map.next_value::<bool>()? {
                    return Err(de::Error::custom("NULL must be true"));
                }
                AttrValue::Null
            }
            Kind::L => AttrValue::L(map.next_value()?),
            Kind::M => AttrValue::M(map.next_value::<BTreeMap<String, AttrValue>>()?),
            Kind::SS => AttrValue::SS(map.next_value()?),
            Kind::NS => AttrValue::NS(map.next_value()?),
            Kind::BS => AttrValue::BS(
                map.next_value::<Vec<String>>()?
                    .iter()
                    .map(|s| unb64(s))
                    .collect::<Result<_, _>>()?,
            ),
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "attribute value has a second type key `{extra}` after `{}`",
                value.type_name()
            )));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchPart, WorkBatch};
    use crate::encoded::EncodedItem;
    use crate::limits::{KeyAttr, KeyType};
    use crate::value::SqlValue;
    use serde_json::Value as Json;

    fn every_kind() -> AttrValue {
        let mut inner = BTreeMap::new();
        inner.insert("bin".to_string(), AttrValue::B(vec![0, 1, 2, 255]));
        inner.insert("empty".to_string(), AttrValue::B(vec![]));
        inner.insert("null".to_string(), AttrValue::Null);
        inner.insert(
            "list".to_string(),
            AttrValue::L(vec![
                AttrValue::N("12345678901234567890123456789012345678".into()),
                AttrValue::N("-1.5E-130".into()),
                AttrValue::Bool(false),
                AttrValue::M(BTreeMap::from([(
                    "deep".to_string(),
                    AttrValue::L(vec![AttrValue::S("é\u{1F600}\"\\".into())]),
                )])),
            ]),
        );
        inner.insert(
            "ss".to_string(),
            AttrValue::SS(vec!["a".into(), "b".into()]),
        );
        inner.insert(
            "ns".to_string(),
            AttrValue::NS(vec!["1".into(), "0.25".into()]),
        );
        inner.insert("bs".to_string(), AttrValue::BS(vec![vec![9], vec![0, 0]]));
        AttrValue::M(inner)
    }

    #[test]
    fn every_kind_round_trips_and_matches_dynamo_json() {
        let v = every_kind();
        let text = serde_json::to_string(&v).unwrap();
        let back: AttrValue = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        // The serde form is exactly the DynamoDB JSON the CLI prints.
        let as_json: Json = serde_json::from_str(&text).unwrap();
        assert_eq!(as_json, v.to_dynamo_json());
        assert_eq!(AttrValue::deserialize(&v.to_dynamo_json()).unwrap(), v);
    }

    #[test]
    fn numbers_stay_text_with_every_digit() {
        let v = AttrValue::N("0.1000000000000000000000000000000000001".into());
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, r#"{"N":"0.1000000000000000000000000000000000001"}"#);
        assert_eq!(serde_json::from_str::<AttrValue>(&text).unwrap(), v);
    }

    #[test]
    fn malformed_values_are_refused_with_a_reason() {
        let cases = [
            (r#"{}"#, "empty attribute value"),
            (r#"{"X": 1}"#, "unknown variant `X`"),
            (r#"{"S": "a", "N": "1"}"#, "second type key `N` after `S`"),
            (r#"{"NULL": false}"#, "NULL must be true"),
            (r#"{"B": "not base64!"}"#, "not valid base64"),
            (r#"{"N": 1}"#, "invalid type"),
        ];
        for (text, reason) in cases {
            let err = serde_json::from_str::<AttrValue>(text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(reason), "{text}: {err}");
        }
    }

    #[test]
    fn a_work_batch_round_trips() {
        let mut item = BTreeMap::new();
        item.insert("PK".to_string(), AttrValue::S("ORDER#7".into()));
        item.insert("doc".to_string(), every_kind());
        let batch = WorkBatch {
            run_id: "run-1".parse().unwrap(),
            entity: "order".into(),
            segment: 3,
            page: 41,
            part: BatchPart { index: 1, count: 2 },
            pointers: Vec::new(),
            rows_read: 5,
            items: vec![EncodedItem::new(
                &item,
                &[KeyAttr::new("PK", KeyType::S)],
                serde_json::json!({"order_id": 7}),
                123,
            )],
        };
        let text = serde_json::to_string(&batch).unwrap();
        let back = serde_json::from_str::<WorkBatch>(&text).unwrap();
        assert_eq!(back, batch);
        assert_eq!(back.items[0].decode().unwrap(), item);
    }

    #[test]
    fn sql_values_round_trip_for_cursors() {
        let values = vec![
            SqlValue::Null,
            SqlValue::Int(-7),
            SqlValue::UInt(u64::MAX),
            SqlValue::Decimal("12.3400".into()),
            SqlValue::Text("a#b".into()),
            SqlValue::Bytes(vec![0, 255]),
            SqlValue::Date(chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap()),
            SqlValue::Timestamp(
                chrono::NaiveDate::from_ymd_opt(2024, 1, 2)
                    .unwrap()
                    .and_hms_micro_opt(3, 4, 5, 6)
                    .unwrap(),
            ),
            SqlValue::TimestampTz(chrono::DateTime::from_timestamp(1_700_000_000, 5).unwrap()),
        ];
        let text = serde_json::to_string(&values).unwrap();
        assert_eq!(
            serde_json::from_str::<Vec<SqlValue>>(&text).unwrap(),
            values
        );
    }
}
