//! The mapping's entities as a follower sees them: each bound to its
//! table exactly as the full load binds it, and the mappings that cannot be
//! followed safely refused before anything is created or written.

use std::collections::HashMap;

use sql2ddb_mapping::{BoundEntity, BoundPointer, EntitySource, Plan};
use sql2ddb_source::{PageQuery, Relation, Source};

use crate::error::EngineError;
use crate::run::embed::{self, ChildPlan};

/// One entity being followed.
pub(super) struct Followed {
    /// The mapping's entity name.
    pub name: String,
    /// Its table, as the mapping names it.
    pub table: String,
    /// Bound as the full load binds it.
    pub bound: BoundEntity,
    /// Its page query: the select list and decoders the full load reads with.
    pub query: PageQuery,
    /// Its embeds' child queries: an item with embeds is re-rendered from
    /// its row and its children as the source holds them.
    pub children: Vec<ChildPlan>,
    /// `[[pointer]]`s its rows move, forward only, as in a full load.
    pub pointers: Vec<BoundPointer>,
}

/// A table whose rows an entity embeds: a change of one re-renders the
/// parent's item.
pub(super) struct ChildOf {
    /// The parent's table OID and its position in [`ByTable::parents`].
    pub parent: (u32, usize),
    /// The child table read with its `parent_key` as key: a decoded child
    /// row's [`PageQuery::key_of`] is its parent's key.
    pub query: PageQuery,
}

/// The followed tables by OID (a table may feed several entities, and be
/// embedded too).
#[derive(Default)]
pub(super) struct ByTable {
    /// Tables of entities.
    pub parents: HashMap<u32, Vec<Followed>>,
    /// Tables embedded by an entity.
    pub children: HashMap<u32, Vec<ChildOf>>,
}

impl ByTable {
    /// Whether changes of table `oid` matter.
    pub fn follows(&self, oid: u32) -> bool {
        self.parents.contains_key(&oid) || self.children.contains_key(&oid)
    }
}

/// One reason of a refusal, about entity `entity`.
fn reason(entity: &str, message: impl Into<String>) -> String {
    format!("entity {entity}: cannot be followed: {}", message.into())
}

/// The entity a reason of [`reason`]'s is about; `None` for a reason about
/// the server, the user or a table.
pub(crate) fn reason_entity(reason: &str) -> Option<&str> {
    let (entity, _) = reason
        .strip_prefix("entity ")?
        .split_once(": cannot be followed: ")?;
    Some(entity)
}

/// Every reason at once, or nothing to refuse.
pub(super) fn refuse_all(reasons: Vec<String>) -> Result<(), EngineError> {
    match reasons.is_empty() {
        true => Ok(()),
        false => Err(EngineError::Refused { reasons }),
    }
}

/// An error met while binding an entity as a reason of the refusal; an
/// error that says nothing about the mapping (the source unreachable, a
/// statement failing) stays an error.
fn as_reason(e: EngineError) -> Result<String, EngineError> {
    use sql2ddb_source::SourceErrorKind as Kind;
    match &e {
        EngineError::Source(s) if matches!(s.kind(), Kind::Connect | Kind::Query) => Err(e),
        _ => Ok(e.to_string()),
    }
}

/// What of `plan` cannot be followed, seen without reading the source:
/// queries, embeds of queries, nested embeds, `overwrite = true`.
pub(super) fn plan_reasons(plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    for e in &plan.entities {
        if let EntitySource::Query(_) = &e.from {
            out.push(reason(
                &e.name,
                "it reads a query, whose rows have no table to follow; map a table instead",
            ));
        }
        if e.overwrite {
            out.push(reason(&e.name, "it has overwrite = true: several rows share an item, so a deleted row cannot say whether its item goes"));
        }
        for embed in e.embeds() {
            match &embed.from {
                EntitySource::Table(_) if embed.embeds().is_empty() => {}
                EntitySource::Table(_) => out.push(reason(
                    &e.name,
                    format!(
                        "embed {} has embeds of its own, which the follower does not re-render yet",
                        embed.name
                    ),
                )),
                EntitySource::Query(_) => out.push(reason(
                    &e.name,
                    format!(
                        "embed {} reads a query, whose rows have no table to follow",
                        embed.name
                    ),
                )),
            }
        }
    }
    out
}

/// Whether `plan_reasons` says nothing about entity `e`.
fn plain(e: &sql2ddb_mapping::Entity) -> bool {
    matches!(e.from, EntitySource::Table(_))
        && !e.overwrite
        && e.embeds()
            .iter()
            .all(|c| matches!(c.from, EntitySource::Table(_)) && c.embeds().is_empty())
}

/// The tables of `plan`'s entities and their embeds, each once (queries
/// left out).
pub(super) fn table_names(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in &plan.entities {
        let embeds = e.embeds().iter().map(|c| &c.from);
        for from in std::iter::once(&e.from).chain(embeds) {
            if let EntitySource::Table(t) = from {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
        }
    }
    out
}

/// The tables of `plan`'s entities, each once, refusing what cannot be
/// followed without reading the source (queries).
pub(super) fn tables(plan: &Plan) -> Result<Vec<String>, EngineError> {
    refuse_all(plan_reasons(plan))?;
    Ok(table_names(plan))
}

/// Binds every entity of `plan` for following, or refuses with every
/// reason at once (see [`bind`]).
pub(super) async fn prepare(source: &Source, plan: &Plan) -> Result<ByTable, EngineError> {
    let (by_table, reasons) = bind(source, plan, &[]).await?;
    refuse_all(reasons)?;
    Ok(by_table)
}

/// Binds every entity of `plan` for following, and says of each one that
/// cannot be followed why: a query; a table without a primary key (a
/// change could not be matched to its item); nested embeds or embeds of a
/// query and `overwrite = true` (not supported by the follower yet); item
/// key templates that read columns outside the primary key on a table
/// whose `REPLICA IDENTITY` is not `FULL` (an update changing them would
/// not say which item it moved from). Entities reading a table of
/// `refused` are left out: that table is refused already.
pub(super) async fn bind(
    source: &Source,
    plan: &Plan,
    refused: &[String],
) -> Result<(ByTable, Vec<String>), EngineError> {
    let mut reasons = plan_reasons(plan);
    let mut by_table = ByTable::default();
    let reads_refused = |e: &sql2ddb_mapping::Entity| {
        let embeds = e.embeds().iter().map(|c| &c.from);
        std::iter::once(&e.from)
            .chain(embeds)
            .any(|f| matches!(f, EntitySource::Table(t) if refused.contains(t)))
    };
    for entity in plan
        .entities
        .iter()
        .filter(|e| plain(e) && !reads_refused(e))
    {
        match bind_entity(source, plan, entity, &mut by_table).await {
            Ok(None) => {}
            Ok(Some(why)) => reasons.push(reason(&entity.name, why)),
            Err(e) => reasons.push(as_reason(e)?),
        }
    }
    Ok((by_table, reasons))
}

/// Binds `entity` (a table, embeds of tables) into `by_table`; why it
/// cannot be followed when it cannot.
async fn bind_entity(
    source: &Source,
    plan: &Plan,
    entity: &sql2ddb_mapping::Entity,
    by_table: &mut ByTable,
) -> Result<Option<String>, EngineError> {
    let EntitySource::Table(table) = &entity.from else {
        unreachable!("queries are left to plan_reasons")
    };
    let name = &entity.name;
    let from = Relation::Table(table);
    let shape = source.describe_named(name, &from).await?;
    if shape.primary_key.is_empty() {
        return Ok(Some(format!("table {table} has no primary key, so its updates and deletes cannot be matched to their items; add a primary key")));
    }
    let key = entity
        .key
        .clone()
        .unwrap_or_else(|| shape.primary_key.clone());
    if !entity.embeds().is_empty() && key != shape.primary_key {
        return Ok(Some(format!("it embeds child rows and is keyed by {key:?} rather than its primary key {:?}: follow it by its primary key", shape.primary_key)));
    }
    let (bound, children) = if entity.embeds().is_empty() {
        (entity.bind(plan, &shape.columns, &key)?, Vec::new())
    } else {
        let (shapes, children) =
            embed::prepare(source, name, &entity.from, &key, entity.embeds()).await?;
        let bound = entity.bind_with_children(plan, &shape.columns, &key, &shapes)?;
        (bound, children)
    };
    let query = source.page_query(&from, &shape, &shape.primary_key, 1)?;
    let key_indices = query.key_indices();
    let outside_key = bound
        .key_template_columns()
        .into_iter()
        .any(|i| !key_indices.contains(&i));
    if outside_key && source.replica_identity(table).await? != 'f' {
        return Ok(Some(format!("its item key templates read columns outside the primary key of {table}, and an update of those columns only says where the row went, not where it was: run ALTER TABLE {table} REPLICA IDENTITY FULL")));
    }
    let pointers = plan
        .pointers()
        .iter()
        .filter(|p| p.entity == *name)
        .map(|p| p.bind(plan, &shape.columns))
        .collect::<Result<Vec<_>, _>>()?;
    let mut embedded = Vec::new();
    for e in entity.embeds() {
        let EntitySource::Table(child) = &e.from else {
            unreachable!("queries are left to plan_reasons")
        };
        let from = Relation::Table(child);
        let shape = source.describe(&from).await?;
        let outside_key = e.parent_key.iter().any(|c| !shape.primary_key.contains(c));
        if outside_key && source.replica_identity(child).await? != 'f' {
            return Ok(Some(format!("embed {} matches its rows by {:?}, outside the primary key of {child}: a change of those columns would not say which parent the row left; run ALTER TABLE {child} REPLICA IDENTITY FULL", e.name, e.parent_key)));
        }
        let query = source.page_query(&from, &shape, &e.parent_key, 1)?;
        embedded.push((source.table_oid(child).await?, query));
    }
    let oid = source.table_oid(table).await?;
    let list = by_table.parents.entry(oid).or_default();
    let at = (oid, list.len());
    list.push(Followed {
        name: name.clone(),
        table: table.clone(),
        bound,
        query,
        children,
        pointers,
    });
    for (child_oid, query) in embedded {
        by_table
            .children
            .entry(child_oid)
            .or_default()
            .push(ChildOf { parent: at, query });
    }
    Ok(None)
}
