//! The digest of everything in a mapping that decides the items a run
//! writes, so a resumed run can refuse a mapping that changed since the run
//! started (its items would come out in two shapes, silently).
//!
//! The digest is kept per part (`target table`, `entity orders: pk template`,
//! `entity orders: attributes`, …) so a refusal can name what changed.
//! Settings that change how items are written but not what they are
//! (concurrency, capacity cap, page size, read parallelism, the source URL,
//! the endpoint, billing) are left out: a run may be resumed with other ones.
//!
//! Each part hashes a canonical text of the loaded mapping (values after
//! `${VAR}` expansion), never the file's text: comments, layout and the order
//! of TOML tables do not count. Where a part is the `Debug` form of loaded
//! values, their places in the file ([`Location`](crate::Location)) are cut
//! out, so an option added to those values later is covered without anyone
//! remembering to add it here.

use std::collections::BTreeMap;
use std::fmt;

use crate::plan::{EntityDef, Plan};

/// The part of an entity that covers whatever its named parts do not.
const OTHER_OPTIONS: &str = "other options";

/// A stable digest of what decides a mapping's items, per named part.
///
/// Two plans have equal digests when they map every row to the same item;
/// [`ItemDigest::changes_since`] names the parts that differ.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ItemDigest {
    parts: BTreeMap<String, String>,
}

impl ItemDigest {
    /// A digest from its parts (part name → hash), as recorded earlier with
    /// [`ItemDigest::parts`].
    pub fn from_parts(parts: BTreeMap<String, String>) -> ItemDigest {
        ItemDigest { parts }
    }

    /// The parts: part name (`entity orders: pk template`) → hash (hex).
    pub fn parts(&self) -> &BTreeMap<String, String> {
        &self.parts
    }

    /// One hash of every part (hex, 32 characters).
    pub fn hash(&self) -> String {
        let mut h = Fnv128::new();
        for (name, hash) in &self.parts {
            h.write(name.as_bytes());
            h.write(&[0]);
            h.write(hash.as_bytes());
            h.write(&[0]);
        }
        h.hex()
    }

    /// The parts that differ from `recorded`, by name, in order: changed
    /// ones as they are, parts only `recorded` has with ` (removed)`, parts
    /// only this one has with ` (added)`. An entity's `other options` is
    /// named only when none of its named parts changed. Empty when equal.
    pub fn changes_since(&self, recorded: &ItemDigest) -> Vec<String> {
        let mut changed: Vec<(String, &str)> = Vec::new();
        for (name, hash) in &recorded.parts {
            match self.parts.get(name) {
                Some(h) if h == hash => {}
                Some(_) => changed.push((name.clone(), "")),
                None => changed.push((name.clone(), " (removed)")),
            }
        }
        for name in self.parts.keys() {
            if !recorded.parts.contains_key(name) {
                changed.push((name.clone(), " (added)"));
            }
        }
        changed.sort();
        let named: Vec<String> = changed
            .iter()
            .filter(|(n, _)| !n.ends_with(OTHER_OPTIONS))
            .map(|(n, _)| n.clone())
            .collect();
        changed
            .iter()
            .filter(|(n, _)| match n.strip_suffix(OTHER_OPTIONS) {
                // `entity orders: other options` changes with any named part of orders.
                Some(prefix) => !named.iter().any(|m| m.starts_with(prefix)),
                None => true,
            })
            .map(|(n, suffix)| format!("{n}{suffix}"))
            .collect()
    }
}

impl fmt::Display for ItemDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hash())
    }
}

impl Plan {
    /// The digest of everything in this mapping that decides the items: per
    /// entity its name, source, key columns, pk/sk templates, attributes,
    /// excluded columns, `nulls`, `invalid`, embeds; the pointers; the target
    /// table's name and key schema, its index keys; the source timezone. Not
    /// in it: concurrency, `max_wcu`, page sizes, read parallelism, the
    /// source URL, the endpoint, the region, billing.
    pub fn item_digest(&self) -> ItemDigest {
        let mut parts = Parts::default();
        let t = &self.target;
        parts.add(
            "target table",
            format!("{:?} {:?} {:?}", t.table, t.pk, t.sk),
        );
        let indexes: Vec<_> = t.gsis.iter().map(|g| (&g.name, &g.pk, &g.sk)).collect();
        parts.add("target indexes", format!("{indexes:?}"));
        parts.add("source timezone", format!("{:?}", self.source.timezone));
        let names: Vec<&str> = self.entities.iter().map(|e| e.name.as_str()).collect();
        parts.add("entities", format!("{names:?}"));
        for e in &self.entities {
            let part = |what: &str| format!("entity {}: {what}", e.name);
            let def = &e.def;
            parts.add(part("source"), format!("{:?}", e.from));
            parts.add(part("key columns"), format!("{:?}", e.key));
            parts.add(part("pk template"), format!("{:?}", def.pk.text));
            let sk = def.sk.as_ref().map(|t| &t.text);
            parts.add(part("sk template"), format!("{sk:?}"));
            parts.add(part("attributes"), debug(&def.attributes));
            parts.add(part("excluded columns"), format!("{:?}", excluded(def)));
            parts.add(part("nulls"), format!("{:?}", def.nulls));
            parts.add(part("invalid"), format!("{:?}", def.invalid));
            parts.add(part("embeds"), debug(&e.embeds));
            let mut whole = def.clone();
            whole.exclude.sort_by(|a, b| a.0.cmp(&b.0));
            parts.add(part(OTHER_OPTIONS), debug(&whole));
        }
        for (i, p) in self.pointers.iter().enumerate() {
            let name = match self.pointers[..i].iter().any(|q| q.name == p.name) {
                true => format!("pointer {} #{}", p.name, i + 1),
                false => format!("pointer {}", p.name),
            };
            parts.add(name, debug(p));
        }
        ItemDigest { parts: parts.0 }
    }
}

/// An entity's excluded columns, in name order (their order changes nothing).
fn excluded(def: &EntityDef) -> Vec<&str> {
    let mut cols: Vec<&str> = def.exclude.iter().map(|(c, _)| c.as_str()).collect();
    cols.sort_unstable();
    cols
}

#[derive(Default)]
struct Parts(BTreeMap<String, String>);

impl Parts {
    fn add(&mut self, name: impl Into<String>, canonical: String) {
        let mut h = Fnv128::new();
        h.write(canonical.as_bytes());
        self.0.insert(name.into(), h.hex());
    }
}

/// The `Debug` form of `value` without the places in the file it carries.
fn debug(value: &impl fmt::Debug) -> String {
    without_locations(&format!("{value:?}"))
}

/// Replaces every `Location { file: "…", line: …, col: … }` by `Location`.
fn without_locations(text: &str) -> String {
    const OPEN: &str = "Location {";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        out.push_str("Location");
        let body = &rest[at + OPEN.len()..];
        let (mut in_string, mut escaped, mut end) = (false, false, body.len());
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                '}' if !in_string => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

/// 128-bit FNV-1a: small, dependency-free and stable across releases and
/// platforms (unlike `std`'s hashers). Not a defence against a forged
/// mapping, only a check that it is the same one.
struct Fnv128(u128);

impl Fnv128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;

    fn new() -> Fnv128 {
        Fnv128(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_in_the_file_are_cut_out_strings_with_braces_included() {
        let text = r#"A { at: Location { file: "a}\"b.toml", line: 3, col: 7 }, x: 1 }"#;
        assert_eq!(without_locations(text), "A { at: Location, x: 1 }");
        assert_eq!(without_locations("no places"), "no places");
    }

    #[test]
    fn fnv_1a_128_matches_its_reference_values() {
        let mut h = Fnv128::new();
        assert_eq!(h.hex(), "6c62272e07bb014262b821756295c58d");
        h.write(b"a");
        assert_eq!(h.hex(), "d228cb696f1a8caf78912b704e4a8964");
    }
}
