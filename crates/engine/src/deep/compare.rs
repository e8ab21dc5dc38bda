//! Comparing one bucket of expected items with the same bucket of the table,
//! key by key, and writing each difference as a line of `diff.jsonl`.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value as Json;
use sql2ddb_core::{KeyAttr, SourceKey};

use super::canon::{attribute_diffs, canonical_item, key_json, AttrDiff};
use super::spill::Record;
use crate::error::EngineError;

/// Differences kept in the report for the terminal (the file has them all).
pub const SHOWN: usize = 20;

/// What kind of difference a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffKind {
    /// Expected from the source, not in the table.
    Missing,
    /// In the table under the entity's key shape, not expected.
    Extra,
    /// In the table with other attribute values than expected.
    Different,
    /// Several source rows map to this one key.
    Collapsed,
    /// A pointer item that is not what the mapping makes of the source row
    /// with the max (or min) value: its value or a carried attribute differs,
    /// or it holds an attribute the mapping does not put there.
    Pointer,
}

/// One line of `diff.jsonl`.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// What differs.
    pub kind: DiffKind,
    /// The entity (for a pointer: the pointer's name).
    pub entity: String,
    /// The item's key attributes, as DynamoDB JSON.
    pub key: Json,
    /// The source rows that map to the key (missing, collapsed, different).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_keys: Vec<Json>,
    /// The attributes that differ, with their expected and actual values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttrDiff>,
}

/// The counts of one entity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EntityDiff {
    /// Entity name.
    pub entity: String,
    /// Distinct keys the source maps to.
    pub expected: u64,
    /// Of those, keys the table holds.
    pub found: u64,
    /// Found and equal.
    pub identical: u64,
    /// Expected, not in the table.
    pub missing: u64,
    /// In the table under the entity's key shape, not expected.
    pub extra: u64,
    /// Found with other values.
    pub different: u64,
    /// Source rows that landed on a key another row maps to.
    pub collapsed: u64,
    /// Source rows the mapping rejects (listed in `verify-rejects.jsonl`):
    /// no item is expected for them.
    pub rejected: u64,
    /// Child rows of the entity's embeds whose parent key matches no parent
    /// row (listed in `verify-rejects.jsonl` as "no parent"): in no item.
    pub no_parent: u64,
}

/// The differences found so far: written to the file, counted per entity,
/// the first few kept.
pub struct Findings {
    keys: Vec<KeyAttr>,
    path: PathBuf,
    out: BufWriter<File>,
    /// Per entity, in the plan's order.
    pub entities: Vec<EntityDiff>,
    /// Differences written.
    pub written: u64,
    /// The first [`SHOWN`] differences.
    pub first: Vec<Difference>,
}

impl Findings {
    /// Starts `path` afresh, for the entities named.
    pub fn create(
        path: &Path,
        keys: Vec<KeyAttr>,
        names: &[String],
    ) -> Result<Findings, EngineError> {
        let file = File::create(path).map_err(|e| EngineError::io(path, e))?;
        Ok(Findings {
            keys,
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            entities: names
                .iter()
                .map(|n| EntityDiff {
                    entity: n.clone(),
                    ..EntityDiff::default()
                })
                .collect(),
            written: 0,
            first: Vec::new(),
        })
    }

    fn entity(&mut self, name: &str) -> &mut EntityDiff {
        match self.entities.iter().position(|e| e.entity == name) {
            Some(i) => &mut self.entities[i],
            None => {
                self.entities.push(EntityDiff {
                    entity: name.to_string(),
                    ..EntityDiff::default()
                });
                self.entities.last_mut().expect("just pushed")
            }
        }
    }

    /// Counts `n` items of `entity` found identical without being compared
    /// key by key (their bucket's digests are equal on both sides).
    pub fn add_identical(&mut self, entity: &str, n: u64) {
        let counts = self.entity(entity);
        counts.expected += n;
        counts.found += n;
        counts.identical += n;
    }

    /// Writes one difference.
    pub fn add(&mut self, d: Difference) -> Result<(), EngineError> {
        let line = serde_json::to_string(&d).expect("a difference serialises");
        let io = |e| EngineError::io(&self.path, e);
        self.out.write_all(line.as_bytes()).map_err(io)?;
        self.out.write_all(b"\n").map_err(io)?;
        self.written += 1;
        if self.first.len() < SHOWN {
            self.first.push(d);
        }
        Ok(())
    }

    /// Flushes the file.
    pub fn finish(&mut self) -> Result<(), EngineError> {
        self.out.flush().map_err(|e| EngineError::io(&self.path, e))
    }

    /// Compares a bucket: every expected key with the table's item at that
    /// key, then the table's items nobody expected. Returns the items compared.
    pub fn compare(
        &mut self,
        expected: Vec<Record>,
        actual: Vec<Record>,
    ) -> Result<u64, EngineError> {
        let mut by_key: BTreeMap<String, Vec<Record>> = BTreeMap::new();
        for r in expected {
            by_key.entry(r.key.clone()).or_default().push(r);
        }
        let compared = by_key.len() as u64 + actual.len() as u64;
        let mut found: HashMap<String, Record> =
            actual.into_iter().map(|r| (r.key.clone(), r)).collect();
        for (key, rows) in by_key {
            let actual = found.remove(&key);
            self.compare_key(rows, actual)?;
        }
        let mut extra: Vec<Record> = found.into_values().collect();
        extra.sort_by(|a, b| a.key.cmp(&b.key));
        for r in extra {
            self.entity(&r.entity).extra += 1;
            let key = key_json(&r.item, &self.keys);
            self.add(Difference {
                kind: DiffKind::Extra,
                entity: r.entity,
                key,
                source_keys: Vec::new(),
                attributes: Vec::new(),
            })?;
        }
        Ok(compared)
    }

    /// One key: the rows that map to it (several: collapsed) and the
    /// table's item there, if any.
    fn compare_key(
        &mut self,
        rows: Vec<Record>,
        actual: Option<Record>,
    ) -> Result<(), EngineError> {
        let entity = rows[0].entity.clone();
        let key = key_json(&rows[0].item, &self.keys);
        let sources = || -> Vec<Json> {
            rows.iter()
                .filter_map(|r| r.source_key.as_ref().map(SourceKey::to_json))
                .collect()
        };
        let counts = self.entity(&entity);
        counts.expected += 1;
        if rows.len() > 1 {
            counts.collapsed += rows.len() as u64 - 1;
        }
        let difference = match actual {
            None => {
                counts.missing += 1;
                Some((DiffKind::Missing, Vec::new()))
            }
            Some(a) => {
                counts.found += 1;
                let actual = canonical_item(&a.item);
                let candidates: Vec<_> = rows.iter().map(|r| canonical_item(&r.item)).collect();
                // Collapsed rows: whichever row's item the table holds is right.
                if candidates.contains(&actual) {
                    counts.identical += 1;
                    None
                } else {
                    counts.different += 1;
                    let last = candidates.last().expect("one row at least");
                    Some((DiffKind::Different, attribute_diffs(last, &actual)))
                }
            }
        };
        if rows.len() > 1 {
            self.add(Difference {
                kind: DiffKind::Collapsed,
                entity: entity.clone(),
                key: key.clone(),
                source_keys: sources(),
                attributes: Vec::new(),
            })?;
        }
        if let Some((kind, attributes)) = difference {
            self.add(Difference {
                kind,
                entity,
                key,
                source_keys: sources(),
                attributes,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::limits::KeyType;
    use sql2ddb_core::{AttrValue, Item};

    use super::*;
    use crate::deep::canon::key_text;

    fn record(entity: &str, pk: &str, v: &str, source: i64) -> Record {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S(pk.into()));
        item.insert("v".into(), AttrValue::N(v.into()));
        let keys = [KeyAttr::new("PK", KeyType::S)];
        Record {
            key: key_text(&item, &keys).unwrap(),
            entity: entity.into(),
            item,
            source_key: Some(serde_json::json!({ "id": source }).into()),
        }
    }

    #[test]
    fn each_key_is_identical_different_missing_extra_or_collapsed() {
        let dir = tempfile::tempdir().unwrap();
        let keys = vec![KeyAttr::new("PK", KeyType::S)];
        let path = dir.path().join("diff.jsonl");
        let mut f = Findings::create(&path, keys, &["e".to_string()]).unwrap();
        let expected = vec![
            record("e", "A", "1.50", 1),
            record("e", "B", "2", 2),
            record("e", "C", "3", 3),
            record("e", "C", "4", 4),
            record("e", "D", "5", 5),
        ];
        let actual = vec![
            record("e", "A", "1.5", 0),
            record("e", "B", "7", 0),
            record("e", "C", "3", 0),
            record("e", "X", "1", 0),
        ];
        assert_eq!(f.compare(expected, actual).unwrap(), 8);
        f.finish().unwrap();
        let e = &f.entities[0];
        let got = [
            e.expected,
            e.found,
            e.identical,
            e.missing,
            e.extra,
            e.different,
            e.collapsed,
        ];
        assert_eq!(got, [4, 3, 2, 1, 1, 1, 1]);
        let kinds: Vec<DiffKind> = f.first.iter().map(|d| d.kind).collect();
        use DiffKind::*;
        assert_eq!(kinds, [Different, Collapsed, Missing, Extra]);
        assert_eq!(f.first[1].source_keys.len(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4);
    }
}
