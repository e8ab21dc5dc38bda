//! A format-4 head line read by hand, the way [`crate::codec`] writes it:
//! compact JSON, its fields in their order, each item
//! `[text length,size,[key values],source key]` with key values of the
//! kinds a key can hold (`S`, `N`, `B`, and `NULL` for a key an item
//! lacks).
//!
//! It is a fast path, never the judge: anything else it meets (white
//! space, another field order, an unknown field, a value of another kind,
//! a string it cannot take as it is) gives `None`, and serde reads the line
//! instead, with its checks and its reasons. Whatever it reads, it reads as
//! serde would (a test holds the two to that on every byte of damaged
//! lines); what it saves are serde's visitors and a byte-by-byte scan of
//! every string, about half of the head's instructions per item.

use base64::Engine;
use serde_json::value::RawValue;
use sql2ddb_core::{AttrValue, BatchPart, BatchPointer, RunId, SourceKey};

/// A head line's fields, as [`read`] and serde both give them. A field
/// this release does not know is refused, not skipped: what a batch asks
/// of a worker only grows with a new format version.
#[derive(Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeadIn {
    pub run_id: RunId,
    pub entity: String,
    pub segment: u32,
    pub page: u64,
    pub part: BatchPart,
    pub rows_read: u64,
    #[serde(default)]
    pub pointers: Vec<BatchPointer>,
    pub items: Vec<ItemHeadIn>,
}

/// An item in the head line: `[text length, size, key values, source key]`.
#[derive(Debug, PartialEq, serde::Deserialize)]
pub(crate) struct ItemHeadIn(pub usize, pub usize, pub Vec<AttrValue>, pub SourceKey);

/// The head line read by hand; `None` when it is not exactly as written by
/// this release (serde then reads or refuses it).
pub(crate) fn read(line: &[u8]) -> Option<HeadIn> {
    // UTF-8 checked once for the line: strings are then cut out at their
    // quotes, which are always on a character's boundary.
    let line = std::str::from_utf8(line).ok()?;
    let mut c = Cursor { line, at: 0 };
    c.lit(b"{\"run_id\":")?;
    // A text that is not a run id is left to serde, which says so.
    let run_id = RunId::try_from(c.string()?).ok()?;
    c.lit(b",\"entity\":")?;
    let entity = c.string()?;
    c.lit(b",\"segment\":")?;
    let segment = u32::try_from(c.uint()?).ok()?;
    c.lit(b",\"page\":")?;
    let page = c.uint()?;
    c.lit(b",\"part\":")?;
    let part = c.serde_value()?;
    c.lit(b",\"rows_read\":")?;
    let rows_read = c.uint()?;
    let pointers = if c.eat(b",\"pointers\":") {
        c.serde_value()?
    } else {
        Vec::new()
    };
    c.lit(b",\"items\":[")?;
    let items = c.list(Vec::new(), Cursor::item)?;
    c.lit(b"}")?;
    (c.at == line.len()).then_some(HeadIn {
        run_id,
        entity,
        segment,
        page,
        part,
        rows_read,
        pointers,
        items,
    })
}

struct Cursor<'a> {
    line: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn text(&self) -> &'a [u8] {
        self.line.as_bytes()
    }

    /// The rest of a list whose `[` was taken: `each` read at every
    /// element, pushed onto `into`, to the list's `]`.
    fn list<T>(
        &mut self,
        mut into: Vec<T>,
        mut each: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        if self.eat(b"]") {
            return Some(into);
        }
        loop {
            into.push(each(self)?);
            if self.eat(b"]") {
                return Some(into);
            }
            self.lit(b",")?;
        }
    }

    /// Takes `what` if it comes next.
    fn eat(&mut self, what: &[u8]) -> bool {
        let next = self.text()[self.at..].starts_with(what);
        if next {
            self.at += what.len();
        }
        next
    }

    fn lit(&mut self, what: &[u8]) -> Option<()> {
        self.eat(what).then_some(())
    }

    /// A whole number without sign, fraction or exponent, as serde reads
    /// one into an unsigned field (no leading zero but `0` itself).
    fn uint(&mut self) -> Option<u64> {
        let start = self.at;
        let mut n: u64 = 0;
        while let Some(d) = self.text().get(self.at).filter(|b| b.is_ascii_digit()) {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        let fits = digits == 1 || (digits > 1 && self.text()[start] != b'0');
        // A fraction or an exponent would make it a float: serde's to judge.
        let whole = !matches!(self.text().get(self.at), Some(b'.' | b'e' | b'E'));
        (fits && whole).then_some(n)
    }

    /// The span of a string (quotes included) and whether it holds an escape;
    /// `None` for a control character or no closing quote.
    fn string_span(&mut self) -> Option<(usize, usize, bool)> {
        let start = self.at;
        self.lit(b"\"")?;
        let mut escaped = false;
        loop {
            // To the next `"`, `\` or control byte, eight bytes at a time.
            self.at = sql2ddb_core::json::next_special(self.text(), self.at);
            let b = *self.text().get(self.at)?;
            self.at += 1;
            match b {
                b'"' => return Some((start, self.at, escaped)),
                b'\\' => {
                    escaped = true;
                    self.text().get(self.at)?;
                    self.at += 1;
                }
                _ => return None,
            }
        }
    }

    /// A string's value.
    fn string(&mut self) -> Option<String> {
        let (start, end, escaped) = self.string_span()?;
        if escaped {
            serde_json::from_str(&self.line[start..end]).ok()
        } else {
            Some(self.line[start + 1..end - 1].to_owned())
        }
    }

    /// The span of any JSON value, checked no further than its brackets
    /// and strings (serde or `RawValue` reads the span itself).
    fn skip_value(&mut self) -> Option<(usize, usize)> {
        let start = self.at;
        let mut depth = 0usize;
        loop {
            match *self.text().get(self.at)? {
                b'"' => {
                    self.string_span()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.at += 1;
                }
                b',' | b':' if depth > 0 => self.at += 1,
                b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' => self.at += 1,
                _ => return None,
            }
            let ended = depth == 0
                && !matches!(
                    self.text().get(self.at),
                    Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
                );
            if ended {
                return Some((start, self.at));
            }
        }
    }

    /// A value of the few that come once a line, read by serde.
    fn serde_value<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        let (start, end) = self.skip_value()?;
        serde_json::from_str(&self.line[start..end]).ok()
    }

    /// `[text length,size,[key values],source key]`.
    fn item(&mut self) -> Option<ItemHeadIn> {
        self.lit(b"[")?;
        let len = usize::try_from(self.uint()?).ok()?;
        self.lit(b",")?;
        let size = usize::try_from(self.uint()?).ok()?;
        self.lit(b",[")?;
        let key = self.list(Vec::with_capacity(2), Cursor::key_value)?;
        self.lit(b",")?;
        let (start, end) = self.skip_value()?;
        let source = RawValue::from_string(self.line[start..end].to_owned()).ok()?;
        self.lit(b"]")?;
        Some(ItemHeadIn(len, size, key, SourceKey::from_raw(source)))
    }

    /// A key value: `{"S":…}`, `{"N":…}`, `{"B":…}` or `{"NULL":true}`.
    fn key_value(&mut self) -> Option<AttrValue> {
        if self.eat(b"{\"S\":") {
            let s = self.string()?;
            self.lit(b"}")?;
            Some(AttrValue::S(s))
        } else if self.eat(b"{\"N\":") {
            let n = self.string()?;
            self.lit(b"}")?;
            Some(AttrValue::N(n))
        } else if self.eat(b"{\"B\":") {
            let b = self.string()?;
            self.lit(b"}")?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
            Some(AttrValue::B(bytes))
        } else if self.eat(b"{\"NULL\":true}") {
            Some(AttrValue::Null)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use sql2ddb_core::{EncodedItem, KeyAttr, KeyType, PointerUpdate, WorkBatch};

    use super::*;

    fn by_serde(line: &[u8]) -> Result<HeadIn, String> {
        serde_json::from_slice(line).map_err(|e| e.to_string())
    }

    /// The head line `codec` writes for `batch`.
    fn line(batch: &WorkBatch) -> Vec<u8> {
        let payload = crate::codec::text_payload(batch);
        let end = payload.iter().position(|&b| b == b'\n').unwrap();
        payload[..end].to_vec()
    }

    /// Items with every kind of key value: text with escapes and
    /// characters past ASCII, numbers, binary, and a key the item lacks.
    fn items(n: usize) -> Vec<EncodedItem> {
        let keys = [
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::N),
            KeyAttr::new("B", KeyType::B),
        ];
        (0..n)
            .map(|i| {
                let mut item = BTreeMap::new();
                item.insert(
                    "PK".to_string(),
                    AttrValue::S(format!("O#{i}\"\\\n\u{1}/ü€😀")),
                );
                if i % 2 == 0 {
                    item.insert("SK".to_string(), AttrValue::N(format!("-{i}.5E-3")));
                }
                item.insert("B".to_string(), AttrValue::B(vec![i as u8, 0, 255]));
                let source = match i % 3 {
                    0 => serde_json::json!({ "id": i, "name": "a\"b" }),
                    1 => serde_json::Value::Null,
                    _ => serde_json::json!([i, -1.25e-7, true, {"x": [null]}]),
                };
                EncodedItem::new(&item, &keys, source, 10 + i)
            })
            .collect()
    }

    fn batch(items: Vec<EncodedItem>, pointers: bool) -> WorkBatch {
        let pointers = if pointers {
            vec![BatchPointer {
                update: PointerUpdate {
                    name: "LAST_ORDER".into(),
                    pk: AttrValue::S("LAST\"ORDER".into()),
                    sk: Some(AttrValue::N("0".into())),
                    attribute: "v".into(),
                    value: AttrValue::N("29".into()),
                    is_max: true,
                    attributes: Default::default(),
                    cleared: Vec::new(),
                },
                item_key: vec![AttrValue::S("k".into())],
            }]
        } else {
            Vec::new()
        };
        WorkBatch {
            run_id: "run-1".parse().unwrap(),
            entity: "orders ü".into(),
            segment: u32::MAX,
            page: u64::MAX,
            part: BatchPart { index: 2, count: 3 },
            rows_read: 0,
            items,
            pointers,
        }
    }

    #[test]
    fn a_head_line_as_written_is_read_by_hand_as_serde_reads_it() {
        for b in [
            batch(items(7), true),
            batch(items(7), false),
            batch(Vec::new(), false),
            batch(Vec::new(), true),
            WorkBatch {
                segment: 0,
                page: 0,
                rows_read: 10,
                part: BatchPart::WHOLE,
                ..batch(items(1), false)
            },
        ] {
            let line = line(&b);
            let text = String::from_utf8_lossy(&line).into_owned();
            let fast = read(&line).unwrap_or_else(|| panic!("not read by hand: {text}"));
            assert_eq!(Ok(&fast), by_serde(&line).as_ref(), "{text}");
            assert_eq!(fast.items.len(), b.items.len());
            for (got, want) in fast.items.iter().zip(&b.items) {
                assert_eq!(got.2, want.key);
                assert_eq!(got.3, want.source_key);
            }
        }
    }

    /// Every byte of a line replaced by bytes that matter to JSON, or
    /// dropped: whatever the hand reads, serde reads the same, and nothing
    /// serde refuses is read by hand.
    #[test]
    fn a_damaged_head_line_is_read_by_hand_only_as_serde_reads_it() {
        let line = line(&batch(items(3), true));
        let swaps: &[&[u8]] = &[
            b"", b" ", b"\"", b"\\", b"0", b"9", b"-", b".", b"e", b"}", b"]", b"{", b"[", b",",
            b":", b"x", b"\x01", b"\xc3", b"11", b"\"\"", b"null",
        ];
        let (mut read_by_hand, mut tried) = (0, 0);
        for at in 0..line.len() {
            for swap in swaps {
                let mut damaged = line[..at].to_vec();
                damaged.extend_from_slice(swap);
                damaged.extend_from_slice(&line[at + 1..]);
                tried += 1;
                if let Some(fast) = read(&damaged) {
                    read_by_hand += 1;
                    let text = String::from_utf8_lossy(&damaged).into_owned();
                    assert_eq!(Ok(&fast), by_serde(&damaged).as_ref(), "{text}");
                }
            }
        }
        // Many of the damaged lines are still whole JSON of the same shape
        // (a digit for a digit, a character inside a string).
        assert!(read_by_hand > tried / 10, "{read_by_hand} of {tried}");
    }

    #[test]
    fn a_line_not_as_written_is_left_to_serde() {
        let line = String::from_utf8(line(&batch(items(2), false))).unwrap();
        for other in [
            line.replacen("{\"run_id\":", "{ \"run_id\":", 1),
            line.replacen("\"run-1\"", "\"../up\"", 1),
            line.replacen(",\"items\":[", ",\"extra\":1,\"items\":[", 1),
            format!("{line} "),
            line.replacen("{\"S\":", "{\"SS\":[", 1),
        ] {
            assert!(read(other.as_bytes()).is_none(), "{other}");
        }
    }
}
