//! Binding an entity to the columns its source returns, and mapping rows
//! (the parts for embeds, pointers, index keys, attributes and keys in their
//! own modules).

mod binder;
mod embed;
mod fields;
mod gsi;
mod key;
mod pointer;

use serde_json::Value as Json;
use sql2ddb_core::tagged::Tagged;
use sql2ddb_core::{
    check_item, Column, EncodedItem, Item, ItemProblem, KeyAttr, MappedItem, Reject, Row,
    SourceKey, SqlValue,
};

pub use embed::{ChildRow, ChildRows, ChildShape};
pub use pointer::BoundPointer;

use binder::Binder;
use embed::{bind_embeds, describe_sizes, BoundEmbed};
use fields::{map_fields, Field};
use gsi::{check_index_keys, index_keys, IndexKey};
use key::BoundKey;

use crate::convert::in_zone;
use crate::error::MappingError;
use crate::layout::Layout;
use crate::plan::{Entity, Plan};

/// An entity bound to its source's columns: maps rows to items with no lookups by name.
///
/// Cheap to share: it is `Send + Sync` and holds only resolved indices and literals.
#[derive(Debug, Clone)]
pub struct BoundEntity {
    pub(crate) name: String,
    /// Values per row the source returns.
    pub(crate) width: usize,
    keys: Vec<KeyAttr>,
    pub(crate) pk: BoundKey,
    pub(crate) sk: Option<BoundKey>,
    fields: Vec<Field>,
    /// Keyset key columns, for `source_key`.
    key_columns: Vec<(String, usize)>,
    /// Columns shown in rejects (all but excluded ones).
    visible: Vec<(String, usize)>,
    /// `[[entity.embed]]`, bound to their sources' columns.
    pub(crate) embeds: Vec<BoundEmbed>,
    /// Key attributes of the table's indexes, checked when an item has them.
    index_keys: Vec<IndexKey>,
    /// `[source] timezone`: the zone of zone-less timestamps.
    zone: Option<chrono_tz::Tz>,
    /// The item's attribute names, shared by every row (see
    /// [`BoundEntity::encode_row`]); `None` when two sources fill one name.
    layout: Option<Layout>,
}

impl Entity {
    /// Binds the entity to the columns its source returns, in order, and the
    /// keyset key columns actually used. Every column name in the mapping is
    /// resolved here, so [`BoundEntity::map_row`] does no lookups by name.
    ///
    /// An entity with `[[entity.embed]]` is bound with
    /// [`Entity::bind_with_children`] instead.
    pub fn bind(
        &self,
        plan: &Plan,
        columns: &[Column],
        key: &[String],
    ) -> Result<BoundEntity, MappingError> {
        self.bind_with_children(plan, columns, key, &[])
    }

    /// Binds the entity and its embeds: `children` holds, for each of
    /// [`Entity::embeds`] in order, the columns its source returns (and its
    /// own nested embeds' shapes).
    pub fn bind_with_children(
        &self,
        plan: &Plan,
        columns: &[Column],
        key: &[String],
        children: &[ChildShape],
    ) -> Result<BoundEntity, MappingError> {
        let def = &self.def;
        let (mut b, all) = Binder::new(&self.name, &def.at, columns, &def.exclude)?;
        b.invalid = def.invalid;
        b.zone = plan.source.timezone;
        let key_at = def.key_at.as_ref().unwrap_or(&def.at);
        let key_columns = key
            .iter()
            .map(|k| match all.get(k.as_str()) {
                Some(&i) => Ok((k.clone(), i)),
                None => Err(b.error(
                    key_at,
                    Some(k),
                    format!("key column {k:?} is not among the source's columns"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let keys = plan.key_attrs();
        for k in &keys {
            if b.index.contains_key(k.name.as_str()) {
                return Err(b.error(
                    &def.at,
                    Some(&k.name),
                    format!(
                        "column {:?} has the name of the table's key attribute: exclude it, or alias it in a query",
                        k.name
                    ),
                ));
            }
        }
        let pk = b.key(&def.pk, &plan.target.pk, "pk")?;
        let sk = match (&def.sk, &plan.target.sk) {
            (Some(t), Some(attr)) => Some(b.key(t, attr, "sk")?),
            _ => None,
        };
        let index_keys = index_keys(&plan.target.gsis, &keys);
        let fields = b.fields(def.nulls, &def.attributes, true, &index_keys)?;
        let embeds = bind_embeds(&b, &self.embeds, key, children, &def.at)?;
        let visible = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !b.excluded.contains(c.name.as_str()))
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        let layout = Layout::new(
            &pk.attr,
            sk.as_ref().map(|k| k.attr.as_str()),
            fields.iter().map(|f| f.attr.as_str()),
            embeds.iter().map(BoundEmbed::name),
        );
        Ok(BoundEntity {
            layout,
            name: self.name.clone(),
            width: columns.len(),
            keys,
            pk,
            sk,
            fields,
            key_columns,
            visible,
            embeds,
            index_keys,
            zone: plan.source.timezone,
        })
    }
}

impl BoundEntity {
    /// The entity's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Maps one source row (values in the order of the bound columns) to an
    /// item checked against DynamoDB's limits, or to a [`Reject`] that names
    /// the entity, the row's key, the column at fault and the reason.
    ///
    /// For an entity with embeds use [`BoundEntity::map_row_with_children`]:
    /// here the row is rejected, since its children were not read.
    // The signature is the engine's contract; a reject is the rare path.
    #[allow(clippy::result_large_err)]
    pub fn map_row(&self, row: &Row) -> Result<MappedItem, Reject> {
        self.map_row_with_children(row, &ChildRows::default())
    }

    /// Maps one source row with the child rows of each of its embeds (in
    /// embed order; see [`ChildRows`]). Children are converted by the same
    /// rules as the row; `as = "list"` gives a list of maps in the children's
    /// order (the source reads them in `order_by` order), `as = "map"` a map
    /// keyed by the text of `map_key`. An item pushed over 400 KB by its
    /// children is rejected whole, the reason naming each embed and its
    /// child count, never truncated.
    #[allow(clippy::result_large_err)]
    pub fn map_row_with_children(
        &self,
        row: &Row,
        children: &ChildRows,
    ) -> Result<MappedItem, Reject> {
        if row.len() != self.width {
            return Err(self.reject(
                row,
                None,
                format!(
                    "row has {} values, the entity was bound to {} columns",
                    row.len(),
                    self.width
                ),
            ));
        }
        if children.embeds.len() != self.embeds.len() {
            return Err(self.reject(
                row,
                None,
                format!(
                    "row came with the children of {} embeds, the entity has {}",
                    children.embeds.len(),
                    self.embeds.len()
                ),
            ));
        }
        // Keys and attributes see zone-less timestamps already in UTC; rejects
        // and the source key keep the row as read.
        let localized = self.localize(row);
        let values = localized.as_ref().unwrap_or(row);
        let mut item = Item::new();
        for key in std::iter::once(&self.pk).chain(&self.sk) {
            let v = key.value(values).map_err(|(c, r)| self.reject(row, c, r))?;
            item.insert(key.attr.clone(), v);
        }
        map_fields(&self.fields, values, &mut item).map_err(|(c, r)| self.reject(row, c, r))?;
        for (embed, rows) in self.embeds.iter().zip(&children.embeds) {
            let v = embed.value(rows).map_err(|(c, r)| self.reject(row, c, r))?;
            item.insert(embed.name().to_string(), v);
        }
        let size = check_item(&item, &self.keys).map_err(|p| {
            let mut reason = p.to_string();
            if matches!(p, ItemProblem::TooLarge { .. }) {
                reason.push_str(&describe_sizes(&self.embeds, &item, children));
            }
            self.reject(row, self.problem_column(&p), reason)
        })?;
        check_index_keys(&item, &self.index_keys)
            .map_err(|(attr, reason)| self.reject(row, self.attr_column(&attr), reason))?;
        Ok(MappedItem {
            item,
            source_key: self.key_of(row),
            size,
        })
    }

    /// Maps one source row straight to its encoded item: what
    /// [`BoundEntity::map_row`] and [`EncodedItem::of`] give, without the
    /// attribute map between them. The item is built in the entity's layout
    /// (a value per attribute, the names shared by every row), checked by the
    /// same code, and serialised from there; a row that fails a check is
    /// mapped again by [`BoundEntity::map_row`], whose reject it returns.
    #[allow(clippy::result_large_err)]
    pub fn encode_row(&self, row: &Row) -> Result<EncodedItem, Reject> {
        self.encode_row_with_children(row, &ChildRows::default())
    }

    /// [`BoundEntity::encode_row`] for a row with the child rows of its embeds.
    #[allow(clippy::result_large_err)]
    pub fn encode_row_with_children(
        &self,
        row: &Row,
        children: &ChildRows,
    ) -> Result<EncodedItem, Reject> {
        let encoded = self.encode_in_layout(row, children);
        #[cfg(debug_assertions)]
        {
            // Every test that maps rows proves the two paths equal.
            let by_map = self
                .map_row_with_children(row, children)
                .map(|m| EncodedItem::of(m, &self.keys));
            match (&encoded, &by_map) {
                (Some(a), Ok(b)) => {
                    assert_eq!(a, b, "entity {}: layout and map differ", self.name)
                }
                (Some(a), Err(r)) => panic!(
                    "entity {}: the layout encoded {a:?}, the map rejected it: {r:?}",
                    self.name
                ),
                _ => {}
            }
        }
        match encoded {
            Some(item) => Ok(item),
            None => self
                .map_row_with_children(row, children)
                .map(|m| EncodedItem::of(m, &self.keys)),
        }
    }

    /// The row encoded through the layout; `None` when the entity has no
    /// layout or a check fails (the caller then maps the row the map's way,
    /// for the reject's column and reason).
    fn encode_in_layout(&self, row: &Row, children: &ChildRows) -> Option<EncodedItem> {
        let layout = self.layout.as_ref()?;
        if row.len() != self.width || children.embeds.len() != self.embeds.len() {
            return None;
        }
        let localized = self.localize(row);
        let values = localized.as_ref().unwrap_or(row);
        let mut item = layout.empty();
        item.values[layout.pk] = Some(self.pk.value(values).ok()?);
        if let (Some(k), Some(at)) = (&self.sk, layout.sk) {
            item.values[at] = Some(k.value(values).ok()?);
        }
        for (f, &at) in self.fields.iter().zip(&layout.fields) {
            item.values[at] = f.value(values).ok()?;
        }
        for ((embed, rows), &at) in self.embeds.iter().zip(&children.embeds).zip(&layout.embeds) {
            item.values[at] = Some(embed.value(rows).ok()?);
        }
        let size = check_item(&item, &self.keys).ok()?;
        check_index_keys(&item, &self.index_keys).ok()?;
        let text = item.text(size);
        // The item is dropped here: its key values are moved, not cloned.
        let key = item.take_keys(&self.keys);
        Some(EncodedItem::from_parts(
            text,
            key,
            self.source_key_of(row),
            size,
        ))
    }

    /// The row with its zone-less timestamps taken in `[source] timezone` and
    /// made UTC (a local time that never occurs becomes invalid); `None` when
    /// there is no zone or nothing to change.
    pub(crate) fn localize(&self, row: &Row) -> Option<Row> {
        let zone = self.zone?;
        if !row.iter().any(|v| matches!(v, SqlValue::Timestamp(_))) {
            return None;
        }
        Some(
            row.iter()
                .map(|v| match v {
                    SqlValue::Timestamp(ts) => match in_zone(ts, Some(zone)) {
                        Ok(utc) => SqlValue::TimestampTz(utc),
                        Err(reason) => SqlValue::Invalid(reason),
                    },
                    other => other.clone(),
                })
                .collect(),
        )
    }

    /// The source column behind an attribute, when one column is.
    fn attr_column(&self, attr: &str) -> Option<String> {
        self.fields
            .iter()
            .find(|f| f.attr == attr)
            .and_then(|f| f.column.clone())
    }

    /// The row's source key: `{"column": value, …}` over the keyset key columns.
    pub fn key_of(&self, row: &Row) -> Json {
        Json::Object(
            self.key_columns
                .iter()
                .map(|(name, i)| {
                    (
                        name.clone(),
                        row.get(*i).map_or(Json::Null, SqlValue::to_tagged_json),
                    )
                })
                .collect(),
        )
    }

    /// The row's key as [`BoundEntity::key_of`] gives it, written straight
    /// to its text.
    pub fn source_key_of(&self, row: &Row) -> SourceKey {
        SourceKey::of(&RowKey {
            columns: &self.key_columns,
            row,
        })
    }

    pub(crate) fn reject(&self, row: &Row, column: Option<String>, reason: String) -> Reject {
        let shown = self
            .visible
            .iter()
            .filter_map(|(name, i)| row.get(*i).map(|v| (name.clone(), v.to_tagged_json())))
            .collect();
        Reject {
            entity: self.name.clone(),
            key: self.key_of(row),
            column,
            reason,
            row: Json::Object(shown),
        }
    }

    /// The source column behind an item problem, when one column is.
    fn problem_column(&self, p: &ItemProblem) -> Option<String> {
        match p {
            ItemProblem::MissingKey { attr }
            | ItemProblem::EmptyKey { attr }
            | ItemProblem::KeyTooLong { attr, .. }
            | ItemProblem::KeyType { attr, .. } => std::iter::once(&self.pk)
                .chain(&self.sk)
                .find(|k| &k.attr == attr)
                .and_then(|k| k.template.source_column.clone()),
            ItemProblem::TooDeep { attr, .. } | ItemProblem::EmptySet { attr } => {
                self.attr_column(attr)
            }
            _ => None,
        }
    }
}

/// A row's key columns, serialised as [`BoundEntity::key_of`]'s JSON object.
struct RowKey<'a> {
    columns: &'a [(String, usize)],
    row: &'a Row,
}

impl serde::Serialize for RowKey<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.columns.len()))?;
        for (name, i) in self.columns {
            match self.row.get(*i) {
                Some(v) => map.serialize_entry(name, &Tagged(v))?,
                None => map.serialize_entry(name, &())?,
            }
        }
        map.end()
    }
}
