//! `mode = "batch-put"`: the changes of `set` that sql2ddb applies itself to
//! each item read before rewriting it whole with `BatchWriteItem`.

use serde_spanned::Spanned;
use sql2ddb_core::AttrValue;

use super::expr::{self, tokens};
use super::load::invalid_in;
use super::{JobMode, PutChange, UpdateJob};
use crate::error::MappingError;
use crate::load::Loader;

impl UpdateJob {
    /// `mode`: `update-item`, or `batch-put` with changes sql2ddb can apply.
    pub(super) fn mode(
        &mut self,
        l: &Loader,
        mode: &Spanned<String>,
        set: Option<&Spanned<String>>,
    ) -> Result<(), MappingError> {
        match mode.get_ref().as_str() {
            "update-item" => return Ok(()),
            "batch-put" => {}
            other => {
                return Err(l.invalid(
                    &mode.span(),
                    format!("mode {other:?} is not \"update-item\" or \"batch-put\""),
                ))
            }
        }
        let Some(set) = set else {
            return Err(l.invalid(
                &mode.span(),
                "mode = \"batch-put\" rewrites items: it takes set, not delete = true".into(),
            ));
        };
        let toks = tokens(set.get_ref()).map_err(|(at, m)| invalid_in(l, set, at, m))?;
        let actions = expr::simple_actions(&toks)
            .map_err(|(at, m)| invalid_in(l, set, at, format!("set: {m}")))?;
        let name = |n: &str| self.names.get(n).cloned().unwrap_or_else(|| n.to_string());
        self.puts = actions
            .into_iter()
            .map(|a| match a {
                expr::SimpleAction::Set(attr, value) => PutChange::Set {
                    attribute: name(attr),
                    value: self.values.get(value).cloned().unwrap_or(AttrValue::Null),
                },
                expr::SimpleAction::Remove(attr) => PutChange::Remove {
                    attribute: name(attr),
                },
            })
            .collect();
        self.mode = JobMode::BatchPut;
        Ok(())
    }
}
