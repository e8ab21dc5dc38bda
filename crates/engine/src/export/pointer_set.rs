//! The export's pointer items, in memory that stays flat however many
//! there are (a pointer per customer over a billion orders): each item's
//! furthest update per pointer is kept in memory up to a bound, then the
//! kept ones go to a temporary file in key order (a sorted run) and memory
//! starts again. At the end the runs and what is still in memory are
//! merged in key order, an item's updates from every run reduced to the
//! furthest of each pointer, one item at a time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};

use sql2ddb_core::{AttrValue, PointerUpdate};

/// A pointer item's key: partition key value, sort key value.
pub type PointerKey = (AttrValue, Option<AttrValue>);

/// Pointer items kept in memory before they go to a sorted run.
pub const ITEMS_IN_MEMORY: usize = 100_000;

/// One pointer item's furthest update of each pointer, by pointer name.
type Updates = BTreeMap<String, PointerUpdate>;

/// Every pointer item an export met, each with its furthest updates.
#[derive(Default)]
pub struct PointerSet {
    memory: BTreeMap<PointerKey, Updates>,
    /// Sorted runs: lines of JSON, each an item's updates, in key order.
    runs: Vec<File>,
    /// Items kept in memory before a run is written (0: the default).
    limit: usize,
}

impl PointerSet {
    /// A set that writes a sorted run once `limit` items are in memory.
    #[cfg(test)]
    pub fn with_limit(limit: usize) -> PointerSet {
        PointerSet {
            limit,
            ..PointerSet::default()
        }
    }

    /// Keeps `u` if it moves its pointer further than what its item holds.
    pub fn keep(&mut self, u: PointerUpdate) -> io::Result<()> {
        let slot = self.memory.entry((u.pk.clone(), u.sk.clone())).or_default();
        merge(slot, u);
        let limit = match self.limit {
            0 => ITEMS_IN_MEMORY,
            n => n,
        };
        if self.memory.len() >= limit {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorted runs written so far.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Writes what memory holds as a sorted run, and empties it.
    fn spill(&mut self) -> io::Result<()> {
        let mut out = BufWriter::new(tempfile::tempfile()?);
        for updates in std::mem::take(&mut self.memory).into_values() {
            let list: Vec<&PointerUpdate> = updates.values().collect();
            serde_json::to_writer(&mut out, &list)?;
            out.write_all(b"\n")?;
        }
        let mut file = out.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        self.runs.push(file);
        Ok(())
    }

    /// The items in key order, each with its furthest update per pointer.
    pub fn into_items(self) -> io::Result<Items> {
        let mut sources: Vec<Source> = self
            .runs
            .into_iter()
            .map(|f| Source::Run(BufReader::new(f).lines()))
            .collect();
        sources.push(Source::Memory(self.memory.into_iter()));
        let mut items = Items {
            pending: (0..sources.len()).map(|_| None).collect(),
            sources,
            heads: BinaryHeap::new(),
        };
        for i in 0..items.sources.len() {
            items.advance(i)?;
        }
        Ok(items)
    }
}

/// `u` into an item's updates: kept when it moves its pointer further.
fn merge(slot: &mut Updates, u: PointerUpdate) {
    match slot.get(&u.name) {
        Some(kept) if !u.supersedes(kept) => {}
        _ => {
            slot.insert(u.name.clone(), u);
        }
    }
}

/// A sorted run being read, or memory's items.
enum Source {
    Run(io::Lines<BufReader<File>>),
    Memory(std::collections::btree_map::IntoIter<PointerKey, Updates>),
}

impl Source {
    fn next(&mut self) -> io::Result<Option<(PointerKey, Updates)>> {
        match self {
            Source::Memory(it) => Ok(it.next()),
            Source::Run(lines) => {
                let Some(line) = lines.next().transpose()? else {
                    return Ok(None);
                };
                let list: Vec<PointerUpdate> = serde_json::from_str(&line)?;
                let key = match list.first() {
                    Some(u) => (u.pk.clone(), u.sk.clone()),
                    None => return Err(io::Error::other("an empty line in a pointer run")),
                };
                Ok(Some((
                    key,
                    list.into_iter().map(|u| (u.name.clone(), u)).collect(),
                )))
            }
        }
    }
}

/// The merge of a [`PointerSet`]'s runs, one item at a time.
pub struct Items {
    sources: Vec<Source>,
    /// Each source's next item: its key (smallest first), the source.
    heads: BinaryHeap<Reverse<(PointerKey, usize)>>,
    /// Each source's next item, by source.
    pending: Vec<Option<(PointerKey, Updates)>>,
}

impl Items {
    /// The next item in key order with its furthest update per pointer;
    /// `None` at the end.
    pub fn next_item(&mut self) -> io::Result<Option<(PointerKey, Vec<PointerUpdate>)>> {
        let Some(Reverse((key, _))) = self.heads.peek().cloned() else {
            return Ok(None);
        };
        let mut updates = Updates::new();
        while let Some(Reverse((k, i))) = self.heads.peek().cloned() {
            if k != key {
                break;
            }
            self.heads.pop();
            let (_, held) = self.pending[i].take().expect("a source's head");
            for u in held.into_values() {
                merge(&mut updates, u);
            }
            self.advance(i)?;
        }
        Ok(Some((key, updates.into_values().collect())))
    }

    fn advance(&mut self, i: usize) -> io::Result<()> {
        if let Some((key, updates)) = self.sources[i].next()? {
            self.heads.push(Reverse((key.clone(), i)));
            self.pending[i] = Some((key, updates));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::Item;

    fn update(name: &str, pk: u32, value: u32) -> PointerUpdate {
        PointerUpdate {
            name: name.into(),
            pk: AttrValue::S(format!("CUSTOMER#{pk:05}")),
            sk: None,
            attribute: "v".into(),
            value: AttrValue::N(value.to_string()),
            is_max: true,
            attributes: Item::from([("at".to_string(), AttrValue::N(value.to_string()))]),
            cleared: Vec::new(),
        }
    }

    #[test]
    fn runs_merge_into_each_items_furthest_values_in_key_order() {
        // 500 items, each updated in turns by two pointers, through runs
        // of 64 items: an item's updates are spread over several runs.
        let mut set = PointerSet::with_limit(64);
        for round in 0..6u32 {
            for pk in 0..500u32 {
                let value = (pk * 7 + round * 13) % 50;
                set.keep(update("LAST", pk, value)).unwrap();
                if pk % 3 == 0 {
                    set.keep(update("FIRST", pk, 100 - value)).unwrap();
                }
            }
        }
        assert!(set.runs() > 10, "{} runs", set.runs());
        let mut items = set.into_items().unwrap();
        let mut seen = Vec::new();
        while let Some((key, updates)) = items.next_item().unwrap() {
            seen.push(key.0.clone());
            let pk = match &key.0 {
                AttrValue::S(s) => s[9..].parse::<u32>().unwrap(),
                other => panic!("{other:?}"),
            };
            let furthest = |f: &dyn Fn(u32) -> u32| (0..6u32).map(f).max().unwrap();
            let last = furthest(&|r| (pk * 7 + r * 13) % 50);
            let by_name: BTreeMap<&str, &PointerUpdate> =
                updates.iter().map(|u| (u.name.as_str(), u)).collect();
            assert_eq!(
                by_name["LAST"].value,
                AttrValue::N(last.to_string()),
                "{pk}"
            );
            // The row's other attributes come with its value.
            assert_eq!(
                by_name["LAST"].attributes["at"],
                AttrValue::N(last.to_string())
            );
            assert_eq!(by_name.len(), if pk % 3 == 0 { 2 } else { 1 });
            if pk % 3 == 0 {
                let first = furthest(&|r| 100 - (pk * 7 + r * 13) % 50);
                assert_eq!(by_name["FIRST"].value, AttrValue::N(first.to_string()));
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(seen, sorted, "each item once, in key order");
        assert_eq!(seen.len(), 500);
    }
}
