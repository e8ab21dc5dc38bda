//! DynamoDB's JSON as the service may spell it back: the same item in
//! another text (attributes and set elements in another order, a number in
//! another spelling of its value, a character of a string as a `\u`
//! escape), and the one text of an item's value that the proxy recognises
//! it by whatever its spelling. Binary stays as sent: padded base64 has one
//! spelling.

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::Rng;
use serde_json::{Map, Value as Json};

/// `item` (attribute name → attribute value) written as DynamoDB may send it
/// back: the same value, another text. A value that is not well formed is
/// written as it is.
pub(crate) fn item_text(item: &Json, rng: &mut StdRng) -> String {
    let mut out = String::new();
    match item {
        Json::Object(map) => write_item(map, rng, &mut out),
        other => out.push_str(&other.to_string()),
    }
    out
}

/// One text for every spelling of `value` (an item, a key, a write request):
/// object members sorted by name, numbers in one normal form, set elements
/// sorted, base64 without padding.
pub(crate) fn identity(value: &Json) -> String {
    let mut out = String::new();
    write_identity(value, None, &mut out);
    out
}

fn write_identity(value: &Json, type_tag: Option<&str>, out: &mut String) {
    match (type_tag, value) {
        (Some("N"), Json::String(n)) => push_json(out, &canonical_number(n)),
        (Some("B"), Json::String(b)) => push_json(out, b.trim_end_matches('=')),
        (Some(tag @ ("NS" | "SS" | "BS")), Json::Array(elements)) => {
            let mut texts: Vec<String> = elements
                .iter()
                .map(|e| match (tag, e) {
                    ("NS", Json::String(n)) => canonical_number(n),
                    ("BS", Json::String(b)) => b.trim_end_matches('=').to_string(),
                    (_, Json::String(s)) => s.clone(),
                    (_, other) => other.to_string(),
                })
                .collect();
            texts.sort();
            out.push('[');
            for (i, t) in texts.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json(out, t);
            }
            out.push(']');
        }
        (_, Json::Object(map)) => {
            let mut names: Vec<&String> = map.keys().collect();
            names.sort();
            out.push('{');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json(out, name);
                out.push(':');
                // A one-member object whose name is a type tag is an attribute value.
                let tag = (map.len() == 1).then_some(name.as_str());
                write_identity(&map[name], tag, out);
            }
            out.push('}');
        }
        (_, Json::Array(elements)) => {
            out.push('[');
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_identity(e, None, out);
            }
            out.push(']');
        }
        (_, other) => out.push_str(&other.to_string()),
    }
}

fn push_json(out: &mut String, text: &str) {
    out.push_str(&Json::String(text.to_string()).to_string());
}

/// `items` in an order other than the one they came in, when there are two
/// or more.
fn shuffled<T: Clone + PartialEq>(items: &[T], rng: &mut StdRng) -> Vec<T> {
    let mut out = items.to_vec();
    out.shuffle(rng);
    if out.len() > 1 && out == items {
        out.rotate_left(1);
    }
    out
}

fn write_item(map: &Map<String, Json>, rng: &mut StdRng, out: &mut String) {
    let names: Vec<&String> = map.keys().collect();
    out.push('{');
    for (i, name) in shuffled(&names, rng).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_json(out, name);
        out.push(':');
        write_value(&map[name], rng, out);
    }
    out.push('}');
}

/// One attribute value (`{"S": …}`, `{"N": …}`, …), re-spelled.
fn write_value(value: &Json, rng: &mut StdRng, out: &mut String) {
    let Some((tag, inner)) = value
        .as_object()
        .filter(|m| m.len() == 1)
        .and_then(|m| m.iter().next())
    else {
        out.push_str(&value.to_string());
        return;
    };
    out.push('{');
    push_json(out, tag);
    out.push(':');
    match (tag.as_str(), inner) {
        ("S", Json::String(s)) => write_escaped(s, rng, out),
        ("N", Json::String(n)) => push_json(out, &respell_number(n, rng)),
        (tag @ ("SS" | "NS" | "BS"), Json::Array(elements)) => {
            out.push('[');
            for (i, e) in shuffled(elements, rng).iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match (tag, e) {
                    ("NS", Json::String(n)) => push_json(out, &respell_number(n, rng)),
                    (_, other) => out.push_str(&other.to_string()),
                }
            }
            out.push(']');
        }
        ("M", Json::Object(map)) => write_item(map, rng, out),
        ("L", Json::Array(elements)) => {
            out.push('[');
            for (i, e) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(e, rng, out);
            }
            out.push(']');
        }
        (_, other) => out.push_str(&other.to_string()),
    }
    out.push('}');
}

/// `s` as a JSON string with one of its characters written as a `\u`
/// escape (a surrogate pair outside the basic plane).
fn write_escaped(s: &str, rng: &mut StdRng, out: &mut String) {
    let count = s.chars().count();
    if count == 0 {
        push_json(out, s);
        return;
    }
    let at = rng.random_range(0..count);
    let (start, ch) = s.char_indices().nth(at).expect("at < count");
    let quoted = |part: &str| {
        let text = Json::String(part.to_string()).to_string();
        text[1..text.len() - 1].to_string()
    };
    out.push('"');
    out.push_str(&quoted(&s[..start]));
    let mut units = [0u16; 2];
    for unit in ch.encode_utf16(&mut units) {
        out.push_str(&format!("\\u{unit:04x}"));
    }
    out.push_str(&quoted(&s[start + ch.len_utf8()..]));
    out.push('"');
}

/// A number's value: `digits × 10^exponent`, `digits` without leading or
/// trailing zeros (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

fn parse_number(text: &str) -> Option<Decimal> {
    let t = text.trim();
    let (negative, t) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i64>().ok()?),
        None => (t, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let all = format!("{int}{frac}");
    let digits = all.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    let exponent = exp - frac.len() as i64 + (digits.len() - trimmed.len()) as i64;
    if trimmed.is_empty() {
        return Some(Decimal {
            negative: false,
            digits: String::new(),
            exponent: 0,
        });
    }
    Some(Decimal {
        negative,
        digits: trimmed.to_string(),
        exponent,
    })
}

/// The one spelling of a number's value; text that is no number stays as it is.
fn canonical_number(text: &str) -> String {
    match parse_number(text) {
        Some(d) if d.digits.is_empty() => "0".into(),
        Some(d) => format!(
            "{}{}E{}",
            if d.negative { "-" } else { "" },
            d.digits,
            d.exponent
        ),
        None => text.to_string(),
    }
}

/// `d` in plain notation (`123.45`, `0.001`, `1200`).
fn plain(d: &Decimal) -> String {
    let sign = if d.negative { "-" } else { "" };
    if d.digits.is_empty() {
        return "0".into();
    }
    let len = d.digits.len() as i64;
    if d.exponent >= 0 {
        format!("{sign}{}{}", d.digits, "0".repeat(d.exponent as usize))
    } else if len > -d.exponent {
        let (int, frac) = d.digits.split_at((len + d.exponent) as usize);
        format!("{sign}{int}.{frac}")
    } else {
        let zeros = "0".repeat((-d.exponent - len) as usize);
        format!("{sign}0.{zeros}{}", d.digits)
    }
}

/// Another spelling of the number `text`, chosen by `rng` among those that
/// differ from it: plain with a trailing zero, scientific (`1.2345E2`), or
/// an integer mantissa (`12345E-2`). Text that is no number stays as it is.
fn respell_number(text: &str, rng: &mut StdRng) -> String {
    let Some(d) = parse_number(text) else {
        return text.to_string();
    };
    let plain = plain(&d);
    let trailing_zero = if plain.contains('.') {
        format!("{plain}0")
    } else {
        format!("{plain}.0")
    };
    let sign = if d.negative { "-" } else { "" };
    let candidates = if d.digits.is_empty() {
        vec![trailing_zero, "0E+0".to_string()]
    } else {
        let (first, rest) = d.digits.split_at(1);
        let point = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp = d.exponent + rest.len() as i64;
        vec![
            trailing_zero,
            format!("{sign}{first}{point}E{exp:+}"),
            format!("{sign}{}e{}", d.digits, d.exponent),
        ]
    };
    let others: Vec<&String> = candidates.iter().filter(|c| *c != text).collect();
    others[rng.random_range(0..others.len())].clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_respelling_of_a_number_has_its_value() {
        let mut rng = StdRng::seed_from_u64(1);
        for text in [
            "0",
            "5",
            "-5",
            "5.5",
            "12345.67",
            "0.001",
            "-0.00012",
            "1200",
            "1E+2",
            "1e-130",
            "99999999999999999999999999999999999999",
            "0.0",
        ] {
            for _ in 0..20 {
                let other = respell_number(text, &mut rng);
                assert_ne!(other, text);
                assert_eq!(
                    canonical_number(&other),
                    canonical_number(text),
                    "{text} → {other}"
                );
                assert_eq!(
                    other.parse::<f64>().unwrap(),
                    text.parse::<f64>().unwrap(),
                    "{text} → {other}"
                );
            }
        }
        assert_eq!(canonical_number("1.50"), canonical_number("15E-1"));
        assert_ne!(canonical_number("1.5"), canonical_number("15"));
        assert_eq!(canonical_number("-0.0"), "0");
    }

    #[test]
    fn a_reencoded_item_is_the_same_value_in_another_text() {
        let item: Json = serde_json::json!({
            "PK": {"S": "ÉTÉ#1 \"quoted\" 😀"},
            "SK": {"N": "42"},
            "tags": {"SS": ["a", "b", "c", "d"]},
            "nums": {"NS": ["1", "2.5", "-3"]},
            "blob": {"B": "QQ=="},
            "blobs": {"BS": ["QUI=", "QUJD"]},
            "m": {"M": {"x": {"N": "1.25"}, "y": {"NULL": true}, "z": {"BOOL": false}}},
            "l": {"L": [{"N": "7"}, {"S": "x"}]}
        });
        let mut rng = StdRng::seed_from_u64(9);
        let text = item_text(&item, &mut rng);
        assert_ne!(text, item.to_string());
        let back: Json = serde_json::from_str(&text).unwrap();
        assert_ne!(back, item, "another text, not only another order");
        assert_eq!(identity(&back), identity(&item));
        let names: Vec<&String> = back.as_object().unwrap().keys().collect();
        let sent: Vec<&String> = item.as_object().unwrap().keys().collect();
        assert_ne!(names, sent, "attributes in another order");
        assert_eq!(back["blob"]["B"], "QQ==");
        assert_ne!(
            back["tags"]["SS"], item["tags"]["SS"],
            "set in another order"
        );
    }

    #[test]
    fn identity_tells_different_values_apart() {
        let a = serde_json::json!({"PK": {"S": "1"}, "n": {"N": "1"}});
        let b = serde_json::json!({"PK": {"S": "1"}, "n": {"N": "1.5"}});
        let c = serde_json::json!({"PK": {"N": "1"}, "n": {"N": "1"}});
        assert_ne!(identity(&a), identity(&b));
        assert_ne!(identity(&a), identity(&c));
    }
}
