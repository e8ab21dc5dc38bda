//! `BatchWriteItem` request bodies built straight from our items.
//!
//! The SDK would copy every item into its own `AttributeValue` maps and
//! serialise those; here an item is serialised once, when it is mapped
//! ([`sql2ddb_core::EncodedItem`]: DynamoDB JSON, numbers as their text,
//! binary as base64), and its text goes into the queue message and the
//! request body as it is, signed and sent by [`crate::calls::BatchCalls`].

use bytes::Bytes;
use sql2ddb_core::EncodedItem;

/// The JSON body of a `BatchWriteItem` that puts `items` into `table`:
/// each item's own text, as it was serialised when it was mapped.
pub fn batch_put_body(table: &str, items: &[&EncodedItem]) -> Bytes {
    const PUT: &[u8] = br#"{"PutRequest":{"Item":"#;
    let text: usize = items.iter().map(|m| m.item.get().len()).sum();
    let mut out = Vec::with_capacity(32 + table.len() + text + items.len() * (PUT.len() + 3));
    out.extend_from_slice(br#"{"RequestItems":{"#);
    // A table name is [a-zA-Z0-9_.-]+, but escape it as JSON all the same.
    serde_json::to_writer(&mut out, table).expect("a string serialises");
    out.extend_from_slice(b":[");
    for (i, m) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(PUT);
        out.extend_from_slice(m.item.get().as_bytes());
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"]}}");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};

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
        let keys = [KeyAttr::new("PK", KeyType::S)];
        let one = EncodedItem::new(&item, &keys, serde_json::Value::Null, 1);
        let body = batch_put_body("t", &[&one, &one]);
        let put = r#"{"PutRequest":{"Item":{"PK":{"S":"A\"1"},"b":{"B":"AAH/"},"big":{"N":"1234567890123456789012345678901234567"}}}}"#;
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            format!(r#"{{"RequestItems":{{"t":[{put},{put}]}}}}"#)
        );
        let parsed: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed["RequestItems"]["t"].as_array().unwrap().len(), 2);
    }
}
