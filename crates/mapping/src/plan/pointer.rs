//! `[[pointer]]`: an item at a fixed key holding the largest (or smallest)
//! value of a column written so far, such as `LAST_ORDER`. The mapping picks
//! each batch's candidate; the writer moves the pointer with one conditional
//! write (see [`PointerUpdate`](sql2ddb_core::PointerUpdate)).

use super::shared::AttrDef;
use crate::error::Location;
use crate::spec::TimeFormat;
use crate::template::Template;

/// One `[[pointer]]`, bound to its entity's columns with [`Pointer::bind`].
#[derive(Debug, Clone)]
pub struct Pointer {
    /// Label in reports: `name`, else the key as written (`LAST_ORDER`).
    pub name: String,
    /// The entity whose written rows move the pointer.
    pub entity: String,
    /// The attribute holding the value.
    pub attribute: String,
    /// The column the value comes from.
    pub column: String,
    /// `max` (`true`) or `min`.
    pub is_max: bool,
    pub(crate) def: PointerDef,
}

#[derive(Debug, Clone)]
pub(crate) struct PointerDef {
    pub at: Location,
    pub pk: Template,
    pub sk: Option<Template>,
    pub column_at: Location,
    pub format: TimeFormat,
    pub attributes: Vec<AttrDef>,
}

impl Pointer {
    /// The partition key template as written.
    pub fn pk_template(&self) -> &str {
        &self.def.pk.text
    }

    /// The sort key template as written, if any.
    pub fn sk_template(&self) -> Option<&str> {
        self.def.sk.as_ref().map(|t| t.text.as_str())
    }

    pub(crate) fn templates(&self) -> (&Template, Option<&Template>) {
        (&self.def.pk, self.def.sk.as_ref())
    }
}
