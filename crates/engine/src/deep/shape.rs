//! Which entity an item of the table belongs to, judged by its key alone.
//!
//! Each entity's key templates give a shape: the literal text between its
//! placeholders (`ORDER#{order_id}` → starts with `ORDER#`; `PROFILE` →
//! exactly `PROFILE`). An item belongs to the entity whose partition and
//! sort key shapes both match its key values; when several match, to the one
//! with the most literal text (the most specific). Pointer items (the keys
//! of `[[pointer]]`s) are matched the same way and win a tie. An item that
//! matches no shape is outside the mapping's key space: another
//! application's item sharing the table, never reported as extra.

use sql2ddb_core::{AttrValue, Item, KeyAttr};
use sql2ddb_mapping::Plan;

/// A key template's literal pieces, split at its placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyShape {
    /// Literal text around the placeholders: one more piece than placeholders.
    pieces: Vec<String>,
}

impl KeyShape {
    /// The shape of a template as written (`{{` and `}}` are literal braces).
    pub fn of(template: &str) -> KeyShape {
        let mut pieces = vec![String::new()];
        let mut chars = template.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    pieces.last_mut().expect("never empty").push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    pieces.last_mut().expect("never empty").push('}');
                }
                '{' => {
                    for c in chars.by_ref() {
                        if c == '}' {
                            break;
                        }
                    }
                    pieces.push(String::new());
                }
                c => pieces.last_mut().expect("never empty").push(c),
            }
        }
        KeyShape { pieces }
    }

    /// Literal characters: how specific the shape is.
    pub fn literal_len(&self) -> usize {
        self.pieces.iter().map(String::len).sum()
    }

    /// Whether a rendered key value fits the shape.
    pub fn matches(&self, value: &str) -> bool {
        let (first, rest) = self.pieces.split_first().expect("never empty");
        let Some((last, middle)) = rest.split_last() else {
            return value == first;
        };
        if value.len() < first.len() + last.len()
            || !value.starts_with(first.as_str())
            || !value.ends_with(last.as_str())
        {
            return false;
        }
        let mut inner = &value[first.len()..value.len() - last.len()];
        for piece in middle {
            match inner.find(piece.as_str()) {
                Some(at) => inner = &inner[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

/// Who an item of the table belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The entity at this index of the plan.
    Entity(usize),
    /// A pointer item.
    Pointer,
    /// Outside the mapping's key space.
    Outside,
}

/// The key shapes of a mapping's entities and pointers.
pub struct KeySpace {
    keys: Vec<KeyAttr>,
    entities: Vec<Vec<KeyShape>>,
    pointers: Vec<Vec<KeyShape>>,
}

impl KeySpace {
    /// The shapes of every entity and pointer of `plan`.
    pub fn of(plan: &Plan) -> KeySpace {
        let shapes = |pk: &str, sk: Option<&str>| {
            let mut v = vec![KeyShape::of(pk)];
            v.extend(sk.map(KeyShape::of));
            v
        };
        KeySpace {
            keys: plan.key_attrs(),
            entities: plan
                .entities
                .iter()
                .map(|e| shapes(e.pk_template(), e.sk_template()))
                .collect(),
            pointers: plan
                .pointers()
                .iter()
                .map(|p| shapes(p.pk_template(), p.sk_template()))
                .collect(),
        }
    }

    /// Who the item belongs to, by its key.
    pub fn owner(&self, item: &Item) -> Owner {
        let values: Vec<Option<&str>> = self
            .keys
            .iter()
            .map(|k| match item.get(&k.name) {
                Some(AttrValue::S(s)) | Some(AttrValue::N(s)) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        let fits = |shapes: &[KeyShape]| {
            shapes.len() == values.len()
                && shapes
                    .iter()
                    .zip(&values)
                    .all(|(s, v)| v.is_some_and(|v| s.matches(v)))
        };
        let weight = |shapes: &[KeyShape]| shapes.iter().map(KeyShape::literal_len).sum::<usize>();
        let mut best: Option<(usize, Owner)> = None;
        for shapes in &self.pointers {
            if fits(shapes) && best.is_none_or(|(w, _)| weight(shapes) > w) {
                best = Some((weight(shapes), Owner::Pointer));
            }
        }
        for (i, shapes) in self.entities.iter().enumerate() {
            if fits(shapes) && best.is_none_or(|(w, _)| weight(shapes) > w) {
                best = Some((weight(shapes), Owner::Entity(i)));
            }
        }
        best.map_or(Owner::Outside, |(_, o)| o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_match_their_rendered_keys_only() {
        let order = KeyShape::of("ORDER#{order_id:08}#L{line}");
        assert!(order.matches("ORDER#00000007#L3"));
        assert!(!order.matches("ORDER#7"));
        assert!(!order.matches("CUSTOMER#7#L3"));
        let fixed = KeyShape::of("PROFILE");
        assert!(fixed.matches("PROFILE"));
        assert!(!fixed.matches("PROFILE2"));
        let braces = KeyShape::of("{{x}}#{id}");
        assert!(braces.matches("{x}#1"));
        assert_eq!(braces.literal_len(), 4);
        assert!(KeyShape::of("{id}").matches("42"));
    }
}
