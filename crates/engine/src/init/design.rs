//! Where `init --single-table` puts each table, decided from the catalog and
//! from measured cardinalities, by one rule that does not depend on the
//! dialect (documented in docs/planning.md):
//!
//! - a table whose primary key is exactly two foreign keys is a many-to-many
//!   link: one item per link in the collection of one side, and a GSI that
//!   inverts it for the other side;
//! - a table hangs from a parent through a foreign key to the parent's whole
//!   primary key, never through a nullable one (a NULL would reject the row),
//!   and never through one whose largest value would hold more than
//!   [`HOT_SHARE`] of the rows (a lookup: it stays an attribute, and the
//!   lookup its own small entity);
//! - among the rest: the foreign key within its primary key, then one with
//!   `ON DELETE CASCADE`, then the parent referenced by the fewest tables (an
//!   owner such as an invoice rather than a catalogue such as a track), then
//!   the parent whose name the child's begins with, then the columns' names;
//! - a child of a top-level table goes into its item collection; a child of
//!   such a child is embedded in its items; deeper, it is its own entity.

use std::collections::{BTreeMap, BTreeSet};

use sql2ddb_source::SchemaTable;

use super::short;

/// The largest share of the rows one partition key may hold when the schema
/// offers another choice.
pub const HOT_SHARE: f64 = 0.05;
/// A partition key of at most this many items is never hot, whatever its
/// share: a small database has no partition to spread.
pub const HOT_MIN_ITEMS: u64 = 100;

/// What `init` measured in the source.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Rows of each table, in the order of the tables.
    pub rows: Vec<u64>,
    /// The most rows of a table sharing one (non-NULL) value of one of its
    /// references: (table, index of the foreign key) → rows.
    pub largest: BTreeMap<(usize, usize), u64>,
}

/// A foreign key of a table to the whole primary key of another mapped
/// table.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// Position of the foreign key among the table's.
    pub index: usize,
    /// The referenced table.
    pub parent: usize,
    /// The table's columns, in the order of the parent's primary key.
    pub columns: Vec<String>,
    /// Declared `ON DELETE CASCADE`.
    pub cascade: bool,
}

/// How a table is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// Its own partition per row: `PK = "<TABLE>#{pk}"`.
    Root,
    /// Items in the parent's item collection.
    Collection { parent: usize, columns: Vec<String> },
    /// Embedded into the parent's items.
    Embedded { parent: usize, columns: Vec<String> },
    /// A many-to-many link: items in the collection of `side`, inverted by
    /// the GSI for `other`.
    Link {
        side: usize,
        side_columns: Vec<String>,
        other: usize,
        other_columns: Vec<String>,
    },
}

/// The roles of the tables, and per table the comment lines that explain
/// them with the figures behind them.
#[derive(Debug, Clone)]
pub struct Design {
    /// One per table.
    pub roles: Vec<Role>,
    /// One list of comment lines (without `# `) per table.
    pub notes: Vec<Vec<String>>,
    /// The rows the shares are taken of: the rows of the tables with a key.
    pub total: u64,
}

impl Design {
    /// Whether any table is a many-to-many link (the mapping needs GSI1).
    pub fn has_links(&self) -> bool {
        self.roles.iter().any(|r| matches!(r, Role::Link { .. }))
    }
}

/// The references of table `i`: foreign keys to the whole primary key of a
/// mapped table with a primary key.
pub fn references(tables: &[SchemaTable], i: usize) -> Vec<Reference> {
    let t = &tables[i];
    let mut out = Vec::new();
    for (index, fk) in t.foreign_keys.iter().enumerate() {
        let Some(parent) = tables
            .iter()
            .position(|p| short(&p.name).eq_ignore_ascii_case(&fk.ref_table))
        else {
            continue;
        };
        let pk = &tables[parent].primary_key;
        if pk.is_empty() || pk.len() != fk.columns.len() {
            continue;
        }
        // SQLite's `REFERENCES parent` without columns names the primary key.
        let refs: Vec<String> = match fk.ref_columns.iter().all(|c| c.is_empty()) {
            true => pk.clone(),
            false => fk.ref_columns.clone(),
        };
        let columns: Option<Vec<String>> = pk
            .iter()
            .map(|k| {
                let at = refs.iter().position(|r| r.eq_ignore_ascii_case(k))?;
                fk.columns.get(at).cloned()
            })
            .collect();
        if let Some(columns) = columns {
            out.push(Reference {
                index,
                parent,
                columns,
                cascade: fk.on_delete_cascade,
            });
        }
    }
    // By column names, not the catalog's order: the same on every dialect.
    out.sort_by(|a, b| a.columns.cmp(&b.columns));
    out
}

fn percent(n: u64, total: u64) -> String {
    format!("{:.1}%", n as f64 * 100.0 / total.max(1) as f64)
}

fn is_hot(items: u64, total: u64) -> bool {
    items > HOT_MIN_ITEMS && items as f64 > HOT_SHARE * total.max(1) as f64
}

/// The two references that make table `i` a many-to-many link: their
/// columns are disjoint and together exactly its primary key.
fn link_pair(t: &SchemaTable, refs: &[Reference]) -> Option<(Reference, Reference)> {
    let pk: BTreeSet<&String> = t.primary_key.iter().collect();
    let mut pairs = Vec::new();
    for (x, a) in refs.iter().enumerate() {
        for b in &refs[x + 1..] {
            let ca: BTreeSet<&String> = a.columns.iter().collect();
            let cb: BTreeSet<&String> = b.columns.iter().collect();
            let union: BTreeSet<&String> = ca.union(&cb).copied().collect();
            if ca.is_disjoint(&cb) && union == pk {
                pairs.push((a.clone(), b.clone()));
            }
        }
    }
    pairs.sort_by(|a, b| (&a.0.columns, &a.1.columns).cmp(&(&b.0.columns, &b.1.columns)));
    pairs.into_iter().next()
}

/// Length of the common prefix of two names, ignoring case.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x.eq_ignore_ascii_case(y))
        .count()
}

/// Decides every table's role. Without `single`, every table is its own
/// entity.
pub fn design(tables: &[SchemaTable], measured: &Measured, single: bool) -> Design {
    let n = tables.len();
    let mut notes = vec![Vec::new(); n];
    let total: u64 = (0..n)
        .filter(|&i| !tables[i].primary_key.is_empty())
        .map(|i| measured.rows.get(i).copied().unwrap_or(0))
        .sum::<u64>()
        .max(1);
    if !single {
        return Design {
            roles: vec![Role::Root; n],
            notes,
            total,
        };
    }
    let facts = Facts::new(tables, measured, total);
    let chosen: Vec<Option<Reference>> =
        (0..n).map(|i| facts.parent_of(i, &mut notes[i])).collect();
    let mut roles = vec![Role::Root; n];
    for i in 0..n {
        if let Some((a, b)) = &facts.links[i] {
            roles[i] = link_role(tables, i, a, b, &chosen, measured, total, &mut notes[i]);
        } else if let Some(r) = &chosen[i] {
            roles[i] = facts.role_under(i, r, &chosen, &mut notes[i]);
        }
    }
    for i in 0..n {
        if tables[i].primary_key.is_empty() || roles[i] != Role::Root {
            continue;
        }
        if notes[i].is_empty() {
            notes[i].push(
                "its own partition per row: no foreign key to another mapped table's primary key"
                    .into(),
            );
        }
        partition_note(tables, i, &roles, measured, total, &mut notes[i]);
    }
    Design {
        roles,
        notes,
        total,
    }
}

/// What the choices of a single-table design read: the tables, what was
/// measured of them, their references, the link tables, and how many
/// tables reference each.
struct Facts<'a> {
    tables: &'a [SchemaTable],
    measured: &'a Measured,
    /// Rows mapped, all tables with a primary key together.
    total: u64,
    refs: Vec<Vec<Reference>>,
    links: Vec<Option<(Reference, Reference)>>,
    /// How many other tables reference each table: a catalogue is
    /// referenced from many places, an owner from its parts.
    referenced_by: Vec<BTreeSet<usize>>,
}

impl<'a> Facts<'a> {
    fn new(tables: &'a [SchemaTable], measured: &'a Measured, total: u64) -> Facts<'a> {
        let n = tables.len();
        let refs: Vec<Vec<Reference>> = (0..n).map(|i| references(tables, i)).collect();
        let links = (0..n)
            .map(|i| match tables[i].primary_key.is_empty() {
                true => None,
                false => link_pair(&tables[i], &refs[i]),
            })
            .collect();
        let mut referenced_by = vec![BTreeSet::new(); n];
        for (i, r) in refs.iter().enumerate() {
            for x in r.iter().filter(|x| x.parent != i) {
                referenced_by[x.parent].insert(i);
            }
        }
        Facts {
            tables,
            measured,
            total,
            refs,
            links,
            referenced_by,
        }
    }

    /// The most rows of table `i` that share one value of reference `r`.
    fn largest(&self, i: usize, r: &Reference) -> u64 {
        self.measured
            .largest
            .get(&(i, r.index))
            .copied()
            .unwrap_or(0)
    }

    /// The parent table `i` goes under, if any: of its references to a
    /// table that is not a link, those neither nullable nor a lookup, the
    /// one that identifies it first, then one that cascades, then the
    /// parent referenced by the fewest tables, then the closest name. Notes
    /// why each other reference was not taken.
    fn parent_of(&self, i: usize, notes: &mut Vec<String>) -> Option<Reference> {
        let t = &self.tables[i];
        if t.primary_key.is_empty() || self.links[i].is_some() {
            return None;
        }
        let total = self.total;
        let mut accepted = Vec::new();
        for r in &self.refs[i] {
            let p = r.parent;
            if p == i || self.links[p].is_some() {
                continue;
            }
            let parent = short(&self.tables[p].name);
            let cols = r.columns.join(", ");
            // Primary key columns are never NULL once `run` proved the key.
            let nullable = r.columns.iter().any(|c| {
                !t.primary_key.contains(c) && t.columns.iter().any(|x| &x.name == c && x.nullable)
            });
            if nullable {
                notes.push(format!(
                    "not under {parent} ({cols}): nullable, and a NULL in a key would reject the row; it stays an attribute"
                ));
                continue;
            }
            let most = self.largest(i, r);
            if is_hot(most + 1, total) {
                notes.push(format!(
                    "not under {parent} ({cols}): a lookup — its largest value holds {most} rows, {} of the {total} rows mapped; it stays an attribute, {parent} its own entity",
                    percent(most + 1, total)
                ));
                continue;
            }
            let identifying = r.columns.iter().all(|c| t.primary_key.contains(c));
            let rank = match (identifying, r.cascade) {
                (true, _) => 0,
                (false, true) => 1,
                (false, false) => 2,
            };
            let key = (
                rank,
                self.referenced_by[p].len(),
                usize::MAX - common_prefix(short(&t.name), parent),
                r.columns.clone(),
            );
            accepted.push((key, r.clone()));
        }
        accepted.sort_by(|a, b| a.0.cmp(&b.0));
        accepted.into_iter().next().map(|(_, r)| r)
    }

    /// The role of table `i` under its chosen parent `r`: in the parent's
    /// item collection, embedded in its item (when the parent is itself
    /// in a collection), or its own entity (when the parent is embedded).
    fn role_under(
        &self,
        i: usize,
        r: &Reference,
        chosen: &[Option<Reference>],
        notes: &mut Vec<String>,
    ) -> Role {
        let (p, total) = (r.parent, self.total);
        let parent = short(&self.tables[p].name);
        let most = self.largest(i, r);
        let why = match (
            r.columns
                .iter()
                .all(|c| self.tables[i].primary_key.contains(c)),
            r.cascade,
        ) {
            (true, _) => "part of its primary key",
            (false, true) => "NOT NULL, ON DELETE CASCADE",
            (false, false) => "NOT NULL; the parent referenced by the fewest tables",
        };
        let cols = r.columns.join(", ");
        match chosen[p].as_ref().map(|g| chosen[g.parent].is_some()) {
            None => {
                notes.push(format!(
                    "in the item collection of its {parent} ({cols}: {why}): at most {most} per {parent} (measured), {} of the {total} rows mapped",
                    percent(most + 1, total)
                ));
                Role::Collection {
                    parent: p,
                    columns: r.columns.clone(),
                }
            }
            Some(false) => {
                notes.push(format!(
                    "embedded in its {parent} item ({cols}: {why}): at most {most} per {parent} (measured)"
                ));
                Role::Embedded {
                    parent: p,
                    columns: r.columns.clone(),
                }
            }
            Some(true) => {
                notes.push(format!(
                    "its own entity: its owner {parent} ({cols}) is itself embedded"
                ));
                Role::Root
            }
        }
    }
}

/// The side of a link whose collection holds its items: not hot if one
/// side is not, then a top-level side (its item shares the collection), then
/// the fewer links per side value, then the columns' names.
#[allow(clippy::too_many_arguments)]
fn link_role(
    tables: &[SchemaTable],
    i: usize,
    a: &Reference,
    b: &Reference,
    chosen: &[Option<Reference>],
    measured: &Measured,
    total: u64,
    notes: &mut Vec<String>,
) -> Role {
    let most = |r: &Reference| measured.largest.get(&(i, r.index)).copied().unwrap_or(0);
    let rank = |r: &Reference| {
        (
            is_hot(most(r) + 1, total),
            chosen[r.parent].is_some(),
            most(r),
            r.columns.clone(),
        )
    };
    let (side, other) = match rank(a) <= rank(b) {
        true => (a, b),
        false => (b, a),
    };
    let (s, o) = (
        short(&tables[side.parent].name),
        short(&tables[other.parent].name),
    );
    notes.push(format!(
        "many-to-many link of {s} and {o}: one item per link in the collection of its {s} (at most {} per {s}, {} of the {total} rows mapped; {} per {o} at most)",
        most(side),
        percent(most(side) + 1, total),
        most(other)
    ));
    notes.push(format!(
        "read from the {o} side through GSI1: Query GSI1 with GSI1PK = \"{}#<{}>\"",
        o.to_ascii_uppercase(),
        other.columns.join("#")
    ));
    if is_hot(most(side) + 1, total) {
        notes.push(format!(
            "hot either way: {s}'s largest value holds {} of the rows mapped; no other key spreads them",
            percent(most(side) + 1, total)
        ));
    }
    if chosen[side.parent].is_some() {
        notes.push(format!(
            "the {s} item itself is nested under its own parent, not at this key: these items form a partition of their own"
        ));
    }
    Role::Link {
        side: side.parent,
        side_columns: side.columns.clone(),
        other: other.parent,
        other_columns: other.columns.clone(),
    }
}

/// For a top-level table: the most items one of its partition keys holds
/// (its item, its collection's children, its links), at most.
fn partition_note(
    tables: &[SchemaTable],
    p: usize,
    roles: &[Role],
    measured: &Measured,
    total: u64,
    notes: &mut Vec<String>,
) {
    let mut items = 1;
    let mut parts = Vec::new();
    for (c, role) in roles.iter().enumerate() {
        let columns = match role {
            Role::Collection { parent, columns } if *parent == p => columns,
            Role::Link {
                side, side_columns, ..
            } if *side == p => side_columns,
            _ => continue,
        };
        let Some(r) = references(tables, c)
            .into_iter()
            .find(|r| r.parent == p && &r.columns == columns)
        else {
            continue;
        };
        let most = measured.largest.get(&(c, r.index)).copied().unwrap_or(0);
        items += most;
        parts.push(format!("{most} {}", short(&tables[c].name)));
    }
    if parts.is_empty() {
        return;
    }
    let hot = match is_hot(items, total) {
        true => " — over 5%: see `sql2ddb plan`'s hot partitions",
        false => "",
    };
    notes.push(format!(
        "a partition holds at most {items} items (its own, {}): {} of the {total} rows mapped{hot}",
        parts.join(", "),
        percent(items, total)
    ));
}

#[cfg(test)]
#[path = "design_tests.rs"]
mod tests;
