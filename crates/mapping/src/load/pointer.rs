//! Loading one `[[pointer]]`, checked against the entities and the table's keys.

use serde_spanned::Spanned;

use super::Loader;
use crate::error::MappingError;
use crate::plan::{Entity, Pointer, PointerDef, TargetSpec};
use crate::spec::RawPointer;

impl Loader<'_, '_> {
    /// One `[[pointer]]`, checked against the entities and the table's keys.
    pub(crate) fn pointer(
        &self,
        spanned: &Spanned<RawPointer>,
        target: &TargetSpec,
        entities: &[Entity],
    ) -> Result<Pointer, MappingError> {
        let p = spanned.get_ref();
        let entity = p.entity.get_ref();
        if !entities.iter().any(|e| &e.name == entity) {
            let names: Vec<&str> = entities.iter().map(|e| e.name.as_str()).collect();
            return Err(self.invalid(
                &p.entity.span(),
                format!(
                    "pointer names entity {entity:?}, which the mapping does not define (entities: {})",
                    names.join(", ")
                ),
            ));
        }
        let (value, is_max) = match (&p.max, &p.min) {
            (Some(v), None) => (v, true),
            (None, Some(v)) => (v, false),
            (Some(_), Some(v)) => {
                return Err(self.invalid(&v.span(), "a pointer has max or min, not both".into()))
            }
            (None, None) => {
                return Err(MappingError::MissingKey {
                    at: self.sm.at(spanned.span().start),
                    key: "max".into(),
                    message:
                        "pointer needs max = { attribute = \"…\", column = \"…\" } (or min = …)"
                            .into(),
                })
            }
        };
        let v = value.get_ref();
        let attribute = v.attribute.get_ref().clone();
        let mut reserved: Vec<&str> = target.key_names();
        if attribute.is_empty() || reserved.contains(&attribute.as_str()) {
            return Err(self.invalid(
                &v.attribute.span(),
                format!("{attribute:?} cannot hold the pointer's value: name a non-key attribute"),
            ));
        }
        reserved.push(&attribute);
        let attributes = self.attributes(&p.attributes, &reserved)?;
        let pk = self.key_template(&p.pk, &target.pk)?;
        let sk = self.sort_key_template(p.sk.as_ref(), target, spanned.span().start, "pointer")?;
        let name = match &p.name {
            Some(n) if n.get_ref().trim().is_empty() => {
                return Err(self.invalid(&n.span(), "pointer name is empty".into()))
            }
            Some(n) => n.get_ref().clone(),
            None => match &sk {
                Some(sk) if sk.text != pk.text => format!("{}/{}", pk.text, sk.text),
                _ => pk.text.clone(),
            },
        };
        Ok(Pointer {
            name,
            entity: entity.clone(),
            attribute,
            column: v.column.get_ref().clone(),
            is_max,
            def: PointerDef {
                at: self.sm.at(spanned.span().start),
                pk,
                sk,
                column_at: self.sm.at(v.column.span().start),
                format: v.format.as_ref().map(|f| *f.get_ref()).unwrap_or_default(),
                attributes,
            },
        })
    }
}
