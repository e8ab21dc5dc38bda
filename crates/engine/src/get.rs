//! `sql2ddb get MAPPING ENTITY KEY=VALUE…`: one source row explained. The
//! row is read by key and mapped by the run's own stages (the bindings,
//! embeds and mapping code of a full load, as `run --only-rejects` reads its
//! rows), and each item it makes is compared, attribute by attribute, with
//! what the table holds at the item's key, as `verify --deep` compares them.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::{Map, Value as Json};
use sql2ddb_core::{AttrValue, Item, WorkBatch};
use sql2ddb_dynamo::{batch_get, RetryPolicy};
use sql2ddb_mapping::Plan;

use crate::deep::canon::{attribute_diffs, canonical_item, key_item, key_json, key_text};
use crate::error::EngineError;
use crate::progress::{EntityProgress, RunProgress};
use crate::run::expected::SourceItems;
use crate::run::RunOptions;

/// What `get` is asked.
#[derive(Debug, Clone)]
pub struct GetOptions {
    /// The source, endpoint, region and run directory.
    pub run: RunOptions,
    /// The entity.
    pub entity: String,
    /// The row's key columns and their values, as given.
    pub key: Vec<(String, String)>,
}

/// One source row, explained.
#[derive(Debug, Clone, Serialize)]
pub struct GetReport {
    /// The entity.
    pub entity: String,
    /// The row's key columns, as given.
    pub source_key: Map<String, Json>,
    /// The table.
    pub table: String,
    /// The endpoint, as reports show it.
    pub endpoint: String,
    /// What was found.
    #[serde(flatten)]
    pub outcome: GetOutcome,
}

/// What the row became.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum GetOutcome {
    /// No row of the entity has this key in the source.
    NotInSource,
    /// The mapping rejects the row: it makes no item.
    Rejected {
        /// Why.
        reasons: Vec<String>,
        /// The rejects file with the row.
        rejects_file: String,
    },
    /// The items the mapping makes of the row, each beside the table's.
    Items {
        /// In the order the mapping makes them.
        items: Vec<ItemCheck>,
    },
}

/// One expected item beside the table's item at its key.
#[derive(Debug, Clone, Serialize)]
pub struct ItemCheck {
    /// The item's key attributes (DynamoDB JSON).
    pub key: Json,
    /// No item at this key in the table.
    pub missing: bool,
    /// Every attribute of either item, by name.
    pub attributes: Vec<AttrRow>,
}

/// One attribute: its expected and actual values (DynamoDB JSON, canonical;
/// `None`: absent) and whether they differ.
#[derive(Debug, Clone, Serialize)]
pub struct AttrRow {
    /// Attribute name.
    pub name: String,
    /// What the mapping makes of the row.
    pub expected: Option<Json>,
    /// What the table holds.
    pub actual: Option<Json>,
    /// Whether they differ (numbers and sets compared as DynamoDB does).
    pub differs: bool,
}

impl ItemCheck {
    /// The item is in the table, every attribute equal.
    pub fn equal(&self) -> bool {
        !self.missing && self.attributes.iter().all(|a| !a.differs)
    }
}

impl GetReport {
    /// Every item the row makes is in the table, equal.
    pub fn equal(&self) -> bool {
        match &self.outcome {
            GetOutcome::Items { items } => items.iter().all(ItemCheck::equal),
            _ => false,
        }
    }
}

/// Reads the row, maps it, and reads the table at each item's key.
pub async fn get(plan: &Plan, opts: &GetOptions) -> Result<GetReport, EngineError> {
    if plan.entity(&opts.entity).is_none() {
        let names: Vec<&str> = plan.entities.iter().map(|e| e.name.as_str()).collect();
        return Err(EngineError::Config(format!(
            "the mapping has no entity {:?} (it has {})",
            opts.entity,
            names.join(", ")
        )));
    }
    let endpoint = opts.run.endpoint.as_deref();
    if endpoint.or(plan.target.endpoint.as_deref()) == Some("local") {
        // The embedded endpoint's data is in the run's directory; without
        // it, an empty table would be started and every item "missing".
        let run_id = opts.run.run_id.as_deref().unwrap_or_default();
        let data = opts
            .run
            .runs_dir
            .join(run_id)
            .join(crate::resources::LOCAL_DATA_FILE);
        if !data.is_file() {
            return Err(EngineError::Config(format!(
                "`--endpoint local` reads the data a run's embedded endpoint kept in its directory, and {} is not there: give the id of a run made with `--endpoint local` (--run, and --runs-dir if its directory is elsewhere), or the URL of a DynamoDB endpoint",
                data.display()
            )));
        }
    }
    let progress = RunProgress::new();
    let source =
        SourceItems::open_row(plan, &opts.run, &progress, (&opts.entity, &opts.key)).await?;
    let result = explain(plan, opts, &source, &progress).await;
    source.close().await;
    result
}

async fn explain(
    plan: &Plan,
    opts: &GetOptions,
    source: &SourceItems,
    progress: &RunProgress,
) -> Result<GetReport, EngineError> {
    let made = Mutex::new(Vec::new());
    source
        .read(|batch: WorkBatch| {
            let mut made = made.lock().expect("items lock");
            for m in batch.items {
                // Read back from the text a run would write.
                let item = m.decode().map_err(|message| EngineError::Entity {
                    entity: batch.entity.clone(),
                    message: message.to_string(),
                })?;
                made.push(item);
            }
            Ok(())
        })
        .await?;
    let made = made.into_inner().expect("items lock");
    let counters = progress.entity(&opts.entity);
    let outcome = if !made.is_empty() {
        GetOutcome::Items {
            items: compare(plan, source, made).await?,
        }
    } else if EntityProgress::get(&counters.rejected) > 0 {
        GetOutcome::Rejected {
            reasons: source
                .reject_reasons()
                .into_iter()
                .map(|r| match r.column {
                    Some(c) => format!("{c}: {}", r.reason),
                    None => r.reason,
                })
                .collect(),
            rejects_file: source.rejects_file().display().to_string(),
        }
    } else {
        GetOutcome::NotInSource
    };
    Ok(GetReport {
        entity: opts.entity.clone(),
        source_key: opts
            .key
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect(),
        table: plan.target.table.clone(),
        endpoint: source.endpoint().to_string(),
        outcome,
    })
}

/// Each expected item beside the table's item at its key (one strongly
/// consistent read for them all).
async fn compare(
    plan: &Plan,
    source: &SourceItems,
    made: Vec<Item>,
) -> Result<Vec<ItemCheck>, EngineError> {
    let keys = plan.key_attrs();
    let wanted: Vec<Item> = made.iter().map(|i| key_item(i, &keys)).collect();
    let found = batch_get(
        source.client(),
        &plan.target.table,
        &wanted,
        None,
        RetryPolicy::default(),
    )
    .await?;
    Ok(made
        .iter()
        .map(|item| {
            let expected = canonical_item(item);
            let text = key_text(item, &keys);
            let actual = found
                .iter()
                .find(|f| text.is_some() && key_text(f, &keys) == text)
                .map(canonical_item);
            let empty = Item::new();
            let differing = attribute_diffs(&expected, actual.as_ref().unwrap_or(&empty));
            let mut names: Vec<&String> = expected.keys().collect();
            if let Some(a) = &actual {
                names.extend(a.keys());
            }
            names.sort();
            names.dedup();
            let value = |i: Option<&Item>, n: &str| i?.get(n).map(AttrValue::to_dynamo_json);
            ItemCheck {
                key: key_json(item, &keys),
                missing: actual.is_none(),
                attributes: names
                    .into_iter()
                    .map(|n| AttrRow {
                        name: n.clone(),
                        expected: value(Some(&expected), n),
                        actual: value(actual.as_ref(), n),
                        differs: differing.iter().any(|d| &d.name == n),
                    })
                    .collect(),
            }
        })
        .collect())
}
