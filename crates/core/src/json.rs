//! DynamoDB JSON written straight into text, for the write path: the same
//! text `serde_json` gives for an [`Item`](crate::Item) through
//! [`AttrValue`]'s `Serialize` (checked by the tests below), without the
//! serializer's per-call overhead and with strings escaped eight bytes at
//! a time.

use base64::Engine;

use crate::attr::{AttrValue, Attrs};
use crate::limits::item_size;

/// The item as its DynamoDB-JSON object (`{"PK":{"S":"A#1"},…}`), attributes
/// in the order `item` gives them (an [`Item`](crate::Item)'s is byte order).
pub fn item_text<A: Attrs + ?Sized>(item: &A) -> String {
    item_text_of_size(item, item_size(item))
}

/// [`item_text`] for an item whose size by DynamoDB's rules is known: it
/// sizes the text's buffer.
pub fn item_text_of_size<A: Attrs + ?Sized>(item: &A, size: usize) -> String {
    object_text(item.each(), item.each().count(), size, write_key)
}

/// [`item_text_of_size`] for attributes whose names are already written as
/// JSON with their colon (`"PK":`, by [`keyed_name`]), as an entity's
/// layout holds them once for every row: the same text, without escaping
/// every name of every item again.
pub fn item_text_keyed<'a>(
    attrs: impl Iterator<Item = (&'a str, &'a AttrValue)>,
    count: usize,
    size: usize,
) -> String {
    object_text(attrs, count, size, String::push_str)
}

/// An attribute name as JSON text with its colon (`"PK":`), for
/// [`item_text_keyed`].
pub fn keyed_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 3);
    write_key(&mut out, name);
    out
}

/// The object of `count` attributes whose size by DynamoDB's rules is
/// `size`, each name written by `key`, in a buffer sized for it.
fn object_text<'a>(
    attrs: impl Iterator<Item = (&'a str, &'a AttrValue)>,
    count: usize,
    size: usize,
    key: impl Fn(&mut String, &'a str),
) -> String {
    // Names and values, plus `{"":{"S":""}},` around each: rarely grown.
    let mut out = String::with_capacity(size + size / 3 + 16 * count + 2);
    write_object(&mut out, attrs, key);
    out
}

/// `{`, each attribute's name (by `key`) and value, commas between, `}`.
fn write_object<'a>(
    out: &mut String,
    attrs: impl Iterator<Item = (&'a str, &'a AttrValue)>,
    key: impl Fn(&mut String, &'a str),
) {
    out.push('{');
    for (i, (name, value)) in attrs.enumerate() {
        if i > 0 {
            out.push(',');
        }
        key(out, name);
        write_value(out, value);
    }
    out.push('}');
}

/// A name as a JSON string and its colon.
fn write_key(out: &mut String, name: &str) {
    write_str(out, name);
    out.push(':');
}

/// One attribute value as DynamoDB JSON (`{"S":"x"}`).
pub fn write_value(out: &mut String, v: &AttrValue) {
    match v {
        AttrValue::S(s) => {
            out.push_str(r#"{"S":"#);
            write_str(out, s);
        }
        AttrValue::N(n) => {
            out.push_str(r#"{"N":"#);
            write_str(out, n);
        }
        AttrValue::B(b) => {
            out.push_str(r#"{"B":""#);
            base64::engine::general_purpose::STANDARD.encode_string(b, out);
            out.push('"');
        }
        AttrValue::Bool(true) => out.push_str(r#"{"BOOL":true"#),
        AttrValue::Bool(false) => out.push_str(r#"{"BOOL":false"#),
        AttrValue::Null => out.push_str(r#"{"NULL":true"#),
        AttrValue::L(l) => write_list(out, r#"{"L":["#, l, write_value),
        AttrValue::M(m) => {
            out.push_str(r#"{"M":"#);
            write_object(out, m.iter().map(|(k, v)| (k.as_str(), v)), write_key);
        }
        AttrValue::SS(s) => write_list(out, r#"{"SS":["#, s, |out, e| write_str(out, e)),
        AttrValue::NS(s) => write_list(out, r#"{"NS":["#, s, |out, e| write_str(out, e)),
        AttrValue::BS(s) => write_list(out, r#"{"BS":["#, s, |out, b| {
            out.push('"');
            base64::engine::general_purpose::STANDARD.encode_string(b, out);
            out.push('"');
        }),
    }
    out.push('}');
}

/// `open`, the elements written by `each` with commas between them, `]`.
fn write_list<T>(out: &mut String, open: &str, items: &[T], each: impl Fn(&mut String, &T)) {
    out.push_str(open);
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(out, e);
    }
    out.push(']');
}

/// Where in `w` (eight bytes, the first lowest) the first byte below 0x20,
/// `"` or `\` is: its index, or `None` when there is none. Each test flags
/// its first such byte exactly (a false flag only ever sits above a true
/// one), so the lowest flag of the three is the first such byte.
#[inline]
pub(crate) fn first_special(w: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = (w ^ (ONES * b'"' as u64)).wrapping_sub(ONES) & !(w ^ (ONES * b'"' as u64));
    let slash = (w ^ (ONES * b'\\' as u64)).wrapping_sub(ONES) & !(w ^ (ONES * b'\\' as u64));
    let flags = (below | quote | slash) & HIGH;
    (flags != 0).then(|| flags.trailing_zeros() as usize / 8)
}

/// The index of the first byte of `bytes` at or after `from` that is below
/// 0x20, `"` or `\`, or `bytes.len()` when there is none (or `from` when it
/// is past the end): eight bytes at a time, the last few one by one.
#[inline]
pub fn next_special(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(w) = bytes.get(i..i + 8) {
        match first_special(u64::from_le_bytes(w.try_into().expect("eight bytes"))) {
            None => i += 8,
            Some(at) => return i + at,
        }
    }
    while let Some(&b) = bytes.get(i) {
        if b < 0x20 || b == b'"' || b == b'\\' {
            break;
        }
        i += 1;
    }
    i
}

/// `s` as a JSON string, escaped as `serde_json` escapes it: `"` and `\`,
/// the short escapes of `\b \f \n \r \t`, other control characters as
/// `\u00xx`; nothing else (not `/`, not DEL, not non-ASCII).
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0; // bytes[start..i] are still to be copied
    let mut i = next_special(bytes, 0);
    while let Some(&b) = bytes.get(i) {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            _ => "",
        };
        // Escaped bytes are ASCII, so `start..i` ends on a char boundary.
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(escape);
        }
        start = i + 1;
        i = next_special(bytes, start);
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::attr::Item;

    fn serde(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    #[test]
    fn the_first_special_byte_of_a_word_is_found_whatever_follows_it() {
        let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        // Every byte value at every place, among bytes that borrow and carry
        // in the word tests (0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0xff).
        let fillers = [0x20u8, 0x21, 0x5b, 0x5d, 0x7f, 0xff, b'a', 0x80];
        for at in 0..8 {
            for b in 0..=255u8 {
                for &fill in &fillers {
                    for &after in &[fill, 0x00, b'"', b'\\', 0x1f] {
                        let mut w = [fill; 8];
                        w[at] = b;
                        for x in w.iter_mut().skip(at + 1) {
                            *x = after;
                        }
                        let expected = w.iter().position(|&c| special(c));
                        assert_eq!(first_special(u64::from_le_bytes(w)), expected, "{w:?}");
                    }
                }
            }
        }
    }

    fn ours(s: &str) -> String {
        let mut out = String::new();
        write_str(&mut out, s);
        out
    }

    #[test]
    fn strings_are_escaped_exactly_as_serde_json_escapes_them() {
        // Every ASCII byte, alone and at each offset within eight-byte words.
        for b in 0u8..0x80 {
            let c = b as char;
            for at in 0..17 {
                let s: String = std::iter::repeat_n('a', at)
                    .chain([c])
                    .chain(std::iter::repeat_n('z', 9))
                    .collect();
                assert_eq!(ours(&s), serde(&s), "byte {b:#x} at {at}");
            }
        }
        for s in [
            "",
            "é",
            "naïve \"quoted\" \\ back\\slash/ and \u{7f} del",
            "日本語のテキスト\u{1}\u{1f}\u{20}",
            "tab\there\nnew\rline\u{8}\u{c}",
            "😀😀😀😀 emoji at a word edge \"",
        ] {
            assert_eq!(ours(s), serde(s), "{s:?}");
        }
        // Pseudo-random strings of bytes from a small alphabet rich in escapes.
        let alphabet = ['a', '"', '\\', '\n', '\u{1}', 'é', '€', ' ', '/', 'Z'];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5_000 {
            let mut s = String::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for k in 0..(x % 40) {
                s.push(alphabet[((x >> (k % 60)) % alphabet.len() as u64) as usize]);
            }
            assert_eq!(ours(&s), serde(&s), "{s:?}");
        }
    }

    #[test]
    fn an_item_is_written_as_serde_json_writes_it() {
        let mut inner = BTreeMap::new();
        inner.insert("bin".to_string(), AttrValue::B(vec![0, 1, 2, 255]));
        inner.insert("empty".to_string(), AttrValue::B(vec![]));
        inner.insert("null".to_string(), AttrValue::Null);
        inner.insert("q\"uote".to_string(), AttrValue::Bool(false));
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S("C#\"1\"\n".into()));
        item.insert("n".into(), AttrValue::N("-1.5E+3".into()));
        item.insert("b".into(), AttrValue::Bool(true));
        item.insert("m".into(), AttrValue::M(inner.clone()));
        item.insert(
            "l".into(),
            AttrValue::L(vec![
                AttrValue::M(inner),
                AttrValue::L(vec![]),
                AttrValue::Null,
            ]),
        );
        item.insert("ss".into(), AttrValue::SS(vec!["a".into(), "\\".into()]));
        item.insert("ns".into(), AttrValue::NS(vec!["1".into(), "2.5".into()]));
        item.insert("bs".into(), AttrValue::BS(vec![vec![], vec![9; 7]]));
        item.insert("ü".into(), AttrValue::S(String::new()));
        assert_eq!(item_text(&item), serde_json::to_string(&item).unwrap());
        assert_eq!(item_text(&Item::new()), "{}");
    }
}
