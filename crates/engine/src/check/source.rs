//! `sql2ddb check MAPPING --source`: every entity bound against the live
//! source as a run binds it before it reads a row — the table exists, every
//! column a template, attribute, `exclude`, `key` or pointer names is one
//! the source returns, the key templates cannot collapse rows, the key is
//! proven unique and non-NULL — with every problem reported at once.
//! Reads the catalog (and, for a `query` entity, the query's keys); writes
//! nothing, anywhere.

use sql2ddb_core::Column;
use sql2ddb_mapping::{Entity, MappingError, Plan};
use sql2ddb_source::{Source, SourceErrorKind};

use crate::error::EngineError;
use crate::run::{check_binding, check_key, describe, Described};

/// Most columns one entity's binding is retried past (each retry finds one
/// more column the source does not return).
const MAX_MISSING_COLUMNS: usize = 100;

/// What binding the mapping to its source found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SourceCheck {
    /// Everything a run would refuse, each naming the place in the
    /// mapping (`file:line:col`), the entity and the field, and what to do
    /// (a "did you mean" where a name is close to one that exists).
    pub problems: Vec<String>,
    /// What a run would warn about (an entity with `overwrite = true`).
    pub warnings: Vec<String>,
    /// Entities bound without a problem.
    pub bound: usize,
}

/// Connects to `source_url` and binds every entity of `plan` against it;
/// an error only when the source cannot be reached or a statement fails
/// for a reason that is not the mapping's.
pub async fn check_source(plan: &Plan, source_url: &str) -> Result<SourceCheck, EngineError> {
    let source = Source::connect(source_url, 2).await?;
    let mut out = SourceCheck::default();
    let mut result = Ok(());
    for entity in &plan.entities {
        let before = out.problems.len();
        if let Err(e) = check_entity(&source, plan, entity, &mut out).await {
            result = Err(e);
            break;
        }
        if out.problems.len() == before {
            out.bound += 1;
        }
    }
    source.close().await;
    result.map(|()| out)
}

/// Binds one entity, adding its problems to `out`.
async fn check_entity(
    source: &Source,
    plan: &Plan,
    entity: &Entity,
    out: &mut SourceCheck,
) -> Result<(), EngineError> {
    let mut described = match describe(source, entity).await {
        Ok(d) => d,
        Err(e) => return problem(entity, e, &[], out),
    };
    let columns = described.shape.columns.clone();
    let mut missing = 0;
    while let Err(e) = check_binding(plan, entity, &described, &mut out.warnings) {
        // The templates bound, and the rule against collapsing rows judged
        // a column taken as there, whose type is not known: its verdict
        // waits for that column to be fixed.
        if missing > 0 && matches!(e, EngineError::Entity { .. }) {
            return Ok(());
        }
        // A column the source does not return: said, then taken as if it
        // were there so that binding goes on to the next problem.
        let absent = absent_column(&e, entity, &described);
        problem(entity, e, &columns, out)?;
        match absent {
            Some(name) if missing < MAX_MISSING_COLUMNS => {
                missing += 1;
                described.shape.columns.push(Column {
                    name,
                    sql_type: String::new(),
                });
            }
            _ => return Ok(()),
        }
    }
    numeric_key_warnings(plan, entity, &columns, &mut out.warnings);
    // Keyset paging needs a key the source proves unique; a key column the
    // source lacks was said above.
    let key_exists = described
        .key
        .iter()
        .all(|k| columns.iter().any(|c| c.name == *k));
    if key_exists {
        if let Err(e) = check_key(source, entity, &described).await {
            problem(entity, e, &columns, out)?;
        }
    }
    Ok(())
}

/// A warning for each column of a text (or other non-numeric) type that a
/// key template puts into a key attribute of type N: each row whose value
/// is not a number is rejected, which no check before reading can rule out.
fn numeric_key_warnings(
    plan: &Plan,
    entity: &Entity,
    columns: &[Column],
    warnings: &mut Vec<String>,
) {
    for (attr, column, at) in entity.numeric_key_columns(plan) {
        let Some(c) = columns.iter().find(|c| c.name == column) else {
            continue;
        };
        if !c.sql_type.is_empty() && !is_numeric_type(&c.sql_type) {
            warnings.push(format!(
                "{at}: entity {}: key attribute {attr} is of type N, but column {column:?} is {}: a row whose {column} is not a number is rejected (make {attr} of type S, or use a numeric column)",
                entity.name, c.sql_type
            ));
        }
    }
}

/// Whether a source's type name is a number's, in any dialect.
fn is_numeric_type(sql_type: &str) -> bool {
    let t = sql_type.to_ascii_lowercase();
    [
        "int", "numeric", "decimal", "real", "float", "double", "serial", "number", "money",
    ]
    .iter()
    .any(|n| t.contains(n))
}

/// The column `e` says the entity's source does not return, when that is
/// what it says.
fn absent_column(e: &EngineError, entity: &Entity, d: &Described) -> Option<String> {
    let EngineError::Mapping(m) = e else {
        return None;
    };
    let MappingError::Bind {
        entity: name,
        column: Some(column),
        ..
    } = m.as_ref()
    else {
        return None;
    };
    let known = d.shape.columns.iter().any(|c| c.name == *column);
    (*name == entity.name && !known).then(|| column.clone())
}

/// Adds `e` to the problems of `out`, placed at the entity's header when it
/// names no place of its own, its list of columns the source's own
/// (`columns`, when given); an error that says nothing about the mapping
/// (the source unreachable, a statement failing) is returned instead.
fn problem(
    entity: &Entity,
    e: EngineError,
    columns: &[Column],
    out: &mut SourceCheck,
) -> Result<(), EngineError> {
    let text = match e {
        EngineError::Source(s)
            if matches!(s.kind(), SourceErrorKind::Connect | SourceErrorKind::Query) =>
        {
            return Err(EngineError::Source(s));
        }
        EngineError::Mapping(mut m) => {
            own_columns(&mut m, entity, columns);
            m.to_string()
        }
        other => format!("{}: {other}", entity.location()),
    };
    out.problems.push(text);
    Ok(())
}

/// Puts the source's own columns (less the excluded ones) in the list of
/// columns available that a binding error of `entity` gives, and its "did
/// you mean" among them, in place of those that count the columns taken as
/// there to go on binding; an embed's error lists the embed's columns,
/// left as they are.
fn own_columns(m: &mut MappingError, entity: &Entity, columns: &[Column]) {
    let MappingError::Bind {
        available,
        entity: name,
        column,
        message,
        ..
    } = m
    else {
        return;
    };
    if *name != entity.name || columns.is_empty() {
        return;
    }
    let excluded: Vec<&str> = entity.excluded().collect();
    *available = columns
        .iter()
        .filter(|c| !excluded.contains(&c.name.as_str()))
        .map(|c| c.name.clone())
        .collect();
    const ASK: &str = "; did you mean ";
    if let (Some(column), Some(at)) = (column.as_deref(), message.find(ASK)) {
        let near = sql2ddb_core::suggest::closest(column, available.iter().map(String::as_str));
        let rest = message[at + ASK.len()..]
            .split_once("?")
            .map_or("", |(_, rest)| rest)
            .to_string();
        message.truncate(at);
        if let Some(near) = near {
            message.push_str(&format!("{ASK}{near:?}?"));
        }
        message.push_str(&rest);
    }
}
