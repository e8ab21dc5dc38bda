//! The count a run checks once every entity was read: rows read must
//! equal rows counted, or the report says why not.

use std::sync::Arc;

use sql2ddb_core::shown::thousands;
use sql2ddb_source::{Relation, Source};

use super::prepared::Prepared;
use crate::report::RunReport;

/// After every entity was read: rows read must equal rows counted. When they
/// differ, the entity is counted again: a source that changed under the run
/// is reported as such (a warning: rows written or deleted meanwhile may or
/// may not be in the copy); a source that did not change means rows were
/// skipped, and the run fails with the numbers.
pub(super) async fn check_counts(
    source: &Source,
    prepared: &[Arc<Prepared>],
    report: &mut RunReport,
) {
    let mut failures = Vec::new();
    // Under a snapshot a key range cannot change while it is read: a segment
    // that read other than its range holds skipped rows.
    let in_snapshot = report.snapshot.id.is_some();
    for p in prepared {
        let notes = p.segment_mismatches.lock().expect("mismatch lock").clone();
        if in_snapshot {
            failures.extend(
                notes
                    .iter()
                    .map(|n| format!("{n}; the run read one snapshot, so rows were skipped")),
            );
        }
        report.warnings.extend(notes);
    }
    let attempts = report.snapshot.earlier.len() + 1;
    for (p, e) in prepared.iter().zip(report.entities.iter_mut()) {
        if e.rows_read == p.counted {
            continue;
        }
        if in_snapshot && attempts > 1 {
            // Rows read by earlier attempts came from earlier snapshots:
            // each attempt was checked against its own, segment by segment.
            report.warnings.push(format!(
                "entity {:?}: the run was resumed and its {attempts} attempts read {attempts} snapshots; {} rows read over all of them, {} at the last: rows inserted or deleted between attempts may or may not be in the copy",
                e.name,
                thousands(e.rows_read),
                thousands(p.counted)
            ));
            continue;
        }
        if p.replay.is_some() {
            report.warnings.push(format!(
                "entity {:?}: {} of the {} rejected rows are no longer in the source (deleted since?), so they were not replayed",
                e.name,
                thousands(p.counted.saturating_sub(e.rows_read)),
                thousands(p.counted)
            ));
            continue;
        }
        let from = match &p.from {
            sql2ddb_mapping::EntitySource::Table(t) => Relation::Table(t),
            sql2ddb_mapping::EntitySource::Query(q) => Relation::Query(q),
        };
        match source.count(&from).await {
            Ok(now) if now != p.counted => report.warnings.push(format!(
                "entity {:?}: the source changed during the run ({} rows when it started, {} at the end, {} read): rows inserted or deleted meanwhile may or may not be in the copy",
                e.name,
                thousands(p.counted),
                thousands(now),
                thousands(e.rows_read)
            )),
            Ok(_) => failures.push(format!(
                "entity {:?}: read {} rows but the source holds {} (unchanged since the run started): {} rows were not read",
                e.name,
                thousands(e.rows_read),
                thousands(p.counted),
                thousands(p.counted.abs_diff(e.rows_read))
            )),
            Err(err) => failures.push(format!(
                "entity {:?}: read {} rows but the source held {} when the run started, and counting again failed: {err}",
                e.name,
                thousands(e.rows_read),
                thousands(p.counted)
            )),
        }
    }
    if !failures.is_empty() {
        report.error = Some(failures.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sql2ddb_mapping::{EntitySource, Plan};
    use sql2ddb_source::{Relation, Source};

    use super::super::prepared::{Prepared, WriteStats};
    use super::check_counts;
    use crate::report::{EntityReport, RunReport, RunStatus};

    const MAPPING: &str = r#"
version = 1
[source]
url = "sqlite://../../examples/shop.db"
[target]
table = "shop_t"
pk = { name = "PK", type = "S" }
[[entity]]
name = "customer"
from = "customers"
pk = "CUSTOMER#{customer_id}"
"#;

    async fn prepared(source: &Source, plan: &Plan, counted: u64) -> Arc<Prepared> {
        let entity = &plan.entities[0];
        let from = Relation::Table("customers");
        let shape = source.describe(&from).await.unwrap();
        let key = shape.primary_key.clone();
        let bound = entity.bind(plan, &shape.columns, &key).unwrap();
        Arc::new(Prepared {
            bound: Arc::new(bound),
            query: source.page_query(&from, &shape, &key, 10).unwrap(),
            segments: Vec::new(),
            children: Vec::new(),
            pointers: Vec::new(),
            counters: Arc::new(Default::default()),
            stats: Arc::new(WriteStats::default()),
            overwrites: None,
            from: EntitySource::Table("customers".into()),
            counted,
            replay: None,
            segment_mismatches: Default::default(),
        })
    }

    fn report(rows_read: u64) -> RunReport {
        RunReport {
            run_id: "r".parse().unwrap(),
            mapping: "shop.toml".into(),
            status: RunStatus::Ok,
            source: String::new(),
            table: "t".into(),
            endpoint: String::new(),
            local_data_file: None,
            table_created: false,
            queue: None,
            progress_table: None,
            run_dir: String::new(),
            rejects_file: None,
            entities: vec![EntityReport {
                name: "customer".into(),
                rows_read,
                ..EntityReport::default()
            }],
            totals: EntityReport::default(),
            writer: Default::default(),
            pointers: Vec::new(),
            rejects_by_reason: Vec::new(),
            timeline: Default::default(),
            warnings: Vec::new(),
            table_emptied: None,
            error: None,
            cause: None,
            snapshot: Default::default(),
        }
    }

    #[tokio::test]
    async fn nothing_lost_01_rows_read_must_equal_rows_counted() {
        let plan = Plan::parse(MAPPING, "m.toml".as_ref(), &|_| None).unwrap();
        let source = Source::connect("sqlite://../../examples/shop.db", 1)
            .await
            .unwrap();
        let n = source.count(&Relation::Table("customers")).await.unwrap();
        assert!(n > 2);

        // Every row read: nothing to say.
        let mut r = report(n);
        check_counts(&source, &[prepared(&source, &plan, n).await], &mut r).await;
        assert_eq!((r.error.as_deref(), r.warnings.len()), (None, 0));

        // Two rows short and the source unchanged: rows were skipped, the run fails,
        // and the segment that fell short is named.
        let mut r = report(n - 2);
        let p = prepared(&source, &plan, n).await;
        p.segment_mismatches
            .lock()
            .unwrap()
            .push("entity \"customer\" segment 3: read 8 rows, its key range holds 10".into());
        check_counts(&source, &[p], &mut r).await;
        assert!(r.warnings[0].contains("segment 3"), "{:?}", r.warnings);
        let error = r.error.clone().expect("a shortfall is an error");
        assert!(
            error.contains(&format!(
                "read {} rows but the source holds {}",
                sql2ddb_core::shown::thousands(n - 2),
                sql2ddb_core::shown::thousands(n)
            )),
            "{error}"
        );
        r.finish(0.0);
        assert_eq!(r.status, RunStatus::Failed);

        // The source changed between the start and the end: said, not failed.
        let mut r = report(n);
        check_counts(&source, &[prepared(&source, &plan, n + 3).await], &mut r).await;
        assert_eq!(r.error, None);
        assert!(
            r.warnings[0].contains("the source changed during the run"),
            "{:?}",
            r.warnings
        );
        source.close().await;
    }

    fn with_snapshot(mut r: RunReport, earlier: usize) -> RunReport {
        r.snapshot.kind = "postgres".into();
        r.snapshot.id = Some("00000003-0000001B-1".into());
        r.snapshot.earlier = vec![Default::default(); earlier];
        r
    }

    #[tokio::test]
    async fn under_a_snapshot_counts_are_checked_per_snapshot() {
        let plan = Plan::parse(MAPPING, "m.toml".as_ref(), &|_| None).unwrap();
        let source = Source::connect("sqlite://../../examples/shop.db", 1)
            .await
            .unwrap();
        let n = source.count(&Relation::Table("customers")).await.unwrap();

        // One snapshot: a segment that fell short fails the run, even when
        // the entity's total happens to match.
        let mut r = with_snapshot(report(n), 0);
        let p = prepared(&source, &plan, n).await;
        p.segment_mismatches
            .lock()
            .unwrap()
            .push("entity \"customer\" segment 1: read 4 rows, its key range holds 5".into());
        check_counts(&source, &[p], &mut r).await;
        let error = r.error.clone().expect("a segment shortfall is an error");
        assert!(
            error.contains("segment 1") && error.contains("rows were skipped"),
            "{error}"
        );

        // Resumed: the attempts read two snapshots, and the source changed
        // between them: said, not failed (each attempt was checked per segment).
        let mut r = with_snapshot(report(n), 1);
        check_counts(&source, &[prepared(&source, &plan, n + 3).await], &mut r).await;
        assert_eq!(r.error, None);
        assert!(
            r.warnings[0].contains("2 attempts read 2 snapshots"),
            "{:?}",
            r.warnings
        );
        source.close().await;
    }
}
