//! The source side of `sql2ddb plan`: every entity bound as a run binds it
//! (the same columns, key and key proof, key rules, embeds; no DynamoDB
//! call), counted unless asked not to, then a sample of its rows read from
//! parts spread over its key range and mapped by the run's own mapping.

use sql2ddb_core::{MappedItem, Reject, Row, SqlValue};
use sql2ddb_mapping::{BoundEntity, EntitySource, Plan};
use sql2ddb_source::{Relation, Shape, Source};

use super::context::{Context, Purpose};
use super::options::{RunOptions, SnapshotMode};
use super::{embed, prepare};
use crate::error::EngineError;

/// Most parts a sample is read from (each a short read at a key bound).
const MAX_SAMPLE_PARTS: usize = 100;

/// Sampled rows, mapped as a run maps them.
#[derive(Debug, Default)]
pub struct EntitySample {
    /// Rows read for the sample.
    pub rows: u64,
    /// The items the rows became, in key order within each part, parts in key order.
    pub items: Vec<MappedItem>,
    /// The rows the mapping rejected.
    pub rejects: Vec<Reject>,
}

/// One entity bound to its source.
struct SampledEntity {
    bound: BoundEntity,
    shape: Shape,
    key: Vec<String>,
    children: Vec<embed::ChildPlan>,
    from: EntitySource,
    counted: Option<u64>,
}

/// A source opened and every entity of a mapping bound, ready to be
/// sampled; nothing is written anywhere.
pub struct Sampler {
    ctx: Context,
    entities: Vec<SampledEntity>,
}

impl Sampler {
    /// Opens the source (no snapshot: each read sees the source as it is)
    /// and binds every entity of `plan` as a run binds it; counts each
    /// entity's rows when `count`. `opts.source` overrides the mapping's
    /// source; a run directory is created under `opts.runs_dir`.
    pub async fn open(plan: &Plan, opts: &RunOptions, count: bool) -> Result<Sampler, EngineError> {
        let opts = RunOptions {
            dry_run: true,
            snapshot: SnapshotMode::None,
            ..opts.clone()
        };
        let ctx = Context::open(plan, &opts, Purpose::Read).await?;
        let mut sampler = Sampler {
            ctx,
            entities: Vec::new(),
        };
        match sampler.bind_all(plan, count).await {
            Ok(()) => Ok(sampler),
            Err(e) => {
                sampler.close().await;
                Err(e)
            }
        }
    }

    async fn bind_all(&mut self, plan: &Plan, count: bool) -> Result<(), EngineError> {
        for entity in &plan.entities {
            let b = self.ctx.bind(plan, entity).await?;
            let counted = match count {
                true => Some(
                    self.ctx
                        .source
                        .count(&prepare::relation(&entity.from))
                        .await?,
                ),
                false => None,
            };
            self.entities.push(SampledEntity {
                bound: b.bound,
                shape: b.shape,
                key: b.key,
                children: b.children,
                from: entity.from.clone(),
                counted,
            });
        }
        Ok(())
    }

    /// The source, for the plan's own questions (groups, estimates).
    pub fn source(&self) -> &Source {
        &self.ctx.source
    }

    /// The entities' names and the rows each held when counted (`None`:
    /// not counted).
    pub fn entities(&self) -> Vec<(String, Option<u64>)> {
        self.entities
            .iter()
            .map(|e| (e.bound.name().to_string(), e.counted))
            .collect()
    }

    /// What entity `index` reads, as the source names it.
    pub fn relation(&self, index: usize) -> Relation<'_> {
        prepare::relation(&self.entities[index].from)
    }

    /// About `n` rows of entity `index`, read from up to 100 parts spread
    /// over its key range (the first rows after each segment bound of the
    /// run's own `split`, so a sample is never just the first `n` rows),
    /// mapped with their embeds.
    pub async fn sample(&self, index: usize, n: usize) -> Result<EntitySample, EngineError> {
        let e = &self.entities[index];
        let mut out = EntitySample::default();
        if n == 0 {
            return Ok(out);
        }
        let parts = n.clamp(1, MAX_SAMPLE_PARTS);
        let source = &self.ctx.source;
        let from = prepare::relation(&e.from);
        let query = source.page_query(&from, &e.shape, &e.key, n.div_ceil(parts))?;
        for segment in source.split(&query, parts as u32).await? {
            let rows = source
                .read_range(&query, segment.after.as_deref(), segment.until.as_deref())
                .await?;
            out.rows += rows.len() as u64;
            let keys: Vec<Vec<SqlValue>> = rows.iter().map(|r| query.key_of(r)).collect();
            self.map(e, &rows, &keys, &mut out).await?;
            if out.rows as usize >= n {
                break;
            }
        }
        Ok(out)
    }

    /// Maps `rows` (whose keys are `keys`) of entity `e` with their children.
    async fn map(
        &self,
        e: &SampledEntity,
        rows: &[Row],
        keys: &[Vec<SqlValue>],
        out: &mut EntitySample,
    ) -> Result<(), EngineError> {
        let children = match e.children.is_empty() {
            true => Vec::new(),
            false => embed::fetch(&self.ctx.source, &e.children, keys).await?,
        };
        for (i, row) in rows.iter().enumerate() {
            let mapped = match children.get(i) {
                Some(c) => e.bound.map_row_with_children(row, c),
                None => e.bound.map_row(row),
            };
            match mapped {
                Ok(m) => out.items.push(m),
                Err(r) => out.rejects.push(r),
            }
        }
        Ok(())
    }

    /// Closes the source.
    pub async fn close(self) {
        self.ctx.source.close().await;
        self.ctx.resources.close().await;
    }
}
