//! Pointer items (the "last order" pattern): one item at a fixed key whose
//! attribute holds the newest (or oldest) value written so far, moved only
//! forward by a conditional write.

use std::cmp::Ordering;

use crate::attr::{AttrValue, Item};

/// One conditional update of a pointer item: set `attribute` to `value` (and
/// `attributes`) unless the item already holds a value at least as far along.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PointerUpdate {
    /// The pointer's label in reports (`LAST_ORDER`, or as the mapping names it).
    pub name: String,
    /// Partition key value of the pointer item.
    pub pk: AttrValue,
    /// Sort key value, when the table has a sort key.
    pub sk: Option<AttrValue>,
    /// The attribute that holds the compared value.
    pub attribute: String,
    /// The candidate value: `N` (compared numerically) or `S` (compared by UTF-8 bytes).
    pub value: AttrValue,
    /// `true`: the pointer keeps the largest value (`#v < :new`); `false`: the smallest.
    pub is_max: bool,
    /// Other attributes written with the value, taken from the same source row.
    pub attributes: Item,
    /// The pointer's other attributes that row has no value for (NULL):
    /// removed with the write, so the item never mixes two rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cleared: Vec<String>,
}

impl PointerUpdate {
    /// Whether `self` would move the pointer past `other` (same pointer key):
    /// a larger value for a max pointer, a smaller one for a min pointer.
    /// Values that cannot be compared (different types) never supersede.
    pub fn supersedes(&self, other: &PointerUpdate) -> bool {
        match compare_values(&self.value, &other.value) {
            Some(Ordering::Greater) => self.is_max,
            Some(Ordering::Less) => !self.is_max,
            _ => false,
        }
    }
}

/// Compares two pointer values as DynamoDB's condition expressions do:
/// numbers numerically, strings by their UTF-8 bytes. `None` for values of
/// different or other types.
pub fn compare_values(a: &AttrValue, b: &AttrValue) -> Option<Ordering> {
    match (a, b) {
        (AttrValue::N(x), AttrValue::N(y)) => Some(compare_numbers(x, y)),
        (AttrValue::S(x), AttrValue::S(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        _ => None,
    }
}

/// Compares two decimal numbers in plain notation (as
/// [`normalize_number`](crate::normalize_number) writes them) numerically,
/// without converting them to floats (38 digits do not fit an `f64`).
pub fn compare_numbers(a: &str, b: &str) -> Ordering {
    let (neg_a, a) = split_sign(a);
    let (neg_b, b) = split_sign(b);
    let a_zero = is_zero(a);
    let b_zero = is_zero(b);
    let neg_a = neg_a && !a_zero;
    let neg_b = neg_b && !b_zero;
    match (neg_a, neg_b) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => compare_magnitudes(a, b),
        (true, true) => compare_magnitudes(b, a),
    }
}

fn split_sign(s: &str) -> (bool, &str) {
    let s = s.trim();
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

fn is_zero(s: &str) -> bool {
    s.bytes().all(|b| b == b'0' || b == b'.')
}

fn compare_magnitudes(a: &str, b: &str) -> Ordering {
    let parts = |s: &str| -> (String, String) {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        (
            int.trim_start_matches('0').to_string(),
            frac.trim_end_matches('0').to_string(),
        )
    };
    let (ia, fa) = parts(a);
    let (ib, fb) = parts(b);
    ia.len()
        .cmp(&ib.len())
        .then_with(|| ia.cmp(&ib))
        .then_with(|| fa.cmp(&fb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_numerically() {
        assert_eq!(compare_numbers("10", "9"), Ordering::Greater);
        assert_eq!(compare_numbers("-10", "-9"), Ordering::Less);
        assert_eq!(compare_numbers("0.5", "0.45"), Ordering::Greater);
        assert_eq!(compare_numbers("-0", "0"), Ordering::Equal);
        assert_eq!(compare_numbers("1.50", "1.5"), Ordering::Equal);
        assert_eq!(compare_numbers("-1", "0"), Ordering::Less);
        assert_eq!(
            compare_numbers(
                "12345678901234567890123456789012345678",
                "12345678901234567890123456789012345677"
            ),
            Ordering::Greater
        );
    }

    #[test]
    fn strings_compare_by_bytes_and_types_do_not_mix() {
        let s = |v: &str| AttrValue::S(v.into());
        assert_eq!(compare_values(&s("b"), &s("a")), Some(Ordering::Greater));
        assert_eq!(compare_values(&s("Z"), &s("a")), Some(Ordering::Less));
        assert_eq!(compare_values(&s("1"), &AttrValue::N("1".into())), None);
    }

    #[test]
    fn supersedes_follows_direction() {
        let update = |v: &str, is_max| PointerUpdate {
            name: "p".into(),
            pk: AttrValue::S("P".into()),
            sk: None,
            attribute: "v".into(),
            value: AttrValue::N(v.into()),
            is_max,
            attributes: Item::new(),
            cleared: Vec::new(),
        };
        assert!(update("10", true).supersedes(&update("9", true)));
        assert!(!update("9", true).supersedes(&update("10", true)));
        assert!(update("9", false).supersedes(&update("10", false)));
        assert!(!update("9", true).supersedes(&update("9", true)));
    }
}
