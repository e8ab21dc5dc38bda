//! The engine's verification adds up what the progress store recorded:
//! against an in-process DynamoDB-compatible server.

use sql2ddb_core::{AttrValue, RunId, SqlValue};
use sql2ddb_dynamo::progress::{BatchRecord, ProgressStore};
use sql2ddb_engine::verify::{summarize, MissingPage};
use sql2ddb_testkit::sdk::to_sdk;
use sql2ddb_testkit::support::{progress_store, run_meta, Dynamo};

fn record(entity: &str, segment: u32, page: u64, rows: u64) -> BatchRecord {
    BatchRecord {
        entity: entity.into(),
        segment,
        page,
        part: 0,
        parts: 1,
        rows,
        items: rows,
        rejected: 0,
        failed: 0,
    }
}

/// A progress store of the test's own (see [`progress_store`]) with `run`
/// recorded over `entities` (name and segments).
async fn store_with_run(
    name: &str,
    run: &RunId,
    entities: &[(&str, u32)],
) -> (Dynamo, ProgressStore) {
    let (local, store) = progress_store(name).await;
    store.record_run(run, &run_meta(entities)).await.unwrap();
    (local, store)
}

/// Records `batch` of `run`.
async fn recorded(store: &ProgressStore, run: &RunId, batch: &BatchRecord) {
    store.record_batch(run, batch).await.unwrap();
}

#[tokio::test]
async fn a_redelivered_batch_is_counted_once_and_the_run_completes_when_sums_meet() {
    let run = &RunId::parse("r1").unwrap();
    let (local, store) = store_with_run("redelivered", run, &[("order", 2), ("customer", 1)]).await;
    for segment in 0..2 {
        for page in 0..3 {
            recorded(&store, run, &record("order", segment, page, 10)).await;
        }
    }
    // The same message delivered twice: its record is written twice.
    recorded(&store, run, &record("order", 1, 2, 10)).await;
    let customer = BatchRecord {
        items: 4,
        rejected: 1,
        ..record("customer", 0, 0, 5)
    };
    recorded(&store, run, &customer).await;
    recorded(&store, run, &customer).await;

    let v = summarize(&store.load(run).await.unwrap());
    assert!(!v.complete, "no segment is finished yet");
    assert_eq!(v.entities[0].rows_read, None);
    assert_eq!(v.entities[0].written, 60);

    store.finish_segment(run, "order", 0, 30, 3).await.unwrap();
    store.finish_segment(run, "order", 1, 30, 3).await.unwrap();
    store
        .finish_segment(run, "customer", 0, 5, 1)
        .await
        .unwrap();
    let progress = store.load(run).await.unwrap();
    assert_eq!(progress.batches.len(), 7);
    let v = summarize(&progress);
    let counts: Vec<_> = v
        .entities
        .iter()
        .map(|e| {
            (
                e.entity.as_str(),
                e.rows_read,
                e.written,
                e.rejected,
                e.failed,
                e.pending,
            )
        })
        .collect();
    assert_eq!(
        counts,
        [
            ("order", Some(60), 60, 0, 0, Some(0)),
            ("customer", Some(5), 4, 1, 0, Some(0)),
        ]
    );
    assert!(v.missing.is_empty(), "{:?}", v.missing);
    assert!(v.complete);

    // The run's description reads back, its password redacted.
    let meta_back = progress.meta.unwrap();
    assert!(
        !meta_back.source.contains("hunter2"),
        "{}",
        meta_back.source
    );
    assert_eq!(
        meta_back.entities,
        run_meta(&[("order", 2), ("customer", 1)]).entities
    );
    local.stop().await;
}

#[tokio::test]
async fn pages_sent_without_a_record_are_named_and_keep_the_run_incomplete() {
    let run = &RunId::parse("r2").unwrap();
    let (local, store) = store_with_run("missing", run, &[("order", 2)]).await;
    // Segment 0: pages 0..3 sent, page 1 never written.
    store
        .set_cursor(run, "order", 0, &[SqlValue::Int(300)], 3, 30)
        .await
        .unwrap();
    recorded(&store, run, &record("order", 0, 0, 10)).await;
    recorded(&store, run, &record("order", 0, 2, 10)).await;
    // Segment 1: one page split in two parts, only part 0 written.
    store.finish_segment(run, "order", 1, 8, 1).await.unwrap();
    let part0 = BatchRecord {
        part: 0,
        parts: 2,
        ..record("order", 1, 0, 5)
    };
    recorded(&store, run, &part0).await;

    let v = summarize(&store.load(run).await.unwrap());
    let missing = |segment, page| MissingPage {
        entity: "order".into(),
        segment,
        page,
    };
    assert_eq!(v.missing, [missing(0, 1), missing(1, 0)]);
    assert_eq!(v.entities[0].segments_finished, 1);
    assert_eq!(v.entities[0].rows_read, None);
    assert!(!v.complete);

    // The missing writes arrive, the reader finishes: complete.
    recorded(&store, run, &record("order", 0, 1, 10)).await;
    let part1 = BatchRecord {
        part: 1,
        rows: 3,
        items: 3,
        ..part0.clone()
    };
    recorded(&store, run, &part1).await;
    store.finish_segment(run, "order", 0, 30, 3).await.unwrap();
    let v = summarize(&store.load(run).await.unwrap());
    assert!(v.missing.is_empty(), "{:?}", v.missing);
    assert_eq!(v.entities[0].rows_read, Some(38));
    assert!(v.complete);
    local.stop().await;
}

#[tokio::test]
async fn complete_only_when_the_records_add_up_to_the_rows_read() {
    let run = &RunId::parse("r3").unwrap();
    let (local, store) = store_with_run("sums", run, &[("order", 1)]).await;
    recorded(&store, run, &record("order", 0, 0, 10)).await;
    // The reader read 12 rows in one page, but the record accounts for 10.
    store.finish_segment(run, "order", 0, 12, 1).await.unwrap();
    let v = summarize(&store.load(run).await.unwrap());
    assert!(v.missing.is_empty());
    assert_eq!(v.entities[0].pending, Some(2));
    assert!(!v.complete);

    // A record whose own numbers do not add up is not accounted for either.
    let inconsistent = BatchRecord {
        rows: 12,
        items: 10,
        ..record("order", 0, 0, 12)
    };
    recorded(&store, run, &inconsistent).await;
    let v = summarize(&store.load(run).await.unwrap());
    assert_eq!(v.entities[0].pending, Some(0));
    assert!(!v.complete);

    let rejects_and_failures = BatchRecord {
        rejected: 1,
        failed: 1,
        ..inconsistent
    };
    store
        .record_batch(run, &rejects_and_failures)
        .await
        .unwrap();
    let v = summarize(&store.load(run).await.unwrap());
    assert_eq!((v.entities[0].rejected, v.entities[0].failed), (1, 1));
    assert!(v.complete);

    // Without its description a run is never complete.
    let mut progress = store.load(run).await.unwrap();
    progress.meta = None;
    assert!(!summarize(&progress).complete);
    local.stop().await;
}

#[tokio::test]
async fn load_reads_every_record_of_a_run_over_many_query_pages() {
    let (local, store) = progress_store("pages").await;
    let run = &RunId::parse("r5").unwrap();
    // Long entity names make each record ~1 KB: 2,500 of them are over 2 MB,
    // more than one Query answer (1 MB) holds.
    let entity = format!("order_{}", "x".repeat(400));
    store
        .record_run(run, &run_meta(&[(&entity, 1)]))
        .await
        .unwrap();
    let records: Vec<BatchRecord> = (0..2_500).map(|page| record(&entity, 0, page, 3)).collect();
    for chunk in records.chunks(16) {
        let mut writes = tokio::task::JoinSet::new();
        for r in chunk {
            let (store, run, r) = (store.clone(), run.clone(), r.clone());
            writes.spawn(async move { store.record_batch(&run, &r).await });
        }
        while let Some(done) = writes.join_next().await {
            assert!(done.unwrap().is_ok());
        }
    }
    store
        .finish_segment(run, &entity, 0, 7_500, 2_500)
        .await
        .unwrap();

    // One Query does not return it all: the store must follow LastEvaluatedKey.
    let first = local
        .client
        .query()
        .table_name(store.table())
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", to_sdk(&AttrValue::S(format!("RUN#{run}"))))
        .send()
        .await
        .unwrap();
    assert!(
        first.last_evaluated_key.is_some(),
        "{} records in one answer",
        first.count
    );

    let progress = store.load(run).await.unwrap();
    assert_eq!(progress.batches.len(), 2_500);
    let v = summarize(&progress);
    assert_eq!(v.entities[0].rows_read, Some(7_500));
    assert_eq!(v.entities[0].written, 7_500);
    assert!(v.complete);
    local.stop().await;
}
