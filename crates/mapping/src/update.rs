//! Update jobs: `sql2ddb update JOB.toml`, the mass `UPDATE x WHERE y` (or
//! `DELETE … WHERE y`) over an existing DynamoDB table, as a validated
//! [`UpdateJob`]. No IO: [`UpdateJob::parse`] checks everything the text
//! alone can tell, [`UpdateJob::check_table`] what needs the table's
//! description (key attributes, indexes). Errors are [`MappingError`]s,
//! `FILE:LINE:COL: message`, like a mapping's.
//!
//! ```toml
//! version = 1
//! [target]
//! table = "shop"
//! [update]
//! name = "close-stale-orders"
//! scan = { segments = 8 }
//! where = "begins_with(SK, :o) AND #st = :new"
//! set = "SET #st = :closed REMOVE retry_count"
//! names = { "#st" = "status" }
//! values = { ":o" = "ORDER#", ":new" = "new", ":closed" = "closed" }
//! ```

mod batch_put;
mod expr;
mod load;
mod repeat;
mod reserved;
#[cfg(test)]
mod tests;
mod token;
mod values;

use std::collections::BTreeMap;
use std::path::Path;

use sql2ddb_core::{AttrValue, KeyAttr};

use crate::error::{Location, MappingError};
use crate::plan::Projection;

/// The placeholders an expression uses, each where it is first used.
#[derive(Debug, Clone, Default)]
struct Used {
    names: Vec<(String, Location)>,
    values: Vec<(String, Location)>,
}

/// The only update job version.
pub const JOB_VERSION: i64 = 1;
/// Parallel scan segments when the job names neither `scan` nor `query`.
pub const DEFAULT_SEGMENTS: u32 = 4;
/// Most parallel scan segments a job may ask for.
pub const MAX_SEGMENTS: u32 = 1000;
/// Most items per Scan or Query call (`page_size`).
pub const MAX_PAGE_SIZE: usize = 100_000;
/// The attribute a job whose update depends on the item's current value
/// marks each item it changed with (the run id).
pub const RUN_MARKER: &str = "sql2ddb_run";
/// The attribute-name placeholder of [`RUN_MARKER`] in the expressions sql2ddb adds.
pub const MARKER_NAME: &str = "#sql2ddb_run";
/// The value placeholder of the run id in the expressions sql2ddb adds.
pub const MARKER_VALUE: &str = ":sql2ddb_run";
/// Placeholders starting with this are sql2ddb's own.
const RESERVED_PREFIX: &str = "sql2ddb";

/// A validated update job.
#[derive(Debug, Clone)]
pub struct UpdateJob {
    /// `[update] name`: a label for reports.
    pub name: String,
    /// `[target]`: the table to change.
    pub target: JobTarget,
    /// How the items are found: a parallel Scan or a Query on an index.
    pub read: JobRead,
    /// `page_size`: most items per Scan/Query call; `None` = DynamoDB's 1 MB pages.
    pub page_size: Option<usize>,
    /// `where`: the condition an item must meet, applied as the read's
    /// `FilterExpression` and again as each write's `ConditionExpression`.
    pub filter: Option<String>,
    /// What happens to each matching item.
    pub action: JobAction,
    /// `mode`: how the matching items are written.
    pub mode: JobMode,
    /// `names` (with the query's): `#placeholder` → attribute name.
    pub names: BTreeMap<String, String>,
    /// `values` (with the query's): `:placeholder` → value.
    pub values: BTreeMap<String, AttrValue>,
    file: String,
    filter_uses: Used,
    key_uses: Used,
    set_uses: Used,
    /// Attributes the update writes (placeholders resolved), where written.
    targets: Vec<(String, Location)>,
    /// Where the query's index is named.
    index_at: Option<Location>,
    /// Byte offset just after the `SET` keyword of `set`, if it has one.
    set_end: Option<usize>,
    /// `mode = "batch-put"`: the changes sql2ddb applies to each item read.
    puts: Vec<PutChange>,
}

/// `mode`: how an update job writes the matching items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobMode {
    /// `"update-item"` (the default): one conditional `UpdateItem` or
    /// `DeleteItem` per item, `where` judged again at the write; safe while
    /// the application writes.
    #[default]
    UpdateItem,
    /// `"batch-put"`: sql2ddb applies `set` to each item read and rewrites
    /// whole items with `BatchWriteItem`, 25 a call, without a condition:
    /// fewer calls, but an application's write to an item between the read
    /// and the rewrite is lost. `set` may only SET top-level attributes to
    /// values and REMOVE top-level attributes.
    BatchPut,
}

/// One change of a `mode = "batch-put"` job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutChange {
    /// `SET attribute = :value`.
    Set {
        /// The attribute (placeholder resolved).
        attribute: String,
        /// Its new value.
        value: AttrValue,
    },
    /// `REMOVE attribute`.
    Remove {
        /// The attribute (placeholder resolved).
        attribute: String,
    },
}

/// `[target]` of an update job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTarget {
    /// Table name, `${VAR}` expanded.
    pub table: String,
    /// `"local"` or an endpoint URL; `None` for AWS.
    pub endpoint: Option<String>,
    /// AWS region; `None` for the environment's default.
    pub region: Option<String>,
    /// `pk`/`sk` when the job declares them (checked before any call);
    /// empty otherwise (the table's description says).
    pub keys: Vec<KeyAttr>,
}

/// How an update job finds its items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRead {
    /// `scan = { segments = N }`: a parallel Scan in N segments.
    Scan {
        /// `TotalSegments`.
        segments: u32,
    },
    /// `query = { index, key }`: a Query on a global secondary index.
    Query {
        /// The index.
        index: String,
        /// The `KeyConditionExpression`.
        key: String,
    },
}

/// What an update job does to each matching item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobAction {
    /// `set = "…"`: a conditional `UpdateItem` with this `UpdateExpression`.
    Update {
        /// The expression as written.
        expression: String,
        /// Why applying it twice can differ from once: its result depends
        /// on the item's current value (`ADD`, `DELETE`, `list_append`,
        /// `if_not_exists`, `+`/`-`, a list index, an attribute read by
        /// `SET`). Such a job marks each item with the run ([`RUN_MARKER`])
        /// so a retry, a resumed page or a rerun applies it once per item.
        not_idempotent: Option<String>,
    },
    /// `delete = true`: a conditional `DeleteItem`.
    Delete,
}

/// What [`UpdateJob::check_table`] needs to know of the table (from DescribeTable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableShape {
    /// Key attribute names, partition key first.
    pub keys: Vec<String>,
    /// Global and local secondary indexes.
    pub indexes: Vec<IndexShape>,
}

/// One index of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexShape {
    /// Index name.
    pub name: String,
    /// Its key attribute names, partition key first.
    pub keys: Vec<String>,
    /// Which attributes it holds.
    pub projection: Projection,
}

impl UpdateJob {
    /// Parses and validates an update job. `file` is only used in messages;
    /// `env` looks up `${VAR}`s (in `[target]`, `name` and string `values`).
    pub fn parse(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<UpdateJob, MappingError> {
        load::parse(text, file, env)
    }

    /// Whether `text` is an update job's file (it has an `[update]` table)
    /// rather than a mapping: how a command that takes either tells them
    /// apart before parsing (a file that is not TOML is neither).
    pub fn is_job_file(text: &str) -> bool {
        text.parse::<toml::Table>()
            .is_ok_and(|t| t.get("update").is_some_and(toml::Value::is_table))
    }

    /// The update must not write a key attribute of the table.
    fn check_keys(&self, keys: &[String]) -> Result<(), MappingError> {
        for (attr, at) in &self.targets {
            if keys.contains(attr) {
                return Err(MappingError::Invalid {
                    at: at.clone(),
                    message: format!("set writes {attr}, a key attribute of table {}: DynamoDB cannot change an item's key (copy the item to its new key instead)", self.target.table),
                });
            }
        }
        Ok(())
    }

    /// The checks that need the table's description: the update writes no
    /// key attribute, and the query's index exists. Call it before any write.
    pub fn check_table(&self, table: &TableShape) -> Result<(), MappingError> {
        self.check_keys(&table.keys)?;
        if let (JobRead::Query { index, .. }, Some(at)) = (&self.read, &self.index_at) {
            let found = table.indexes.iter().find(|i| &i.name == index);
            if let Some(i) = found.filter(|i| i.projection != Projection::All) {
                if self.mode == JobMode::BatchPut {
                    return Err(MappingError::Invalid {
                        at: at.clone(),
                        message: format!("mode = \"batch-put\" rewrites whole items, but index {} holds only some of their attributes ({:?}): the rewrite would drop the others; query an index that projects ALL, scan, or use mode = \"update-item\"", i.name, i.projection),
                    });
                }
            }
            if found.is_none() {
                let known: Vec<&str> = table.indexes.iter().map(|i| i.name.as_str()).collect();
                return Err(MappingError::Invalid {
                    at: at.clone(),
                    message: format!(
                        "query.index {index} is not an index of table {} (its indexes: {})",
                        self.target.table,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                });
            }
        }
        Ok(())
    }

    /// The attributes the update writes (top-level names, placeholders
    /// resolved); empty for a delete.
    pub fn written_attributes(&self) -> impl Iterator<Item = &str> {
        self.targets.iter().map(|(t, _)| t.as_str())
    }

    /// The job file's name, as given to [`UpdateJob::parse`].
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Why the update is not idempotent (it depends on the item's current
    /// value), if it is not; `None` for an update that gives the same item
    /// however often it is applied, and for a delete.
    pub fn not_idempotent(&self) -> Option<&str> {
        match &self.action {
            JobAction::Update { not_idempotent, .. } => not_idempotent.as_deref(),
            JobAction::Delete => None,
        }
    }

    /// The update expression that also marks the item with the run:
    /// `#sql2ddb_run = :sql2ddb_run` added to its SET clause (or as a SET
    /// clause of its own). `None` for a delete.
    pub fn marked_expression(&self) -> Option<String> {
        let JobAction::Update { expression, .. } = &self.action else {
            return None;
        };
        let mark = format!("{MARKER_NAME} = {MARKER_VALUE}");
        Some(match self.set_end {
            Some(end) => format!("{} {mark},{}", &expression[..end], &expression[end..]),
            None => format!("{expression} SET {mark}"),
        })
    }

    /// `mode = "batch-put"`: applies the job's changes to an item as read.
    pub fn apply_changes(&self, item: &mut sql2ddb_core::Item) {
        for change in &self.puts {
            match change {
                PutChange::Set { attribute, value } => {
                    item.insert(attribute.clone(), value.clone());
                }
                PutChange::Remove { attribute } => {
                    item.remove(attribute);
                }
            }
        }
    }

    /// The names and values the read (Scan/Query) uses: `where` and `query.key`.
    pub fn read_placeholders(&self) -> (BTreeMap<String, String>, BTreeMap<String, AttrValue>) {
        self.subset(&[&self.filter_uses, &self.key_uses])
    }

    /// The names and values each write uses: `where` and `set`.
    pub fn write_placeholders(&self) -> (BTreeMap<String, String>, BTreeMap<String, AttrValue>) {
        self.subset(&[&self.filter_uses, &self.set_uses])
    }

    fn subset(&self, uses: &[&Used]) -> (BTreeMap<String, String>, BTreeMap<String, AttrValue>) {
        let mut names = BTreeMap::new();
        let mut values = BTreeMap::new();
        for u in uses {
            for (n, _) in &u.names {
                if let Some(v) = self.names.get(n) {
                    names.insert(n.clone(), v.clone());
                }
            }
            for (n, _) in &u.values {
                if let Some(v) = self.values.get(n) {
                    values.insert(n.clone(), v.clone());
                }
            }
        }
        (names, values)
    }
}
