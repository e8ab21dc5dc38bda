//! The first pass of a full `verify --deep`: each item of either side is
//! reduced to its bucket (by key hash) and a 128-bit digest of its canonical
//! form, and each bucket keeps only an order-independent sum of its items'
//! digests (a wrapping sum of one half, an XOR of the other, and a count),
//! plus, on the expected side, how many of its items each entity made. That
//! is a few dozen bytes per bucket whatever the table's size: nothing is
//! spilled. Buckets whose sums differ are resolved in a second pass
//! ([`Resolver`]): only their records are kept, in [`Buckets`] (spilled past
//! the budget), and compared key by key.
//!
//! Two source rows collapsing onto one key always make the expected side of
//! their bucket count one item more than the table (which holds one item per
//! key), so their bucket is resolved and the collapse reported even when the
//! table is otherwise identical.

use sql2ddb_core::{normalize_number, AttrValue, Item};

use super::canon::mix;
use super::spill::{Buckets, Record};
use crate::error::EngineError;

/// Where one side's records go: the digests of the first pass, or the
/// buckets the second pass resolves.
pub trait Sink: Send + 'static {
    /// Takes one record whose key hashes to `hash`.
    fn push(&mut self, hash: u64, record: Record) -> Result<(), EngineError>;
}

impl Sink for Buckets {
    fn push(&mut self, hash: u64, record: Record) -> Result<(), EngineError> {
        Buckets::push(self, hash, &record)
    }
}

/// The order-independent digest of a bucket's items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketDigest {
    /// Items.
    pub count: u64,
    /// Wrapping sum of the items' first digest halves.
    pub sum: u64,
    /// XOR of the items' second digest halves.
    pub xor: u64,
}

/// The two 64-bit halves of an item's digest: two hashes of its canonical
/// form (names sorted, numbers normalised, sets sorted without duplicates,
/// lists in order, each value tagged with its type and each piece with its
/// length), the key attributes included, fed in one walk without building
/// the canonical item.
pub fn item_digest(item: &Item) -> (u64, u64) {
    let mut h = Hasher::new();
    h.item(item);
    h.finish()
}

/// Two 64-bit lanes over the same bytes: FNV-1a, and a multiply-rotate lane
/// with another constant.
struct Hasher {
    a: u64,
    b: u64,
}

impl Hasher {
    fn new() -> Hasher {
        Hasher {
            a: 0xcbf2_9ce4_8422_2325,
            b: 0x6c62_272e_07bb_0142,
        }
    }

    fn raw(&mut self, data: &[u8]) {
        for &x in data {
            self.a = (self.a ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
            self.b = (self.b ^ u64::from(x))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29);
        }
    }

    fn len(&mut self, n: usize) {
        self.raw(&(n as u64).to_le_bytes());
    }

    fn bytes(&mut self, data: &[u8]) {
        self.len(data.len());
        self.raw(data);
    }

    fn item(&mut self, item: &Item) {
        self.len(item.len());
        for (name, value) in item {
            self.bytes(name.as_bytes());
            self.value(value);
        }
    }

    fn set<'a>(&mut self, members: impl Iterator<Item = std::borrow::Cow<'a, [u8]>>) {
        let mut members: Vec<_> = members.collect();
        members.sort();
        members.dedup();
        self.len(members.len());
        for m in &members {
            self.bytes(m);
        }
    }

    fn value(&mut self, v: &AttrValue) {
        let number = |n: &String| normalize_number(n).unwrap_or_else(|_| n.clone());
        match v {
            AttrValue::S(s) => {
                self.raw(&[1]);
                self.bytes(s.as_bytes());
            }
            AttrValue::N(n) => {
                self.raw(&[2]);
                self.bytes(number(n).as_bytes());
            }
            AttrValue::B(b) => {
                self.raw(&[3]);
                self.bytes(b);
            }
            AttrValue::Bool(b) => self.raw(&[4, u8::from(*b)]),
            AttrValue::Null => self.raw(&[5]),
            AttrValue::L(l) => {
                self.raw(&[6]);
                self.len(l.len());
                for x in l {
                    self.value(x);
                }
            }
            AttrValue::M(m) => {
                self.raw(&[7]);
                self.item(m);
            }
            AttrValue::SS(s) => {
                self.raw(&[8]);
                self.set(s.iter().map(|x| x.as_bytes().into()));
            }
            AttrValue::NS(s) => {
                self.raw(&[9]);
                self.set(s.iter().map(|x| number(x).into_bytes().into()));
            }
            AttrValue::BS(s) => {
                self.raw(&[10]);
                self.set(s.iter().map(|x| x.as_slice().into()));
            }
        }
    }

    fn finish(&self) -> (u64, u64) {
        (mix(self.a), mix(self.b ^ self.a.rotate_left(32)))
    }
}

/// One side's digests, bucket by bucket.
pub struct Digests {
    buckets: Vec<BucketDigest>,
    /// Entity names, in the plan's order.
    names: Vec<String>,
    /// Items per bucket and entity (`bucket * names.len() + entity`).
    per_entity: Vec<u64>,
}

impl Digests {
    /// `count` empty buckets, counting the items of the entities `names`.
    pub fn new(count: usize, names: &[String]) -> Digests {
        let count = count.max(1);
        Digests {
            buckets: vec![BucketDigest::default(); count],
            names: names.to_vec(),
            per_entity: vec![0; count * names.len()],
        }
    }

    /// The buckets whose digests differ between `self` and `other`.
    pub fn differing(&self, other: &Digests) -> Vec<bool> {
        self.buckets
            .iter()
            .zip(&other.buckets)
            .map(|(a, b)| a != b)
            .collect()
    }

    /// The items of each entity in the buckets not in `skip`, in the order
    /// of the names given.
    pub fn items_outside(&self, skip: &[bool]) -> Vec<u64> {
        let n = self.names.len();
        let mut out = vec![0; n];
        for (bucket, counts) in self.per_entity.chunks(n.max(1)).enumerate() {
            if skip.get(bucket).copied().unwrap_or(false) {
                continue;
            }
            for (total, c) in out.iter_mut().zip(counts) {
                *total += c;
            }
        }
        out
    }
}

impl Sink for Digests {
    fn push(&mut self, hash: u64, record: Record) -> Result<(), EngineError> {
        let bucket = (hash % self.buckets.len() as u64) as usize;
        let (first, second) = item_digest(&record.item);
        let d = &mut self.buckets[bucket];
        d.count += 1;
        d.sum = d.sum.wrapping_add(first);
        d.xor ^= second;
        if let Some(e) = self.names.iter().position(|n| *n == record.entity) {
            self.per_entity[bucket * self.names.len() + e] += 1;
        }
        Ok(())
    }
}

/// The second pass: keeps only the records of the buckets to resolve.
pub struct Resolver {
    /// The records kept, in the same buckets as the digests.
    pub buckets: Buckets,
    /// Which buckets are resolved.
    pub wanted: Vec<bool>,
}

impl Sink for Resolver {
    fn push(&mut self, hash: u64, record: Record) -> Result<(), EngineError> {
        let bucket = (hash % self.wanted.len() as u64) as usize;
        if !self.wanted[bucket] {
            return Ok(());
        }
        self.buckets.push(hash, &record)
    }
}

#[cfg(test)]
mod tests {
    use super::super::canon::stable_hash;
    use super::*;

    fn record(pk: &str, v: &str) -> Record {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S(pk.into()));
        item.insert("v".into(), AttrValue::N(v.into()));
        Record {
            key: pk.into(),
            entity: "e".into(),
            item,
            source_key: None,
        }
    }

    fn digests(records: &[(&str, &str)]) -> Digests {
        let mut d = Digests::new(1024, &["e".to_string()]);
        for (pk, v) in records {
            d.push(stable_hash(pk), record(pk, v)).unwrap();
        }
        d
    }

    #[test]
    fn order_and_number_form_do_not_matter_a_value_or_a_duplicate_does() {
        let set = |v: &[&str]| AttrValue::SS(v.iter().map(|s| s.to_string()).collect());
        let mut x = record("A", "1").item;
        x.insert("tags".into(), set(&["b", "a", "b"]));
        let mut y = record("A", "1.0").item;
        y.insert("tags".into(), set(&["a", "b"]));
        assert_eq!(item_digest(&x), item_digest(&y));
        y.insert("tags".into(), AttrValue::L(vec![AttrValue::S("a".into())]));
        assert_ne!(item_digest(&x), item_digest(&y));
        let a = digests(&[("A", "1.50"), ("B", "2"), ("C", "3")]);
        let b = digests(&[("C", "3"), ("A", "1.5"), ("B", "2")]);
        assert!(a.differing(&b).iter().all(|d| !d));
        assert_eq!(a.items_outside(&a.differing(&b)), [3]);
        let changed = digests(&[("A", "1.5"), ("B", "7"), ("C", "3")]);
        assert_eq!(a.differing(&changed).iter().filter(|d| **d).count(), 1);
        // Two rows on one key: one item more expected than the table holds.
        let collapsed = digests(&[("A", "1.5"), ("B", "2"), ("C", "3"), ("C", "3")]);
        let diff = collapsed.differing(&a);
        assert_eq!(diff.iter().filter(|d| **d).count(), 1);
        assert_eq!(collapsed.items_outside(&diff), [2]);
    }
}
