//! Stage 1 of a run: resolve every entity against its source (columns, key,
//! bindings, key rules, counts, segments), then make sure the table exists
//! and record the run — all before the first write, so a mapping that does
//! not fit its source or table fails without touching DynamoDB.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sql2ddb_dynamo::{ensure_table_spec, GsiSpec, TableSpec};
use sql2ddb_mapping::{BoundEntity, BoundPointer, ChildShape, Entity, EntitySource, Plan};
use sql2ddb_source::{default_read_parallelism, Relation, Shape, Source};

use super::context::Context;
use super::options::RunOptions;
use super::prepared::{Prepared, WriteStats};
use super::{embed, keys};
use crate::checkpoint::Checkpoints;
use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::target::TablePlan;

/// An entity bound to its source's columns, before its reads are planned.
pub(super) struct Bound {
    pub(super) shape: Shape,
    pub(super) key: Vec<String>,
    pub(super) bound: BoundEntity,
    pub(super) children: Vec<embed::ChildPlan>,
    pointers: Vec<BoundPointer>,
    overwrites: Option<keys::Overwrites>,
}

impl Context {
    /// Prepares every entity the run reads, then the table and the run's
    /// record; returns the entities and the checkpoints (when tracked).
    pub(super) async fn prepare(
        &mut self,
        plan: &Plan,
        opts: &RunOptions,
        progress: &RunProgress,
    ) -> Result<(Vec<Arc<Prepared>>, Option<Arc<Checkpoints>>), EngineError> {
        let mut prepared = Vec::with_capacity(plan.entities.len());
        for entity in &plan.entities {
            if self.rejected.as_ref().is_some_and(|r| !r.has(&entity.name)) {
                continue;
            }
            let bound = self.bind(plan, entity).await?;
            prepared.push(self.plan_reads(plan, entity, opts, progress, bound).await?);
        }
        // A failed look at the table fails the run where the table's
        // other checks would: after the source's.
        let table_plan = self.table_plan.take().unwrap_or(Ok(TablePlan::AsItIs))?;
        if !opts.dry_run {
            self.report.table_created = ensure_table_spec(
                self.resources.client(),
                &table_spec(plan),
                plan.target.create,
            )
            .await?;
        }
        // After every check of the source and the table, so a mapping that
        // does not fit leaves the table as it was; before the run is
        // recorded, so a run stopped while emptying leaves nothing to
        // resume: it is started again, and empties what is left.
        if let (TablePlan::Empty { held }, false) = (table_plan, self.report.table_created) {
            let client = self.resources.client();
            let deleted = crate::target::empty(plan, opts, client, held, progress).await?;
            self.report.table_emptied = Some(deleted);
        }
        let checkpoints = match &self.tracking {
            Some(t) => Some(
                t.start(
                    plan,
                    &self.run_id,
                    &self.source_url,
                    self.queue_url.as_deref(),
                    &self.report.snapshot,
                )
                .await?,
            ),
            None => None,
        };
        Ok((prepared, checkpoints))
    }

    /// Describes the entity's source, settles its key (and proves it), and
    /// binds its templates, embeds and pointers to the source's columns.
    pub(super) async fn bind(
        &mut self,
        plan: &Plan,
        entity: &Entity,
    ) -> Result<Bound, EngineError> {
        let described = describe(&self.source, entity).await?;
        let (bound, pointers, overwrites) =
            bind_described(plan, entity, &described, &mut self.report.warnings)?;
        let Described {
            shape,
            key,
            children,
            ..
        } = described;
        keys::prove_unique(&self.source, entity, &relation(&entity.from), &shape, &key).await?;
        Ok(Bound {
            shape,
            key,
            bound,
            children,
            pointers,
            overwrites,
        })
    }

    /// Counts the entity's rows and cuts its key range into segments (the
    /// recorded ones on resume, less those finished; none for a replay).
    async fn plan_reads(
        &mut self,
        plan: &Plan,
        entity: &Entity,
        opts: &RunOptions,
        progress: &RunProgress,
        b: Bound,
    ) -> Result<Arc<Prepared>, EngineError> {
        let from = relation(&entity.from);
        let page_size = opts.page_size.unwrap_or_else(|| entity.page_size(plan));
        let query = self.source.page_query(&from, &b.shape, &b.key, page_size)?;
        let counters = progress.entity(&entity.name);
        let replay = match &self.rejected {
            Some(r) => Some(r.keys(&entity.name, &b.key, &b.shape.columns)?),
            None => None,
        };
        let total = match &replay {
            Some(keys) => keys.len() as u64,
            None => self.source.count(&from).await?,
        };
        counters.total.store(total, Ordering::Relaxed);
        let parallelism = opts
            .read_parallelism
            .or_else(|| entity.read_parallelism(plan))
            .unwrap_or_else(|| default_read_parallelism(total));
        let recorded = self
            .tracking
            .as_ref()
            .and_then(|t| t.recorded_segments(&entity.name));
        let segments = match recorded {
            Some(s) => s,
            None if replay.is_some() => Vec::new(),
            None => self.source.split(&query, parallelism).await?,
        };
        let segments = match &mut self.tracking {
            Some(t) => {
                t.describe(&entity.name, &segments);
                t.remaining(&entity.name, segments)
            }
            None => segments,
        };
        Ok(Arc::new(Prepared {
            bound: Arc::new(b.bound),
            query,
            segments,
            children: b.children,
            pointers: b.pointers,
            counters,
            stats: Arc::new(WriteStats::default()),
            overwrites: b.overwrites,
            from: entity.from.clone(),
            counted: total,
            replay,
            segment_mismatches: Default::default(),
        }))
    }
}

/// An entity's source as binding needs it: its columns, the key it is
/// paged by, and its embeds' shapes and queries.
pub(crate) struct Described {
    /// The columns and primary key the source returns.
    pub(crate) shape: Shape,
    /// The key the entity is paged by: its `key`, else the primary key.
    pub(crate) key: Vec<String>,
    /// Each embed's columns (and its own embeds'), to bind against.
    pub(crate) child_shapes: Vec<ChildShape>,
    /// Each embed's query.
    pub(crate) children: Vec<embed::ChildPlan>,
}

/// Describes `entity`'s source (and its embeds'), and settles the key it
/// is paged by; refuses an entity with no key.
pub(crate) async fn describe(source: &Source, entity: &Entity) -> Result<Described, EngineError> {
    let from = relation(&entity.from);
    let shape = source.describe_named(&entity.name, &from).await?;
    let key = match &entity.key {
        Some(k) => k.clone(),
        None => shape.primary_key.clone(),
    };
    if key.is_empty() {
        return Err(EngineError::Entity {
            entity: entity.name.clone(),
            message: "has no primary key to page by; set `key = [\"col\", …]` in its [[entity]]"
                .into(),
        });
    }
    let (child_shapes, children) = match entity.embeds().is_empty() {
        true => (Vec::new(), Vec::new()),
        false => embed::prepare(source, &entity.name, &entity.from, &key, entity.embeds()).await?,
    };
    Ok(Described {
        shape,
        key,
        child_shapes,
        children,
    })
}

/// Binds `entity`'s templates, embeds and pointers to what [`describe`]
/// found, and applies the key rule that needs no query (templates that
/// can collapse rows); no IO.
fn bind_described(
    plan: &Plan,
    entity: &Entity,
    d: &Described,
    warnings: &mut Vec<String>,
) -> Result<(BoundEntity, Vec<BoundPointer>, Option<keys::Overwrites>), EngineError> {
    let bound = match entity.embeds().is_empty() {
        true => entity.bind(plan, &d.shape.columns, &d.key)?,
        false => entity.bind_with_children(plan, &d.shape.columns, &d.key, &d.child_shapes)?,
    };
    let overwrites = keys::settle(entity, &d.shape, &d.key, warnings)?;
    let pointers = plan
        .pointers()
        .iter()
        .filter(|p| p.entity == entity.name)
        .map(|p| p.bind(plan, &d.shape.columns))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((bound, pointers, overwrites))
}

/// Whether `entity` binds to `d` as a run binds it before reading
/// (`check --source`); the warnings a run would print go to `warnings`.
pub(crate) fn check_binding(
    plan: &Plan,
    entity: &Entity,
    d: &Described,
    warnings: &mut Vec<String>,
) -> Result<(), EngineError> {
    bind_described(plan, entity, d, warnings).map(drop)
}

/// Refuses `entity` when the key [`describe`] settled is not proven
/// unique and non-NULL, as a run does before reading.
pub(crate) async fn check_key(
    source: &Source,
    entity: &Entity,
    d: &Described,
) -> Result<(), EngineError> {
    let from = relation(&entity.from);
    keys::prove_unique(source, entity, &from, &d.shape, &d.key)
        .await
        .map(drop)
}

/// What an entity reads, as the source names it.
pub(super) fn relation(from: &EntitySource) -> Relation<'_> {
    match from {
        EntitySource::Table(t) => Relation::Table(t),
        EntitySource::Query(q) => Relation::Query(q),
    }
}

/// The target table as the mapping declares it: keys, GSIs, billing.
pub(super) fn table_spec(plan: &Plan) -> TableSpec {
    let t = &plan.target;
    TableSpec {
        name: t.table.clone(),
        keys: plan.key_attrs(),
        gsis: t
            .gsis
            .iter()
            .map(|g| GsiSpec {
                name: g.name.clone(),
                keys: g.keys(),
                projection: g.projection.clone(),
            })
            .collect(),
        billing: t.billing,
    }
}
