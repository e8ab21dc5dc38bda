//! An entity's item layout: its attribute names, bound once and shared by
//! every row, so the write path builds an item as a vector of values and
//! serialises it straight into DynamoDB JSON, instead of a map that holds
//! its own copy of every name.

use sql2ddb_core::json::{item_text_keyed, keyed_name};
use sql2ddb_core::{AttrValue, Attrs, KeyAttr};

/// Where each of an entity's attributes goes in the layout: the names in
/// the order a map of the item would hold them (byte order, so the text is
/// the same as a map's), and the position of each source of a value.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// Attribute names, sorted.
    pub names: Vec<String>,
    /// The same names written as JSON with their colon (`"PK":`), once.
    keyed: Vec<String>,
    /// Position of the partition key, the sort key, each field, each embed.
    pub pk: usize,
    pub sk: Option<usize>,
    pub fields: Vec<usize>,
    pub embeds: Vec<usize>,
}

impl Layout {
    /// The layout of attributes named, in the order they are filled, `pk`,
    /// `sk`, `fields` and `embeds`; `None` when two of them share a name
    /// (one value then replaces another, which a map does and a layout
    /// does not: such an entity takes the map's path).
    pub fn new<'a>(
        pk: &'a str,
        sk: Option<&'a str>,
        fields: impl Iterator<Item = &'a str>,
        embeds: impl Iterator<Item = &'a str>,
    ) -> Option<Layout> {
        let fields: Vec<&str> = fields.collect();
        let embeds: Vec<&str> = embeds.collect();
        let mut names: Vec<String> = std::iter::once(pk)
            .chain(sk)
            .chain(fields.iter().copied())
            .chain(embeds.iter().copied())
            .map(str::to_string)
            .collect();
        let filled = names.len();
        names.sort();
        names.dedup();
        if names.len() != filled {
            return None;
        }
        let at = |n: &str| {
            names
                .binary_search_by(|x| x.as_str().cmp(n))
                .expect("a name of the layout")
        };
        Some(Layout {
            pk: at(pk),
            sk: sk.map(at),
            fields: fields.iter().map(|n| at(n)).collect(),
            embeds: embeds.iter().map(|n| at(n)).collect(),
            keyed: names.iter().map(|n| keyed_name(n)).collect(),
            names,
        })
    }

    /// An item of this layout with no values yet.
    pub fn empty(&self) -> Slots<'_> {
        Slots {
            names: &self.names,
            keyed: &self.keyed,
            values: vec![None; self.names.len()],
        }
    }
}

/// An item in an entity's layout: a value (or none) per attribute name.
/// It is written as the [`sql2ddb_core::Item`] with the same attributes
/// would be (names in the same order), and the limits are checked on it by
/// the same code.
#[derive(Debug)]
pub(crate) struct Slots<'a> {
    names: &'a [String],
    keyed: &'a [String],
    pub values: Vec<Option<AttrValue>>,
}

impl Slots<'_> {
    /// The item's DynamoDB JSON, its size by DynamoDB's rules being `size`:
    /// the text [`sql2ddb_core::json::item_text`] gives, from the names the
    /// layout wrote once.
    pub fn text(&self, size: usize) -> String {
        let present = self.values.iter().filter(|v| v.is_some()).count();
        item_text_keyed(
            self.keyed
                .iter()
                .zip(&self.values)
                .filter_map(|(n, v)| Some((n.as_str(), v.as_ref()?))),
            present,
            size,
        )
    }
}

impl Slots<'_> {
    /// Where the attribute `name` is in the layout.
    fn index(&self, name: &str) -> Option<usize> {
        // Among a few dozen names, mostly of different lengths, comparing
        // lengths first finds one with a single string comparison, where a
        // binary search makes several; a wide entity is searched.
        if self.names.len() <= 32 {
            self.names
                .iter()
                .position(|x| x.len() == name.len() && x == name)
        } else {
            self.names.binary_search_by(|x| x.as_str().cmp(name)).ok()
        }
    }

    /// The values of the key attributes `keys`, in their order, moved out
    /// of the item (`NULL` for one it lacks), as
    /// [`sql2ddb_core::EncodedItem::with_text`] would clone them.
    pub fn take_keys(&mut self, keys: &[KeyAttr]) -> Vec<AttrValue> {
        keys.iter()
            .map(|k| {
                self.index(&k.name)
                    .and_then(|i| self.values[i].take())
                    .unwrap_or(AttrValue::Null)
            })
            .collect()
    }
}

impl Attrs for Slots<'_> {
    fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.values[self.index(name)?].as_ref()
    }

    fn each(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.names
            .iter()
            .zip(&self.values)
            .filter_map(|(n, v)| Some((n.as_str(), v.as_ref()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sql2ddb_core::json::item_text;
    use sql2ddb_core::{check_item, item_size, Item, KeyAttr, KeyType};

    #[test]
    fn an_item_in_a_layout_reads_checks_and_serialises_as_the_map_with_its_values() {
        let layout = Layout::new(
            "PK",
            Some("SK"),
            ["name", "age", "Zed"].into_iter(),
            ["lines"].into_iter(),
        )
        .expect("distinct names");
        let mut slots = layout.empty();
        let mut map = Item::new();
        let mut put = |at: usize, name: &str, v: Option<AttrValue>| {
            if let Some(v) = &v {
                map.insert(name.to_string(), v.clone());
            }
            slots.values[at] = v;
        };
        put(layout.pk, "PK", Some(AttrValue::S("C#1".into())));
        put(layout.sk.unwrap(), "SK", Some(AttrValue::N("7".into())));
        put(
            layout.fields[0],
            "name",
            Some(AttrValue::S("é \"q\"".into())),
        );
        put(layout.fields[1], "age", None);
        put(layout.fields[2], "Zed", Some(AttrValue::Bool(true)));
        put(
            layout.embeds[0],
            "lines",
            Some(AttrValue::L(vec![AttrValue::Null])),
        );
        assert_eq!(item_text(&slots), serde_json::to_string(&map).unwrap());
        assert_eq!(slots.text(item_size(&slots)), item_text(&slots));
        assert_eq!(slots.attr("name"), map.get("name"));
        assert_eq!(slots.attr("age"), None);
        assert_eq!(slots.attr("nope"), None);
        assert_eq!(item_size(&slots), item_size(&map));
        let keys = [
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::S),
        ];
        assert_eq!(check_item(&slots, &keys), check_item(&map, &keys));
        assert!(
            check_item(&slots, &keys).is_err(),
            "SK is a number, the key an S"
        );
        // The key values move out as an encoded item would clone them.
        let cloned = sql2ddb_core::EncodedItem::with_text(
            String::new(),
            &slots,
            &keys,
            serde_json::Value::Null,
            0,
        );
        let gone = [KeyAttr::new("GSI1PK", KeyType::S)];
        assert_eq!(slots.take_keys(&gone), vec![AttrValue::Null]);
        assert_eq!(slots.take_keys(&keys), cloned.key);
        assert_eq!(slots.attr("PK"), None, "moved out");
        assert_eq!(slots.attr("name"), map.get("name"), "the rest stays");
    }

    #[test]
    fn every_attribute_is_found_by_name_in_narrow_and_wide_layouts() {
        for width in [1, 5, 31, 32, 33, 80] {
            // Names of equal and of different lengths, in no order.
            let names: Vec<String> = (0..width)
                .map(|i| format!("{}{}", if i % 3 == 0 { "a" } else { "attr_" }, width - i))
                .collect();
            let layout = Layout::new(
                "PK",
                None,
                names.iter().map(String::as_str),
                std::iter::empty(),
            )
            .expect("distinct names");
            let mut slots = layout.empty();
            slots.values[layout.pk] = Some(AttrValue::S("pk".into()));
            for (name, &at) in names.iter().zip(&layout.fields) {
                slots.values[at] = Some(AttrValue::S(name.clone()));
            }
            assert_eq!(slots.attr("PK"), Some(&AttrValue::S("pk".into())));
            for name in &names {
                assert_eq!(
                    slots.attr(name),
                    Some(&AttrValue::S(name.clone())),
                    "{width}"
                );
            }
            for missing in ["", "a", "attr_", "a0", "PK ", "pk", "attr_1000"] {
                assert_eq!(slots.attr(missing), None, "{width}: {missing}");
            }
        }
    }

    #[test]
    fn names_written_once_give_the_text_names_escaped_per_item_give() {
        let names = ["q\"uote", "é", "tab\t", "back\\slash", "ctl\u{1}", "plain"];
        let layout =
            Layout::new("PK", None, names.into_iter(), std::iter::empty()).expect("distinct names");
        let mut slots = layout.empty();
        slots.values[layout.pk] = Some(AttrValue::S("k".into()));
        // Some attributes missing, the first of them among them.
        for (i, &at) in layout.fields.iter().enumerate() {
            if i % 2 == 1 {
                slots.values[at] = Some(AttrValue::N(i.to_string()));
            }
        }
        let size = item_size(&slots);
        assert_eq!(slots.text(size), item_text(&slots));
        slots.values[layout.pk] = None;
        assert_eq!(slots.text(size), item_text(&slots));
        for v in slots.values.iter_mut() {
            *v = None;
        }
        assert_eq!(slots.text(0), "{}");
    }

    #[test]
    fn names_filled_twice_have_no_layout() {
        assert!(Layout::new("PK", None, ["a", "PK"].into_iter(), std::iter::empty()).is_none());
        assert!(Layout::new("PK", None, ["a"].into_iter(), ["a"].into_iter()).is_none());
    }
}
