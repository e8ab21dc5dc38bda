//! Loading an update job's TOML into an [`UpdateJob`]: the file as written
//! (serde structs with spans), then each part validated, placeholders
//! checked against their uses.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_spanned::Spanned;
use sql2ddb_core::KeyAttr;

use super::expr::{self, tokens, update_shape, Uses};
use super::{
    values, JobAction, JobMode, JobRead, JobTarget, UpdateJob, Used, DEFAULT_SEGMENTS, JOB_VERSION,
    MAX_PAGE_SIZE, MAX_SEGMENTS, RESERVED_PREFIX,
};
use crate::error::{MappingError, SourceMap};
use crate::load::{is_table_or_index_name, Loader};
use crate::spec::RawKey;

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an update job (version, [target], [update])"
)]
struct RawJob {
    version: Spanned<i64>,
    target: RawJobTarget,
    update: RawUpdate,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [target] table with table")]
struct RawJobTarget {
    table: Spanned<String>,
    endpoint: Option<Spanned<String>>,
    region: Option<Spanned<String>>,
    pk: Option<Spanned<RawKey>>,
    sk: Option<Spanned<RawKey>>,
}

type RawNames = BTreeMap<Spanned<String>, Spanned<String>>;
type RawValues = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "an [update] table with name")]
struct RawUpdate {
    name: Spanned<String>,
    scan: Option<Spanned<RawScan>>,
    query: Option<Spanned<RawQuery>>,
    #[serde(rename = "where")]
    filter: Option<Spanned<String>>,
    set: Option<Spanned<String>>,
    delete: Option<Spanned<bool>>,
    page_size: Option<Spanned<i64>>,
    mode: Option<Spanned<String>>,
    #[serde(default)]
    names: RawNames,
    #[serde(default)]
    values: RawValues,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table like { segments = 8 }")]
struct RawScan {
    segments: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { index = \"GSI1\", key = \"GSI1PK = :s\", values = { … } }"
)]
struct RawQuery {
    index: Spanned<String>,
    key: Spanned<String>,
    #[serde(default)]
    names: RawNames,
    #[serde(default)]
    values: RawValues,
}

/// Parses and validates an update job. `file` is only used in messages;
/// `env` looks up `${VAR}`s (in `[target]`, `name` and string `values`).
pub(super) fn parse(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<UpdateJob, MappingError> {
    let sm = SourceMap::new(&file.display().to_string(), text);
    let raw: RawJob = toml::from_str(text).map_err(|e| sm.toml_error(&e))?;
    let l = Loader::new(&sm, env);
    if *raw.version.get_ref() != JOB_VERSION {
        return Err(l.invalid(
            &raw.version.span(),
            format!(
                "unsupported update job version {} (this sql2ddb reads version 1)",
                raw.version.get_ref()
            ),
        ));
    }
    let target = job_target(&l, &raw.target)?;
    let u = &raw.update;
    let name = l.expand(&u.name)?;
    if name.trim().is_empty() {
        return Err(l.invalid(&u.name.span(), "update.name is empty".into()));
    }
    let page_size = u
        .page_size
        .as_ref()
        .map(|p| l.positive(p, "update.page_size", MAX_PAGE_SIZE))
        .transpose()?;
    let mut job = UpdateJob {
        name,
        target,
        read: JobRead::Scan {
            segments: DEFAULT_SEGMENTS,
        },
        page_size,
        filter: None,
        action: JobAction::Delete,
        names: BTreeMap::new(),
        values: BTreeMap::new(),
        file: sm.file().to_string(),
        filter_uses: Used::default(),
        key_uses: Used::default(),
        set_uses: Used::default(),
        targets: Vec::new(),
        index_at: None,
        set_end: None,
        mode: JobMode::UpdateItem,
        puts: Vec::new(),
    };
    job.read(&l, u)?;
    job.action(&l, u)?;
    if let Some(w) = &u.filter {
        let (uses, toks) = expression(&l, w, "where")?;
        check_reserved(&l, w, "where", &toks)?;
        job.filter_uses = uses;
        job.filter = Some(w.get_ref().clone());
    }
    let mut names: Vec<&RawNames> = vec![&u.names];
    let mut values: Vec<&RawValues> = vec![&u.values];
    if let Some(q) = &u.query {
        names.push(&q.get_ref().names);
        values.push(&q.get_ref().values);
    }
    job.placeholders(&l, &names, &values)?;
    if let Some(mode) = &u.mode {
        job.mode(&l, mode, u.set.as_ref())?;
    }
    let keys: Vec<String> = job.target.keys.iter().map(|k| k.name.clone()).collect();
    job.check_keys(&keys)?;
    Ok(job)
}

impl UpdateJob {
    /// `scan` or `query` (not both).
    fn read(&mut self, l: &Loader, u: &RawUpdate) -> Result<(), MappingError> {
        match (&u.scan, &u.query) {
            (Some(_), Some(q)) => {
                Err(l.invalid(&q.span(), "give either scan or query, not both".into()))
            }
            (Some(s), None) => {
                let segments = match &s.get_ref().segments {
                    Some(n) => l.positive(n, "scan.segments", MAX_SEGMENTS as usize)? as u32,
                    None => DEFAULT_SEGMENTS,
                };
                self.read = JobRead::Scan { segments };
                Ok(())
            }
            (None, Some(q)) => {
                let q = q.get_ref();
                let index = q.index.get_ref().clone();
                if !is_table_or_index_name(&index) {
                    return Err(l.invalid(
                        &q.index.span(),
                        format!("query.index {index:?} is not an index name (3 to 255 of a-z, A-Z, 0-9, _ . -)"),
                    ));
                }
                let (uses, toks) = expression(l, &q.key, "query.key")?;
                check_reserved(l, &q.key, "query.key", &toks)?;
                self.key_uses = uses;
                self.index_at = Some(l.sm.at(q.index.span().start));
                self.read = JobRead::Query {
                    index,
                    key: q.key.get_ref().clone(),
                };
                Ok(())
            }
            (None, None) => Ok(()),
        }
    }

    /// `set` or `delete = true` (exactly one).
    fn action(&mut self, l: &Loader, u: &RawUpdate) -> Result<(), MappingError> {
        let delete = u.delete.as_ref().filter(|d| *d.get_ref());
        match (&u.set, delete) {
            (Some(_), Some(d)) => Err(l.invalid(
                &d.span(),
                "give either set (UPDATE) or delete = true (DELETE), not both".into(),
            )),
            (None, Some(_)) => {
                self.action = JobAction::Delete;
                Ok(())
            }
            (None, None) => Err(MappingError::MissingKey {
                at: l.sm.at(0),
                key: "set".into(),
                message: "[update] says nothing to do: give set = \"SET …\" (an UpdateExpression) or delete = true".into(),
            }),
            (Some(set), None) => {
                let (uses, toks) = expression(l, set, "set")?;
                let shape = update_shape(&toks)
                    .map_err(|(at, m)| invalid_in(l, set, at, format!("set: {m}")))?;
                check_reserved(l, set, "set", &toks)?;
                self.set_uses = uses;
                self.targets = shape
                    .targets
                    .into_iter()
                    .map(|(t, at)| (t, l.sm.at_in_string(&set.span(), set.get_ref(), at)))
                    .collect();
                self.action = JobAction::Update {
                    expression: set.get_ref().clone(),
                    not_idempotent: shape.not_idempotent.map(|(why, _)| why),
                };
                self.set_end = shape.set_end;
                Ok(())
            }
        }
    }

    /// `names` and `values`: each defined once, each used, each use defined;
    /// the update's targets resolved to attribute names.
    fn placeholders(
        &mut self,
        l: &Loader,
        names: &[&RawNames],
        values: &[&RawValues],
    ) -> Result<(), MappingError> {
        let uses = [&self.filter_uses, &self.key_uses, &self.set_uses];
        let used = |name: &str, values: bool| {
            uses.iter().any(|u| {
                let list = if values { &u.values } else { &u.names };
                list.iter().any(|(n, _)| n == name)
            })
        };
        for (key, value) in names.iter().flat_map(|m| m.iter()) {
            let k = placeholder_key(l, key, '#', "names", &self.names)?;
            if !used(&k, false) {
                return Err(l.invalid(
                    &key.span(),
                    format!(
                        "{k} is defined in names but used in no expression (where, set, query.key)"
                    ),
                ));
            }
            if value.get_ref().is_empty() {
                return Err(l.invalid(
                    &value.span(),
                    format!("names: {k} stands for an empty attribute name"),
                ));
            }
            self.names.insert(k, value.get_ref().clone());
        }
        for (key, value) in values.iter().flat_map(|m| m.iter()) {
            let k = placeholder_key(l, key, ':', "values", &self.values)?;
            if !used(&k, true) {
                return Err(l.invalid(&key.span(), format!("{k} is defined in values but used in no expression (where, set, query.key)")));
            }
            let v = values::attr_value(l, value)?;
            self.values.insert(k, v);
        }
        for (field, u) in [
            ("where", &self.filter_uses),
            ("query.key", &self.key_uses),
            ("set", &self.set_uses),
        ] {
            for (n, at) in &u.names {
                if !self.names.contains_key(n) {
                    return Err(MappingError::Invalid { at: at.clone(), message: format!("{field} uses {n}, which names does not define (add \"{n}\" = \"attribute\" to names)") });
                }
            }
            for (v, at) in &u.values {
                if !self.values.contains_key(v) {
                    return Err(MappingError::Invalid {
                        at: at.clone(),
                        message: format!("{field} uses {v}, which values does not define"),
                    });
                }
            }
        }
        for (t, _) in &mut self.targets {
            if let Some(real) = self.names.get(t.as_str()) {
                *t = real.clone();
            }
        }
        Ok(())
    }
}

/// `[target]`: table, endpoint, region, and optionally the keys.
fn job_target(l: &Loader, t: &RawJobTarget) -> Result<JobTarget, MappingError> {
    let table = l.expand(&t.table)?;
    if !is_table_or_index_name(&table) {
        return Err(l.invalid(
            &t.table.span(),
            format!("{table:?} is not a DynamoDB table name (3 to 255 of a-z, A-Z, 0-9, _ . -)"),
        ));
    }
    let endpoint = t.endpoint.as_ref().map(|e| l.expand(e)).transpose()?;
    if let (Some(ep), Some(raw)) = (&endpoint, &t.endpoint) {
        if ep != "local" && !ep.starts_with("http://") && !ep.starts_with("https://") {
            return Err(l.invalid(
                &raw.span(),
                format!("endpoint {ep:?} must be \"local\" or an http:// or https:// URL"),
            ));
        }
    }
    let region = t.region.as_ref().map(|r| l.expand(r)).transpose()?;
    let mut keys = Vec::new();
    for k in [&t.pk, &t.sk].into_iter().flatten() {
        let k = k.get_ref();
        if k.name.get_ref().is_empty() {
            return Err(l.invalid(&k.name.span(), "key attribute name is empty".into()));
        }
        keys.push(KeyAttr {
            name: k.name.get_ref().clone(),
            kind: k.kind,
        });
    }
    if t.sk.is_some() && t.pk.is_none() {
        return Err(l.invalid(&t.table.span(), "[target] declares sk without pk".into()));
    }
    Ok(JobTarget {
        table,
        endpoint,
        region,
        keys,
    })
}

/// Tokenises an expression, its mistakes located in the file.
fn expression<'t>(
    l: &Loader,
    v: &'t Spanned<String>,
    field: &str,
) -> Result<(Used, Vec<(expr::Tok<'t>, usize)>), MappingError> {
    if v.get_ref().trim().is_empty() {
        return Err(l.invalid(&v.span(), format!("{field} is empty")));
    }
    let toks =
        tokens(v.get_ref()).map_err(|(at, m)| invalid_in(l, v, at, format!("{field}: {m}")))?;
    let uses = Uses::of(&toks);
    for (p, at) in uses.names.iter().chain(&uses.values) {
        if p[1..].starts_with(RESERVED_PREFIX) {
            return Err(invalid_in(l, v, *at, format!("{field}: placeholder {p} is reserved (names starting with {RESERVED_PREFIX} are sql2ddb's own)")));
        }
    }
    let locate = |list: Vec<(String, usize)>| {
        list.into_iter()
            .map(|(p, at)| (p, l.sm.at_in_string(&v.span(), v.get_ref(), at)))
            .collect()
    };
    let used = Used {
        names: locate(uses.names),
        values: locate(uses.values),
    };
    Ok((used, toks))
}

/// A reserved word used as a bare attribute name is refused, with the fix.
fn check_reserved(
    l: &Loader,
    v: &Spanned<String>,
    field: &str,
    toks: &[(expr::Tok<'_>, usize)],
) -> Result<(), MappingError> {
    if let Some((word, at)) = expr::reserved_name(toks) {
        let ph = format!("#{}", word.to_ascii_lowercase());
        return Err(invalid_in(l, v, at, format!("{field}: {word} is a reserved word of DynamoDB and cannot name an attribute in an expression: write {ph} instead and add \"{ph}\" = \"{word}\" to names")));
    }
    Ok(())
}

/// A mistake at byte `at` of an expression string.
pub(super) fn invalid_in(
    l: &Loader,
    v: &Spanned<String>,
    at: usize,
    message: String,
) -> MappingError {
    MappingError::Invalid {
        at: l.sm.at_in_string(&v.span(), v.get_ref(), at),
        message,
    }
}

/// A `names`/`values` key: `#x`/`:x`, defined once.
fn placeholder_key<V>(
    l: &Loader,
    key: &Spanned<String>,
    sigil: char,
    table: &str,
    defined: &BTreeMap<String, V>,
) -> Result<String, MappingError> {
    let k = key.get_ref();
    let valid = k.starts_with(sigil)
        && k.len() > 1
        && k[1..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(l.invalid(&key.span(), format!("{table}: {k:?} is not a placeholder (write \"{sigil}name\": {sigil} then letters, digits, _)")));
    }
    if defined.contains_key(k) {
        return Err(l.invalid(
            &key.span(),
            format!("{table}: {k} is defined twice (in [update] and in query)"),
        ));
    }
    Ok(k.clone())
}
