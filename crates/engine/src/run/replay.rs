//! `run --only-rejects FILE`: read again, by key, exactly the rows a rejects
//! file names, and send them through the current (fixed) mapping. The keys
//! come back with their SQL types from the file's typed JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

use serde_json::Value as Json;
use sql2ddb_core::{Reject, SqlValue};
use sql2ddb_mapping::Plan;

use crate::error::EngineError;

/// The rows to replay: per entity, the key objects of its rejects, each once,
/// in file order.
#[derive(Debug, Default)]
pub(super) struct Rejected {
    by_entity: BTreeMap<String, Vec<serde_json::Map<String, Json>>>,
    /// The file, for messages.
    file: String,
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
        })
    }

    /// Whether the file names rows of `entity`.
    pub fn has(&self, entity: &str) -> bool {
        self.by_entity.contains_key(entity)
    }

    /// The keys of `entity`'s rejected rows as cursor values, in `key` order.
    pub fn keys(&self, entity: &str, key: &[String]) -> Result<Vec<Vec<SqlValue>>, EngineError> {
        let rows = self.by_entity.get(entity).map(Vec::as_slice).unwrap_or(&[]);
        rows.iter()
            .map(|obj| {
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
