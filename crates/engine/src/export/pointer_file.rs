//! The pointer step of a bulk put export.
//!
//! Bulk put items writes each record as a put; a pointer item in an existing
//! table may already be further along than the export's value, and the
//! names of a record's per-item condition fields could not be confirmed
//! from an authoritative description. So an export for bulk put writes data
//! items only, and each pointer item's updates go to `pointers.json` beside
//! `data/` (never under it: bulk put reads every object there), one line per
//! pointer item, the line a JSON array of its updates. Once the bulk put has
//! finished, `sql2ddb pointers MAPPING --from FILE` writes them with the
//! conditional update `run` uses (`attribute_not_exists(#v) OR #v < :new`),
//! so a pointer only moves forward.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Serialize;
use sql2ddb_core::KeyAttr;
use sql2ddb_core::PointerUpdate;
use sql2ddb_dynamo::pointer::{write_pointer, PointerOutcome};
use sql2ddb_dynamo::{Dynamo, WriteCapacityLimiter};
use sql2ddb_mapping::Plan;

use super::output::s3_error;
use super::S3Options;
use crate::error::EngineError;
use crate::resources::{Job, ResourceOptions, Resources};
use crate::settings::{WriterFlags, WriterSettings};

/// The pointer file's name beside `data/` (with the run id when the export
/// was added beside an earlier one).
pub const POINTER_FILE: &str = "pointers.json";

/// One pointer item's line: its updates, as a JSON array.
pub fn line(updates: &[PointerUpdate]) -> Vec<u8> {
    let mut out = serde_json::to_vec(updates).expect("pointer updates serialise");
    out.push(b'\n');
    out
}

/// What the pointer step takes besides the mapping.
#[derive(Debug, Clone, Default)]
pub struct PointerStepOptions {
    /// The pointer file: a path, or `s3://BUCKET/KEY`.
    pub from: String,
    /// Where the table is (endpoint, region), over the mapping.
    pub resources: ResourceOptions,
    /// Where the S3 client connects, for an `s3://` file.
    pub s3: S3Options,
    /// Calls in flight, the write-capacity cap and the retry budget, over
    /// the mapping's `[writer]`.
    pub flags: WriterFlags,
}

/// What one pointer's updates did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PointerStepCount {
    /// The pointer's name.
    pub name: String,
    /// Updates that moved the pointer (it was missing or behind).
    pub moved: u64,
    /// Updates the table's pointer was already as far along as: nothing changed.
    pub already_newer: u64,
}

/// What the pointer step did.
#[derive(Debug, Clone, Serialize)]
pub struct PointerStepReport {
    /// The file read.
    pub from: String,
    /// The table written.
    pub table: String,
    /// The endpoint, as reports show it.
    pub endpoint: String,
    /// Pointer items in the file (its lines).
    pub items: u64,
    /// Per pointer, in name order.
    pub pointers: Vec<PointerStepCount>,
    /// The settings the writes were made with.
    pub settings: WriterSettings,
}

/// Writes the pointer updates of `opts.from` into `plan`'s table, each with
/// `run`'s conditional update. Every line is read and checked (a pointer the
/// mapping does not have, a line that is not an array of updates) before
/// anything is written.
pub async fn apply_pointers(
    plan: &Plan,
    opts: &PointerStepOptions,
) -> Result<PointerStepReport, EngineError> {
    let resources = Resources::open(Some(plan), &opts.resources, Job::Status).await?;
    let s3 = S3Options {
        aws: Some(resources.aws().clone()),
        ..opts.s3.clone()
    };
    let text = read(&opts.from, &s3).await?;
    let items = parse(plan, &opts.from, &text)?;
    let settings = opts.flags.resolve(plan);
    let keys: Vec<KeyAttr> = plan.key_attrs();
    let limiter = settings.max_wcu.map(WriteCapacityLimiter::new);
    let writes = Writes {
        dynamo: resources.client(),
        table: &plan.target.table,
        keys: &keys,
        settings: &settings,
        limiter: limiter.as_ref(),
    };
    let outcomes: Vec<(String, PointerOutcome)> = stream::iter(items.iter().flatten())
        .map(|u| writes.one(u))
        .buffer_unordered(settings.concurrency)
        .try_collect()
        .await?;
    let mut counts: BTreeMap<String, PointerStepCount> = BTreeMap::new();
    for (name, outcome) in outcomes {
        let c = counts
            .entry(name.clone())
            .or_insert_with(|| PointerStepCount {
                name,
                ..PointerStepCount::default()
            });
        match outcome {
            PointerOutcome::Written => c.moved += 1,
            PointerOutcome::AlreadyNewer => c.already_newer += 1,
        }
    }
    Ok(PointerStepReport {
        from: sql2ddb_core::redact_url(&opts.from),
        table: plan.target.table.clone(),
        endpoint: resources.endpoint().to_string(),
        items: items.len() as u64,
        pointers: counts.into_values().collect(),
        settings,
    })
}

/// The writes of one pointer step.
struct Writes<'a> {
    dynamo: &'a Dynamo,
    table: &'a str,
    keys: &'a [KeyAttr],
    settings: &'a WriterSettings,
    limiter: Option<&'a WriteCapacityLimiter>,
}

impl Writes<'_> {
    /// One conditional update (one write unit per kilobyte of the item's
    /// values, at least one, within the cap).
    async fn one(&self, u: &PointerUpdate) -> Result<(String, PointerOutcome), EngineError> {
        if let Some(l) = self.limiter {
            l.acquire(1).await;
        }
        let outcome =
            write_pointer(self.dynamo, self.table, self.keys, u, &self.settings.retry).await?;
        Ok((u.name.clone(), outcome))
    }
}

/// The pointer file's text, from a path or an S3 object.
async fn read(from: &str, s3: &S3Options) -> Result<String, EngineError> {
    let bytes = match from.starts_with("s3://") {
        true => sql2ddb_s3::read_object(from, s3).await.map_err(s3_error)?,
        false => tokio::fs::read(from)
            .await
            .map_err(|e| EngineError::io(from, e))?,
    };
    String::from_utf8(bytes).map_err(|_| {
        EngineError::Config(format!(
            "{}: not a pointer file (not UTF-8 text)",
            sql2ddb_core::redact_url(from)
        ))
    })
}

/// Every line's updates, each checked against the mapping's pointers.
fn parse(plan: &Plan, from: &str, text: &str) -> Result<Vec<Vec<PointerUpdate>>, EngineError> {
    let names: Vec<&str> = plan.pointers().iter().map(|p| p.name.as_str()).collect();
    let from = sql2ddb_core::redact_url(from);
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| EngineError::Config(format!("{from}:{}: {why}", i + 1));
        let updates: Vec<PointerUpdate> = serde_json::from_str(line).map_err(|e| {
            at(format!(
                "not a line of pointer updates (a JSON array, as an export for bulk put writes them): {e}"
            ))
        })?;
        if let Some(u) = updates.iter().find(|u| !names.contains(&u.name.as_str())) {
            return Err(at(format!(
                "pointer {} is not one of the mapping's ({}): give the mapping the export was made with",
                u.name,
                match names.is_empty() {
                    true => "it has none".to_string(),
                    false => names.join(", "),
                }
            )));
        }
        items.push(updates);
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::{AttrValue, Item};

    fn plan() -> Plan {
        let text = "version = 1\n[source]\nurl = \"sqlite://unused.db\"\n[target]\ntable = \"shop\"\npk = { name = \"PK\", type = \"S\" }\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"O#{id}\"\n[[pointer]]\nentity = \"order\"\npk = \"LAST_ORDER\"\nmax = { attribute = \"id\", column = \"id\" }\n";
        Plan::parse(text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    fn update(name: &str, value: &str) -> PointerUpdate {
        PointerUpdate {
            name: name.into(),
            pk: AttrValue::S("LAST_ORDER".into()),
            sk: None,
            attribute: "id".into(),
            value: AttrValue::N(value.into()),
            is_max: true,
            attributes: Item::new(),
            cleared: vec!["note".into()],
        }
    }

    #[test]
    fn a_line_reads_back_as_the_updates_it_was_written_from() {
        let updates = vec![update("LAST_ORDER", "2000")];
        let mut text = String::from_utf8(line(&updates)).unwrap();
        text.push('\n');
        text.push_str(std::str::from_utf8(&line(&[update("LAST_ORDER", "7")])).unwrap());
        let read = parse(&plan(), "p.json", &text).unwrap();
        assert_eq!(read, vec![updates, vec![update("LAST_ORDER", "7")]]);
    }

    #[test]
    fn a_pointer_the_mapping_lacks_or_a_bad_line_is_named_by_its_line() {
        let text = [
            line(&[update("LAST_ORDER", "1")]),
            line(&[update("FIRST", "1")]),
        ]
        .concat();
        let e = parse(&plan(), "p.json", std::str::from_utf8(&text).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("p.json:2: pointer FIRST is not one of the mapping's (LAST_ORDER)"),
            "{e}"
        );
        let e = parse(&plan(), "p.json", "{\"Item\": {}}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("p.json:1: not a line of pointer updates"), "{e}");
    }
}
