//! The mapping's entities as a follower sees them: each bound to its
//! table exactly as the full load binds it, and the mappings that cannot be
//! followed safely refused before anything is created or written.

use std::collections::HashMap;

use sql2ddb_mapping::{BoundEntity, EntitySource, Plan};
use sql2ddb_source::{PageQuery, Relation, Source};

use crate::error::EngineError;

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
}

/// The followed entities by their table's OID (a table may feed several).
pub(super) type ByTable = HashMap<u32, Vec<Followed>>;

fn refuse(entity: &str, message: impl Into<String>) -> EngineError {
    EngineError::Entity {
        entity: entity.to_string(),
        message: format!("cannot be followed: {}", message.into()),
    }
}

/// The tables of `plan`'s entities, each once, refusing what cannot be
/// followed without reading the source (queries).
pub(super) fn tables(plan: &Plan) -> Result<Vec<String>, EngineError> {
    let mut out: Vec<String> = Vec::new();
    for e in &plan.entities {
        match &e.from {
            EntitySource::Table(t) => {
                if !out.contains(t) {
                    out.push(t.clone());
                }
            }
            EntitySource::Query(_) => {
                return Err(refuse(
                    &e.name,
                    "it reads a query, whose rows have no table to follow; map a table instead",
                ))
            }
        }
    }
    Ok(out)
}

/// Binds every entity of `plan` for following, or says which one cannot be
/// followed and why: a query; a table without a primary key (a change
/// could not be matched to its item); embedded children, pointers and
/// `overwrite = true` (not supported by the follower yet); item key
/// templates that read columns outside the primary key on a table whose
/// `REPLICA IDENTITY` is not `FULL` (an update changing them would not say
/// which item it moved from).
pub(super) async fn prepare(source: &Source, plan: &Plan) -> Result<ByTable, EngineError> {
    tables(plan)?;
    let mut by_table: ByTable = HashMap::new();
    for entity in &plan.entities {
        let EntitySource::Table(table) = &entity.from else {
            unreachable!("queries refused above")
        };
        let name = &entity.name;
        if !entity.embeds().is_empty() {
            return Err(refuse(name, "it embeds child rows, which the follower does not re-render yet; follow a mapping without [[entity.embed]]"));
        }
        if plan.pointers().iter().any(|p| p.entity == *name) {
            return Err(refuse(
                name,
                "a [[pointer]] reads it, which the follower does not move yet",
            ));
        }
        if entity.overwrite {
            return Err(refuse(name, "it has overwrite = true: several rows share an item, so a deleted row cannot say whether its item goes"));
        }
        let from = Relation::Table(table);
        let shape = source.describe_named(name, &from).await?;
        if shape.primary_key.is_empty() {
            return Err(refuse(
                name,
                format!("table {table} has no primary key, so its updates and deletes cannot be matched to their items; add a primary key"),
            ));
        }
        let key = entity
            .key
            .clone()
            .unwrap_or_else(|| shape.primary_key.clone());
        let bound = entity.bind(plan, &shape.columns, &key)?;
        let query = source.page_query(&from, &shape, &shape.primary_key, 1)?;
        let key_indices = query.key_indices();
        let outside_key = bound
            .key_template_columns()
            .into_iter()
            .any(|i| !key_indices.contains(&i));
        if outside_key && source.replica_identity(table).await? != 'f' {
            return Err(refuse(
                name,
                format!("its item key templates read columns outside the primary key of {table}, and an update of those columns only says where the row went, not where it was: run ALTER TABLE {table} REPLICA IDENTITY FULL"),
            ));
        }
        let oid = source.table_oid(table).await?;
        by_table.entry(oid).or_default().push(Followed {
            name: name.clone(),
            table: table.clone(),
            bound,
            query,
        });
    }
    Ok(by_table)
}
