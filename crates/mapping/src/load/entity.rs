//! Loading one `[[entity]]` table (and the parts embeds and pointers share:
//! sources, keys, excludes, attributes) into its validated form.

use serde_spanned::Spanned;
use sql2ddb_core::{normalize_number, KeyAttr};

use super::Loader;
use crate::error::{Location, MappingError};
use crate::plan::{
    AttrDef, AttrKind, Entity, EntityDef, EntitySource, TargetSpec, MAX_READ_PARALLELISM,
};
use crate::spec::{AttrType, KeyType, RawAttr, RawEntity};
use crate::template::{Part, Template};

impl Loader<'_, '_> {
    pub(crate) fn entity(
        &self,
        spanned: &Spanned<RawEntity>,
        target: &TargetSpec,
    ) -> Result<Entity, MappingError> {
        let header = spanned.span();
        let e = spanned.get_ref();
        let name = e.name.get_ref().clone();
        if name.trim().is_empty() {
            return Err(self.invalid(&e.name.span(), "entity name is empty".into()));
        }
        let from = self.source(&e.from, &e.query, header.start, &format!("entity {name:?}"))?;
        let key = self.key_columns(e.key.as_ref())?;
        let page_size = e
            .page_size
            .as_ref()
            .map(|p| self.positive(p, "page_size", usize::MAX))
            .transpose()?;
        let read_parallelism = e
            .read_parallelism
            .as_ref()
            .map(|p| self.read_parallelism(p))
            .transpose()?;
        let pk = self.key_template(&e.pk, &target.pk)?;
        let sk = self.sort_key_template(
            e.sk.as_ref(),
            target,
            header.start,
            &format!("entity {name:?}"),
        )?;
        let key_names: Vec<&str> = target.key_names();
        let attributes = self.attributes(&e.attributes, &key_names)?;
        let embeds = self.embeds(&e.embed, key.as_deref(), &attributes, &key_names)?;
        Ok(Entity {
            name,
            from,
            key,
            page_size,
            read_parallelism,
            overwrite: e.overwrite,
            def: EntityDef {
                at: self.sm.at(header.start),
                key_at: e.key.as_ref().map(|k| self.sm.at(k.span().start)),
                pk,
                sk,
                exclude: self.exclude(&e.exclude),
                nulls: e.nulls.unwrap_or_default(),
                invalid: e.invalid.unwrap_or_default(),
                attributes,
            },
            embeds,
        })
    }

    /// `from = "table"` or `query = "SELECT …"`: exactly one.
    pub(crate) fn source(
        &self,
        from: &Option<Spanned<String>>,
        query: &Option<Spanned<String>>,
        header: usize,
        what: &str,
    ) -> Result<EntitySource, MappingError> {
        Ok(match (from, query) {
            (Some(t), None) if t.get_ref().trim().is_empty() => {
                return Err(self.invalid(&t.span(), "from is empty: name a table".into()))
            }
            (None, Some(q)) if q.get_ref().trim().is_empty() => {
                return Err(self.invalid(&q.span(), "query is empty".into()))
            }
            (Some(t), None) => EntitySource::Table(t.get_ref().clone()),
            (None, Some(q)) => EntitySource::Query(q.get_ref().clone()),
            (Some(_), Some(q)) => {
                return Err(self.invalid(
                    &q.span(),
                    format!("{what} has both from and query: keep exactly one"),
                ))
            }
            (None, None) => {
                return Err(MappingError::MissingKey {
                    at: self.sm.at(header),
                    key: "from".into(),
                    message: format!("{what} needs from = \"table\" or query = \"SELECT …\""),
                })
            }
        })
    }

    /// `key = […]`: a non-empty list of distinct columns.
    pub(crate) fn key_columns(
        &self,
        key: Option<&Spanned<Vec<Spanned<String>>>>,
    ) -> Result<Option<Vec<String>>, MappingError> {
        Ok(match key {
            None => None,
            Some(k) => {
                let cols: Vec<String> = k.get_ref().iter().map(|c| c.get_ref().clone()).collect();
                if cols.is_empty() {
                    return Err(self.invalid(
                        &k.span(),
                        "key is empty: name the paging key columns".into(),
                    ));
                }
                for (i, c) in k.get_ref().iter().enumerate() {
                    if cols[..i].contains(c.get_ref()) {
                        return Err(self.invalid(
                            &c.span(),
                            format!("key column {:?} is listed twice", c.get_ref()),
                        ));
                    }
                }
                Some(cols)
            }
        })
    }

    /// `exclude = […]` with the place of each column.
    pub(crate) fn exclude(&self, raw: &[Spanned<String>]) -> Vec<(String, Location)> {
        raw.iter()
            .map(|c| (c.get_ref().clone(), self.sm.at(c.span().start)))
            .collect()
    }

    /// An `attributes` table (of an entity, an embed or a pointer); names in
    /// `reserved` (the table's key attributes) are refused.
    pub(crate) fn attributes(
        &self,
        raw: &std::collections::BTreeMap<Spanned<String>, Spanned<RawAttr>>,
        reserved: &[&str],
    ) -> Result<Vec<AttrDef>, MappingError> {
        let key_names = reserved;
        let mut attributes = Vec::with_capacity(raw.len());
        for (attr_name, value) in raw {
            let n = attr_name.get_ref();
            if n.is_empty() {
                return Err(self.invalid(&attr_name.span(), "attribute name is empty".into()));
            }
            if key_names.contains(&n.as_str()) {
                return Err(self.invalid(
                    &attr_name.span(),
                    format!("attribute {n:?} is a key attribute of the table: set it with pk/sk, not in attributes"),
                ));
            }
            let kind = match value.get_ref() {
                RawAttr::Template(t) => AttrKind::Template(self.template(value.span(), t)?),
                RawAttr::Column(c) => AttrKind::Column {
                    column: c.column.get_ref().clone(),
                    at: self.sm.at(c.column.span().start),
                    format: c
                        .format
                        .as_ref()
                        .map(|f| (*f.get_ref(), self.sm.at(f.span().start))),
                    numeric_as: c.numeric_as.unwrap_or_default(),
                    kind: self.attr_type(c)?,
                    invalid: c.invalid,
                },
            };
            attributes.push(AttrDef {
                name: n.clone(),
                kind,
            });
        }
        Ok(attributes)
    }

    /// `read_parallelism = N`, 1..=[`MAX_READ_PARALLELISM`].
    pub(crate) fn read_parallelism(&self, v: &Spanned<i64>) -> Result<u32, MappingError> {
        let n = self.positive(v, "read_parallelism", MAX_READ_PARALLELISM as usize)?;
        Ok(n as u32)
    }

    /// `timezone = "Europe/Paris"`: an IANA zone name.
    pub(crate) fn timezone(&self, v: &Spanned<String>) -> Result<chrono_tz::Tz, MappingError> {
        let name = v.get_ref();
        name.parse().map_err(|_| {
            self.invalid(
                &v.span(),
                format!(
                    "timezone {name:?} is not an IANA time zone name (like \"Europe/Paris\", \"America/New_York\" or \"UTC\")"
                ),
            )
        })
    }

    /// An attribute's `type`, refused beside the options it would contradict.
    pub(crate) fn attr_type(
        &self,
        c: &crate::spec::RawAttrColumn,
    ) -> Result<Option<AttrType>, MappingError> {
        let Some(kind) = &c.kind else {
            return Ok(None);
        };
        let other = match (&c.format, &c.numeric_as) {
            (Some(_), _) => Some("format"),
            (None, Some(_)) => Some("numeric_as"),
            (None, None) => None,
        };
        if let Some(other) = other {
            return Err(self.invalid(
                &kind.span(),
                format!("type and {other} both say how the value is written: keep one"),
            ));
        }
        Ok(Some(*kind.get_ref()))
    }

    /// A pk/sk template, with the checks that need no columns.
    pub(crate) fn key_template(
        &self,
        v: &Spanned<String>,
        attr: &KeyAttr,
    ) -> Result<Template, MappingError> {
        let t = self.template(v.span(), v.get_ref())?;
        if let Some(lit) = t.literal() {
            if lit.is_empty() {
                return Err(self.invalid(
                    &v.span(),
                    format!(
                        "template for key attribute {:?} is empty (DynamoDB forbids empty keys)",
                        attr.name
                    ),
                ));
            }
            if attr.kind == KeyType::N {
                if let Err(e) = normalize_number(&lit) {
                    return Err(self.invalid(
                        &v.span(),
                        format!("key attribute {:?} is of type N: {e}", attr.name),
                    ));
                }
            }
        } else if attr.kind == KeyType::N {
            // Columns with text around them: the text must be able to be
            // part of a number, or no row makes a key.
            let text: String = t
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::Lit(s) => Some(s.as_str()),
                    Part::Col(_) => None,
                })
                .collect();
            if let Some(c) = text
                .chars()
                .find(|c| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
            {
                return Err(self.invalid(
                    &v.span(),
                    format!(
                        "key attribute {:?} is of type N, but template {:?} puts {c:?} in it: no row would make a number (make the attribute type S, or the template only columns and digits)",
                        attr.name, t.text
                    ),
                ));
            }
        }
        Ok(t)
    }

    /// `sk = "…"`: required exactly when the table has a sort key; `who`
    /// (`entity "order"`, `pointer`) names the owner in messages and `header`
    /// is the offset of its table.
    pub(crate) fn sort_key_template(
        &self,
        sk: Option<&Spanned<String>>,
        target: &TargetSpec,
        header: usize,
        who: &str,
    ) -> Result<Option<Template>, MappingError> {
        match (sk, &target.sk) {
            (Some(t), Some(attr)) => Ok(Some(self.key_template(t, attr)?)),
            (None, None) => Ok(None),
            (None, Some(attr)) => Err(MappingError::MissingKey {
                at: self.sm.at(header),
                key: "sk".into(),
                message: format!(
                    "{who} has no sk, but the target table has the sort key {:?}: add sk = \"…\"",
                    attr.name
                ),
            }),
            (Some(t), None) => Err(self.invalid(
                &t.span(),
                "sk is set, but [target] has no sk (the table has no sort key)".into(),
            )),
        }
    }
}
