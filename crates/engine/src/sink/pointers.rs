//! What a process's pointer writes did, in memory that stays flat however
//! long it runs: the counts, how many distinct pointer items were touched
//! (counted exactly up to [`KEYS_COUNTED`], then as "at least"), and the
//! key of the first one (the report reads a fixed-key pointer back).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use sql2ddb_core::PointerUpdate;

/// Distinct pointer items counted exactly; past them the count is a lower
/// bound. Each costs a 64-bit hash, so at most about a megabyte a pointer.
pub const KEYS_COUNTED: usize = 65_536;

/// Counts of one pointer.
#[derive(Debug, Default, Clone)]
pub struct PointerStats {
    /// Conditional writes that moved it.
    pub moved: u64,
    /// Conditional writes that found a newer value there.
    pub already_newer: u64,
    /// The first update written (its key reads a fixed-key pointer back).
    first: Option<PointerUpdate>,
    /// The distinct pointer items seen, by a hash of their key.
    seen: HashSet<u64>,
    /// More distinct items than [`KEYS_COUNTED`] were seen.
    more: bool,
}

impl PointerStats {
    /// Counts the item `update` was written to.
    pub fn touched(&mut self, update: &PointerUpdate) {
        if self.first.is_none() {
            self.first = Some(update.clone());
        }
        let mut h = DefaultHasher::new();
        update.pk.hash(&mut h);
        update.sk.hash(&mut h);
        let key = h.finish();
        if self.seen.len() < KEYS_COUNTED {
            self.seen.insert(key);
        } else if !self.seen.contains(&key) {
            self.more = true;
        }
    }

    /// Distinct pointer items touched (a lower bound when [`Self::counted_all`]
    /// is false).
    pub fn keys(&self) -> u64 {
        self.seen.len() as u64
    }

    /// Whether [`Self::keys`] is exact.
    pub fn counted_all(&self) -> bool {
        !self.more
    }

    /// The update to read the pointer back by, when it has one item only.
    pub fn only_item(&self) -> Option<&PointerUpdate> {
        match (self.keys(), self.more) {
            (1, false) => self.first.as_ref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::AttrValue;

    fn update(pk: &str) -> PointerUpdate {
        PointerUpdate {
            name: "LAST_ORDER".into(),
            pk: AttrValue::S(pk.into()),
            sk: Some(AttrValue::S("LAST".into())),
            attribute: "v".into(),
            value: AttrValue::N("1".into()),
            is_max: true,
            attributes: Default::default(),
            cleared: Vec::new(),
        }
    }

    #[test]
    fn a_fixed_key_pointer_is_read_back_by_its_one_item() {
        let mut s = PointerStats::default();
        for _ in 0..3 {
            s.touched(&update("CUSTOMER#1"));
        }
        assert_eq!(s.keys(), 1);
        assert!(s.counted_all());
        assert_eq!(
            s.only_item().map(|u| &u.pk),
            Some(&AttrValue::S("CUSTOMER#1".into()))
        );
        s.touched(&update("CUSTOMER#2"));
        assert_eq!(s.keys(), 2);
        assert!(s.only_item().is_none());
    }

    #[test]
    fn memory_stays_flat_past_the_counted_keys() {
        let mut s = PointerStats::default();
        for i in 0..KEYS_COUNTED + 10 {
            s.touched(&update(&format!("CUSTOMER#{i}")));
        }
        assert_eq!(s.keys(), KEYS_COUNTED as u64);
        assert!(!s.counted_all());
        assert_eq!(s.seen.len(), KEYS_COUNTED);
        // A key seen before the bound is still recognised.
        s.more = false;
        s.touched(&update("CUSTOMER#0"));
        assert!(s.counted_all());
    }
}
