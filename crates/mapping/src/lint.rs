//! Static warnings for `check`: mappings that load but would overwrite items
//! silently, because a key template does not include a unique key of its
//! source, or because two entities (or pointers) can produce the same key.

use std::fmt;

use sql2ddb_core::Column;

use crate::error::Location;
use crate::plan::{Entity, Plan};
use crate::template::{Part, Template};

/// A warning about a mapping that loads but would lose items silently.
/// Displays as `FILE:LINE:COL: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// Where in the mapping file.
    pub at: Location,
    /// What would go wrong, and how to fix it.
    pub message: String,
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

impl Plan {
    /// Warnings found without a source: entities whose pk/sk do not use all
    /// of their declared `key` columns, and pairs of entities or pointers
    /// whose keys can be equal. For an entity without `key`, call
    /// [`Entity::lint_keys`] with its source's primary key once known.
    pub fn lint(&self) -> Vec<Lint> {
        let mut out: Vec<Lint> = self
            .entities
            .iter()
            .filter(|e| !e.overwrite)
            .flat_map(|e| match &e.key {
                Some(k) => e.collapse_lints(k, None),
                None => e.touching_placeholders(),
            })
            .collect();
        // Everything that writes items at keys of its own: entities, then pointers.
        let writers: Vec<(String, &Template, Option<&Template>)> = self
            .entities
            .iter()
            .map(|e| (format!("entity {:?}", e.name), &e.def.pk, e.def.sk.as_ref()))
            .chain(self.pointers.iter().map(|p| {
                let (pk, sk) = p.templates();
                (format!("pointer {:?}", p.name), pk, sk)
            }))
            .collect();
        for (j, (b, b_pk, b_sk)) in writers.iter().enumerate() {
            for (a, a_pk, a_sk) in &writers[..j] {
                let sk_overlap = match (a_sk, b_sk) {
                    (Some(x), Some(y)) => may_overlap(x, y),
                    _ => true,
                };
                if may_overlap(a_pk, b_pk) && sk_overlap {
                    let keys = |pk: &Template, sk: Option<&&Template>| match sk {
                        Some(sk) => format!("pk {:?}, sk {:?}", pk.text, sk.text),
                        None => format!("pk {:?}", pk.text),
                    };
                    out.push(Lint {
                        at: b_pk.at.clone(),
                        message: format!(
                            "{b} ({}) can produce the same key as {a} ({}): one's items would overwrite the other's; give them different literal prefixes",
                            keys(b_pk, b_sk.as_ref()),
                            keys(a_pk, a_sk.as_ref())
                        ),
                    });
                }
            }
        }
        out
    }
}

impl Entity {
    /// A warning when the pk and sk templates together do not use every
    /// column of `unique_key` (the entity's `key`, or its source's primary
    /// key): rows that differ only in the missing columns would map to the
    /// same item, and the later would overwrite the earlier silently.
    pub fn lint_keys(&self, unique_key: &[String]) -> Option<Lint> {
        let used: Vec<&str> = self
            .def
            .pk
            .placeholders()
            .chain(self.def.sk.iter().flat_map(|t| t.placeholders()))
            .map(|p| p.column.as_str())
            .collect();
        let missing: Vec<&str> = unique_key
            .iter()
            .map(String::as_str)
            .filter(|k| !used.contains(k))
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(Lint {
            at: self.def.pk.at.clone(),
            message: format!(
                "entity {:?}: pk and sk do not use key column(s) {} of its unique key ({}): rows that differ only there map to the same item and overwrite each other silently; add them to pk or sk",
                self.name,
                missing.join(", "),
                unique_key.join(", ")
            ),
        })
    }
}

impl Entity {
    /// Every way this entity's pk/sk can map two distinct rows to one item:
    /// a column of `unique_key` the templates leave out
    /// ([`Entity::lint_keys`]), two placeholders that touch with no literal
    /// between them (`{a}{b}`: `('1','23')` and `('12','3')` meet), and —
    /// when `columns` gives the source's types — a placeholder followed by a
    /// separator its column's values can contain (`{a}#{b}` over text).
    /// `run` refuses an entity with any of these unless it says
    /// `overwrite = true`.
    pub fn collapse_lints(&self, unique_key: &[String], columns: Option<&[Column]>) -> Vec<Lint> {
        let mut out: Vec<Lint> = self.lint_keys(unique_key).into_iter().collect();
        out.extend(self.touching_placeholders());
        if let Some(columns) = columns {
            out.extend(self.ambiguous_separators(columns));
        }
        out
    }

    fn templates(&self) -> impl Iterator<Item = (&'static str, &Template)> {
        std::iter::once(("pk", &self.def.pk)).chain(self.def.sk.iter().map(|t| ("sk", t)))
    }

    /// Two placeholders with nothing between them.
    fn touching_placeholders(&self) -> Vec<Lint> {
        let mut out = Vec::new();
        for (which, t) in self.templates() {
            for pair in t.parts.windows(2) {
                if let [Part::Col(a), Part::Col(b)] = pair {
                    out.push(Lint {
                        at: b.at.clone(),
                        message: format!(
                            "entity {:?}: in {which} {:?}, {{{}}} and {{{}}} touch with no separator, so distinct rows can render the same key (('1','23') and ('12','3') both give \"123\"): put a separator such as \"#\" between them that the first column's values cannot contain, or set overwrite = true if several rows per item is what you mean",
                            self.name, t.text, a.column, b.column
                        ),
                    });
                }
            }
        }
        out
    }

    /// A placeholder, then a separator its column's values can contain, then
    /// another placeholder: `{a}#{b}` with `a = 'x#'` meets `a = 'x'`.
    fn ambiguous_separators(&self, columns: &[Column]) -> Vec<Lint> {
        let mut out = Vec::new();
        for (which, t) in self.templates() {
            for triple in t.parts.windows(3) {
                let [Part::Col(a), Part::Lit(sep), Part::Col(b)] = triple else {
                    continue;
                };
                let Some(column) = columns.iter().find(|c| c.name == a.column) else {
                    continue;
                };
                let safe = rendered_chars(&column.sql_type)
                    .is_some_and(|chars| !sep.chars().any(|c| chars.contains(c)));
                if !safe {
                    out.push(Lint {
                        at: b.at.clone(),
                        message: format!(
                            "entity {:?}: in {which} {:?}, the values of {} ({}) can contain the separator {sep:?} before {{{}}}, so distinct rows can render the same key: use a separator its values cannot contain, put that column last, or set overwrite = true if several rows per item is what you mean",
                            self.name, t.text, a.column, column.sql_type, b.column
                        ),
                    });
                }
            }
        }
        out
    }
}

/// The characters a value of this SQL type can render as in a key template,
/// when the type bounds them; `None` for text and anything not known. Taken
/// from the declared type (SQLite's declared types included, which its
/// dynamic typing does not enforce).
pub(crate) fn rendered_chars(sql_type: &str) -> Option<&'static str> {
    let t = sql_type.to_ascii_lowercase();
    let base = t.split(['(', ' ']).next().unwrap_or("");
    const INT: &str = "0123456789-";
    Some(match base {
        "int" | "int2" | "int4" | "int8" | "integer" | "smallint" | "bigint" | "tinyint"
        | "mediumint" | "serial" | "bigserial" | "smallserial" | "year" | "bit" => INT,
        "numeric" | "decimal" | "real" | "float" | "float4" | "float8" | "double" => {
            "0123456789-+.eENaIinfty"
        }
        "date" => INT,
        "time" | "timetz" => "0123456789:.",
        "timestamp" | "timestamptz" | "datetime" => "0123456789-:.TZ",
        "uuid" => "0123456789abcdef-",
        "bool" | "boolean" => "truefals",
        _ => return None,
    })
}

/// The literal text before the first placeholder and after the last one, and
/// whether the template is all literal.
fn ends(t: &Template) -> (String, String, bool) {
    let lit = |p: &Part| match p {
        Part::Lit(s) => Some(s.clone()),
        Part::Col(_) => None,
    };
    let all_literal = t.parts.iter().all(|p| matches!(p, Part::Lit(_)));
    if all_literal {
        let s: String = t.parts.iter().filter_map(lit).collect();
        return (s.clone(), s, true);
    }
    let prefix = t.parts.first().and_then(lit).unwrap_or_default();
    let suffix = t.parts.last().and_then(lit).unwrap_or_default();
    (prefix, suffix, false)
}

/// Whether two templates may render the same text: conservatively yes,
/// unless their literal beginnings or endings force different strings
/// (`PROFILE` and `ORDER#{id}` differ at the first character). A placeholder
/// is taken to render any text.
pub(crate) fn may_overlap(a: &Template, b: &Template) -> bool {
    let (pa, sa, la) = ends(a);
    let (pb, sb, lb) = ends(b);
    match (la, lb) {
        (true, true) => pa == pb,
        // A literal and a pattern: the literal must start with the pattern's
        // prefix, end with its suffix, and hold both without overlapping them.
        (true, false) => {
            pa.starts_with(&pb) && pa.ends_with(&sb) && pa.len() >= pb.len() + sb.len()
        }
        (false, true) => {
            pb.starts_with(&pa) && pb.ends_with(&sa) && pb.len() >= pa.len() + sa.len()
        }
        (false, false) => {
            (pa.starts_with(&pb) || pb.starts_with(&pa)) && (sa.ends_with(&sb) || sb.ends_with(&sa))
        }
    }
}
