//! `sql2ddb check`: parse and validate a mapping without any IO; with
//! `--source`, bind it against the live source as a run does ([`source`]).

pub mod source;

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
    /// `${VAR}`s that are not set, `file:line:col: message` each: `check`
    /// connects to nothing and needs none of them; the jobs that read the
    /// source or the table do.
    pub unset: Vec<String>,
}

/// A mapping that `check` refuses: the first error, and the `${VAR}`s that
/// are not set (reported beside it, never instead of it).
#[derive(Debug)]
pub struct CheckFailure {
    /// What is wrong (boxed: the error is large beside the summary).
    pub error: Box<MappingError>,
    /// Unset variables, `file:line:col: message` each.
    pub unset: Vec<String>,
}

/// Validates mapping `text` (read from `file`); `env` resolves `${VAR}`,
/// and a variable that is not set does not make the mapping invalid.
pub fn check(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<CheckSummary, CheckFailure> {
    let (plan, unset) = Plan::parse_without_env(text, file, env);
    let unset: Vec<String> = unset.iter().map(ToString::to_string).collect();
    let plan = plan.map_err(|error| CheckFailure {
        error: Box::new(error),
        unset: unset.clone(),
    })?;
    Ok(CheckSummary {
        unset,
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
