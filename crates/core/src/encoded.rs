//! An item as it travels from the mapping to the table: serialised once.

use crate::FormatError;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value as Json;

use crate::attr::{AttrValue, Attrs, Item};
use crate::limits::KeyAttr;
use crate::structure::MAX_DEPTH;

/// An item ready to write, with the source key of the row it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MappedItem {
    /// The DynamoDB item.
    pub item: Item,
    /// The source row's key (`{"order_id": 7}`), for rejects and reports.
    pub source_key: Json,
    /// Size by DynamoDB's rules, computed when the item was checked.
    pub size: usize,
}

/// A mapped item serialised once, as DynamoDB JSON, with what the writers
/// need without reading it again: its key values, its size, its source key.
///
/// This is the form of the items of a [`crate::WorkBatch`]: the text goes
/// into queue messages and `BatchWriteItem` bodies as it is, so a worker
/// writes a queued page without decoding its items into attribute maps and
/// encoding them again, and an item in flight costs its text instead of a
/// map of strings (the attribute names are not repeated in memory per
/// attribute value).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EncodedItem {
    /// The item as a DynamoDB-JSON object (`{"PK":{"S":"A#1"},…}`).
    pub item: ItemJson,
    /// The values of the table's key attributes, partition key first.
    /// Messages of older releases do not carry it: a writer takes it from
    /// [`EncodedItem::item`] (see [`EncodedItem::ensure_key`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<AttrValue>,
    /// The source row's key (`{"order_id":7}`), for rejects and reports.
    pub source_key: SourceKey,
    /// Size by DynamoDB's rules, computed when the item was checked.
    pub size: usize,
}

impl EncodedItem {
    /// Serialises `item` (an [`Item`], or an item in a mapping's layout)
    /// and takes the values of `keys` from it.
    pub fn new<A: Attrs + ?Sized>(
        item: &A,
        keys: &[KeyAttr],
        source_key: impl Into<SourceKey>,
        size: usize,
    ) -> EncodedItem {
        let text = crate::json::item_text_of_size(item, size);
        EncodedItem::with_text(text, item, keys, source_key, size)
    }

    /// [`EncodedItem::new`] for an item whose text is already written
    /// (by [`crate::json::item_text_keyed`], the same text).
    pub fn with_text<A: Attrs + ?Sized>(
        text: String,
        item: &A,
        keys: &[KeyAttr],
        source_key: impl Into<SourceKey>,
        size: usize,
    ) -> EncodedItem {
        EncodedItem {
            item: ItemJson(text.into_boxed_str()),
            key: key_values(item, keys),
            source_key: source_key.into(),
            size,
        }
    }

    /// An item whose text is written and whose key values, in the order
    /// of the table's key attributes, are already taken out of it (what
    /// [`EncodedItem::with_text`] clones).
    pub fn from_parts(
        text: String,
        key: Vec<AttrValue>,
        source_key: impl Into<SourceKey>,
        size: usize,
    ) -> EncodedItem {
        EncodedItem {
            item: ItemJson(text.into_boxed_str()),
            key,
            source_key: source_key.into(),
            size,
        }
    }

    /// The encoded form of a mapped item (its attribute map is dropped).
    pub fn of(m: MappedItem, keys: &[KeyAttr]) -> EncodedItem {
        EncodedItem::new(&m.item, keys, &m.source_key, m.size)
    }

    /// The item read back into attribute values (for rejects, reports and
    /// tests: the write path never needs it).
    pub fn decode(&self) -> Result<Item, FormatError> {
        serde_json::from_str(self.item.get())
            .map_err(|e| FormatError(format!("an encoded item is not DynamoDB JSON: {e}")))
    }

    /// The item as a JSON value (DynamoDB JSON), as the rejects file shows it.
    pub fn to_json(&self) -> Json {
        serde_json::from_str(self.item.get()).unwrap_or(Json::Null)
    }

    /// The item's key as an item of its key attributes alone (the `Key` of
    /// an `UpdateItem`), `keys` naming them as [`EncodedItem::key`] holds them.
    pub fn key_item(&self, keys: &[KeyAttr]) -> Item {
        keys.iter()
            .zip(&self.key)
            .map(|(k, v)| (k.name.clone(), v.clone()))
            .collect()
    }

    /// Fills [`EncodedItem::key`] from the item when the item came without
    /// it, so deduplication and pointers see its real key. An item that does
    /// not read back, or lacks a key attribute, gets `NULL` there, which no
    /// real key has: it is refused by the service and rejected alone.
    pub fn ensure_key(&mut self, keys: &[KeyAttr]) {
        if self.key.len() == keys.len() {
            return;
        }
        self.key = match self.decode() {
            Ok(item) => key_values(&item, keys),
            Err(_) => vec![AttrValue::Null; keys.len()],
        };
    }
}

impl PartialEq for EncodedItem {
    fn eq(&self, other: &Self) -> bool {
        self.item == other.item
            && self.key == other.key
            && self.source_key == other.source_key
            && self.size == other.size
    }
}

/// An item's DynamoDB JSON, written once (by [`crate::json::item_text`],
/// which writes only well-formed JSON) and never parsed on the write path.
///
/// In a queue message it is the JSON object itself, not a string holding
/// it: serialised as a raw JSON value (checked then, since a message is
/// parsed by another process) and read back as one.
#[derive(Clone, PartialEq, Eq)]
pub struct ItemJson(Box<str>);

impl ItemJson {
    /// The text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// Takes `text`, which another process wrote, as an item's DynamoDB
    /// JSON once it is shown to be one JSON object whose strings and
    /// brackets all close where they should: spliced into a request body,
    /// it can neither end the body's structure early nor open more of it.
    /// This is the check a worker makes of an item a queue message carried
    /// as text, without parsing it; an item that passes and is still not
    /// DynamoDB JSON is refused by the service, alone.
    pub fn from_object_text(text: &str) -> Result<ItemJson, FormatError> {
        check_one_object(text.as_bytes()).map_err(FormatError)?;
        Ok(ItemJson(text.into()))
    }
}

/// Whether `b` is one bracket-balanced JSON object: `{` first, every string
/// closed, every `}` and `]` matching the bracket it closes, and nothing after
/// the object's own `}`. Found 64 bytes at a time
/// ([`crate::structure::is_one_object`]); a text that does not pass there
/// (it has a backslash, or is not one object) is checked byte by byte,
/// which follows escapes and says what is wrong.
fn check_one_object(b: &[u8]) -> Result<(), String> {
    if crate::structure::is_one_object(b) {
        return Ok(());
    }
    check_one_object_bytewise(b)
}

/// [`check_one_object`] a byte at a time, strings skipped eight bytes at a
/// time.
fn check_one_object_bytewise(b: &[u8]) -> Result<(), String> {
    if b.first() != Some(&b'{') {
        return Err("an item's text does not start with `{`".into());
    }
    // One bit per open bracket, innermost lowest: 1 for `{`, 0 for `[`.
    let mut open: u128 = 0;
    let mut depth = 0u32;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => loop {
                // To the string's next `"`, `\` or control byte.
                i = crate::json::next_special(b, i + 1);
                match b.get(i) {
                    Some(b'"') => break,
                    Some(b'\\') => i += 1, // and the byte it escapes
                    Some(_) => {}
                    None => return Err("a string in an item's text does not end".into()),
                }
            },
            c @ (b'{' | b'[') => {
                if depth == MAX_DEPTH {
                    return Err(format!(
                        "an item's text nests deeper than {MAX_DEPTH} brackets"
                    ));
                }
                open = (open << 1) | u128::from(c == b'{');
                depth += 1;
            }
            c @ (b'}' | b']') => {
                if depth == 0 || (open & 1 == 1) != (c == b'}') {
                    return Err(format!(
                        "an item's text closes a bracket it did not open at byte {i}"
                    ));
                }
                open >>= 1;
                depth -= 1;
                if depth == 0 && i + 1 != b.len() {
                    return Err(format!(
                        "an item's text goes on after its object ends at byte {i}"
                    ));
                }
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 {
        return Err("an item's text ends inside its object".into());
    }
    Ok(())
}

impl fmt::Debug for ItemJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ItemJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &RawValue = serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ItemJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(ItemJson(raw.into()))
    }
}

/// A source row's key as compact JSON text (`{"order_id":7}`), the form
/// [`crate::SqlValue::to_tagged_json`] gives its values.
///
/// It is needed only when an item is rejected or reported, so it travels as
/// the text it was written as, is never parsed on the write path, and a
/// queue message carries it as the JSON value itself.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SourceKey(Box<RawValue>);

impl SourceKey {
    /// Writes `key` (a JSON value, or anything that serialises as one) as
    /// compact text.
    pub fn of<T: Serialize + ?Sized>(key: &T) -> SourceKey {
        SourceKey(
            serde_json::value::to_raw_value(key)
                .expect("a source key serialises as JSON (its map keys are names)"),
        )
    }

    /// A key already held as a JSON value's text.
    pub fn from_raw(raw: Box<RawValue>) -> SourceKey {
        SourceKey(raw)
    }

    /// `null`: no source key (an item that did not come from a row).
    pub fn null() -> SourceKey {
        SourceKey::of(&Json::Null)
    }

    /// The text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The key as a JSON value, as the rejects file shows it.
    pub fn to_json(&self) -> Json {
        serde_json::from_str(self.0.get()).expect("a source key is JSON it wrote itself")
    }
}

impl From<Json> for SourceKey {
    fn from(key: Json) -> SourceKey {
        SourceKey::of(&key)
    }
}

impl From<&Json> for SourceKey {
    fn from(key: &Json) -> SourceKey {
        SourceKey::of(key)
    }
}

impl PartialEq for SourceKey {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for SourceKey {}

impl fmt::Debug for SourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for SourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// The values of `keys` in `item`, `NULL` for one it lacks.
fn key_values<A: Attrs + ?Sized>(item: &A, keys: &[KeyAttr]) -> Vec<AttrValue> {
    keys.iter()
        .map(|k| item.attr(&k.name).cloned().unwrap_or(AttrValue::Null))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::KeyType;

    fn item() -> Item {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S("A\"1".into()));
        item.insert("SK".into(), AttrValue::N("7".into()));
        item.insert("b".into(), AttrValue::B(vec![0, 255]));
        item
    }

    fn keys() -> Vec<KeyAttr> {
        vec![
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::N),
        ]
    }

    #[test]
    fn an_item_is_its_dynamodb_json_and_reads_back_exactly() {
        let e = EncodedItem::new(&item(), &keys(), serde_json::json!({"id": 1}), 12);
        assert_eq!(
            e.item.get(),
            r#"{"PK":{"S":"A\"1"},"SK":{"N":"7"},"b":{"B":"AP8="}}"#
        );
        assert_eq!(
            e.key,
            vec![AttrValue::S("A\"1".into()), AttrValue::N("7".into())]
        );
        assert_eq!(e.decode().unwrap(), item());
        let text = serde_json::to_string(&e).unwrap();
        let back: EncodedItem = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn an_item_text_is_taken_only_when_it_is_one_closed_object() {
        // Whatever the writer writes is taken as it is.
        let mut item = item();
        item.insert(
            "doc".into(),
            serde_json::from_value(serde_json::json!(
                {"M": {"l": {"L": [{"S": "}]\\\""}, {"M": {}}, {"L": []}]}, "e": {"S": ""}}}
            ))
            .unwrap(),
        );
        let text = crate::json::item_text(&item);
        assert_eq!(ItemJson::from_object_text(&text).unwrap().get(), text);
        assert!(ItemJson::from_object_text("{}").is_ok());
        // Text that would end or extend the body it is spliced into is not.
        for bad in [
            "",
            "[]",
            " {}",
            r#"{"PK":{"S":"x"}}}],"other":[{"PutRequest":{"Item":{}}}"#,
            r#"{"PK":{"S":"x"}},{"PK":{"S":"y"}}"#,
            r#"{"PK":{"S":"x}}"#,
            r#"{"PK":{"S":"x\"}}"#,
            r#"{"PK":{"L":[}]}"#,
            r#"{"PK":{"S":"x"}"#,
            r#"{"PK":{"S":"x"}} "#,
            r#"{"a":"\"#,
        ] {
            assert!(ItemJson::from_object_text(bad).is_err(), "{bad}");
        }
        // An escaped quote is part of its string, an escaped backslash is
        // not a quote's escape: at every offset of the eight-byte steps.
        for k in 0..24 {
            let x = "x".repeat(k);
            let inside = format!(r#"{{"a":{{"S":"{x}\"}}}}{x}"}}}}"#);
            assert!(ItemJson::from_object_text(&inside).is_ok(), "{inside}");
            let closed = format!(r#"{{"a":{{"S":"{x}\\"}}}}{x}"}}}}"#);
            assert!(ItemJson::from_object_text(&closed).is_err(), "{closed}");
            let control = format!("{{\"a\":{{\"S\":\"{x}\n}}}}{x}\"}}}}");
            assert!(ItemJson::from_object_text(&control).is_ok(), "{control}");
        }
        let deep = format!("{}{}", "{\"a\":".repeat(128), "}".repeat(128));
        assert!(ItemJson::from_object_text(&deep).is_ok());
        let deeper = format!("{}1{}", "[".repeat(128), "]".repeat(128));
        assert!(ItemJson::from_object_text(&format!("{{\"a\":{deeper}}}"))
            .unwrap_err()
            .0
            .contains("deeper than 128"));
    }

    /// The 64-byte check says an item is one object exactly when the byte
    /// by byte check does (for text without a backslash, which it leaves to
    /// that check), and never says so of text that is not: on items of every
    /// length across the blocks' edges, each damaged at every byte.
    #[test]
    fn the_block_check_agrees_with_the_byte_check() {
        fn agree(text: &[u8]) {
            let blocks = crate::structure::is_one_object(text);
            let bytes = check_one_object_bytewise(text).is_ok();
            if blocks {
                assert!(bytes, "{:?}", String::from_utf8_lossy(text));
            } else if !text.contains(&b'\\') {
                assert!(!bytes, "{:?}", String::from_utf8_lossy(text));
            }
        }
        let mut texts = Vec::new();
        for n in 0..150 {
            let mut item = Item::new();
            item.insert("PK".into(), AttrValue::S("x".repeat(n)));
            texts.push(crate::json::item_text(&item));
            item.insert(
                "doc".into(),
                AttrValue::L(vec![
                    AttrValue::M(Item::new()),
                    AttrValue::S("{[".repeat(n % 40)),
                    AttrValue::L(vec![AttrValue::N("1".into())]),
                ]),
            );
            texts.push(crate::json::item_text(&item));
        }
        let deep = format!("{}{}", "{\"a\":".repeat(128), "}".repeat(128));
        let deeper = format!("{{\"a\":{}1{}}}", "[".repeat(128), "]".repeat(128));
        texts.extend([deep, deeper]);
        for text in &texts {
            agree(text.as_bytes());
            let mut b = text.clone().into_bytes();
            for at in 0..b.len() {
                let was = b[at];
                for c in *b"\"{}[] a\n\\" {
                    b[at] = c;
                    agree(&b);
                }
                b[at] = was;
                agree(&[&b[..at], &b[at + 1..]].concat());
            }
            agree(&[text.as_bytes(), b"}"].concat());
            agree(&[text.as_bytes(), b" "].concat());
        }
    }

    #[test]
    fn a_source_key_is_its_compact_text_and_reads_back_as_its_json() {
        let json =
            serde_json::json!({"order_id": 7, "name": "é\"\n", "at": {"$date": "2024-01-02"}});
        let key = SourceKey::from(&json);
        assert_eq!(
            key.get(),
            r#"{"order_id":7,"name":"é\"\n","at":{"$date":"2024-01-02"}}"#
        );
        assert_eq!(key.get(), json.to_string());
        assert_eq!(key.to_string(), json.to_string());
        assert_eq!(key.to_json(), json);
        assert_eq!(SourceKey::null().get(), "null");
        // Carried as the JSON value itself, and read back as the same text.
        let e = EncodedItem::new(&item(), &keys(), &json, 12);
        let text = serde_json::to_string(&e).unwrap();
        assert!(text.contains(r#""source_key":{"order_id":7,"#), "{text}");
        let back: EncodedItem = serde_json::from_str(&text).unwrap();
        assert_eq!(back.source_key, key);
        // Text of another writer is taken only when it is JSON.
        assert!(serde_json::from_str::<SourceKey>(r#"{"id":"#).is_err());
    }

    #[test]
    fn an_item_queued_without_its_key_gets_it_from_the_item() {
        let e = EncodedItem::new(&item(), &keys(), Json::Null, 12);
        let old = format!(r#"{{"item":{},"source_key":null,"size":12}}"#, e.item.get());
        let mut back: EncodedItem = serde_json::from_str(&old).unwrap();
        assert!(back.key.is_empty());
        back.ensure_key(&keys());
        assert_eq!(back, e);
        let mut lacking = EncodedItem::new(&item(), &keys()[..1], Json::Null, 12);
        lacking.key.clear();
        lacking.ensure_key(&[KeyAttr::new("other", KeyType::S)]);
        assert_eq!(lacking.key, vec![AttrValue::Null]);
    }
}
