//! The progress store against an in-process DynamoDB-compatible server.

use sql2ddb_core::{BatchPart, RunId, SqlValue, WorkBatch};
use sql2ddb_dynamo::progress::{BatchRecord, SegmentBounds};
use sql2ddb_testkit::support::{progress_store, run_meta};

#[tokio::test]
async fn a_cursor_reads_back_with_its_types_and_only_moves_forward() {
    let (local, store) = progress_store("cursor").await;
    let run = &RunId::parse("r4").unwrap();
    let cursor = vec![
        SqlValue::Text("EU#7".into()),
        SqlValue::Decimal("12.50".into()),
        SqlValue::UInt(u64::MAX),
        SqlValue::Bytes(vec![0, 255, 7]),
    ];
    store
        .set_cursor(run, "order", 3, &cursor, 41, 4_100)
        .await
        .unwrap();
    // A late update from a reader that lost its place changes nothing.
    store
        .set_cursor(run, "order", 3, &[SqlValue::Int(1)], 40, 4_000)
        .await
        .unwrap();
    let progress = store.load(run).await.unwrap();
    assert_eq!(progress.cursors.len(), 1);
    assert_eq!(progress.cursors[0].cursor, cursor);
    assert_eq!(progress.cursors[0].pages_sent, 41);
    assert_eq!(progress.cursors[0].rows_sent, 4_100);
    assert_eq!(progress.cursors[0].segment, 3);
    // Runs do not see each other's records.
    assert!(store
        .load(&"other-run".parse().unwrap())
        .await
        .unwrap()
        .cursors
        .is_empty());
    local.stop().await;
}

#[tokio::test]
async fn a_run_description_reads_back_alone_with_its_segment_bounds_and_queue() {
    let (local, store) = progress_store("meta").await;
    let r6 = &RunId::parse("r6").unwrap();
    assert_eq!(store.run_meta(r6).await.unwrap(), None);
    let mut described = run_meta(&[("order", 2)]);
    described.entities[0].bounds = vec![
        SegmentBounds {
            after: None,
            until: Some(vec![SqlValue::Int(500)]),
        },
        SegmentBounds {
            after: Some(vec![SqlValue::Int(500)]),
            until: None,
        },
    ];
    described.queue = Some("http://127.0.0.1:1/123/jobs".into());
    store.record_run(r6, &described).await.unwrap();
    let back = store.run_meta(r6).await.unwrap().unwrap();
    assert_eq!(back.entities, described.entities);
    assert_eq!(back.queue, described.queue);
    assert!(!back.source.contains("hunter2"), "{}", back.source);
    local.stop().await;
}

#[test]
fn a_batch_record_counts_rows_rejected_while_mapping() {
    let batch = WorkBatch {
        run_id: "r".parse().unwrap(),
        entity: "order".into(),
        segment: 2,
        page: 17,
        part: BatchPart { index: 1, count: 3 },
        pointers: Vec::new(),
        rows_read: 7,
        items: Vec::new(),
    };
    let record = BatchRecord::for_batch(&batch, 0, 0, 0);
    assert_eq!(
        (record.rows, record.items, record.rejected, record.failed),
        (7, 0, 7, 0)
    );
    assert_eq!(record.sort_key(), "BATCH#order#00002#0000000017#001");
    assert_eq!((record.part, record.parts), (1, 3));
}

#[tokio::test]
async fn a_follow_record_replaces_the_one_before_and_is_not_counted_as_progress() {
    let (local, store) = progress_store("follow").await;
    let r7 = &RunId::parse("r7").unwrap();
    assert_eq!(store.follow_record(r7).await.unwrap(), None);
    store
        .record_run(r7, &run_meta(&[("order", 1)]))
        .await
        .unwrap();
    store.record_follow(r7, r#"{"n":1}"#).await.unwrap();
    store.record_follow(r7, r#"{"n":2}"#).await.unwrap();
    assert_eq!(
        store.follow_record(r7).await.unwrap().as_deref(),
        Some(r#"{"n":2}"#)
    );
    // A run's counts are read past it.
    let progress = store.load(r7).await.unwrap();
    assert!(progress.meta.is_some());
    assert!(progress.batches.is_empty() && progress.cursors.is_empty());
    assert_eq!(
        store.follow_record(&"r8".parse().unwrap()).await.unwrap(),
        None
    );
    local.stop().await;
}

#[tokio::test]
async fn a_fleets_beats_read_back_replace_each_other_and_leave_the_counts_alone() {
    use sql2ddb_dynamo::progress::FleetBeat;
    let (local, store) = progress_store("fleet").await;
    let r9 = &RunId::parse("r9").unwrap();
    let other = &RunId::parse("other").unwrap();
    let beat = |member: &str, at_ms, throttled_ms| FleetBeat {
        member: member.into(),
        at_ms,
        throttled_ms,
    };
    let one = store.fleet_beat(r9, &beat("a", 1_000, 0)).await.unwrap();
    assert_eq!(one, [beat("a", 1_000, 0)]);
    store.fleet_beat(r9, &beat("b", 1_100, 900)).await.unwrap();
    // A member's next beat replaces its last; another run's fleet is its own.
    store.fleet_beat(other, &beat("c", 1_150, 0)).await.unwrap();
    let mut all = store
        .fleet_beat(r9, &beat("a", 2_000, 1_500))
        .await
        .unwrap();
    all.sort_by(|x, y| x.member.cmp(&y.member));
    assert_eq!(all, [beat("a", 2_000, 1_500), beat("b", 1_100, 900)]);
    // Beats are not progress: a run's counts are read past them.
    store
        .record_run(r9, &run_meta(&[("order", 1)]))
        .await
        .unwrap();
    let progress = store.load(r9).await.unwrap();
    assert!(progress.meta.is_some());
    assert!(progress.batches.is_empty() && progress.cursors.is_empty());
    // A member that leaves is gone from the next beat's answer.
    store.fleet_leave(r9, "b").await.unwrap();
    let left = store
        .fleet_beat(r9, &beat("a", 3_000, 1_500))
        .await
        .unwrap();
    assert_eq!(left, [beat("a", 3_000, 1_500)]);
    local.stop().await;
}
