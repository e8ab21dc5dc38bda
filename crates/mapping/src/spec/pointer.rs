//! The raw `[[pointer]]` shape.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_spanned::Spanned;

use super::shared::{RawAttr, TimeFormat};

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a [[pointer]] table with entity, pk and max or min"
)]
pub(crate) struct RawPointer {
    pub name: Option<Spanned<String>>,
    pub entity: Spanned<String>,
    pub pk: Spanned<String>,
    pub sk: Option<Spanned<String>>,
    pub max: Option<Spanned<RawPointerValue>>,
    pub min: Option<Spanned<RawPointerValue>>,
    #[serde(default)]
    pub attributes: BTreeMap<Spanned<String>, Spanned<RawAttr>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { attribute = \"orderId\", column = \"order_id\" }"
)]
pub(crate) struct RawPointerValue {
    pub attribute: Spanned<String>,
    pub column: Spanned<String>,
    pub format: Option<Spanned<TimeFormat>>,
}
