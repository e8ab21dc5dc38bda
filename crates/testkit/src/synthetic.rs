//! The items a null sink's table holds when it is scanned: `len` synthetic
//! order items, numbered `0..len`, made up on demand from their number (so
//! nothing is stored), about 250 bytes each by DynamoDB's size rules.
//!
//! A parallel Scan's segment `s` of `t` holds the items numbered
//! `len * s / t .. len * (s + 1) / t`, so the segments are disjoint and
//! together hold every item once. A page holds as many items as fit in
//! DynamoDB's 1 MB, and its `LastEvaluatedKey` is its last item's key, from
//! which the next page's first number is read back.

use std::fmt::Write;
use std::ops::Range;

use serde_json::Value as Json;
use sql2ddb_core::{item_size, Item, KeyAttr, KeyType};

/// The most item bytes of one Scan page, as DynamoDB's 1 MB page limit.
pub const PAGE_BYTES: usize = 1024 * 1024;

/// A table of synthetic items with a given key schema.
#[derive(Debug, Clone)]
pub struct SyntheticTable {
    len: u64,
    keys: Vec<KeyAttr>,
    /// The key names as JSON strings, quoted once.
    quoted: Vec<String>,
    /// Items per full page.
    per_page: u64,
}

/// One page of a segment: the items numbered `items`, and whether more of
/// the segment follows (then the page's `LastEvaluatedKey` is its last
/// item's key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageSpan {
    /// The numbers of the page's items.
    pub items: Range<u64>,
    /// Whether the segment goes on after this page.
    pub more: bool,
}

/// Why a page cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// `Segment` is not below `TotalSegments`, or `TotalSegments` is 0.
    #[error("Segment {segment} is out of range for TotalSegments {total}")]
    Segment {
        /// `Segment`.
        segment: u64,
        /// `TotalSegments`.
        total: u64,
    },
    /// `ExclusiveStartKey` is not a key of an item of that segment.
    #[error("the provided starting key is invalid")]
    StartKey,
}

/// A key schema synthetic items cannot have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeySchemaError {
    /// No key attribute, more than two, or a binary one.
    #[error("synthetic items need one or two S or N key attributes")]
    Unsupported,
}

impl SyntheticTable {
    /// A table of `len` items keyed by `keys` (partition key first, S or N;
    /// a binary key is refused).
    pub fn new(len: u64, keys: Vec<KeyAttr>) -> Result<SyntheticTable, KeySchemaError> {
        if keys.is_empty() || keys.len() > 2 || keys.iter().any(|k| k.kind == KeyType::B) {
            return Err(KeySchemaError::Unsupported);
        }
        let quoted = keys
            .iter()
            .map(|k| Json::String(k.name.clone()).to_string())
            .collect();
        let mut table = SyntheticTable {
            len,
            keys,
            quoted,
            per_page: 1,
        };
        let widest = item_size(&table.item(len.saturating_sub(1))).max(1);
        table.per_page = (PAGE_BYTES / widest).max(1) as u64;
        Ok(table)
    }

    /// How many items the table holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The numbers of the items in `segment` of `total`.
    pub fn segment(&self, segment: u64, total: u64) -> Result<Range<u64>, ScanError> {
        if total == 0 || segment >= total {
            return Err(ScanError::Segment { segment, total });
        }
        let at = |s: u64| (u128::from(self.len) * u128::from(s) / u128::from(total)) as u64;
        Ok(at(segment)..at(segment + 1))
    }

    /// The page of `segment` of `total` that starts after the item keyed
    /// `start` (from the start when `None`), of at most `limit` items.
    pub fn page(
        &self,
        segment: u64,
        total: u64,
        start: Option<&Json>,
        limit: Option<u64>,
    ) -> Result<PageSpan, ScanError> {
        let range = self.segment(segment, total)?;
        let first = match start {
            None => range.start,
            Some(key) => {
                let last = self.number_of(key).ok_or(ScanError::StartKey)?;
                if !range.contains(&last) {
                    return Err(ScanError::StartKey);
                }
                last + 1
            }
        };
        let per_page = limit.map_or(self.per_page, |l| l.clamp(1, self.per_page));
        let end = first.saturating_add(per_page).min(range.end);
        Ok(PageSpan {
            items: first..end,
            more: end < range.end,
        })
    }

    /// The number of the item whose key is `key` (`{"PK": {"S": …}, …}`).
    pub fn number_of(&self, key: &Json) -> Option<u64> {
        let key = key.as_object()?;
        if key.len() != self.keys.len() {
            return None;
        }
        let last = self.keys.last()?;
        let value = key.get(&last.name)?;
        let number = match last.kind {
            KeyType::N => value.get("N")?.as_str()?.parse().ok()?,
            _ => value.get("S")?.as_str()?.rsplit('#').next()?.parse().ok()?,
        };
        // The whole key must be this item's, not only its last part.
        let mut expected = String::new();
        self.write_key(number, &mut expected);
        let expected: Json = serde_json::from_str(&expected).ok()?;
        (number < self.len && expected.as_object() == Some(key)).then_some(number)
    }

    /// Appends the key of item `n` as DynamoDB JSON (`{"PK":{"S":"…"},…}`).
    pub fn write_key(&self, n: u64, out: &mut String) {
        out.push('{');
        self.write_key_attrs(n, out);
        out.push('}');
    }

    fn write_key_attrs(&self, n: u64, out: &mut String) {
        let two = self.keys.len() == 2;
        for (i, (key, quoted)) in self.keys.iter().zip(&self.quoted).enumerate() {
            if i > 0 {
                out.push(',');
            }
            // The partition key groups ten orders under a customer.
            let partition = two && i == 0;
            let _ = match (key.kind, partition) {
                (KeyType::N, true) => write!(out, "{quoted}:{{\"N\":\"{}\"}}", n / 10),
                (KeyType::N, false) => write!(out, "{quoted}:{{\"N\":\"{n}\"}}"),
                (_, true) => write!(out, "{quoted}:{{\"S\":\"CUSTOMER#{:07}\"}}", n / 10),
                (_, false) => write!(out, "{quoted}:{{\"S\":\"ORDER#{n:010}\"}}"),
            };
        }
    }

    /// Appends item `n` as DynamoDB JSON. Every value is plain ASCII: nothing
    /// to escape.
    pub fn write_item(&self, n: u64, out: &mut String) {
        out.push('{');
        self.write_key_attrs(n, out);
        let mix = |k: u64| n.wrapping_add(k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let _ = write!(
            out,
            concat!(
                ",\"entity\":{{\"S\":\"order\"}},\"status\":{{\"S\":\"open\"}}",
                ",\"customer_id\":{{\"N\":\"{}\"}},\"currency\":{{\"S\":\"EUR\"}}",
                ",\"total\":{{\"N\":\"{}.{}\"}},\"quantity\":{{\"N\":\"{}\"}}",
                ",\"created_at\":{{\"S\":\"2024-{:02}-{:02}T{:02}:{:02}:{:02}Z\"}}",
                ",\"shipped\":{{\"BOOL\":{}}},\"sku\":{{\"S\":\"SKU-{:06}\"}}",
                ",\"note\":{{\"S\":\"{:016x}{:016x}{:016x}{:016x}{:016x}{:016x}\"}}}}"
            ),
            n / 10 % 100_000,
            n * 37 % 1000,
            // A last decimal that is never 0: the number as DynamoDB normalises it.
            1 + n % 9,
            1 + n % 9,
            1 + n % 12,
            1 + n % 28,
            n % 24,
            n % 60,
            n / 60 % 60,
            n.is_multiple_of(3),
            n % 5000,
            mix(0),
            mix(1),
            mix(2),
            mix(3),
            mix(4),
            mix(5),
        );
    }

    /// Item `n`, as the Scan returns it.
    pub fn item(&self, n: u64) -> Item {
        let mut json = String::with_capacity(512);
        self.write_item(n, &mut json);
        serde_json::from_str(&json).expect("a synthetic item is DynamoDB JSON")
    }

    /// Its size by DynamoDB's rules.
    pub fn item_bytes(&self, n: u64) -> u64 {
        item_size(&self.item(n)) as u64
    }
}

#[cfg(test)]
mod tests;
