//! Loading `[[target.gsi]]` and `billing`: the indexes checked against each
//! other and the table's keys.

use std::collections::HashMap;

use serde_spanned::Spanned;
use sql2ddb_core::{KeyAttr, KeyType};

use super::{is_table_or_index_name, Loader};
use crate::error::MappingError;
use crate::plan::{Billing, Gsi, Projection, MAX_GSIS, MAX_PROJECTED_ATTRIBUTES};
use crate::spec::{RawBilling, RawGsi, RawProjection};

impl Loader<'_, '_> {
    /// `[[target.gsi]]`, checked against each other and the table's keys.
    pub(crate) fn gsis(
        &self,
        raw: &[Spanned<RawGsi>],
        pk: &KeyAttr,
        sk: Option<&KeyAttr>,
    ) -> Result<Vec<Gsi>, MappingError> {
        if let Some(extra) = raw.get(MAX_GSIS) {
            return Err(self.invalid(
                &extra.span(),
                format!("a table has at most {MAX_GSIS} global secondary indexes"),
            ));
        }
        // Each key attribute has one type, wherever it is a key.
        let mut types: HashMap<String, KeyType> = std::iter::once(pk)
            .chain(sk)
            .map(|k| (k.name.clone(), k.kind))
            .collect();
        let mut gsis: Vec<Gsi> = Vec::with_capacity(raw.len());
        let mut projected = 0;
        for g in raw {
            let g = g.get_ref();
            let name = g.name.get_ref();
            if !is_table_or_index_name(name) {
                return Err(self.invalid(
                    &g.name.span(),
                    format!(
                        "{name:?} is not a DynamoDB index name (3 to 255 of a-z, A-Z, 0-9, _ . -)"
                    ),
                ));
            }
            if gsis.iter().any(|x| &x.name == name) {
                return Err(self.invalid(&g.name.span(), format!("duplicate index name {name:?}")));
            }
            let keys = self.gsi_keys(g, &mut types)?;
            let projection = self.projection(g, &mut projected)?;
            let mut keys = keys.into_iter();
            gsis.push(Gsi {
                name: name.clone(),
                pk: keys.next().expect("pk is required"),
                sk: keys.next(),
                projection,
            });
        }
        Ok(gsis)
    }

    /// An index's key attributes (pk, then sk), each with one type across
    /// the table (`types` holds the types seen so far).
    fn gsi_keys(
        &self,
        g: &RawGsi,
        types: &mut HashMap<String, KeyType>,
    ) -> Result<Vec<KeyAttr>, MappingError> {
        let name = g.name.get_ref();
        let mut keys = Vec::with_capacity(2);
        for k in std::iter::once(&g.pk).chain(&g.sk) {
            let k = k.get_ref();
            let attr = KeyAttr {
                name: k.name.get_ref().clone(),
                kind: k.kind,
            };
            if attr.name.is_empty() {
                return Err(self.invalid(&k.name.span(), "key attribute name is empty".into()));
            }
            if keys.iter().any(|x: &KeyAttr| x.name == attr.name) {
                return Err(self.invalid(
                    &k.name.span(),
                    format!(
                        "index {name:?} has sort key and partition key both named {:?}",
                        attr.name
                    ),
                ));
            }
            match types.get(&attr.name) {
                Some(kind) if *kind != attr.kind => {
                    return Err(self.invalid(
                        &k.name.span(),
                        format!(
                            "key attribute {:?} is of type {kind} elsewhere in [target]; one attribute has one type",
                            attr.name
                        ),
                    ))
                }
                _ => {
                    types.insert(attr.name.clone(), attr.kind);
                }
            }
            keys.push(attr);
        }
        Ok(keys)
    }

    /// An index's `projection`; `projected` counts the included attributes
    /// of all indexes so far.
    fn projection(&self, g: &RawGsi, projected: &mut usize) -> Result<Projection, MappingError> {
        Ok(match g.projection.as_ref().map(Spanned::get_ref) {
            None | Some(RawProjection::All) => Projection::All,
            Some(RawProjection::KeysOnly) => Projection::KeysOnly,
            Some(RawProjection::Include(list)) => {
                if list.get_ref().is_empty() {
                    return Err(self.invalid(
                        &list.span(),
                        "include is empty: name attributes, or use projection = \"keys_only\""
                            .into(),
                    ));
                }
                let mut attrs: Vec<String> = Vec::with_capacity(list.get_ref().len());
                for a in list.get_ref() {
                    if a.get_ref().is_empty() || attrs.contains(a.get_ref()) {
                        return Err(self.invalid(
                            &a.span(),
                            format!("include lists {:?} twice or empty", a.get_ref()),
                        ));
                    }
                    attrs.push(a.get_ref().clone());
                }
                *projected += attrs.len();
                if *projected > MAX_PROJECTED_ATTRIBUTES {
                    return Err(self.invalid(
                        &list.span(),
                        format!("the indexes of a table may include at most {MAX_PROJECTED_ATTRIBUTES} attributes together"),
                    ));
                }
                Projection::Include(attrs)
            }
        })
    }

    /// `billing = …`, on-demand when absent.
    pub(crate) fn billing(
        &self,
        raw: Option<&Spanned<RawBilling>>,
    ) -> Result<Billing, MappingError> {
        Ok(match raw.map(Spanned::get_ref) {
            None | Some(RawBilling::OnDemand) => Billing::OnDemand,
            Some(RawBilling::Provisioned { read, write }) => Billing::Provisioned {
                read: self.positive(read, "billing.read", i64::MAX as usize)? as u64,
                write: self.positive(write, "billing.write", i64::MAX as usize)? as u64,
            },
        })
    }
}
