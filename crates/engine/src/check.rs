//! `sql2ddb check`: parse and validate a mapping without any IO.

use std::path::Path;

use sql2ddb_mapping::{EntitySource, MappingError, Plan};

/// What `check` found valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSummary {
    /// Target table.
    pub table: String,
    /// Key attributes, `PK (S)` style.
    pub keys: Vec<String>,
    /// One line per entity: name and what it reads.
    pub entities: Vec<String>,
    /// Possible silent overwrites, `file:line:col: message` each: a key
    /// template that leaves out part of its entity's `key`, or two entities
    /// (or pointers) whose keys can be equal.
    pub warnings: Vec<String>,
}

/// Validates mapping `text` (read from `file`); `env` resolves `${VAR}`.
pub fn check(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<CheckSummary, MappingError> {
    let plan = Plan::parse(text, file, env)?;
    Ok(CheckSummary {
        table: plan.target.table.clone(),
        keys: plan
            .key_attrs()
            .iter()
            .map(|k| format!("{} ({})", k.name, k.kind))
            .collect(),
        entities: plan
            .entities
            .iter()
            .map(|e| match &e.from {
                EntitySource::Table(t) => format!("{} ← table {t}", e.name),
                EntitySource::Query(_) => format!("{} ← query", e.name),
            })
            .collect(),
        warnings: plan.lint().iter().map(ToString::to_string).collect(),
    })
}
