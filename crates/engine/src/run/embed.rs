//! Child rows nested into their parents' items: resolved once against the
//! source, then fetched per page of parents — one query per embed and page
//! (chunked by the source for very long pages), never one per parent row.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as Json;
use sql2ddb_core::{Reject, Row, SqlValue};
use sql2ddb_mapping::{ChildRow, ChildRows, ChildShape, Embed, EntitySource};
use sql2ddb_source::{ChildQuery, Relation, Source};

use crate::error::EngineError;
use crate::report::EmbedReport;

/// The reason an orphaned child row is rejected with.
pub(crate) const NO_PARENT: &str = "no parent";

/// One embed resolved against its source.
pub(crate) struct ChildPlan {
    /// `entity.embed` (`entity.embed.nested` for a nested one).
    name: String,
    query: ChildQuery,
    /// Positions of the child's own key in its rows (what nested embeds match).
    key_indices: Vec<usize>,
    /// What the parent reads, and its key's columns (in `parent_key`'s
    /// order): the rows an orphan matches none of.
    parent_from: EntitySource,
    parent_key: Vec<String>,
    children: Vec<ChildPlan>,
    /// Child rows read with their parents, and how each ended.
    pub(crate) counts: EmbedCounts,
}

/// Child rows of one embed: every one read is nested in a parent's item, or
/// rejected with its parent, or rejected for having none.
#[derive(Debug, Default)]
pub(crate) struct EmbedCounts {
    /// Nested in a parent row that became an item.
    nested: AtomicU64,
    /// Children of a parent row the mapping rejected.
    parent_rejected: AtomicU64,
    /// Rows whose parent key matches no parent row (or holds NULL), found by
    /// the last scan: each in the rejects file as "no parent".
    no_parent: AtomicU64,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, EngineError>> + Send + 'a>>;

/// Describes every embed (and nested embed) of `embeds`: the shapes the
/// mapping binds against, and the queries that fetch the rows.
pub(crate) fn prepare<'a>(
    source: &'a Source,
    parent: &'a str,
    parent_from: &'a EntitySource,
    parent_key: &'a [String],
    embeds: &'a [Embed],
) -> Boxed<'a, (Vec<ChildShape>, Vec<ChildPlan>)> {
    Box::pin(async move {
        let mut shapes = Vec::with_capacity(embeds.len());
        let mut plans = Vec::with_capacity(embeds.len());
        for e in embeds {
            let from = match &e.from {
                EntitySource::Table(t) => Relation::Table(t),
                EntitySource::Query(q) => Relation::Query(q),
            };
            let shape = source.describe(&from).await?;
            let key = e.key.clone().unwrap_or_else(|| shape.primary_key.clone());
            if !e.embeds().is_empty() && key.is_empty() {
                return Err(EngineError::Entity {
                    entity: format!("{parent}.{}", e.name),
                    message:
                        "has nested embeds but no key to match them by; set `key = [\"col\", …]`"
                            .into(),
                });
            }
            let query = source.child_query(&from, &shape, &e.parent_key, &e.order_by)?;
            let key_indices = query
                .column_indices(&key)
                .ok_or_else(|| EngineError::Entity {
                    entity: format!("{parent}.{}", e.name),
                    message: format!("key {key:?} is not among the columns the embed reads"),
                })?;
            let name = format!("{parent}.{}", e.name);
            let (child_shapes, child_plans) =
                prepare(source, &name, &e.from, &key, e.embeds()).await?;
            // Orphans are looked for under a parent table only: a parent
            // `query` chooses its rows, and the children of rows it leaves
            // out are left out with them, not rejected.
            let table = matches!(parent_from, EntitySource::Table(_));
            let parent_key = match table && parent_key.len() == e.parent_key.len() {
                true => parent_key.to_vec(),
                false => Vec::new(),
            };
            shapes.push(ChildShape {
                columns: query.columns().to_vec(),
                key: key.clone(),
                children: child_shapes,
            });
            plans.push(ChildPlan {
                name,
                query,
                key_indices,
                parent_from: parent_from.clone(),
                parent_key,
                children: child_plans,
                counts: EmbedCounts::default(),
            });
        }
        Ok((shapes, plans))
    })
}

/// The child rows of each parent of a page, in the order of `parent_keys`.
pub(crate) fn fetch<'a>(
    source: &'a Source,
    plans: &'a [ChildPlan],
    parent_keys: &'a [Vec<SqlValue>],
) -> Boxed<'a, Vec<ChildRows>> {
    Box::pin(async move {
        let mut out = vec![ChildRows::default(); parent_keys.len()];
        for plan in plans {
            let groups = source
                .read_children_grouped(&plan.query, parent_keys)
                .await?;
            // Nested embeds: one query for all the children of the page.
            let mut nested = if plan.children.is_empty() {
                Vec::new()
            } else {
                let keys: Vec<Vec<SqlValue>> = groups
                    .iter()
                    .flatten()
                    .map(|row| plan.key_indices.iter().map(|&i| row[i].clone()).collect())
                    .collect();
                fetch(source, &plan.children, &keys).await?
            }
            .into_iter();
            for (parent, rows) in out.iter_mut().zip(groups) {
                let children = rows
                    .into_iter()
                    .map(|row| ChildRow {
                        row,
                        children: nested.next().unwrap_or_default(),
                    })
                    .collect();
                parent.embeds.push(children);
            }
        }
        Ok(out)
    })
}

/// Counts the child rows of one parent row, every embed and nested embed:
/// nested in its item when `mapped`, else rejected with it.
pub(super) fn count(plans: &[ChildPlan], rows: &ChildRows, mapped: bool) {
    for (plan, children) in plans.iter().zip(&rows.embeds) {
        let n = children.len() as u64;
        let counter = match mapped {
            true => &plan.counts.nested,
            false => &plan.counts.parent_rejected,
        };
        counter.fetch_add(n, Ordering::Relaxed);
        for child in children {
            count(&plan.children, &child.children, mapped);
        }
    }
}

/// Finds every embed's orphaned rows (a parent key that matches no parent
/// row, or NULL), rejects each as "no parent", and returns how many. A
/// nested embed's rows are matched against its own parent embed's rows.
pub(super) fn reject_orphans<'a>(
    source: &'a Source,
    plans: &'a [ChildPlan],
    rejects: &'a crate::rejects::RejectsFile,
) -> Boxed<'a, u64> {
    Box::pin(async move {
        let mut total = 0;
        for plan in plans {
            if let (false, EntitySource::Table(parent)) =
                (plan.parent_key.is_empty(), &plan.parent_from)
            {
                let parent = Relation::Table(parent);
                let rows = source
                    .read_orphans(&plan.query, &parent, &plan.parent_key)
                    .await?;
                let found: Vec<Reject> = rows.iter().map(|r| plan.orphan(r)).collect();
                rejects.write(&found).await?;
                plan.counts
                    .no_parent
                    .store(found.len() as u64, Ordering::Relaxed);
                total += found.len() as u64;
            }
            total += reject_orphans(source, &plan.children, rejects).await?;
        }
        Ok(total)
    })
}

impl ChildPlan {
    /// An orphaned row, rejected with its key and the parent key it holds.
    fn orphan(&self, row: &Row) -> Reject {
        let columns = self.query.columns();
        let object = |pick: &mut dyn Iterator<Item = usize>| {
            Json::Object(
                pick.filter_map(|i| {
                    Some((columns.get(i)?.name.clone(), row.get(i)?.to_tagged_json()))
                })
                .collect(),
            )
        };
        let key = object(&mut self.key_indices.iter().copied());
        let held: Vec<String> = self
            .query
            .parent_key_of(row)
            .iter()
            .map(|v| v.to_text().unwrap_or_else(|| "NULL".into()))
            .collect();
        Reject {
            entity: self.name.clone(),
            key,
            column: None,
            reason: format!(
                "{NO_PARENT}: no parent row has {} = {} (the row is in no item)",
                self.parent_key.join(", "),
                held.join(", ")
            ),
            row: object(&mut (0..columns.len())),
        }
    }

    /// This embed's figures and its nested embeds', for the report.
    pub(super) fn reports(&self, out: &mut Vec<EmbedReport>) {
        let c = &self.counts;
        let nested = c.nested.load(Ordering::Relaxed);
        let parent_rejected = c.parent_rejected.load(Ordering::Relaxed);
        let no_parent = c.no_parent.load(Ordering::Relaxed);
        out.push(EmbedReport {
            name: self.name.clone(),
            rows_read: nested + parent_rejected + no_parent,
            nested,
            rejected_with_parent: parent_rejected,
            no_parent,
        });
        for child in &self.children {
            child.reports(out);
        }
    }
}
