//! The calls of an update job: the read (Scan or Query, `where` as its
//! filter) and each item's conditional write (`where` again, the item's
//! existence, and for an update that reads the item's current value the
//! run's marker).

use std::collections::{BTreeMap, HashMap};

use sql2ddb_core::AttrValue;
use sql2ddb_dynamo::update::{ConditionalWrite, PageRequest, Placeholders, TableDescription};
use sql2ddb_mapping::{JobAction, JobRead, UpdateJob, MARKER_NAME, MARKER_VALUE, RUN_MARKER};

/// The placeholder of the table's partition key in the existence condition.
const KEY_NAME: &str = "#sql2ddb_key";

/// `(attribute_not_exists(#sql2ddb_run) OR #sql2ddb_run <> :sql2ddb_run)`.
fn run_clause() -> String {
    format!("(attribute_not_exists({MARKER_NAME}) OR {MARKER_NAME} <> {MARKER_VALUE})")
}

/// The read: the job's Scan or Query, `where` as the filter, and for an
/// update that is marked (it reads the item's current value) the run's marker.
///
/// A fresh run written here reads only the items that do not carry its
/// marker yet. A resumed run, and a run whose pages go to a queue, read
/// instead the items that meet `where` *or* carry the marker: a page cut
/// short by a crash (or sent just before the reader stopped) is read again
/// with the same items as the first time, whatever was applied since, and
/// each item an earlier attempt changed fails the write's condition on its
/// own mark and counts as updated, once (the checkpoint never counted it).
pub(super) fn read_request(job: &UpdateJob, run_id: &str, reread: bool) -> PageRequest {
    let (names, values) = job.read_placeholders();
    let mut ph = placeholders(names, values);
    let mut filter = job.filter.clone().map(|w| format!("({w})"));
    if job.not_idempotent().is_some() {
        match (reread, filter) {
            (false, w) => {
                add_marker(&mut ph, run_id);
                filter = Some(match w {
                    Some(w) => format!("{w} AND {}", run_clause()),
                    None => run_clause(),
                });
            }
            (true, Some(w)) => {
                add_marker(&mut ph, run_id);
                filter = Some(format!("({w} OR {MARKER_NAME} = {MARKER_VALUE})"));
            }
            (true, None) => filter = None,
        }
    }
    let (index, key_condition) = match &job.read {
        JobRead::Query { index, key } => (Some(index.clone()), Some(key.clone())),
        JobRead::Scan { .. } => (None, None),
    };
    PageRequest {
        table: job.target.table.clone(),
        index,
        key_condition,
        segment: None,
        filter,
        placeholders: ph,
        limit: job.page_size,
    }
}

/// The conditional write of each matching item.
pub(super) fn write_request(
    job: &UpdateJob,
    table: &TableDescription,
    run_id: &str,
) -> ConditionalWrite {
    let marker = job.not_idempotent().is_some();
    let (names, values) = job.write_placeholders();
    let mut ph = placeholders(names, values);
    let mut condition = format!("attribute_exists({KEY_NAME})");
    if let Some(pk) = table.keys.first() {
        ph.names.insert(KEY_NAME.into(), pk.name.clone());
    }
    if let Some(w) = &job.filter {
        condition = format!("{condition} AND ({w})");
    }
    if marker {
        add_marker(&mut ph, run_id);
        condition = format!("{condition} AND {}", run_clause());
    }
    let update = match &job.action {
        JobAction::Update { expression, .. } => Some(match marker {
            true => job
                .marked_expression()
                .unwrap_or_else(|| expression.clone()),
            false => expression.clone(),
        }),
        JobAction::Delete => None,
    };
    ConditionalWrite {
        table: job.target.table.clone(),
        update,
        condition,
        placeholders: ph,
        own_mark: marker.then(|| (RUN_MARKER.to_string(), run_id.to_string())),
    }
}

fn placeholders(
    names: BTreeMap<String, String>,
    values: BTreeMap<String, AttrValue>,
) -> Placeholders {
    Placeholders {
        names: names.into_iter().collect::<HashMap<_, _>>(),
        values: values.into_iter().collect::<HashMap<_, _>>(),
    }
}

fn add_marker(ph: &mut Placeholders, run_id: &str) {
    ph.names.insert(MARKER_NAME.into(), RUN_MARKER.into());
    ph.values
        .insert(MARKER_VALUE.into(), AttrValue::S(run_id.to_string()));
}
