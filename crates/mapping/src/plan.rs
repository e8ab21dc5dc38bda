//! The validated mapping: [`Plan`] and its parts, built once from the TOML text.

mod embed;
mod gsi;
mod pointer;
mod shared;

use std::fmt;

use sql2ddb_core::{redact_url, KeyAttr};

pub use embed::Embed;
pub(crate) use embed::EmbedDef;
pub(crate) use gsi::MAX_PROJECTED_ATTRIBUTES;
pub use gsi::{Billing, Gsi, Projection, MAX_GSIS};
pub use pointer::Pointer;
pub(crate) use pointer::PointerDef;
pub use shared::EntitySource;
pub(crate) use shared::{AttrDef, AttrKind};

use crate::error::Location;
use crate::spec::{Invalid, Nulls};
use crate::template::Template;

/// Rows per keyset page when neither the source nor the entity says.
pub const DEFAULT_PAGE_SIZE: usize = 5000;
/// Concurrent writer tasks when `[writer]` does not say.
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Calls per 25-item chunk before its items fail, when `[writer]` does not say.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 12;
/// Most concurrent writer tasks a mapping may ask for.
pub const MAX_CONCURRENCY: usize = 256;
/// Most concurrent segments an entity may be read with (`read_parallelism`).
pub const MAX_READ_PARALLELISM: u32 = 64;
/// Highest write-units-per-second cap (`max_wcu`) a mapping may ask for.
pub const MAX_WCU: u64 = 1_000_000_000;
/// The only mapping spec version.
pub const SPEC_VERSION: i64 = 1;

/// A validated mapping spec: where to read, where to write, and how each entity maps.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `[source]`.
    pub source: SourceSpec,
    /// `[target]`.
    pub target: TargetSpec,
    /// `[writer]`, with defaults filled in.
    pub writer: WriterSpec,
    /// `[[entity]]`, in file order.
    pub entities: Vec<Entity>,
    /// `[[pointer]]`, in file order.
    pub(crate) pointers: Vec<Pointer>,
    pub(crate) file: String,
}

/// `[source]`: the SQL database to read.
#[derive(Clone)]
pub struct SourceSpec {
    /// Connection URL, `${VAR}` expanded. A secret: never print it unredacted.
    pub url: String,
    /// Rows per keyset page (default 5000).
    pub page_size: usize,
    /// `read_parallelism`: segments each entity's key range is cut into and
    /// read concurrently, 1..=64; `None` lets the reader choose from the
    /// table's size.
    pub read_parallelism: Option<u32>,
    /// `timezone`: the IANA zone that zone-less timestamps (`DATETIME`,
    /// `timestamp without time zone`) are taken in before they are written as
    /// UTC; `None` = they already are UTC.
    pub timezone: Option<chrono_tz::Tz>,
}

impl fmt::Debug for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceSpec")
            .field("url", &redact_url(&self.url))
            .field("page_size", &self.page_size)
            .field("read_parallelism", &self.read_parallelism)
            .field("timezone", &self.timezone)
            .finish()
    }
}

/// `[target]`: the DynamoDB table to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// Table name, `${VAR}` expanded.
    pub table: String,
    /// `"local"` for the embedded emulator, or an endpoint URL; `None` for AWS.
    pub endpoint: Option<String>,
    /// AWS region; `None` for the environment's default.
    pub region: Option<String>,
    /// Create the table when it is missing.
    pub create: bool,
    /// Partition key.
    pub pk: KeyAttr,
    /// Sort key, if the table has one.
    pub sk: Option<KeyAttr>,
    /// `[[target.gsi]]`: global secondary indexes, in file order.
    pub gsis: Vec<Gsi>,
    /// `billing`: how a created table is billed (default on-demand).
    pub billing: Billing,
}

/// `[writer]`: how the items are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterSpec {
    /// Most `BatchWriteItem` calls in flight, 1..=256 (default 8).
    pub concurrency: usize,
    /// Whether concurrency adapts to throttling (additive increase,
    /// multiplicative decrease within `[1, concurrency]`); `false` keeps it
    /// fixed. Default `true`.
    pub adaptive: bool,
    /// Cap on write units per second for this process (`max_wcu`), counted
    /// as DynamoDB bills them; `None` = no cap.
    pub max_wcu: Option<u64>,
    /// Calls that wrote nothing, failed for a reason other than throttling
    /// (5xx, timeouts), before an item fails (`max_attempts`, default 12);
    /// throttling never counts as an attempt.
    pub max_attempts: u32,
    /// The retry budget in seconds (`retry_seconds`): how long an item the
    /// table throttles is retried, from its first call; `None` = the
    /// default (ten minutes), unless `--retry-budget` says otherwise.
    pub retry_seconds: Option<u64>,
}

/// One `[[entity]]`: a source table or query and how its rows become items.
#[derive(Debug, Clone)]
pub struct Entity {
    /// Unique entity name.
    pub name: String,
    /// Table or query.
    pub from: EntitySource,
    /// Keyset paging key columns, when the mapping names them.
    pub key: Option<Vec<String>>,
    /// Rows per page for this entity, when it overrides `[source]`.
    pub page_size: Option<usize>,
    /// Concurrent segments for this entity, when it overrides `[source]`.
    pub read_parallelism: Option<u32>,
    /// `overwrite = true`: the user accepts that several rows map to one
    /// item (last write wins). Without it, `run` refuses key templates that
    /// can collapse distinct rows onto one key.
    pub overwrite: bool,
    pub(crate) def: EntityDef,
    /// `[[entity.embed]]`: child rows nested into each item.
    pub(crate) embeds: Vec<Embed>,
}

/// The parts of an entity only binding needs.
#[derive(Debug, Clone)]
pub(crate) struct EntityDef {
    /// The `[[entity]]` header.
    pub at: Location,
    /// The `key = […]` value.
    pub key_at: Option<Location>,
    pub pk: Template,
    pub sk: Option<Template>,
    pub exclude: Vec<(String, Location)>,
    pub nulls: Nulls,
    /// `invalid`: the default of the entity's attributes.
    pub invalid: Invalid,
    pub attributes: Vec<AttrDef>,
}

impl Plan {
    /// The target table's key attributes: partition key, then sort key.
    pub fn key_attrs(&self) -> Vec<KeyAttr> {
        std::iter::once(self.target.pk.clone())
            .chain(self.target.sk.clone())
            .collect()
    }

    /// The entity of that name.
    pub fn entity(&self, name: &str) -> Option<&Entity> {
        self.entities.iter().find(|e| e.name == name)
    }

    /// The mapping file's name, as given to [`Plan::parse`].
    pub fn file(&self) -> &str {
        &self.file
    }

    /// `[[pointer]]` items, in file order; bind each with [`Pointer::bind`].
    pub fn pointers(&self) -> &[Pointer] {
        &self.pointers
    }
}

impl TargetSpec {
    /// The names of the table's key attributes: partition key, then sort key.
    pub(crate) fn key_names(&self) -> Vec<&str> {
        std::iter::once(self.pk.name.as_str())
            .chain(self.sk.as_ref().map(|s| s.name.as_str()))
            .collect()
    }
}

impl Entity {
    /// Rows per keyset page: the entity's own, else the source's.
    pub fn page_size(&self, plan: &Plan) -> usize {
        self.page_size.unwrap_or(plan.source.page_size)
    }

    /// Concurrent read segments: the entity's own, else the source's; `None`
    /// when neither says (the reader then chooses from the table's size).
    pub fn read_parallelism(&self, plan: &Plan) -> Option<u32> {
        self.read_parallelism.or(plan.source.read_parallelism)
    }

    /// The partition key template as written.
    pub fn pk_template(&self) -> &str {
        &self.def.pk.text
    }

    /// The sort key template as written, if any.
    pub fn sk_template(&self) -> Option<&str> {
        self.def.sk.as_ref().map(|t| t.text.as_str())
    }

    /// Each column the item key templates put into a key attribute of type
    /// N, as (attribute, column, where the placeholder is): a row whose
    /// value there is not a number makes no key.
    pub fn numeric_key_columns(&self, plan: &Plan) -> Vec<(String, String, Location)> {
        let keys = [(&plan.target.pk, Some(&self.def.pk))]
            .into_iter()
            .chain(plan.target.sk.as_ref().map(|k| (k, self.def.sk.as_ref())));
        keys.filter(|(attr, _)| attr.kind == crate::spec::KeyType::N)
            .filter_map(|(attr, t)| Some((attr, t?)))
            .flat_map(|(attr, t)| {
                t.placeholders()
                    .map(|p| (attr.name.clone(), p.column.clone(), p.at.clone()))
            })
            .collect()
    }

    /// Where the entity's `[[entity]]` header is in the mapping file.
    pub fn location(&self) -> &Location {
        &self.def.at
    }

    /// Columns left out of the items (and of reject files).
    pub fn excluded(&self) -> impl Iterator<Item = &str> {
        self.def.exclude.iter().map(|(c, _)| c.as_str())
    }

    /// `[[entity.embed]]`: what to read for each page of this entity's rows,
    /// in file order (bind them with [`Entity::bind_with_children`]).
    pub fn embeds(&self) -> &[Embed] {
        &self.embeds
    }
}
