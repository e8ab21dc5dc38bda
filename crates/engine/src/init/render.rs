//! The mapping's text: one `[[entity]]` per table (children embedded where
//! the design says), each choice explained in a comment line.

use std::fmt::Write as _;

use sql2ddb_source::{quote_table, Dialect, RelationKind, SchemaColumn, SchemaTable};

use super::design::{Design, Measured, Role};
use super::{short, InitOptions, EMBED_SUGGESTED_MAX};

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

fn comments(out: &mut String, lines: &[String]) {
    for l in lines {
        let _ = writeln!(out, "# {l}");
    }
}

/// The whole mapping.
pub(super) fn render(
    tables: &[SchemaTable],
    design: &Design,
    measured: &Measured,
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
    if opts.single_table.is_some() {
        let _ = writeln!(
            out,
            "# Keys are chosen from foreign keys and measured row counts (docs/planning.md says how, and how to\n\
             # change each choice); shares are of the {} rows of the tables with a key.",
            design.total
        );
    }
    out.push_str("version = 1\n\n[source]\nurl = \"${DATABASE_URL}\"\n\n[target]\n");
    let _ = writeln!(out, "table = {table:?}");
    if opts.single_table.is_none() {
        out.push_str("# (name the DynamoDB table; with --single-table NAME, init names it)\n");
    }
    out.push_str("create = true\npk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n");
    if design.has_links() {
        out.push_str(
            "\n# The many-to-many links, inverted: each link read from its other side.\n\
             [[target.gsi]]\nname = \"GSI1\"\npk = { name = \"GSI1PK\", type = \"S\" }\n\
             sk = { name = \"GSI1SK\", type = \"S\" }\nprojection = \"all\"\n",
        );
    }
    let mut pointers = String::new();
    for (i, t) in tables.iter().enumerate() {
        if matches!(design.roles[i], Role::Embedded { .. }) {
            continue;
        }
        out.push('\n');
        if t.primary_key.is_empty() {
            render_keyless(&mut out, t, dialect);
            continue;
        }
        render_entity(&mut out, tables, design, measured, i, dialect);
        for (j, r) in design.roles.iter().enumerate() {
            if matches!(r, Role::Embedded { parent, .. } if *parent == i) {
                render_embed(&mut out, tables, design, j);
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

/// A table with neither a primary key nor a unique index over NOT NULL
/// columns: read by the row's address where the dialect has one that is
/// stable under the run's snapshot, else left out with what to do.
fn render_keyless(out: &mut String, t: &SchemaTable, dialect: Dialect) {
    if t.kind == RelationKind::View {
        render_view(out, t, dialect);
        return;
    }
    let name = short(&t.name);
    let has = |c: &str| t.columns.iter().any(|x| x.name.eq_ignore_ascii_case(c));
    let address = match dialect {
        // A ctid is unique within one table: with partitions or inheritance
        // children, the table it is in (`tableoid`) makes it unique.
        Dialect::Postgres if t.children > 0 => Some((
            "tableoid::regclass::text || ':' || ctid::text AS row_address",
            "row_address",
            "the partition and PostgreSQL row address (tableoid, ctid) it is in",
        )),
        Dialect::Postgres => Some(("ctid", "ctid", "its PostgreSQL row address (ctid)")),
        Dialect::Sqlite if !has("rowid") => Some(("rowid", "rowid", "its SQLite rowid")),
        _ => None,
    };
    let Some((expr, column, what)) = address else {
        let _ = writeln!(
            out,
            "# {name}: not mapped — no primary key and no unique index over NOT NULL columns, so no key\n\
             # reads each row once, and {} has no row address to read it by. Give it one\n\
             # (ALTER TABLE {} ADD COLUMN id BIGINT AUTO_INCREMENT PRIMARY KEY, or a unique index over\n\
             # NOT NULL columns) and run init again, or map a query whose `key` is unique and NOT NULL.",
            match dialect {
                Dialect::MySql => "MySQL",
                Dialect::Sqlite => "this table (it has a column named rowid)",
                Dialect::Postgres => "PostgreSQL",
            },
            quote_table(dialect, &t.name)
        );
        return;
    };
    let _ = writeln!(
        out,
        "[[entity]]\nname = {name:?}\n\
         # no primary key and no unique index over NOT NULL columns: read by {what}, unique\n\
         # under the run's snapshot, in one segment. The item key is that address: a later run after the\n\
         # table was rewritten (UPDATE, VACUUM) writes other keys. Give it a primary key for stable items.\n\
         query = {:?}\nkey = [{column:?}]\nread_parallelism = 1\npk = \"{}#{{{column}}}\"\nsk = \"{}\"",
        format!("SELECT {expr}, * FROM {}", quote_table(dialect, &t.name)),
        upper(t),
        upper(t)
    );
    let attrs = column_settings(&t.columns, dialect, out);
    let _ = writeln!(out, "[entity.attributes]\nentity = {name:?}");
    out.push_str(&attrs);
}

/// Column types a view's rows cannot be ordered by (PostgreSQL has no
/// ordering for them).
const UNORDERED: [&str; 8] = [
    "json", "xml", "point", "line", "lseg", "box", "path", "polygon",
];

/// A view: no key and no row address. Its rows are numbered in the order of
/// all its columns, which is the same on every read of the run's snapshot.
fn render_view(out: &mut String, t: &SchemaTable, dialect: Dialect) {
    let name = short(&t.name);
    let column = ["view_row", "sql2ddb_view_row"]
        .into_iter()
        .find(|c| !t.columns.iter().any(|x| x.name.eq_ignore_ascii_case(c)))
        .unwrap_or("sql2ddb_view_row");
    let order: Vec<String> = t
        .columns
        .iter()
        .filter(|c| !UNORDERED.contains(&c.sql_type.to_ascii_lowercase().as_str()))
        .map(|c| quote_table(dialect, &c.name))
        .collect();
    let query = format!(
        "SELECT row_number() OVER (ORDER BY {}) AS {column}, v.* FROM {} AS v",
        order.join(", "),
        quote_table(dialect, &t.name)
    );
    let _ = writeln!(
        out,
        "[[entity]]\nname = {name:?}\n\
         # a view: no primary key and no row address. Its rows are numbered in the order of all their\n\
         # columns ({column}), the same numbers on every read of the run's snapshot, in one segment; rows\n\
         # equal in every column are the same item content. Each page sorts the view again: for a large\n\
         # view, map a query whose `key` names unique NOT NULL columns instead.\n\
         query = {query:?}\nkey = [{column:?}]\nread_parallelism = 1\npk = \"{up}#{{{column}}}\"\nsk = \"{up}\"",
        up = upper(t)
    );
    let attrs = column_settings(&t.columns, dialect, out);
    let _ = writeln!(out, "[entity.attributes]\nentity = {name:?}");
    out.push_str(&attrs);
}

fn render_entity(
    out: &mut String,
    tables: &[SchemaTable],
    design: &Design,
    measured: &Measured,
    i: usize,
    dialect: Dialect,
) {
    let t = &tables[i];
    let _ = writeln!(
        out,
        "[[entity]]\nname = {:?}\nfrom = {:?}",
        short(&t.name),
        t.name
    );
    key_comments(out, t);
    comments(out, &design.notes[i]);
    let gsi = match &design.roles[i] {
        Role::Collection { parent, columns } => {
            collection_keys(out, tables, measured, i, *parent, columns);
            String::new()
        }
        Role::Link {
            side,
            side_columns,
            other,
            other_columns,
        } => link_keys(
            out,
            t,
            (&tables[*side], side_columns),
            (&tables[*other], other_columns),
        ),
        _ => {
            let own = placeholders(t, &t.primary_key, false);
            let _ = writeln!(out, "pk = \"{}#{own}\"\nsk = \"{}\"", upper(t), upper(t));
            String::new()
        }
    };
    let attrs = column_settings(&t.columns, dialect, out);
    let _ = writeln!(out, "[entity.attributes]\nentity = {:?}", short(&t.name));
    out.push_str(&gsi);
    out.push_str(&attrs);
}

/// What a reader of the mapping should know of a table's keys: a unique
/// index standing in for the primary key, key columns that may hold NULL,
/// other unique columns, partitions read with it.
fn key_comments(out: &mut String, t: &SchemaTable) {
    if t.unique.contains(&t.primary_key) {
        let _ = writeln!(
            out,
            "key = {:?}   # no primary key: its unique index over NOT NULL columns",
            t.primary_key
        );
    }
    let nullable_key: Vec<&str> = t
        .primary_key
        .iter()
        .filter(|k| t.columns.iter().any(|c| &c.name == *k && c.nullable))
        .map(String::as_str)
        .collect();
    if !nullable_key.is_empty() {
        let _ = writeln!(
            out,
            "# key column(s) {} may hold NULL (not declared NOT NULL): `run` checks that no row does, and refuses the table if one does",
            nullable_key.join(", ")
        );
    }
    for u in t.unique.iter().filter(|u| **u != t.primary_key) {
        let _ = writeln!(
            out,
            "# unique ({}): one row per value; a GSI keyed by it would serve lookups by it",
            u.join(", ")
        );
    }
    if t.children > 0 {
        let _ = writeln!(
            out,
            "# read from {name}: its {} partitions or inheritance children with it, each row once (they are not mapped on their own)",
            t.children,
            name = short(&t.name)
        );
    }
}

/// The keys of table `i` in the item collection of `parent` (by its
/// `columns`), and, when a parent holds few of them, the embed that could
/// replace the entity.
fn collection_keys(
    out: &mut String,
    tables: &[SchemaTable],
    measured: &Measured,
    i: usize,
    parent: usize,
    columns: &[String],
) {
    let (t, p) = (&tables[i], &tables[parent]);
    let _ = writeln!(
        out,
        "pk = \"{}#{}\"\nsk = \"{}#{}\"   # integers zero-padded: string order is numeric order",
        upper(p),
        placeholders(t, columns, false),
        upper(t),
        placeholders(t, &t.primary_key, true)
    );
    let most = super::design::references(tables, i)
        .iter()
        .find(|r| r.parent == parent && r.columns == columns)
        .and_then(|r| measured.largest.get(&(i, r.index)).copied())
        .unwrap_or(0);
    if most <= EMBED_SUGGESTED_MAX {
        let _ = writeln!(
            out,
            "# Few per {p}: they could be embedded in its item instead (remove this entity, and add to {p}'s):\n\
             # [[entity.embed]]\n# name = {:?}\n# from = {:?}\n# parent_key = {:?}\n# order_by = {:?}",
            short(&t.name),
            t.name,
            columns,
            t.primary_key,
            p = short(&p.name),
        );
    }
}

/// The keys of link table `t` between `side` and `other` (each with the
/// link's columns that reference it): the item in `side`'s collection, and
/// the GSI keys (returned) that put it in `other`'s.
fn link_keys(
    out: &mut String,
    t: &SchemaTable,
    (s, side_columns): (&SchemaTable, &[String]),
    (o, other_columns): (&SchemaTable, &[String]),
) -> String {
    let _ = writeln!(
        out,
        "pk = \"{}#{}\"\nsk = \"{}#{}\"",
        upper(s),
        placeholders(t, side_columns, false),
        upper(o),
        placeholders(t, other_columns, true)
    );
    format!(
        "GSI1PK = \"{}#{}\"\nGSI1SK = \"{}#{}\"\n",
        upper(o),
        placeholders(t, other_columns, false),
        upper(s),
        placeholders(t, side_columns, true)
    )
}

fn render_embed(out: &mut String, tables: &[SchemaTable], design: &Design, j: usize) {
    let Role::Embedded { columns, .. } = &design.roles[j] else {
        return;
    };
    let t = &tables[j];
    out.push('\n');
    comments(out, &design.notes[j]);
    let _ = writeln!(
        out,
        "# a row whose parent does not exist is rejected as \"no parent\" and counted, never lost"
    );
    let _ = writeln!(
        out,
        "[[entity.embed]]\nname = {:?}\nfrom = {:?}\nparent_key = {:?}\norder_by = {:?}\nexclude = {:?}",
        short(&t.name),
        t.name,
        columns,
        t.primary_key,
        columns
    );
}

/// Comments on columns that cannot be carried as they are, and the
/// attribute settings that fix them (returned, for `[entity.attributes]`).
pub(super) fn column_settings(
    columns: &[SchemaColumn],
    dialect: Dialect,
    out: &mut String,
) -> String {
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
            // NULL is not what a NOT NULL column means: its zero dates are
            // rejected, each with its key, and the rejects file says which.
            match c.nullable {
                true => {
                    let _ = writeln!(out, "# {n}: a MySQL zero date ('0000-00-00') is written as NULL instead of rejecting the row");
                    let _ = writeln!(attrs, "{n} = {{ column = {n:?}, invalid = \"null\" }}");
                }
                false => {
                    let _ = writeln!(out, "# {n}: NOT NULL, so a MySQL zero date ('0000-00-00') rejects its row; to write it as NULL: {n} = {{ column = {n:?}, invalid = \"null\" }}");
                }
            }
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

    #[test]
    fn columns_that_need_a_setting_get_it() {
        let mut wide = column("balance", "decimal(50,2)");
        wide.precision = Some(50);
        let mut joined = column("joined", "date");
        joined.nullable = true;
        let cols = [
            wide,
            joined,
            column("vip", "tinyint(1)"),
            column("born", "datetime"),
        ];
        let mut comments = String::new();
        let attrs = column_settings(&cols, Dialect::MySql, &mut comments);
        assert!(attrs.contains("balance = { column = \"balance\", type = \"S\" }"));
        assert!(attrs.contains("joined = { column = \"joined\", invalid = \"null\" }"));
        // A NOT NULL date keeps its zero dates rejected: never made NULL.
        assert!(!attrs.contains("born"), "{attrs}");
        assert!(
            comments.contains("# born: NOT NULL, so a MySQL zero date"),
            "{comments}"
        );
        assert!(comments.contains("# vip: TINYINT(1)"));
        // PostgreSQL has no zero dates.
        let attrs = column_settings(&cols[1..2], Dialect::Postgres, &mut String::new());
        assert!(attrs.is_empty());
    }
}
