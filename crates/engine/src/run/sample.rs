//! The source side of `sql2ddb plan`: every entity prepared as a dry run
//! prepares it (the same bindings, key rules, counts and embeds; no
//! DynamoDB call), then a sample of its rows read from parts spread over
//! the key range and mapped by the run's own mapping.

use std::sync::Arc;

use sql2ddb_core::{MappedItem, Reject, Row, SqlValue};
use sql2ddb_mapping::Plan;
use sql2ddb_source::{Relation, Source};

use super::{embed, prepare, Context, Prepared, RunOptions, SnapshotMode};
use crate::error::EngineError;
use crate::progress::RunProgress;

/// Most parts a sample is read from (each a short read at a key bound).
const MAX_SAMPLE_PARTS: usize = 100;

/// Sampled rows, mapped as a run maps them.
#[derive(Debug, Default)]
pub struct EntitySample {
    /// Rows read for the sample.
    pub rows: u64,
    /// The items the rows became, in key order of each part, parts in key order.
    pub items: Vec<MappedItem>,
    /// The rows the mapping rejected.
    pub rejects: Vec<Reject>,
}

/// A source opened and every entity of a mapping prepared, ready to be
/// sampled; nothing is written anywhere.
pub struct Sampler {
    ctx: Context,
    prepared: Vec<Arc<Prepared>>,
}

impl Sampler {
    /// Opens the source (no snapshot: each read sees the source as it is)
    /// and prepares every entity of `plan` as a dry run would. `opts.source`
    /// overrides the mapping's source; the run directory is created under
    /// `opts.runs_dir`.
    pub async fn open(plan: &Plan, opts: &RunOptions) -> Result<Sampler, EngineError> {
        let opts = RunOptions {
            dry_run: true,
            snapshot: SnapshotMode::None,
            ..opts.clone()
        };
        let mut ctx = Context::open(plan, &opts).await?;
        let progress = RunProgress::new();
        match ctx.prepare(plan, &opts, &progress).await {
            Ok((prepared, _)) => Ok(Sampler { ctx, prepared }),
            Err(e) => {
                ctx.source.close().await;
                ctx.resources.close().await;
                Err(e)
            }
        }
    }

    /// The source, for the plan's own questions (groups, estimates).
    pub fn source(&self) -> &Source {
        &self.ctx.source
    }

    /// Warnings of the preparation (an entity with `overwrite = true`, …).
    pub fn warnings(&self) -> &[String] {
        &self.ctx.report.warnings
    }

    /// The prepared entities' names and the rows each held when prepared.
    pub fn entities(&self) -> Vec<(String, u64)> {
        self.prepared
            .iter()
            .map(|p| (p.bound.name().to_string(), p.counted))
            .collect()
    }

    /// The columns that order and page an entity's rows (its key).
    pub fn key_columns(&self, index: usize) -> Vec<String> {
        let q = &self.prepared[index].query;
        q.key_indices()
            .iter()
            .map(|&i| q.columns()[i].name.clone())
            .collect()
    }

    /// About `n` rows of entity `index`, read from up to 100 parts spread
    /// over its key range (each the first rows after a segment bound, so a
    /// sample is never just the first `n` rows), mapped with their embeds.
    pub async fn sample(&self, index: usize, n: usize) -> Result<EntitySample, EngineError> {
        let p = &self.prepared[index];
        if n == 0 {
            return Ok(EntitySample::default());
        }
        let parts = n.clamp(1, MAX_SAMPLE_PARTS);
        let per_part = n.div_ceil(parts);
        let source = &self.ctx.source;
        let from = prepare::relation(&p.from);
        let shape = source.describe_named(p.bound.name(), &from).await?;
        let key = self.key_columns(index);
        let query = source.page_query(&from, &shape, &key, per_part)?;
        let segments = source.split(&query, parts as u32).await?;
        let mut out = EntitySample::default();
        for segment in &segments {
            let rows = source
                .read_range(&query, segment.after.as_deref(), segment.until.as_deref())
                .await?;
            out.rows += rows.len() as u64;
            self.map(p, &rows, &mut out).await?;
            if out.rows as usize >= n {
                break;
            }
        }
        Ok(out)
    }

    /// Maps `rows` of entity `p` with their embedded children.
    async fn map(
        &self,
        p: &Prepared,
        rows: &[Row],
        out: &mut EntitySample,
    ) -> Result<(), EngineError> {
        let children = if p.children.is_empty() {
            Vec::new()
        } else {
            let keys: Vec<Vec<SqlValue>> = rows.iter().map(|r| p.query.key_of(r)).collect();
            embed::fetch(&self.ctx.source, &p.children, &keys).await?
        };
        for (i, row) in rows.iter().enumerate() {
            let mapped = match children.get(i) {
                Some(c) => p.bound.map_row_with_children(row, c),
                None => p.bound.map_row(row),
            };
            match mapped {
                Ok(m) => out.items.push(m),
                Err(r) => out.rejects.push(r),
            }
        }
        Ok(())
    }

    /// What entity `index` reads, as the source names it.
    pub fn relation(&self, index: usize) -> Relation<'_> {
        prepare::relation(&self.prepared[index].from)
    }

    /// Closes the source.
    pub async fn close(self) {
        self.ctx.source.close().await;
        self.ctx.resources.close().await;
    }
}
