//! `sql2ddb init`: a commented mapping scaffolded from the source's catalog
//! (tables, primary and foreign keys, column types and sizes), that passes
//! `check` and runs. The source URL is never written: the mapping reads it
//! from `${DATABASE_URL}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sql2ddb_core::redact_secrets;
use sql2ddb_source::{Dialect, ForeignKey, Relation, SchemaColumn, SchemaTable, Source};

use crate::error::EngineError;

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

/// How a table is written.
#[derive(Debug, Clone, PartialEq)]
enum Role {
    /// Its own partition per row: `PK = "<TABLE>#{pk}"`.
    Root,
    /// Items in the parent's item collection, through foreign key `fk`.
    Collection { parent: usize, fk: ForeignKey },
    /// Embedded into the parent's items, through foreign key `fk`.
    Embedded { parent: usize, fk: ForeignKey },
}

/// Reads the catalog and renders the mapping.
pub async fn init(opts: &InitOptions) -> Result<String, EngineError> {
    let source = Source::connect(&opts.source, 2).await?;
    let result = read_and_render(&source, opts).await;
    source.close().await;
    result.map_err(|e| EngineError::Config(redact_secrets(&e.to_string())))
}

async fn read_and_render(source: &Source, opts: &InitOptions) -> Result<String, EngineError> {
    let names = match &opts.tables {
        Some(t) => t.clone(),
        None => source.table_names().await?,
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
    let roles = roles(&tables, opts.single_table.is_some());
    let mut max_children = BTreeMap::new();
    for (i, role) in roles.iter().enumerate() {
        if let Role::Collection { fk, .. } | Role::Embedded { fk, .. } = role {
            let groups = source
                .largest_groups(&Relation::Table(&tables[i].name), &fk.columns, 1)
                .await?;
            max_children.insert(i, groups.first().map_or(0, |g| g.rows));
        }
    }
    Ok(render(
        &tables,
        &roles,
        &max_children,
        source.dialect(),
        opts,
    ))
}

/// The table without its schema.
fn short(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The foreign key a table hangs from: the one within its primary key (an
/// identifying relationship) first, else the first, to a table mapped too.
fn parent_fk(tables: &[SchemaTable], t: &SchemaTable) -> Option<(usize, ForeignKey)> {
    let candidates: Vec<(usize, &ForeignKey)> = t
        .foreign_keys
        .iter()
        .filter_map(|fk| {
            let p = tables.iter().position(|p| short(&p.name) == fk.ref_table)?;
            (short(&tables[p].name) != short(&t.name)).then_some((p, fk))
        })
        .collect();
    let identifying = candidates
        .iter()
        .find(|(_, fk)| fk.columns.iter().all(|c| t.primary_key.contains(c)));
    identifying
        .or(candidates.first())
        .map(|(p, fk)| (*p, (*fk).clone()))
}

fn roles(tables: &[SchemaTable], single: bool) -> Vec<Role> {
    let mut roles = vec![Role::Root; tables.len()];
    if !single {
        return roles;
    }
    let parents: Vec<Option<(usize, ForeignKey)>> =
        tables.iter().map(|t| parent_fk(tables, t)).collect();
    for (i, parent) in parents.iter().enumerate() {
        let Some((p, fk)) = parent else { continue };
        if tables[i].primary_key.is_empty() || fk.ref_columns != tables[*p].primary_key {
            continue;
        }
        match &parents[*p] {
            None => {
                roles[i] = Role::Collection {
                    parent: *p,
                    fk: fk.clone(),
                }
            }
            // The parent is a child itself: one level of collections, then embeds.
            Some((gp, _)) if parents[*gp].is_none() => {
                roles[i] = Role::Embedded {
                    parent: *p,
                    fk: fk.clone(),
                }
            }
            Some(_) => {}
        }
    }
    roles
}

fn is_integer(c: &SchemaColumn) -> bool {
    let t = c.sql_type.to_ascii_lowercase();
    t.contains("int") && !t.contains("point") && !t.contains("interval")
}

/// `{col}` for each key column, integers zero-padded when `pad`.
fn placeholders(t: &SchemaTable, columns: &[String], pad: bool) -> String {
    columns
        .iter()
        .map(|c| {
            let int = t.columns.iter().any(|x| &x.name == c && is_integer(x));
            match pad && int {
                true => format!("{{{c}:010}}"),
                false => format!("{{{c}}}"),
            }
        })
        .collect::<Vec<_>>()
        .join("#")
}

fn upper(t: &SchemaTable) -> String {
    short(&t.name).to_ascii_uppercase()
}

fn render(
    tables: &[SchemaTable],
    roles: &[Role],
    max_children: &BTreeMap<usize, u64>,
    dialect: Dialect,
    opts: &InitOptions,
) -> String {
    let table = opts.single_table.as_deref().unwrap_or("sql2ddb-target");
    let mut out = String::new();
    out.push_str("# A mapping scaffolded by `sql2ddb init` from the source's catalog.\n");
    out.push_str(
        "# Review it, then: sql2ddb check → sql2ddb plan → sql2ddb run → sql2ddb verify.\n",
    );
    out.push_str("# The source URL is read from DATABASE_URL (never written here: it may hold a password).\n");
    out.push_str("version = 1\n\n[source]\nurl = \"${DATABASE_URL}\"\n\n[target]\n");
    let _ = writeln!(out, "table = {table:?}");
    if opts.single_table.is_none() {
        out.push_str("# (name the DynamoDB table; with --single-table NAME, init names it)\n");
    }
    out.push_str("create = true\npk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n");
    let mut pointers = String::new();
    for (i, t) in tables.iter().enumerate() {
        if matches!(roles[i], Role::Embedded { .. }) {
            continue;
        }
        out.push('\n');
        render_entity(&mut out, tables, roles, i, max_children, dialect);
        for (j, r) in roles.iter().enumerate() {
            if matches!(r, Role::Embedded { parent, .. } if *parent == i) {
                render_embed(&mut out, tables, roles, j, max_children);
            }
        }
        if let [k] = t.primary_key.as_slice() {
            if t.columns.iter().any(|c| &c.name == k && is_integer(c)) {
                let _ = write!(
                    pointers,
                    "\n# The newest {name} (its largest {k}), kept in one item a GetItem reads:\n\
                     # [[pointer]]\n# entity = {name:?}\n# pk = \"LAST_{up}\"\n# sk = \"LAST_{up}\"\n\
                     # max = {{ attribute = {k:?}, column = {k:?} }}\n",
                    name = short(&t.name),
                    up = upper(t)
                );
            }
        }
    }
    out.push_str(&pointers);
    out
}

fn render_entity(
    out: &mut String,
    tables: &[SchemaTable],
    roles: &[Role],
    i: usize,
    max_children: &BTreeMap<usize, u64>,
    dialect: Dialect,
) {
    let t = &tables[i];
    let _ = writeln!(
        out,
        "[[entity]]\nname = {:?}\nfrom = {:?}",
        short(&t.name),
        t.name
    );
    if t.primary_key.is_empty() {
        out.push_str(
            "# no primary key: name unique NOT NULL columns to page by\n# key = [\"…\"]\n",
        );
    } else if t.unique.contains(&t.primary_key) {
        let _ = writeln!(
            out,
            "key = {:?}   # no primary key: its unique index over NOT NULL columns",
            t.primary_key
        );
    }
    for u in t.unique.iter().filter(|u| **u != t.primary_key) {
        let _ = writeln!(
            out,
            "# unique ({}): one row per value; a GSI keyed by it would serve lookups by it",
            u.join(", ")
        );
    }
    let own = placeholders(t, &t.primary_key, false);
    match &roles[i] {
        Role::Collection { parent, fk } => {
            let p = &tables[*parent];
            let _ = writeln!(
                out,
                "# in the item collection of its {} (foreign key {} → {}); at most {} per {} (measured)",
                short(&p.name),
                fk.columns.join(", "),
                fk.ref_columns.join(", "),
                max_children.get(&i).copied().unwrap_or(0),
                short(&p.name)
            );
            let _ = writeln!(
                out,
                "pk = \"{}#{}\"",
                upper(p),
                placeholders(t, &fk.columns, false)
            );
            let _ = writeln!(
                out,
                "sk = \"{}#{}\"   # integers zero-padded: string order is numeric order",
                upper(t),
                placeholders(t, &t.primary_key, true)
            );
            if max_children
                .get(&i)
                .is_some_and(|n| *n <= EMBED_SUGGESTED_MAX)
            {
                let _ = writeln!(
                    out,
                    "# Few per {}: they could be embedded in its item instead (remove this entity, and add to {}'s):\n\
                     # [[entity.embed]]\n# name = {:?}\n# from = {:?}\n# parent_key = {:?}\n# order_by = {:?}",
                    short(&p.name),
                    short(&p.name),
                    short(&t.name),
                    t.name,
                    fk.columns,
                    t.primary_key
                );
            }
        }
        _ => {
            let _ = writeln!(out, "pk = \"{}#{own}\"\nsk = \"{}\"", upper(t), upper(t));
        }
    }
    let attrs = column_settings(&t.columns, dialect, out);
    let _ = writeln!(out, "[entity.attributes]\nentity = {:?}", short(&t.name));
    out.push_str(&attrs);
}

fn render_embed(
    out: &mut String,
    tables: &[SchemaTable],
    roles: &[Role],
    j: usize,
    max_children: &BTreeMap<usize, u64>,
) {
    let Role::Embedded { parent, fk } = &roles[j] else {
        return;
    };
    let t = &tables[j];
    let _ = writeln!(
        out,
        "\n# {} rows nested in their {} item (foreign key {}); at most {} per {} (measured)\n\
         [[entity.embed]]\nname = {:?}\nfrom = {:?}\nparent_key = {:?}\norder_by = {:?}\nexclude = {:?}",
        short(&t.name),
        short(&tables[*parent].name),
        fk.columns.join(", "),
        max_children.get(&j).copied().unwrap_or(0),
        short(&tables[*parent].name),
        short(&t.name),
        t.name,
        fk.columns,
        t.primary_key,
        fk.columns
    );
}

/// Comments on columns that cannot be carried as they are, and the
/// attribute settings that fix them (returned, for `[entity.attributes]`).
fn column_settings(columns: &[SchemaColumn], dialect: Dialect, out: &mut String) -> String {
    let mut attrs = String::new();
    for c in columns {
        let ty = c.sql_type.to_ascii_lowercase();
        let n = &c.name;
        if (ty.starts_with("numeric") || ty.starts_with("decimal"))
            && c.precision.is_some_and(|p| p > 38)
        {
            let _ = writeln!(
                out,
                "# {n}: {} digits, over DynamoDB's 38: written as a string",
                c.precision.unwrap_or(0)
            );
            let _ = writeln!(attrs, "{n} = {{ column = {n:?}, type = \"S\" }}");
        } else if ty == "numeric" && c.precision.is_none() && dialect == Dialect::Postgres {
            let _ = writeln!(out, "# {n}: numeric without a precision may exceed 38 digits; if so: {n} = {{ column = {n:?}, type = \"S\" }}");
        }
        if dialect == Dialect::MySql && (ty.starts_with("date") || ty.starts_with("timestamp")) {
            let _ = writeln!(out, "# {n}: a MySQL zero date ('0000-00-00') is written as NULL instead of rejecting the row");
            let _ = writeln!(attrs, "{n} = {{ column = {n:?}, invalid = \"null\" }}");
        }
        if ty == "tinyint(1)" {
            let _ = writeln!(out, "# {n}: TINYINT(1) is read as a boolean when it holds 0 and 1; if it holds numbers: {n} = {{ column = {n:?}, type = \"N\" }}");
        }
        let large = [
            "bytea",
            "blob",
            "longblob",
            "mediumblob",
            "longtext",
            "mediumtext",
        ];
        if (large.contains(&ty.as_str()) && c.max_length.is_none_or(|m| m > 65_535))
            || c.max_length.is_some_and(|m| m > 100_000)
        {
            let _ = writeln!(out, "# {n}: {} values can be large, and an item holds at most 400 KB: `sql2ddb plan` shows the sizes", c.sql_type);
        }
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(name: &str, ty: &str) -> SchemaColumn {
        SchemaColumn {
            name: name.into(),
            sql_type: ty.into(),
            nullable: false,
            precision: None,
            max_length: None,
        }
    }

    fn table(name: &str, pk: &[&str], fks: &[(&[&str], &str, &[&str])]) -> SchemaTable {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        SchemaTable {
            name: name.into(),
            columns: pk.iter().map(|c| column(c, "integer")).collect(),
            primary_key: strings(pk),
            foreign_keys: fks
                .iter()
                .map(|(cols, t, refs)| ForeignKey {
                    columns: strings(cols),
                    ref_table: t.to_string(),
                    ref_columns: strings(refs),
                })
                .collect(),
            unique: Vec::new(),
        }
    }

    fn shop() -> Vec<SchemaTable> {
        vec![
            table("customers", &["customer_id"], &[]),
            table(
                "orders",
                &["order_id"],
                &[(&["customer_id"], "customers", &["customer_id"])],
            ),
            table(
                "order_lines",
                &["order_id", "line_no"],
                &[
                    (&["sku"], "products", &["sku"]),
                    (&["order_id"], "orders", &["order_id"]),
                ],
            ),
            table("products", &["sku"], &[]),
        ]
    }

    #[test]
    fn children_go_into_collections_and_grandchildren_are_embedded() {
        let tables = shop();
        let r = roles(&tables, true);
        assert_eq!(r[0], Role::Root);
        assert!(matches!(&r[1], Role::Collection { parent: 0, .. }));
        // The foreign key within the primary key wins over the first one.
        assert!(matches!(&r[2], Role::Embedded { parent: 1, fk } if fk.columns == ["order_id"]));
        assert_eq!(r[3], Role::Root);
        assert!(roles(&tables, false).iter().all(|r| *r == Role::Root));
    }

    #[test]
    fn columns_that_need_a_setting_get_it() {
        let mut wide = column("balance", "decimal(50,2)");
        wide.precision = Some(50);
        let cols = [wide, column("joined", "date"), column("vip", "tinyint(1)")];
        let mut comments = String::new();
        let attrs = column_settings(&cols, Dialect::MySql, &mut comments);
        assert!(attrs.contains("balance = { column = \"balance\", type = \"S\" }"));
        assert!(attrs.contains("joined = { column = \"joined\", invalid = \"null\" }"));
        assert!(comments.contains("# vip: TINYINT(1)"));
        // PostgreSQL has no zero dates.
        let attrs = column_settings(&cols[1..2], Dialect::Postgres, &mut String::new());
        assert!(attrs.is_empty());
    }
}
