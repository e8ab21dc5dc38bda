//! Static warnings for `check`: mappings that load but would overwrite items
//! silently, because a key template does not include a unique key of its
//! source, or because two entities (or pointers) can produce the same key.

use std::fmt;

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
            .filter_map(|e| e.key.as_ref().and_then(|k| e.lint_keys(k)))
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
