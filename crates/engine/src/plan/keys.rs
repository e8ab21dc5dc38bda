//! The keys of a plan: the partition keys with the most items (exact by
//! `GROUP BY` on the partition key template's columns, or in the sample),
//! put together over the entities that share them, and the rows that map
//! to one key (`GROUP BY … HAVING count(*) > 1`).

use std::collections::{BTreeMap, HashMap};

use sql2ddb_core::{AttrValue, Item};
use sql2ddb_mapping::{Entity, Plan};
use sql2ddb_source::{quote_table, Dialect, Relation};

use super::report::{Collisions, KeyCount, Partition, Totals};
use super::size;
use crate::error::EngineError;
use crate::run::{EntitySample, Sampler};

/// Partition keys listed, all entities together.
pub(super) const HOT_PARTITIONS: usize = 10;
/// Collision examples per entity.
const COLLISION_EXAMPLES: usize = 5;

/// One entity's partition keys, before they are put together.
pub(super) struct EntityPartitions {
    pub(super) keys: Vec<(String, u64)>,
    pub(super) mean_size: f64,
    pub(super) mean_units: f64,
}

/// The entity's most used partition keys and their items: exact by `GROUP
/// BY` on the partition key template's columns, or counted in the sample.
pub(super) async fn partition_keys(
    mapping: &Plan,
    entity: &Entity,
    sampler: &Sampler,
    i: usize,
    sample: &EntitySample,
    scale: f64,
    estimate: bool,
) -> Result<Vec<(String, u64)>, EngineError> {
    let template = entity.pk_template();
    if estimate {
        let pk_attr = &mapping.target.pk.name;
        let mut counts: HashMap<String, u64> = HashMap::new();
        for m in &sample.items {
            *counts
                .entry(key_text(&m.item, &[pk_attr.to_string()]))
                .or_default() += 1;
        }
        let mut keys: Vec<(String, u64)> = counts
            .into_iter()
            .map(|(k, n)| (k, (n as f64 * scale).round() as u64))
            .collect();
        keys.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        keys.truncate(HOT_PARTITIONS);
        return Ok(keys);
    }
    let columns = size::columns([template]);
    let groups = sampler
        .source()
        .largest_groups(&sampler.relation(i), &columns, HOT_PARTITIONS)
        .await?;
    Ok(groups
        .into_iter()
        .map(|g| {
            let values = values_by_column(&columns, &g.values);
            (size::render(template, &values), g.rows)
        })
        .collect())
}

/// Rows of entity `i` with a NULL in a column its key templates read:
/// rows that make no key, which the groups above leave out.
pub(super) async fn null_key_rows(
    entity: &Entity,
    sampler: &Sampler,
    i: usize,
) -> Result<u64, EngineError> {
    let columns = size::columns(std::iter::once(entity.pk_template()).chain(entity.sk_template()));
    Ok(sampler
        .source()
        .rows_with_null(&sampler.relation(i), &columns)
        .await?)
}

/// Group values by column name, for [`size::render`].
fn values_by_column<'a>(
    columns: &'a [String],
    values: &'a [Option<String>],
) -> BTreeMap<&'a str, Option<&'a str>> {
    columns
        .iter()
        .zip(values)
        .map(|(c, v)| (c.as_str(), v.as_deref()))
        .collect()
}

/// An item's key attributes as text, `PK | SK`.
fn key_text(item: &Item, attrs: &[String]) -> String {
    attrs
        .iter()
        .map(|a| match item.get(a) {
            Some(AttrValue::S(s)) | Some(AttrValue::N(s)) => s.clone(),
            Some(v) => v.to_dynamo_json().to_string(),
            None => String::new(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Rows mapped to one key: exact (`GROUP BY … HAVING count(*) > 1` on the
/// key templates' columns), or among the sampled items.
pub(super) async fn collisions(
    mapping: &Plan,
    entity: &Entity,
    sampler: &Sampler,
    i: usize,
    sample: &EntitySample,
    estimate: bool,
) -> Result<Collisions, EngineError> {
    let templates: Vec<&str> = std::iter::once(entity.pk_template())
        .chain(entity.sk_template())
        .collect();
    if estimate {
        let attrs: Vec<String> = mapping.key_attrs().into_iter().map(|k| k.name).collect();
        let mut counts: HashMap<String, u64> = HashMap::new();
        for m in &sample.items {
            *counts.entry(key_text(&m.item, &attrs)).or_default() += 1;
        }
        let mut examples: Vec<KeyCount> = counts
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(key, rows)| KeyCount { key, rows })
            .collect();
        examples.sort_by(|a, b| b.rows.cmp(&a.rows).then_with(|| a.key.cmp(&b.key)));
        let (keys, rows) = (examples.len() as u64, examples.iter().map(|e| e.rows).sum());
        examples.truncate(COLLISION_EXAMPLES);
        return Ok(Collisions {
            exact: false,
            keys,
            rows,
            examples,
        });
    }
    let columns = size::columns(templates.iter().copied());
    let found = sampler
        .source()
        .duplicates(&sampler.relation(i), &columns, COLLISION_EXAMPLES)
        .await?;
    let examples = found
        .examples
        .iter()
        .map(|g| {
            let values = values_by_column(&columns, &g.values);
            let key = templates
                .iter()
                .map(|t| size::render(t, &values))
                .collect::<Vec<_>>()
                .join(" | ");
            KeyCount { key, rows: g.rows }
        })
        .collect();
    Ok(Collisions {
        exact: true,
        keys: found.groups,
        rows: found.rows,
        examples,
    })
}

/// Entities that render the same partition key share its partition, but a
/// key among one entity's largest need not be among another's (a playlist's
/// own item is one of thousands of one-row keys): each key one entity found
/// is counted, exactly, in every other entity whose template renders it.
pub(super) async fn count_shared(
    mapping: &Plan,
    sampler: &Sampler,
    partitions: &mut [(String, EntityPartitions)],
) -> Result<(), EngineError> {
    // The keys that will be shown: the largest, all entities together.
    let mut sums: BTreeMap<&String, u64> = BTreeMap::new();
    for (k, n) in partitions.iter().flat_map(|(_, e)| &e.keys) {
        *sums.entry(k).or_default() += n;
    }
    let mut found: Vec<(&String, u64)> = sums.into_iter().collect();
    found.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let found: Vec<String> = found
        .into_iter()
        .take(HOT_PARTITIONS)
        .map(|(k, _)| k.clone())
        .collect();
    let source = sampler.source();
    let d = source.dialect();
    for (i, (name, e)) in partitions.iter_mut().enumerate() {
        let Some(entity) = mapping.entity(name) else {
            continue;
        };
        let template = entity.pk_template();
        let relation = match sampler.relation(i) {
            Relation::Table(t) => quote_table(d, t),
            Relation::Query(q) => format!("({})", q.trim().trim_end_matches(';')),
        };
        let mut seen: Vec<String> = e.keys.iter().map(|(k, _)| k.clone()).collect();
        for key in &found {
            if seen.contains(key) {
                continue;
            }
            seen.push(key.clone());
            let Some(values) = size::parse(template, key) else {
                continue;
            };
            // A literal the server converts to the column's type: an
            // index on the column serves it.
            let conditions: Vec<String> = values
                .iter()
                .map(|(c, v)| {
                    let mut v = v.replace('\'', "''");
                    if d == Dialect::MySql {
                        v = v.replace('\\', "\\\\");
                    }
                    format!("k.{} = '{v}'", quote_table(d, c))
                })
                .collect();
            let query = format!(
                "SELECT * FROM {relation} AS k WHERE {}",
                conditions.join(" AND ")
            );
            let rows = source.count(&Relation::Query(&query)).await?;
            if rows > 0 {
                e.keys.push((key.clone(), rows));
            }
        }
    }
    Ok(())
}

/// Partition keys of every entity put together (entities that share a key
/// share its partition), the largest first, each with its write rate.
pub(super) fn hot_partitions(
    entities: Vec<(String, EntityPartitions)>,
    planned: f64,
    totals: &Totals,
) -> Vec<Partition> {
    let mut by_key: BTreeMap<String, Partition> = BTreeMap::new();
    for (name, e) in entities {
        for (key, items) in e.keys {
            let p = by_key.entry(key.clone()).or_insert_with(|| Partition {
                key,
                entities: Vec::new(),
                items: 0,
                bytes: 0,
                write_units: 0,
                wcu_per_second: 0.0,
            });
            p.entities.push(name.clone());
            p.items += items;
            p.bytes += (items as f64 * e.mean_size).round() as u64;
            p.write_units += (items as f64 * e.mean_units).round() as u64;
        }
    }
    let mut hot: Vec<Partition> = by_key.into_values().collect();
    hot.sort_by(|a, b| b.items.cmp(&a.items).then_with(|| a.key.cmp(&b.key)));
    hot.truncate(HOT_PARTITIONS);
    for p in &mut hot {
        p.wcu_per_second = match totals.write_units {
            0 => 0.0,
            all => planned * p.write_units as f64 / all as f64,
        };
    }
    hot
}
