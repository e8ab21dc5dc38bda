//! Loading the TOML spec into a [`Plan`]: `[source]`, `[target]`, `[writer]`
//! and the list of entities (each entity, embed, pointer and the indexes in
//! its own module).

mod embed;
mod entity;
mod gsi;
mod pointer;

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use serde_spanned::Spanned;
use sql2ddb_core::KeyAttr;

use crate::env::{expand, ExpandError};
use crate::error::{Location, MappingError, SourceMap};
use crate::plan::{
    Entity, Plan, SourceSpec, TargetSpec, WriterSpec, DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PAGE_SIZE, MAX_CONCURRENCY, MAX_WCU, SPEC_VERSION,
};
use crate::spec::RawSpec;
use crate::template::Template;

impl Plan {
    /// Parses and validates a mapping spec.
    ///
    /// `file` is only used in messages; `env` looks up environment variables for `${VAR}`.
    pub fn parse(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Plan, MappingError> {
        Plan::parse_with_source(text, file, env, None)
    }

    /// As [`Plan::parse`], with the source URL given on the command line
    /// (`--source`) in place of the spec's `[source] url`: that field is
    /// then not expanded, so a `${DATABASE_URL}` that is not set is no error.
    pub fn parse_with_source(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        source_url: Option<&str>,
    ) -> Result<Plan, MappingError> {
        let sm = SourceMap::new(&file.display().to_string(), text);
        let raw: RawSpec = toml::from_str(text).map_err(|e| sm.toml_error(&e))?;
        let mut loader = Loader::new(&sm, env);
        loader.source_url = source_url.map(str::to_string);
        loader.plan(raw)
    }

    /// Parses and validates a mapping spec as [`Plan::parse`] does, except
    /// that a `${VAR}` that is not set (and has no default) does not stop
    /// it: it stands for a placeholder, and each one comes back as a
    /// [`MappingError::Env`] beside the plan (or, when the spec is invalid
    /// besides, beside the first error). For checks that connect to nothing.
    #[allow(clippy::type_complexity)]
    pub fn parse_without_env(
        text: &str,
        file: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> (Result<Plan, MappingError>, Vec<MappingError>) {
        let sm = SourceMap::new(&file.display().to_string(), text);
        let raw: RawSpec = match toml::from_str(text) {
            Ok(raw) => raw,
            Err(e) => return (Err(sm.toml_error(&e)), Vec::new()),
        };
        let loader = Loader::lenient(&sm, env);
        let plan = loader.plan(raw);
        (plan, loader.take_unset())
    }
}

pub(crate) struct Loader<'a, 'e> {
    pub(crate) sm: &'a SourceMap<'a>,
    env: &'e dyn Fn(&str) -> Option<String>,
    /// When set, a `${VAR}` that is not set stands for a placeholder and
    /// is recorded here instead of failing the load (`check`, which
    /// connects to nothing, needs no variable).
    unset: Option<std::cell::RefCell<Vec<MappingError>>>,
    /// The source URL given in place of the spec's (`--source`).
    source_url: Option<String>,
}

impl<'a, 'e> Loader<'a, 'e> {
    pub(crate) fn new(sm: &'a SourceMap<'a>, env: &'e dyn Fn(&str) -> Option<String>) -> Self {
        Loader {
            sm,
            env,
            unset: None,
            source_url: None,
        }
    }

    /// A loader that records unset variables rather than failing on them.
    pub(crate) fn lenient(sm: &'a SourceMap<'a>, env: &'e dyn Fn(&str) -> Option<String>) -> Self {
        Loader {
            sm,
            env,
            unset: Some(Default::default()),
            source_url: None,
        }
    }

    /// The unset variables met so far, each with its place.
    pub(crate) fn take_unset(&self) -> Vec<MappingError> {
        self.unset.as_ref().map(|u| u.take()).unwrap_or_default()
    }
}

impl Loader<'_, '_> {
    pub(crate) fn invalid(&self, span: &Range<usize>, message: String) -> MappingError {
        MappingError::Invalid {
            at: self.sm.at(span.start),
            message,
        }
    }

    pub(crate) fn expand(&self, v: &Spanned<String>) -> Result<String, MappingError> {
        self.expand_as(v, "unset")
    }

    /// As [`Loader::expand`]; a lenient loader puts `placeholder` (a value
    /// the field's own checks accept) for each variable that is not set.
    pub(crate) fn expand_as(
        &self,
        v: &Spanned<String>,
        placeholder: &str,
    ) -> Result<String, MappingError> {
        let env = |name: &str| {
            let value = (self.env)(name);
            // Only `${VAR}` itself: `${VAR:-default}` takes its default.
            let bare = v.get_ref().find(&format!("${{{name}}}"));
            match (&value, &self.unset, bare) {
                (None, Some(unset), Some(offset)) => {
                    unset.borrow_mut().push(MappingError::Env {
                        at: self.sm.at_in_string(&v.span(), v.get_ref(), offset),
                        var: name.to_string(),
                    });
                    Some(placeholder.to_string())
                }
                _ => value,
            }
        };
        expand(v.get_ref(), &env).map_err(|e| match e {
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

    /// The whole spec, validated.
    pub(crate) fn plan(&self, raw: RawSpec) -> Result<Plan, MappingError> {
        if *raw.version.get_ref() != SPEC_VERSION {
            return Err(self.invalid(
                &raw.version.span(),
                format!(
                    "unsupported mapping version {} (this sql2ddb reads version 1)",
                    raw.version.get_ref()
                ),
            ));
        }
        let source = self.source_spec(&raw)?;
        let target = self.target(&raw)?;
        let writer = self.writer(&raw)?;
        let entities = self.entities(&raw, &target)?;
        let pointers = raw
            .pointer
            .iter()
            .map(|p| self.pointer(p, &target, &entities))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            source,
            target,
            writer,
            entities,
            pointers,
            file: self.sm.file().to_string(),
        })
    }

    /// `[source]`.
    fn source_spec(&self, raw: &RawSpec) -> Result<SourceSpec, MappingError> {
        let url = match &self.source_url {
            Some(url) => url.clone(),
            None => self.expand(&raw.source.url)?,
        };
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
        Ok(SourceSpec {
            url,
            page_size,
            read_parallelism,
            timezone,
        })
    }

    /// `[writer]`, defaults filled in.
    fn writer(&self, raw: &RawSpec) -> Result<WriterSpec, MappingError> {
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
        Ok(WriterSpec {
            concurrency,
            adaptive: w.and_then(|w| w.adaptive).unwrap_or(true),
            max_wcu,
            max_attempts,
            retry_seconds,
        })
    }

    /// `[[entity]]`: at least one, names unique.
    fn entities(&self, raw: &RawSpec, target: &TargetSpec) -> Result<Vec<Entity>, MappingError> {
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
            let entity = self.entity(e, target)?;
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
        Ok(entities)
    }

    fn target(&self, raw: &RawSpec) -> Result<TargetSpec, MappingError> {
        let t = &raw.target;
        let table = self.expand_as(&t.table, "unset")?;
        if !is_table_or_index_name(&table) {
            return Err(self.invalid(
                &t.table.span(),
                format!(
                    "{table:?} is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, _ . -)"
                ),
            ));
        }
        let endpoint = t
            .endpoint
            .as_ref()
            .map(|e| self.expand_as(e, "http://unset.invalid"))
            .transpose()?;
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

/// DynamoDB's rule for table and index names: 3 to 255 of a-z, A-Z, 0-9, `_ . -`.
pub(crate) fn is_table_or_index_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}
