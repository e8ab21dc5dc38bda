//! The validated mapping: [`Plan`] and its parts, built once from the TOML text.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde_spanned::Spanned;
use sql2ddb_core::{redact_url, KeyAttr};

use crate::embed::Embed;
use crate::env::{expand, ExpandError};
use crate::error::{Location, MappingError, SourceMap};
use crate::gsi::{Billing, Gsi};
use crate::pointer::Pointer;
use crate::spec::{AttrType, Invalid, Nulls, NumericAs, RawSpec, TimeFormat};
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
    file: String,
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
    /// Calls per 25-item chunk before its items fail (`max_attempts`, default 12).
    pub max_attempts: u32,
    /// Time budget of a chunk's retries in seconds (`retry_seconds`); `None` = attempts only.
    pub retry_seconds: Option<u64>,
}

/// Where an entity's rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntitySource {
    /// `from = "table"` or `"schema.table"`, as written.
    Table(String),
    /// `query = "SELECT …"`.
    Query(String),
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

/// One `[entity.attributes]` entry.
#[derive(Debug, Clone)]
pub(crate) struct AttrDef {
    pub name: String,
    pub kind: AttrKind,
}

#[derive(Debug, Clone)]
pub(crate) enum AttrKind {
    Template(Template),
    Column {
        column: String,
        at: Location,
        format: Option<(TimeFormat, Location)>,
        numeric_as: NumericAs,
        /// `type`: the DynamoDB type to write, whatever the column's.
        kind: Option<AttrType>,
        /// `invalid`; `None` takes the entity's.
        invalid: Option<Invalid>,
    },
}

impl Plan {
    /// Parses and validates a mapping spec.
    ///
    /// `file` is only used in messages; `env` looks up environment variables for `${VAR}`.
    pub fn parse(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, MappingError> {
        let sm = SourceMap::new(&file.display().to_string(), text);
        let raw: RawSpec = toml::from_str(text).map_err(|e| sm.toml_error(&e))?;
        Loader { sm: &sm, env }.plan(raw)
    }

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

pub(crate) struct Loader<'a, 'e> {
    pub(crate) sm: &'a SourceMap<'a>,
    env: &'e dyn Fn(&str) -> Option<String>,
}

impl Loader<'_, '_> {
    pub(crate) fn invalid(&self, span: &Range<usize>, message: String) -> MappingError {
        MappingError::Invalid {
            at: self.sm.at(span.start),
            message,
        }
    }

    fn expand(&self, v: &Spanned<String>) -> Result<String, MappingError> {
        expand(v.get_ref(), self.env).map_err(|e| match e {
            ExpandError::Missing { offset, var } => MappingError::Env {
                at: self.sm.at_in_string(&v.span(), v.get_ref(), offset),
                var,
            },
            ExpandError::Syntax { offset, message } => MappingError::Invalid {
                at: self.sm.at_in_string(&v.span(), v.get_ref(), offset),
                message,
            },
        })
    }

    pub(crate) fn template(
        &self,
        span: Range<usize>,
        text: &str,
    ) -> Result<Template, MappingError> {
        Template::parse(text, &|i| self.sm.at_in_string(&span, text, i)).map_err(|e| {
            MappingError::Template {
                at: self.sm.at_in_string(&span, text, e.offset),
                template: text.to_string(),
                message: e.message,
            }
        })
    }

    pub(crate) fn positive(
        &self,
        v: &Spanned<i64>,
        what: &str,
        max: usize,
    ) -> Result<usize, MappingError> {
        let n = *v.get_ref();
        usize::try_from(n)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| self.invalid(&v.span(), format!("{what} must be 1..={max}, not {n}")))
    }

    fn plan(&self, raw: RawSpec) -> Result<Plan, MappingError> {
        if *raw.version.get_ref() != SPEC_VERSION {
            return Err(self.invalid(
                &raw.version.span(),
                format!(
                    "unsupported mapping version {} (this sql2ddb reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        let url = self.expand(&raw.source.url)?;
        if url.trim().is_empty() {
            return Err(self.invalid(&raw.source.url.span(), "source.url is empty".into()));
        }
        let page_size = match &raw.source.page_size {
            Some(p) => self.positive(p, "page_size", usize::MAX)?,
            None => DEFAULT_PAGE_SIZE,
        };
        let read_parallelism = raw
            .source
            .read_parallelism
            .as_ref()
            .map(|p| self.read_parallelism(p))
            .transpose()?;
        let timezone = raw
            .source
            .timezone
            .as_ref()
            .map(|z| self.timezone(z))
            .transpose()?;
        let target = self.target(&raw)?;
        let concurrency = match raw.writer.as_ref().and_then(|w| w.concurrency.as_ref()) {
            Some(c) => self.positive(c, "writer.concurrency", MAX_CONCURRENCY)?,
            None => DEFAULT_CONCURRENCY,
        };
        let w = raw.writer.as_ref();
        let max_wcu = match w.and_then(|w| w.max_wcu.as_ref()) {
            Some(v) => Some(self.positive(v, "writer.max_wcu", MAX_WCU as usize)? as u64),
            None => None,
        };
        let max_attempts = match w.and_then(|w| w.max_attempts.as_ref()) {
            Some(v) => self.positive(v, "writer.max_attempts", 1000)? as u32,
            None => DEFAULT_MAX_ATTEMPTS,
        };
        let retry_seconds = match w.and_then(|w| w.retry_seconds.as_ref()) {
            Some(v) => Some(self.positive(v, "writer.retry_seconds", 86_400)? as u64),
            None => None,
        };
        let writer = WriterSpec {
            concurrency,
            adaptive: w.and_then(|w| w.adaptive).unwrap_or(true),
            max_wcu,
            max_attempts,
            retry_seconds,
        };
        if raw.entity.is_empty() {
            return Err(MappingError::MissingKey {
                at: self.sm.at(0),
                key: "entity".into(),
                message: "the mapping has no [[entity]]: add one per table or query to copy".into(),
            });
        }
        let mut seen: HashMap<String, Location> = HashMap::new();
        let mut entities = Vec::with_capacity(raw.entity.len());
        for e in &raw.entity {
            let entity = self.entity(e, &target)?;
            let name = &e.get_ref().name;
            if let Some(first) = seen.get(&entity.name) {
                return Err(self.invalid(
                    &name.span(),
                    format!(
                        "duplicate entity name {:?} (first defined at line {})",
                        entity.name, first.line
                    ),
                ));
            }
            seen.insert(entity.name.clone(), self.sm.at(name.span().start));
            entities.push(entity);
        }
        let pointers = raw
            .pointer
            .iter()
            .map(|p| self.pointer(p, &target, &entities))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            source: SourceSpec {
                url,
                page_size,
                read_parallelism,
                timezone,
            },
            target,
            writer,
            entities,
            pointers,
            file: self.sm.file().to_string(),
        })
    }

    fn target(&self, raw: &RawSpec) -> Result<TargetSpec, MappingError> {
        let t = &raw.target;
        let table = self.expand(&t.table)?;
        let valid = (3..=255).contains(&table.len())
            && table
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !valid {
            return Err(self.invalid(
                &t.table.span(),
                format!(
                    "{table:?} is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, _ . -)"
                ),
            ));
        }
        let endpoint = t.endpoint.as_ref().map(|e| self.expand(e)).transpose()?;
        if let (Some(ep), Some(raw_ep)) = (&endpoint, &t.endpoint) {
            if ep != "local" && !ep.starts_with("http://") && !ep.starts_with("https://") {
                return Err(self.invalid(
                    &raw_ep.span(),
                    format!("endpoint {ep:?} must be \"local\" or an http:// or https:// URL"),
                ));
            }
        }
        let region = t.region.as_ref().map(|r| self.expand(r)).transpose()?;
        if let (Some(r), Some(raw_r)) = (&region, &t.region) {
            if r.trim().is_empty() {
                return Err(self.invalid(&raw_r.span(), "region is empty".into()));
            }
        }
        let key = |k: &Spanned<crate::spec::RawKey>| -> Result<KeyAttr, MappingError> {
            let k = k.get_ref();
            if k.name.get_ref().is_empty() {
                return Err(self.invalid(&k.name.span(), "key attribute name is empty".into()));
            }
            Ok(KeyAttr {
                name: k.name.get_ref().clone(),
                kind: k.kind,
            })
        };
        let pk = key(&t.pk)?;
        let sk = t.sk.as_ref().map(key).transpose()?;
        if let (Some(sk), Some(raw_sk)) = (&sk, &t.sk) {
            if sk.name == pk.name {
                return Err(self.invalid(
                    &raw_sk.get_ref().name.span(),
                    format!("sort key and partition key are both named {:?}", pk.name),
                ));
            }
        }
        let gsis = self.gsis(&t.gsi, &pk, sk.as_ref())?;
        let billing = self.billing(t.billing.as_ref())?;
        Ok(TargetSpec {
            table,
            endpoint,
            region,
            create: t.create,
            pk,
            sk,
            gsis,
            billing,
        })
    }
}
