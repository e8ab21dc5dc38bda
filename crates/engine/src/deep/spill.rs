//! One side of the comparison (the items expected from the source, or the
//! items found in the table), partitioned by a hash of the item's key into
//! buckets. Records are held in memory up to a budget; past it, every
//! bucket held is appended to its own file in the spill directory and memory
//! starts again from empty. A bucket is then taken whole (its file and what
//! memory holds), one at a time, so memory never holds more than the budget
//! plus one bucket of each side.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sql2ddb_core::{Item, SourceKey};

use crate::error::EngineError;

/// One item of one side.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The key as text ([`super::canon::key_text`]).
    #[serde(rename = "k")]
    pub key: String,
    /// The entity: the one whose row made it, or the one its key shape names.
    #[serde(rename = "e")]
    pub entity: String,
    /// The item.
    #[serde(rename = "i")]
    pub item: Item,
    /// The source row's key, for expected items.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub source_key: Option<SourceKey>,
}

/// A side's buckets, in memory and spilled.
pub struct Buckets {
    dir: PathBuf,
    side: &'static str,
    held: Vec<Vec<String>>,
    held_bytes: usize,
    budget: usize,
    spilled: Vec<bool>,
    spilled_bytes: u64,
}

impl Buckets {
    /// `count` empty buckets of `side` (a file name prefix) spilling into
    /// `dir` once more than `budget` bytes of records are held.
    pub fn new(dir: &Path, side: &'static str, count: usize, budget: usize) -> Buckets {
        Buckets {
            dir: dir.to_path_buf(),
            side,
            held: vec![Vec::new(); count.max(1)],
            held_bytes: 0,
            budget,
            spilled: vec![false; count.max(1)],
            spilled_bytes: 0,
        }
    }

    /// Bytes written to spill files so far.
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }

    /// Adds a record to the bucket of `hash`.
    pub fn push(&mut self, hash: u64, record: &Record) -> Result<(), EngineError> {
        let line = serde_json::to_string(record).expect("a record serialises");
        let bucket = (hash % self.held.len() as u64) as usize;
        self.held_bytes += line.len();
        self.held[bucket].push(line);
        if self.held_bytes > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    fn file(&self, bucket: usize) -> PathBuf {
        self.dir.join(format!("{}-{bucket:05}.jsonl", self.side))
    }

    /// Appends every bucket held to its file.
    fn spill(&mut self) -> Result<(), EngineError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| EngineError::io(&self.dir, e))?;
        for bucket in 0..self.held.len() {
            if self.held[bucket].is_empty() {
                continue;
            }
            let path = self.file(bucket);
            let io = |e| EngineError::io(&path, e);
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(io)?;
            let mut out = BufWriter::new(file);
            for line in std::mem::take(&mut self.held[bucket]) {
                out.write_all(line.as_bytes()).map_err(io)?;
                out.write_all(b"\n").map_err(io)?;
                self.spilled_bytes += line.len() as u64 + 1;
            }
            out.flush().map_err(io)?;
            self.spilled[bucket] = true;
        }
        self.held_bytes = 0;
        Ok(())
    }

    /// Takes a bucket's records out: its spill file (then removed) and what
    /// memory holds.
    pub fn take(&mut self, bucket: usize) -> Result<Vec<Record>, EngineError> {
        let mut records = Vec::new();
        let parse = |line: &str, path: &Path| {
            serde_json::from_str::<Record>(line).map_err(|e| {
                EngineError::io(
                    path,
                    std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                )
            })
        };
        if self.spilled[bucket] {
            let path = self.file(bucket);
            let file = File::open(&path).map_err(|e| EngineError::io(&path, e))?;
            for line in BufReader::new(file).lines() {
                let line = line.map_err(|e| EngineError::io(&path, e))?;
                records.push(parse(&line, &path)?);
            }
            std::fs::remove_file(&path).map_err(|e| EngineError::io(&path, e))?;
            self.spilled[bucket] = false;
        }
        let held = std::mem::take(&mut self.held[bucket]);
        for line in &held {
            self.held_bytes -= line.len();
            records.push(parse(line, &self.dir)?);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str) -> Record {
        Record {
            key: key.into(),
            entity: "e".into(),
            item: Item::new(),
            source_key: None,
        }
    }

    #[test]
    fn a_tiny_budget_spills_and_every_record_comes_back_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Buckets::new(dir.path(), "expected", 4, 10);
        for i in 0..20u64 {
            b.push(i, &record(&i.to_string())).unwrap();
        }
        assert!(b.spilled_bytes() > 0);
        let mut keys: Vec<u64> = (0..4)
            .flat_map(|n| b.take(n).unwrap())
            .map(|r| r.key.parse().unwrap())
            .collect();
        keys.sort();
        assert_eq!(keys, (0..20).collect::<Vec<_>>());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
