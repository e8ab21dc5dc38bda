//! The mapping file exactly as written: serde structs with spans, no validation
//! beyond types. The loader (`load`) turns them into a [`crate::Plan`].

mod embed;
mod gsi;
mod pointer;
mod shared;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_spanned::Spanned;

pub(crate) use embed::{EmbedAs, RawEmbed};
pub(crate) use gsi::{RawBilling, RawGsi, RawProjection};
pub(crate) use pointer::RawPointer;
pub(crate) use shared::{
    AttrType, Invalid, KeyType, Nulls, NumericAs, RawAttr, RawAttrColumn, RawKey, TimeFormat,
};

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping spec (version, [source], [target], [[entity]], [[pointer]])"
)]
pub(crate) struct RawSpec {
    pub version: Spanned<i64>,
    pub source: RawSource,
    pub target: RawTarget,
    pub writer: Option<RawWriter>,
    #[serde(default)]
    pub entity: Vec<Spanned<RawEntity>>,
    #[serde(default)]
    pub pointer: Vec<Spanned<RawPointer>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [source] table with url")]
pub(crate) struct RawSource {
    pub url: Spanned<String>,
    pub page_size: Option<Spanned<i64>>,
    pub read_parallelism: Option<Spanned<i64>>,
    pub timezone: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [target] table with table and pk")]
pub(crate) struct RawTarget {
    pub table: Spanned<String>,
    pub endpoint: Option<Spanned<String>>,
    pub region: Option<Spanned<String>>,
    #[serde(default)]
    pub create: bool,
    pub pk: Spanned<RawKey>,
    pub sk: Option<Spanned<RawKey>>,
    #[serde(default)]
    pub gsi: Vec<Spanned<RawGsi>>,
    pub billing: Option<Spanned<RawBilling>>,
}
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [writer] table")]
pub(crate) struct RawWriter {
    pub concurrency: Option<Spanned<i64>>,
    pub adaptive: Option<bool>,
    pub max_wcu: Option<Spanned<i64>>,
    pub max_attempts: Option<Spanned<i64>>,
    pub retry_seconds: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [[entity]] table")]
pub(crate) struct RawEntity {
    pub name: Spanned<String>,
    pub from: Option<Spanned<String>>,
    pub query: Option<Spanned<String>>,
    pub key: Option<Spanned<Vec<Spanned<String>>>>,
    pub page_size: Option<Spanned<i64>>,
    pub pk: Spanned<String>,
    pub sk: Option<Spanned<String>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<String>>,
    pub nulls: Option<Nulls>,
    pub invalid: Option<Invalid>,
    pub read_parallelism: Option<Spanned<i64>>,
    /// `overwrite = true`: several rows may map to one item, last write wins.
    #[serde(default)]
    pub overwrite: bool,
    #[serde(default)]
    pub attributes: BTreeMap<Spanned<String>, Spanned<RawAttr>>,
    #[serde(default)]
    pub embed: Vec<Spanned<RawEmbed>>,
}
