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
    /// A mapping `run --follow` can follow: entities that cannot be are
    /// left out (each named with why, in the mapping's comments), and what
    /// the source itself must change is said at its top.
    pub follow: bool,
}

/// Reads the catalog and renders the mapping.
pub async fn init(opts: &InitOptions) -> Result<String, EngineError> {
    if let Some(why) = opts
        .follow
        .then(|| crate::follow::unfollowable_source(&opts.source))
        .flatten()
    {
        return Err(EngineError::Config(format!("--follow: {why}")));
    }
    let source = Source::connect(&opts.source, 2).await?;
    let result = match opts.follow {
        true => followable(&source, opts).await,
        false => read_and_render(&source, opts).await,
    };
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
    let names = table_list(source, opts).await?;
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

/// The tables `init` maps: those asked for, else every table of the source.
async fn table_list(source: &Source, opts: &InitOptions) -> Result<Vec<String>, EngineError> {
    Ok(match &opts.tables {
        Some(t) => t.clone(),
        None => {
            // Sorted here, not by the server's collation: the same schema
            // gives the same mapping on every dialect.
            let mut names = source.table_names().await?;
            names.sort();
            names
        }
    })
}

/// `init --follow`: the mapping rendered as usual, checked as `run
/// --follow` checks it; the tables of entities that cannot be followed are
/// left out and the mapping rendered again from the rest, with every
/// reason in its comments.
async fn followable(source: &Source, opts: &InitOptions) -> Result<String, EngineError> {
    let first = read_and_render(source, opts).await?;
    let reasons = follow_reasons(source, opts, &first).await?;
    let refused: Vec<&str> = reasons
        .iter()
        .filter_map(|r| crate::follow::reason_entity(r))
        .collect();
    // Each table's entity is named after it (a query's too, for a table
    // without a key): those refused are left out, the rest kept.
    let names = table_list(source, opts).await?;
    let (left_out, kept): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| refused.contains(&short(n)));
    let (text, reasons) = match left_out.is_empty() {
        true => (first, reasons),
        false => {
            if kept.is_empty() {
                return Err(EngineError::Refused { reasons });
            }
            let again = InitOptions {
                tables: Some(kept),
                ..opts.clone()
            };
            let text = read_and_render(source, &again).await?;
            let rest = follow_reasons(source, opts, &text).await?;
            let mut all: Vec<String> = reasons
                .into_iter()
                .filter(|r| crate::follow::reason_entity(r).is_some())
                .collect();
            all.extend(rest);
            (text, all)
        }
    };
    let mut head = String::new();
    if reasons.is_empty() {
        head.push_str(
            "# run --follow: every entity below can be followed (checked against the source).\n",
        );
    } else {
        head.push_str(
            "# run --follow: checked against the source when this mapping was written.\n",
        );
        for r in &reasons {
            let what = match crate::follow::reason_entity(r) {
                Some(_) => "left out",
                None => "fix on the source first",
            };
            head.push_str(&format!("#   {what}: {}\n", redact_secrets(r)));
        }
    }
    Ok(head + &text)
}

/// The rendered mapping `text` as a plan, reading `opts.source`.
fn parse(opts: &InitOptions, text: &str) -> Result<sql2ddb_mapping::Plan, EngineError> {
    let plan = sql2ddb_mapping::Plan::parse_with_source(
        text,
        std::path::Path::new("init"),
        &|_: &str| None,
        Some(&opts.source),
    )?;
    Ok(plan)
}

/// Every reason the rendered mapping `text` cannot be followed.
async fn follow_reasons(
    source: &Source,
    opts: &InitOptions,
    text: &str,
) -> Result<Vec<String>, EngineError> {
    let plan = parse(opts, text)?;
    crate::follow::followable_reasons(source, &plan, &opts.source).await
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
