//! A sample item on one line: DynamoDB JSON without its type wrappers, long
//! strings, lists and maps cut (`plan --json` keeps the items whole).

use serde_json::Value as Json;

/// Characters of a string value shown.
const STRING_CHARS: usize = 40;
/// Elements of a list or set, and attributes of a nested map, shown.
const ELEMENTS: usize = 3;
/// Characters of the whole line.
const LINE_CHARS: usize = 240;

/// `item` (a DynamoDB JSON object of attributes) on one line.
pub fn item(item: &Json) -> String {
    let text = match item.as_object() {
        Some(attrs) => map(attrs, usize::MAX),
        None => item.to_string(),
    };
    cut(&text, LINE_CHARS)
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn map(attrs: &serde_json::Map<String, Json>, most: usize) -> String {
    let mut parts: Vec<String> = attrs
        .iter()
        .take(most)
        .map(|(k, v)| format!("{k}: {}", value(v)))
        .collect();
    if attrs.len() > most {
        parts.push(format!("… +{}", attrs.len() - most));
    }
    format!("{{{}}}", parts.join(", "))
}

fn list<'a>(values: impl ExactSizeIterator<Item = String> + 'a) -> String {
    let n = values.len();
    let mut parts: Vec<String> = values.take(ELEMENTS).collect();
    if n > ELEMENTS {
        parts.push(format!("… +{}", n - ELEMENTS));
    }
    parts.join(", ")
}

/// One typed value (`{"S": "…"}`, `{"L": […]}`, …).
fn value(v: &Json) -> String {
    let Some((kind, inner)) = v.as_object().and_then(|o| o.iter().next()) else {
        return v.to_string();
    };
    match (kind.as_str(), inner) {
        ("S", Json::String(s)) => format!("{:?}", cut(s, STRING_CHARS)),
        ("N", Json::String(n)) => n.clone(),
        ("B", Json::String(b)) => format!("<{} base64 chars>", b.len()),
        ("BOOL", Json::Bool(b)) => b.to_string(),
        ("NULL", _) => "null".into(),
        ("L", Json::Array(a)) => format!("[{}]", list(a.iter().map(value))),
        ("M", Json::Object(m)) => map(m, ELEMENTS),
        ("SS", Json::Array(a)) => format!(
            "<<{}>>",
            list(
                a.iter()
                    .map(|s| format!("{:?}", cut(s.as_str().unwrap_or(""), STRING_CHARS)))
            )
        ),
        ("NS", Json::Array(a)) => format!(
            "<<{}>>",
            list(a.iter().map(|n| n.as_str().unwrap_or("").to_string()))
        ),
        ("BS", Json::Array(a)) => format!("<<{} binary values>>", a.len()),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_customer_with_its_invoices_fits_one_line() {
        let invoice = |i: u32| {
            json!({"M": {"invoice_id": {"N": i.to_string()}, "total": {"N": "1.98"},
            "billing_address": {"S": "Theodor-Heuss-Straße 34"}, "lines": {"L": [{"M": {"n": {"N": "1"}}}]}}})
        };
        let item = json!({
            "PK": {"S": "CUSTOMER#1"},
            "SK": {"S": "CUSTOMER"},
            "note": {"S": "x".repeat(500)},
            "vip": {"BOOL": true},
            "fax": {"NULL": true},
            "tags": {"SS": ["a", "b", "c", "d", "e"]},
            "invoices": {"L": (1..=7).map(invoice).collect::<Vec<_>>()},
        });
        let line = super::item(&item);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.chars().count() <= LINE_CHARS + 1, "{line}");
        assert!(
            line.starts_with("{PK: \"CUSTOMER#1\", SK: \"CUSTOMER\""),
            "{line}"
        );
        // A long string cut, a set and a list shortened with what is left.
        assert!(
            line.contains(&format!("note: \"{}…\"", "x".repeat(STRING_CHARS))),
            "{line}"
        );
        assert!(
            line.contains("tags: <<\"a\", \"b\", \"c\", … +2>>"),
            "{line}"
        );
        assert!(line.contains("vip: true, fax: null"), "{line}");
    }

    #[test]
    fn a_long_line_is_cut() {
        let attrs: serde_json::Map<String, Json> = (0..100)
            .map(|i| (format!("attribute_{i}"), json!({"N": "12345"})))
            .collect();
        let line = item(&Json::Object(attrs));
        assert_eq!(line.chars().count(), LINE_CHARS + 1, "{line}");
        assert!(line.ends_with('…'));
    }
}
