//! `BatchWriteItem` request bodies built straight from our items.
//!
//! The SDK would copy every item into its own `AttributeValue` maps and
//! serialise those; here the body is serialised once, from the items
//! themselves (DynamoDB JSON: the encoding of [`sql2ddb_core::AttrValue`]'s
//! `Serialize`, numbers as their text, binary as base64), and handed to the
//! SDK before it signs the request ([`with_body`]). The SDK keeps what it is
//! good at: endpoint, credentials, SigV4, connections, timeouts, errors.

use aws_smithy_types::body::SdkBody;
use bytes::Bytes;
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use sql2ddb_core::Item;

/// The JSON body of a `BatchWriteItem` that puts `items` into `table`.
pub fn batch_put_body(table: &str, items: &[&Item]) -> Bytes {
    let body = Body { table, items };
    // Sized for typical items up front, so the buffer rarely grows.
    let mut out = Vec::with_capacity(64 + table.len() + items.len() * 640);
    // Items are maps of strings and well-formed values: serialising cannot fail.
    serde_json::to_writer(&mut out, &body).expect("a batch serialises");
    Bytes::from(out)
}

/// Replaces the body of the SDK's request with `body` (and its length),
/// before the request is signed. Used through `customize().mutate_request`,
/// which runs at "modify before signing" on every attempt.
pub fn with_body(
    body: Bytes,
) -> impl Fn(&mut aws_smithy_runtime_api::http::Request) + Send + Sync + 'static {
    move |req| {
        req.headers_mut()
            .insert("content-length", body.len().to_string());
        *req.body_mut() = SdkBody::from(body.clone());
    }
}

struct Body<'a> {
    table: &'a str,
    items: &'a [&'a Item],
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut top = s.serialize_map(Some(1))?;
        top.serialize_entry("RequestItems", &Table(self.table, self.items))?;
        top.end()
    }
}

struct Table<'a>(&'a str, &'a [&'a Item]);

impl Serialize for Table<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.0, &Requests(self.1))?;
        map.end()
    }
}

struct Requests<'a>(&'a [&'a Item]);

impl Serialize for Requests<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&Put(item))?;
        }
        seq.end()
    }
}

struct Put<'a>(&'a Item);

impl Serialize for Put<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut put = s.serialize_map(Some(1))?;
        put.serialize_entry("PutRequest", &ItemOf(self.0))?;
        put.end()
    }
}

struct ItemOf<'a>(&'a Item);

impl Serialize for ItemOf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("Item", self.0)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::AttrValue;

    use super::*;

    #[test]
    fn numbers_travel_as_their_text_and_binary_as_base64() {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S("A\"1".into()));
        item.insert(
            "big".into(),
            AttrValue::N("1234567890123456789012345678901234567".into()),
        );
        item.insert("b".into(), AttrValue::B(vec![0, 1, 255]));
        let body = batch_put_body("t", &[&item]);
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"RequestItems":{"t":[{"PutRequest":{"Item":{"PK":{"S":"A\"1"},"b":{"B":"AAH/"},"big":{"N":"1234567890123456789012345678901234567"}}}}]}}"#
        );
    }
}
