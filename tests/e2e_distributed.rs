//! End to end, a run cut at the queue: one `sql2ddb run --queue` process
//! reads PostgreSQL and sends pages to SQS (moto's server), separate
//! `sql2ddb worker` processes write them to a DynamoDB-compatible server
//! (dynoxide in this process, reached over HTTP), and `sql2ddb verify`
//! counts. Processes are killed with SIGKILL mid-run; nothing may be lost or
//! counted twice. Every item is compared with the mapping of its row,
//! computed here from the row number.

use std::time::{Duration, Instant};

use sql2ddb_core::KeyAttr;
use sql2ddb_dynamo::progress::default_table;
use sql2ddb_engine::verify::summarize;
use sql2ddb_queue::WorkQueue;
use sql2ddb_testkit::sdk::types::AttributeValue;

use crate::common::*;
use crate::distributed::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_and_a_reader_migrate_every_row_verified_by_counting() {
    let _heavy = HEAVY.lock().await;
    // 16 pages for three workers: enough for each to take several.
    let f = Fixture::new("dist_all", 40_000, 30, 5).await;
    let reader = f.reader(&[]);
    let run_id = reader.run_id().await;
    let workers: Vec<Proc> = (0..3).map(|_| f.worker(&run_id, "4")).collect();

    let read = reader.wait().await;
    assert_eq!(read.code, 0, "reader:\n{}", read.stderr);
    let report = read.report();
    assert_eq!(
        (report["run_id"].as_str(), report["status"].as_str()),
        (Some(run_id.as_str()), Some("enqueued"))
    );
    assert_eq!(report["queue"], f.urls.queue.as_str());
    assert_eq!(report["totals"]["rows_read"], f.rows);

    let done = wait_all(workers).await;
    // SQS delivers at least once: a send or receive retried after a lost
    // answer may hand a page out twice. Every page is written; extra
    // deliveries are written again and counted once.
    assert!(
        worker_messages(&done) >= f.pages(),
        "every page came to a worker"
    );
    f.assert_verified_and_complete(&run_id).await;

    // What the workers left behind (a duplicate delivery, or a message whose
    // delete was lost) is a page already recorded; once drained, the queue
    // is empty and `status` says so.
    let recorded: Vec<(u32, u64)> = f
        .store()
        .load(&run_id)
        .await
        .unwrap()
        .batches
        .iter()
        .map(|b| (b.segment, b.page))
        .collect();
    for left in f.drain_leftovers().await {
        assert!(
            recorded.contains(&(left.segment(), left.page())),
            "a message left in the queue carries a page never recorded: segment {} page {}",
            left.segment(),
            left.page()
        );
    }
    let status = f.command("status", &run_id).await;
    assert_eq!(status.code, 0, "{}", status.stderr);
    let q = &status.report()["queue"];
    assert_eq!(
        (
            q["visible"].as_u64(),
            q["in_flight"].as_u64(),
            q["dead_letter"].as_u64()
        ),
        (Some(0), Some(0), Some(0))
    );
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_batches_are_written_by_the_others_after_the_visibility_timeout() {
    let _heavy = HEAVY.lock().await;
    let f = Fixture::new("dist_killw", 40_000, 5, 5).await;
    let run_id = f.read_into_queue().await;
    let pages = f.pages() as usize;

    // One worker alone, killed once it has written some pages but not all,
    // while it holds a batch (between two batches it may hold none).
    let doomed = f.worker(&run_id, "2");
    let start = Instant::now();
    loop {
        let recorded = f.store().load(&run_id).await.map_or(0, |p| p.batches.len());
        if recorded > 0 && f.queue.depth().await.unwrap().in_flight >= 1 {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "never saw the worker hold a batch after its first"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    doomed.kill().await;
    let recorded = f.store().load(&run_id).await.unwrap().batches.len();
    assert!(
        recorded < pages,
        "the worker finished everything before it was killed"
    );
    let depth = f.queue.depth().await.unwrap();
    assert!(
        depth.in_flight >= 1,
        "the killed worker held no batch: {depth:?}"
    );

    let others: Vec<Proc> = (0..2).map(|_| f.worker(&run_id, "2")).collect();
    let done = wait_all(others).await;
    // The others wrote everything the killed worker had not recorded, held batches included.
    assert!(worker_messages(&done) >= (pages - recorded) as u64);
    f.assert_verified_and_complete(&run_id).await;
    // Only duplicate deliveries of written pages may be left; none went to
    // the dead-letter queue.
    let recorded = f.store().load(&run_id).await.unwrap().batches;
    for left in f.drain_leftovers().await {
        assert!(recorded
            .iter()
            .any(|b| (b.segment, b.page) == (left.segment(), left.page())));
    }
    assert_eq!(f.queue.depth().await.unwrap().dead_letter, Some(0));
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: kill, lose a cursor, resume, count.
async fn a_killed_reader_resumes_from_its_cursors_and_nothing_is_counted_twice() {
    let _heavy = HEAVY.lock().await;
    let f = Fixture::new("dist_killr", 40_000, 30, 5).await;
    // No workers yet: the reader stops sending at 3 waiting messages.
    let reader = f.reader(&["--max-queued", "3"]);
    let run_id = reader.run_id().await;
    f.wait_for(&run_id, "three pages sent", |p| {
        p.cursors.iter().map(|c| c.pages_sent).sum::<u64>() >= 3
    })
    .await;
    reader.kill().await;
    let before = f.store().load(&run_id).await.unwrap();
    assert!(
        before.totals.len() < 2,
        "both segments finished before the kill"
    );
    let sent: u64 = before.cursors.iter().map(|c| c.pages_sent).sum();

    // The widest crash window: pages sent whose cursor update never landed.
    // That segment then starts over and its pages are sent a second time.
    let lost = before
        .cursors
        .iter()
        .filter(|c| !before.totals.iter().any(|t| t.segment == c.segment))
        .max_by_key(|c| c.pages_sent)
        .cloned()
        .expect("an unfinished segment with pages sent");
    assert!(lost.pages_sent >= 1);
    f.sc.dynamo
        .client
        .delete_item()
        .table_name(default_table(&f.table))
        .key("PK", AttributeValue::S(format!("RUN#{run_id}")))
        .key(
            "SK",
            AttributeValue::S(format!("CURSOR#item#{:05}", lost.segment)),
        )
        .send()
        .await
        .unwrap();

    let workers: Vec<Proc> = (0..2).map(|_| f.worker(&run_id, "2")).collect();
    let resumed = sql2ddb(
        f.sc.path(),
        &[
            "run",
            &f.mapping,
            "--resume",
            &run_id,
            "--sqs-endpoint",
            f.moto.url(),
            "--json",
            "--quiet",
        ],
    )
    .await;
    assert_eq!(resumed.code, 0, "resume:\n{}", resumed.stderr);
    let report = resumed.report();
    assert_eq!(report["run_id"], run_id.as_str());
    assert_eq!(report["status"], "enqueued");
    assert_eq!(
        report["queue"],
        f.urls.queue.as_str(),
        "a resumed run sends to its own queue"
    );
    assert_eq!(
        report["totals"]["rows_read"], 40_000,
        "rows read over both attempts"
    );

    let done = wait_all(workers).await;
    let messages = worker_messages(&done);
    let resent = lost.pages_sent;
    assert!(sent >= 3);
    // At least: the kill may also have fallen between a send and its cursor update.
    assert!(
        messages >= f.pages() + resent,
        "pages re-sent after the lost cursor were written again: {messages} messages"
    );
    // …and still counted once.
    let v = summarize(&f.store().load(&run_id).await.unwrap());
    assert_eq!(v.entities[0].rows_recorded, 40_000);
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_delivered_twice_is_counted_once() {
    let f = Fixture::new("dist_dup", 10_000, 30, 5).await;
    let run_id = f.read_into_queue().await;

    // Deliver one batch twice: its body sent again as a second message.
    let sqs = f.queue.client();
    let got = sqs
        .receive_message()
        .queue_url(&f.urls.queue)
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap();
    let message = &got.messages()[0];
    sqs.send_message()
        .queue_url(&f.urls.queue)
        .message_body(message.body().unwrap())
        .send()
        .await
        .unwrap();
    sqs.change_message_visibility()
        .queue_url(&f.urls.queue)
        .receipt_handle(message.receipt_handle().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();

    let done = wait_all(vec![f.worker(&run_id, "2")]).await;
    assert_eq!(
        worker_messages(&done),
        f.pages() + 1,
        "the copy was written too"
    );
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: dead-letter, status, verify, redrive.
async fn a_batch_that_always_fails_is_dead_lettered_shown_and_not_verified_until_redriven() {
    let f = Fixture::new("dist_dlq", 5_000, 2, 2).await;
    let run_id = f.read_into_queue().await;

    // The table is gone: no worker can write it.
    f.sc.dynamo
        .client
        .delete_table()
        .table_name(&f.table)
        .send()
        .await
        .unwrap();
    let worker = f.spawn(&[
        "worker",
        &f.mapping,
        "--queue",
        &f.urls.queue,
        "--sqs-endpoint",
        f.moto.url(),
        "--poll",
        "1",
        "--idle-exit",
        "600",
    ]);
    let start = Instant::now();
    let state = loop {
        let status = f.command("status", &run_id).await;
        assert_eq!(status.code, 0, "{}", status.stderr);
        let state = status.report();
        if state["queue"]["dead_letter"] == f.pages() {
            break state;
        }
        assert!(start.elapsed() < PATIENCE, "never dead-lettered: {state}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    worker.kill().await;
    assert_eq!(state["complete"], false);
    assert_eq!(state["entities"][0]["written"], 0);

    let v = f.command("verify", &run_id).await;
    assert_eq!(
        v.code, 1,
        "verify passed a run whose batches are dead-lettered"
    );
    let missing = &v.report()["missing"];
    let pages: u64 = missing
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["last"].as_u64().unwrap() - m["first"].as_u64().unwrap() + 1)
        .sum();
    assert_eq!(
        pages,
        f.pages(),
        "verify names every page not written: {missing}"
    );
    assert!(v.stderr.contains("dead-letter"), "{}", v.stderr);
    let text = sql2ddb(
        f.sc.path(),
        &[
            "verify",
            &f.mapping,
            "--run",
            &run_id,
            "--sqs-endpoint",
            f.moto.url(),
        ],
    )
    .await;
    assert!(
        text.stdout.contains("not written: item segment"),
        "{}",
        text.stdout
    );
    assert!(!text.stderr.contains("not written"), "{}", text.stderr);

    // Cause fixed: the table is back; the batches move back and are written.
    let keys = [
        KeyAttr {
            name: "PK".into(),
            kind: sql2ddb_core::KeyType::S,
        },
        KeyAttr {
            name: "SK".into(),
            kind: sql2ddb_core::KeyType::S,
        },
    ];
    sql2ddb_dynamo::ensure_table(&f.sc.dynamo.handle, &f.table, &keys, true)
        .await
        .unwrap();
    let redriven = sql2ddb(
        f.sc.path(),
        &[
            "queue",
            "redrive",
            "--queue",
            &f.urls.queue,
            "--sqs-endpoint",
            f.moto.url(),
            "--json",
        ],
    )
    .await;
    assert_eq!(redriven.code, 0, "{}", redriven.stderr);
    assert_eq!(redriven.report()["moved"], f.pages());
    let done = wait_all(vec![f.worker(&run_id, "2")]).await;
    assert_eq!(worker_messages(&done), f.pages());
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_by_sigterm_releases_what_it_holds_at_once() {
    let f = Fixture::new("dist_term", 10_000, 60, 5).await;
    let run_id = f.read_into_queue().await;

    // No grace: batches being written are released, not finished.
    let worker = f.spawn(&[
        "worker",
        &f.mapping,
        "--queue",
        &f.urls.queue,
        "--sqs-endpoint",
        f.moto.url(),
        "--concurrency",
        "2",
        "--shutdown-grace",
        "0",
        "--json",
    ]);
    let start = Instant::now();
    while f.queue.depth().await.unwrap().in_flight == 0 {
        assert!(start.elapsed() < PATIENCE, "the worker never took a batch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.terminate();
    let stopped = worker.wait().await;
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    let report = stopped.report();
    assert_eq!(report["stopped"], "signal");
    assert!(report["released"].as_u64().unwrap() >= 1, "{report}");
    // Released, so visible again now rather than after the 60 s timeout.
    let depth = f.queue.depth().await.unwrap();
    assert_eq!(depth.in_flight, 0, "{depth:?}");
    let written = report["messages"].as_u64().unwrap();
    assert_eq!(depth.visible, f.pages() - written, "{depth:?}");

    let done = wait_all(vec![f.worker(&run_id, "2")]).await;
    assert_eq!(worker_messages(&done), f.pages() - written);
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_process_run_with_a_progress_table_is_verified_and_resumed_after_a_kill() {
    let _heavy = HEAVY.lock().await;
    let f = Fixture::new("dist_local", 40_000, 30, 5).await;
    // Capped at 2,000 writes a second, so it is still running when killed.
    let first = f.spawn(&[
        "run",
        &f.mapping,
        "--progress-table",
        "--read-parallelism",
        "2",
        "--max-wcu",
        "2000",
        "--json",
        "--quiet",
    ]);
    let run_id = first.run_id().await;
    f.wait_for(&run_id, "two pages written", |p| {
        p.cursors.iter().map(|c| c.pages_sent).sum::<u64>() >= 2
    })
    .await;
    first.kill().await;
    let before = f.store().load(&run_id).await.unwrap();
    assert!(
        before.totals.len() < 2,
        "both segments finished before the kill"
    );
    assert!(before.batches.len() < f.pages() as usize);
    let v = f.command("verify", &run_id).await;
    assert_eq!(v.code, 1, "a killed run is not verified");

    let resumed = sql2ddb(
        f.sc.path(),
        &["run", &f.mapping, "--resume", &run_id, "--json", "--quiet"],
    )
    .await;
    assert_eq!(resumed.code, 0, "resume:\n{}", resumed.stderr);
    let report = resumed.report();
    assert_eq!(report["run_id"], run_id.as_str());
    assert_eq!(report["status"], "ok");
    // Counted over both attempts, each row once.
    assert_eq!(report["totals"]["rows_read"], 40_000);
    assert_eq!(report["totals"]["items_written"], 40_000);
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

/// Four workers, each given the table's whole capacity as `--max-wcu`,
/// share it as one budget through the run's progress table: the table is
/// asked for about what it has, so it refuses little, and every item is
/// written once (consumed ÷ needed counted by the capacity model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_share_one_write_capacity_cap() {
    let _heavy = HEAVY.lock().await;
    // A table of 400 write units a second, no burst credit; 6,000 one-unit
    // items: 15 s of the table's capacity. Alone, each worker would ask for
    // all of it: four would ask four times what the table has.
    const ROWS: i64 = 6_000;
    let model = sql2ddb_testkit::capacity::CapacityConfig {
        burst: false,
        ..sql2ddb_testkit::capacity::CapacityConfig::provisioned(400, 1, 400)
    };
    let f = Fixture::capped("dist_fleet", ROWS, 250, model).await;
    let run_id = f.read_into_queue().await;
    let workers: Vec<Proc> = (0..4)
        .map(|_| f.worker_with(&run_id, "2", &["--max-wcu", "400"]))
        .collect();
    let done = wait_all(workers).await;
    assert!(worker_messages(&done) >= 24, "every page came to a worker");
    for w in &done {
        let report = w.report();
        assert_eq!(report["fleet_workers"], 4, "{report}");
    }
    f.assert_verified_and_complete(&run_id).await;

    let stats = f.proxy.as_ref().unwrap().capacity_stats().unwrap();
    let usage = &stats.tables[&f.table];
    let needed = ROWS as u64;
    assert!(
        usage.write_units * 100 <= needed * 102,
        "consumed {} write units for {needed} one-unit items",
        usage.write_units
    );
    // Each asking for the whole capacity, the four had about 2.4 requests
    // refused per item (14,636 for 6,000 in one try); sharing it, a few
    // are, while the workers join (a worker learns of the others within a
    // beat): 174 in one try.
    assert!(
        usage.refused_writes * 100 <= needed * 10,
        "{} of {needed} write requests refused: {stats:?}",
        usage.refused_writes
    );
    f.clean_up().await;
}
