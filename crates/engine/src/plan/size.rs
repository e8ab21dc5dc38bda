//! Sizes and units of sampled items by DynamoDB's rules (the core crate's
//! `item_size` and `write_units`), each index's projected size, and the key
//! templates' columns for the plan's `GROUP BY`s.

use std::collections::BTreeMap;

use serde::Serialize;
use sql2ddb_core::limits::MAX_ITEM_BYTES;
use sql2ddb_core::{item_size, write_units, Item, KeyAttr};
use sql2ddb_mapping::{Gsi, Projection};

/// An item at least this share of the 400 KB limit is "near the limit".
pub const NEAR_LIMIT_SHARE: f64 = 0.9;

/// Item sizes of a sample, in bytes by DynamoDB's rules.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SizeStats {
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
    /// Share of the items (0..1) at 90% of the 400 KB limit or more.
    pub near_limit: f64,
    /// How many sampled items fall in each size range, from the range of the
    /// smallest to that of the largest (`report.html`'s histogram).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<SizeBucket>,
}

/// Sampled items of one size range.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SizeBucket {
    /// Largest size in the range, in bytes (ranges double from 64 bytes;
    /// the last ends at the 400 KB limit).
    pub up_to: u64,
    /// Items in it.
    pub items: u64,
}

/// Upper bounds of the histogram's ranges: 64 B, 128 B, … 256 KiB, 400 KB.
fn bucket_bounds() -> Vec<u64> {
    let mut bounds: Vec<u64> = (6..=18).map(|p| 1u64 << p).collect();
    bounds.push(MAX_ITEM_BYTES as u64);
    bounds
}

/// The histogram of `sorted` sizes (ascending), empty ranges outside the
/// smallest and the largest size left out.
fn histogram(sorted: &[usize]) -> Vec<SizeBucket> {
    let bounds = bucket_bounds();
    let mut buckets: Vec<SizeBucket> = bounds
        .iter()
        .map(|&up_to| SizeBucket { up_to, items: 0 })
        .collect();
    for &s in sorted {
        let i = bounds
            .iter()
            .position(|&b| s as u64 <= b)
            .unwrap_or(bounds.len() - 1);
        buckets[i].items += 1;
    }
    let first = buckets.iter().position(|b| b.items > 0);
    let last = buckets.iter().rposition(|b| b.items > 0);
    match (first, last) {
        (Some(a), Some(b)) => buckets[a..=b].to_vec(),
        _ => Vec::new(),
    }
}

impl SizeStats {
    /// The statistics of `sizes` (any order).
    pub fn of(sizes: &[usize]) -> SizeStats {
        if sizes.is_empty() {
            return SizeStats::default();
        }
        let mut sorted = sizes.to_vec();
        sorted.sort_unstable();
        let at = |q: f64| {
            sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1] as u64
        };
        let limit = MAX_ITEM_BYTES as f64 * NEAR_LIMIT_SHARE;
        let near = sorted.iter().filter(|&&s| s as f64 >= limit).count();
        SizeStats {
            p50: at(0.5),
            p95: at(0.95),
            max: *sorted.last().unwrap_or(&0) as u64,
            mean: sorted.iter().sum::<usize>() as f64 / sorted.len() as f64,
            near_limit: near as f64 / sorted.len() as f64,
            histogram: histogram(&sorted),
        }
    }
}

/// The size of `item` as projected into `gsi`, or `None` when the item
/// lacks one of the index's key attributes (it is not in the index).
pub fn projected_size(item: &Item, gsi: &Gsi, table_keys: &[KeyAttr]) -> Option<usize> {
    let index_keys = gsi.keys();
    if !index_keys.iter().all(|k| item.contains_key(&k.name)) {
        return None;
    }
    let keep = |name: &str| {
        table_keys.iter().chain(&index_keys).any(|k| k.name == name)
            || match &gsi.projection {
                Projection::All => true,
                Projection::KeysOnly => false,
                Projection::Include(attrs) => attrs.iter().any(|a| a == name),
            }
    };
    let projected: Item = item
        .iter()
        .filter(|(name, _)| keep(name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(item_size(&projected))
}

/// Write units of one item: the table's, and each index's (0 when the item
/// is not in that index), with DynamoDB's 1 KB rounding.
pub fn item_units(
    item: &Item,
    size: usize,
    gsis: &[Gsi],
    keys: &[KeyAttr],
) -> (u64, Vec<Option<usize>>) {
    let sizes = gsis.iter().map(|g| projected_size(item, g, keys)).collect();
    (write_units(size), sizes)
}

/// A placeholder of a key template: the column and its zero padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// Column name.
    pub column: String,
    /// Zero padding width.
    pub width: Option<usize>,
}

/// The pieces of a template's text: literals and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Lit(String),
    /// `{column}` or `{column:0N}`.
    Col(Placeholder),
}

/// Splits a template's text (already validated by the mapping) into pieces.
pub fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                lit.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                lit.push('}');
            }
            '{' => {
                let inner: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let (column, width) = match inner.split_once(':') {
                    Some((c, w)) => (c.trim(), w.trim_start_matches('0').parse().ok()),
                    None => (inner.trim(), None),
                };
                if !lit.is_empty() {
                    out.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                out.push(Piece::Col(Placeholder {
                    column: column.to_string(),
                    width,
                }));
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        out.push(Piece::Lit(lit));
    }
    out
}

/// The distinct columns of templates, in order of first use.
pub fn columns<'a>(templates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in templates {
        for p in pieces(t) {
            if let Piece::Col(p) = p {
                if !out.contains(&p.column) {
                    out.push(p.column);
                }
            }
        }
    }
    out
}

/// The column values that render `template` as `key`, when it can: each
/// placeholder takes the text up to the next literal (a zero-padded number
/// loses its padding). `None` when the template cannot render the key, or
/// two placeholders touch (no literal tells where one ends).
pub fn parse<'a>(template: &str, key: &'a str) -> Option<Vec<(String, &'a str)>> {
    let pieces = pieces(template);
    let mut rest = key;
    let mut out = Vec::new();
    for (i, p) in pieces.iter().enumerate() {
        match p {
            Piece::Lit(l) => rest = rest.strip_prefix(l.as_str())?,
            Piece::Col(c) => {
                let end = match pieces.get(i + 1) {
                    None => rest.len(),
                    Some(Piece::Lit(next)) => rest.find(next.as_str())?,
                    Some(Piece::Col(_)) => return None,
                };
                let mut value = &rest[..end];
                if c.width.is_some() {
                    let trimmed = value.trim_start_matches('0');
                    value = match trimmed.is_empty() {
                        true => &value[value.len().saturating_sub(1)..],
                        false => trimmed,
                    };
                }
                out.push((c.column.clone(), value));
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(out)
}

/// A template filled with the source's text of its columns' values (for
/// showing a key found by a `GROUP BY`; a NULL shows as `NULL`).
pub fn render(text: &str, values: &BTreeMap<&str, Option<&str>>) -> String {
    let mut out = String::new();
    for p in pieces(text) {
        match p {
            Piece::Lit(s) => out.push_str(&s),
            Piece::Col(p) => {
                let v = values
                    .get(p.column.as_str())
                    .copied()
                    .flatten()
                    .unwrap_or("NULL");
                match p.width {
                    Some(w) if v.len() < w => {
                        let (sign, digits) = match v.strip_prefix('-') {
                            Some(d) => ("-", d),
                            None => ("", v),
                        };
                        out.push_str(sign);
                        out.push_str(&"0".repeat(w - v.len()));
                        out.push_str(digits);
                    }
                    _ => out.push_str(v),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::{AttrValue, KeyType};

    #[test]
    fn the_histogram_counts_every_item_once_from_the_smallest_range_to_the_largest() {
        let stats = SizeStats::of(&[100, 120, 128, 129, 3000, 5000]);
        let ranges: Vec<(u64, u64)> = stats.histogram.iter().map(|b| (b.up_to, b.items)).collect();
        assert_eq!(
            ranges,
            [
                (128, 3),
                (256, 1),
                (512, 0),
                (1024, 0),
                (2048, 0),
                (4096, 1),
                (8192, 1)
            ]
        );
        let near = SizeStats::of(&[MAX_ITEM_BYTES]);
        assert_eq!(
            near.histogram.last().map(|b| b.up_to),
            Some(MAX_ITEM_BYTES as u64)
        );
        assert!(SizeStats::of(&[]).histogram.is_empty());
    }

    #[test]
    fn a_key_parses_back_into_the_values_its_template_renders() {
        let got = parse("PLAYLIST#{playlist_id}", "PLAYLIST#12").unwrap();
        assert_eq!(got, vec![("playlist_id".to_string(), "12")]);
        let got = parse("C#{a}#O#{b:06}", "C#x-1#O#000042").unwrap();
        assert_eq!(got, vec![("a".to_string(), "x-1"), ("b".to_string(), "42")]);
        assert_eq!(parse("N#{n:04}", "N#0000").unwrap()[0].1, "0");
        // Another entity's literal, a missing suffix, or no literal between
        // two placeholders: not this template's key.
        assert!(parse("CUSTOMER#{id}", "PLAYLIST#12").is_none());
        assert!(parse("P#{id}#X", "P#12").is_none());
        assert!(parse("{a}{b}", "12").is_none());
    }

    #[test]
    fn templates_split_into_columns_and_render() {
        assert_eq!(
            columns(["CUSTOMER#{customer_id}", "ORDER#{order_id:010}"]),
            ["customer_id", "order_id"]
        );
        assert_eq!(columns(["{{x}}#{a}{b}"]), ["a", "b"]);
        let values = BTreeMap::from([("order_id", Some("42")), ("a", None)]);
        assert_eq!(render("ORDER#{order_id:06}", &values), "ORDER#000042");
        assert_eq!(render("{{{a}}}", &values), "{NULL}");
    }

    #[test]
    fn percentiles_and_projection() {
        let s = SizeStats::of(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!((s.p50, s.p95, s.max), (5, 10, 10));
        let item: Item = [
            ("PK".to_string(), AttrValue::S("A".into())),
            ("G".to_string(), AttrValue::S("B".into())),
            ("big".to_string(), AttrValue::S("x".repeat(2000))),
        ]
        .into();
        let gsi = Gsi {
            name: "i".into(),
            pk: KeyAttr::new("G", KeyType::S),
            sk: None,
            projection: Projection::KeysOnly,
        };
        let keys = [KeyAttr::new("PK", KeyType::S)];
        assert_eq!(projected_size(&item, &gsi, &keys), Some(5));
        let all = Gsi {
            projection: Projection::All,
            ..gsi.clone()
        };
        assert_eq!(projected_size(&item, &all, &keys), Some(item_size(&item)));
        let (units, sizes) = item_units(&item, item_size(&item), &[gsi], &keys);
        assert_eq!((units, sizes), (2, vec![Some(5)]));
    }
}
