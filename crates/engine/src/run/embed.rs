//! Child rows nested into their parents' items: resolved once against the
//! source, then fetched per page of parents — one query per embed and page
//! (chunked by the source for very long pages), never one per parent row.

use std::future::Future;
use std::pin::Pin;

use sql2ddb_core::SqlValue;
use sql2ddb_mapping::{ChildRow, ChildRows, ChildShape, Embed, EntitySource};
use sql2ddb_source::{ChildQuery, Relation, Source};

use crate::error::EngineError;

/// One embed resolved against its source.
pub(crate) struct ChildPlan {
    query: ChildQuery,
    /// Positions of the child's own key in its rows (what nested embeds match).
    key_indices: Vec<usize>,
    children: Vec<ChildPlan>,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, EngineError>> + Send + 'a>>;

/// Describes every embed (and nested embed) of `embeds`: the shapes the
/// mapping binds against, and the queries that fetch the rows.
pub(crate) fn prepare<'a>(
    source: &'a Source,
    parent: &'a str,
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
            let (child_shapes, child_plans) = prepare(source, &name, e.embeds()).await?;
            shapes.push(ChildShape {
                columns: query.columns().to_vec(),
                key,
                children: child_shapes,
            });
            plans.push(ChildPlan {
                query,
                key_indices,
                children: child_plans,
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
