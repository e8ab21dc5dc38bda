//! `run --only-rejects FILE`: read again, by key, exactly the rows a rejects
//! file names, and send them through the current (fixed) mapping. The keys
//! come back with their SQL types from the file's typed JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

use serde_json::Value as Json;
use sql2ddb_core::{Column, Reject, SqlValue};
use sql2ddb_mapping::Plan;

use crate::error::EngineError;

/// The rows to replay: per entity, the key objects of its rejects, each once,
/// in file order.
#[derive(Debug, Default)]
pub(super) struct Rejected {
    by_entity: BTreeMap<String, Vec<serde_json::Map<String, Json>>>,
    /// The file, for messages.
    file: String,
    /// `get`: the one row asked for on the command line, its key columns
    /// given as text (typed by the columns' types when read).
    asked: bool,
}

impl Rejected {
    /// Reads a rejects file; every entity it names must be in the mapping.
    pub fn load(path: &Path, plan: &Plan) -> Result<Rejected, EngineError> {
        let file = std::fs::File::open(path).map_err(|e| EngineError::io(path, e))?;
        let shown = path.display().to_string();
        let bad = |line: usize, message: String| EngineError::Entity {
            entity: "(replay)".into(),
            message: format!("{shown}:{line}: {message}"),
        };
        let mut by_entity: BTreeMap<String, Vec<serde_json::Map<String, Json>>> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| EngineError::io(path, e))?;
            if line.trim().is_empty() {
                continue;
            }
            let reject: Reject = serde_json::from_str(&line)
                .map_err(|e| bad(n + 1, format!("not a rejects line: {e}")))?;
            // A child row without a parent is not read again by key: it
            // needs its parent (or its deletion) in the source first.
            if reject.reason.starts_with(super::embed::NO_PARENT) && reject.entity.contains('.') {
                continue;
            }
            if !plan.entities.iter().any(|e| e.name == reject.entity) {
                return Err(bad(
                    n + 1,
                    format!(
                        "entity {:?} is not in the mapping (its entities: {})",
                        reject.entity,
                        plan.entities
                            .iter()
                            .map(|e| e.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            let Json::Object(key) = reject.key else {
                return Err(bad(n + 1, "its key is not an object of key columns".into()));
            };
            // A row can be logged twice (a redelivered batch): replay it once.
            if seen.insert((reject.entity.clone(), Json::Object(key.clone()).to_string())) {
                by_entity.entry(reject.entity).or_default().push(key);
            }
        }
        Ok(Rejected {
            by_entity,
            file: shown,
            asked: false,
        })
    }

    /// `get ENTITY KEY=VALUE…`: the one row of `entity` whose key columns
    /// hold these values (text, typed by the columns when read).
    pub fn asked(entity: &str, pairs: &[(String, String)]) -> Rejected {
        let key = pairs
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect();
        Rejected {
            by_entity: BTreeMap::from([(entity.to_string(), vec![key])]),
            file: String::new(),
            asked: true,
        }
    }

    /// The key asked for by `get`, checked against the entity's key columns
    /// (every one given, no other) and typed by their columns.
    fn asked_key(
        &self,
        entity: &str,
        obj: &serde_json::Map<String, Json>,
        key: &[String],
        columns: &[Column],
    ) -> Result<Vec<SqlValue>, EngineError> {
        let missing: Vec<&str> = key
            .iter()
            .filter(|k| !obj.contains_key(*k))
            .map(String::as_str)
            .collect();
        let unknown: Vec<&str> = obj
            .keys()
            .filter(|k| !key.contains(k))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() || !unknown.is_empty() {
            let mut wrong = Vec::new();
            if !unknown.is_empty() {
                wrong.push(format!("{} is not a key column", unknown.join(", ")));
            }
            if !missing.is_empty() {
                wrong.push(format!("{} is missing", missing.join(", ")));
            }
            let example: Vec<String> = key.iter().map(|k| format!("{k}=VALUE")).collect();
            return Err(EngineError::Config(format!(
                "entity {entity:?} is keyed by {}: {}; give {}",
                key.join(", "),
                wrong.join(" and "),
                example.join(" ")
            )));
        }
        Ok(key
            .iter()
            .map(|k| {
                let text = obj.get(k).and_then(Json::as_str).unwrap_or_default();
                let sql_type = columns
                    .iter()
                    .find(|c| &c.name == k)
                    .map(|c| c.sql_type.to_ascii_lowercase())
                    .unwrap_or_default();
                // An integer column's value as an integer (SQLite compares
                // by type); every other one as text, cast by the source.
                match text.parse::<i64>() {
                    Ok(i) if sql_type.contains("int") => SqlValue::Int(i),
                    _ => SqlValue::Text(text.to_string()),
                }
            })
            .collect())
    }

    /// Whether the file names rows of `entity`.
    pub fn has(&self, entity: &str) -> bool {
        self.by_entity.contains_key(entity)
    }

    /// The keys of `entity`'s rejected rows as cursor values, in `key` order.
    pub fn keys(
        &self,
        entity: &str,
        key: &[String],
        columns: &[Column],
    ) -> Result<Vec<Vec<SqlValue>>, EngineError> {
        let rows = self.by_entity.get(entity).map(Vec::as_slice).unwrap_or(&[]);
        rows.iter()
            .map(|obj| {
                if self.asked {
                    return self.asked_key(entity, obj, key, columns);
                }
                key.iter()
                    .map(|k| {
                        let v = obj.get(k).ok_or_else(|| EngineError::Entity {
                            entity: entity.to_string(),
                            message: format!(
                                "{}: a reject's key has no column {k} (the entity's key is {}); was the mapping's key changed?",
                                self.file,
                                key.join(", ")
                            ),
                        })?;
                        SqlValue::from_tagged_json(v).map_err(|m| EngineError::Entity {
                            entity: entity.to_string(),
                            message: format!("{}: key column {k}: {m}", self.file),
                        })
                    })
                    .collect()
            })
            .collect()
    }
}
