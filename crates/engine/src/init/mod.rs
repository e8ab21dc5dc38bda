//! `sql2ddb init`: a commented mapping scaffolded from the source's catalog
//! (tables, primary and foreign keys, column types and sizes) and from
//! measured cardinalities, that passes `check` and runs. The source URL is
//! never written: the mapping reads it from `${DATABASE_URL}`.

mod design;
mod render;

use std::collections::BTreeMap;

use sql2ddb_core::redact_secrets;
use sql2ddb_source::{Relation, SchemaTable, Source};

use crate::error::EngineError;

pub use design::{HOT_MIN_ITEMS, HOT_SHARE};

/// Children per parent up to which `init` suggests embedding them.
pub const EMBED_SUGGESTED_MAX: u64 = 100;

/// What `init` reads.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// The source URL (never written into the mapping).
    pub source: String,
    /// Only these tables (`table` or `schema.table`); default: every table.
    pub tables: Option<Vec<String>>,
    /// One DynamoDB table of this name, children in their parents' item
    /// collections (or embedded).
    pub single_table: Option<String>,
}

/// Reads the catalog and renders the mapping.
pub async fn init(opts: &InitOptions) -> Result<String, EngineError> {
    let source = Source::connect(&opts.source, 2).await?;
    let result = read_and_render(&source, opts).await;
    source.close().await;
    // Each error keeps its kind (a source that failed is not a setting).
    result.map_err(|e| match e {
        EngineError::Config(m) => EngineError::Config(redact_secrets(&m)),
        e => e,
    })
}

async fn read_and_render(source: &Source, opts: &InitOptions) -> Result<String, EngineError> {
    // Views are offered, not mapped: they usually repeat rows of the tables.
    let views = match &opts.tables {
        Some(_) => Vec::new(),
        None => source.view_names().await?,
    };
    let names = match &opts.tables {
        Some(t) => t.clone(),
        None => {
            // Sorted here, not by the server's collation: the same schema
            // gives the same mapping on every dialect.
            let mut names = source.table_names().await?;
            names.sort();
            names
        }
    };
    if names.is_empty() {
        return Err(EngineError::Config(
            "the source has no tables to map".into(),
        ));
    }
    let mut tables = Vec::with_capacity(names.len());
    for n in &names {
        let mut t = source.schema_table(n).await?;
        if t.primary_key.is_empty() {
            // No primary key: page by a unique index over NOT NULL columns.
            let not_null = |c: &String| t.columns.iter().any(|x| &x.name == c && !x.nullable);
            if let Some(u) = t.unique.iter().find(|u| u.iter().all(not_null)) {
                t.primary_key = u.clone();
            }
        }
        tables.push(t);
    }
    let single = opts.single_table.is_some();
    let measured = measure(source, &tables, single).await?;
    let design = design::design(&tables, &measured, single);
    let mut text = render::render(&tables, &design, &measured, source.dialect(), opts);
    if !views.is_empty() {
        text.push_str(&format!(
            "\n# Views, not mapped (they usually repeat rows of the tables above); to map one, run init\n\
             # with --tables naming it: {}\n",
            views.join(", ")
        ));
    }
    Ok(text)
}

/// Rows per table and, with `single`, the largest group of rows per
/// reference (the `GROUP BY` the choices are made from).
async fn measure(
    source: &Source,
    tables: &[SchemaTable],
    single: bool,
) -> Result<design::Measured, EngineError> {
    let mut measured = design::Measured::default();
    for t in tables {
        measured
            .rows
            .push(source.count(&Relation::Table(&t.name)).await?);
    }
    if !single {
        return Ok(measured);
    }
    let mut largest = BTreeMap::new();
    for (i, t) in tables.iter().enumerate() {
        for r in design::references(tables, i) {
            // Up to two groups: the first may be the rows holding NULL.
            let groups = source
                .largest_groups(&Relation::Table(&t.name), &r.columns, 2)
                .await?;
            let most = groups
                .iter()
                .find(|g| g.values.iter().all(Option::is_some))
                .map_or(0, |g| g.rows);
            largest.insert((i, r.index), most);
        }
    }
    measured.largest = largest;
    Ok(measured)
}

/// The table without its schema.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}
