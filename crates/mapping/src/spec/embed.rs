//! The raw `[[entity.embed]]` shape, nested to any depth.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_spanned::Spanned;

use super::shared::{Nulls, RawAttr};

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an [[entity.embed]] table with name, from and parent_key"
)]
pub(crate) struct RawEmbed {
    pub name: Spanned<String>,
    pub from: Option<Spanned<String>>,
    pub query: Option<Spanned<String>>,
    pub parent_key: Spanned<Vec<Spanned<String>>>,
    pub key: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub order_by: Vec<Spanned<String>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<String>>,
    #[serde(rename = "as")]
    pub shape: Option<Spanned<EmbedAs>>,
    pub map_key: Option<Spanned<String>>,
    pub nulls: Option<Nulls>,
    #[serde(default)]
    pub attributes: BTreeMap<Spanned<String>, Spanned<RawAttr>>,
    #[serde(default)]
    pub embed: Vec<Spanned<RawEmbed>>,
}

/// `as = "list" | "map"`.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EmbedAs {
    #[default]
    List,
    Map,
}
