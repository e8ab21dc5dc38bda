//! `sql2ddb update --queue`: a non-idempotent job (`ADD visits :one`) whose
//! pages go through a real SQS server (moto) to `sql2ddb worker` processes,
//! with a worker SIGKILLed in the middle of a batch and the reader SIGKILLed
//! and resumed: every matching item is incremented exactly once, every
//! other item is untouched, and `verify` proves the run complete from the
//! progress table.

use std::time::{Duration, Instant};

use sql2ddb_dynamo::progress::{default_table, ProgressStore, RunProgress};
use sql2ddb_queue::{create_queue, delete_queue, QueueUrls};

use crate::common::*;
use crate::update::{job, shop, PER_TYPE};
use sql2ddb_testkit::support::Moto;

const COUNT_VISITS: &str = r#"version = 1
[target]
table = "TABLE"
[update]
name = "count-visits"
scan = { segments = 2 }
page_size = 60
where = "begins_with(SK, :o)"
set = "ADD visits :one"
values = { ":o" = "ORDER#", ":one" = 1 }
"#;

/// The mapping that migrated the table: a worker given it applies update
/// batches of its table as well as migration batches (its source is not read).
const SHOP_MAPPING: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"
[target]
table = "TABLE"
region = "us-east-1"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "customer"
from = "public.customers"
pk = "CUSTOMER#{id}"
sk = "PROFILE"
"#;

const RUN: &str = "visits-q1";

struct World {
    sc: Scenario,
    moto: Moto,
    urls: QueueUrls,
    job: String,
}

impl World {
    /// `sc` with an SQS server, a queue whose deliveries stay invisible for
    /// `visibility` seconds, and the job file.
    async fn new(sc: Scenario, visibility: u64) -> World {
        let moto = Moto::sqs();
        let sqs = sql2ddb_queue::connect(Some(moto.url()), Some("us-east-1"), None)
            .await
            .unwrap();
        let name = sc.table.replace('_', "-");
        let urls = create_queue(&sqs, &name, Duration::from_secs(visibility), 10)
            .await
            .unwrap();
        let job = job(&sc, COUNT_VISITS);
        World {
            sc,
            moto,
            urls,
            job,
        }
    }

    fn spawn(&self, args: &[&str]) -> Proc {
        Proc::spawn(self.sc.path(), args)
    }

    /// `sql2ddb update --queue`, with `extra` arguments.
    fn reader(&self, extra: &[&str]) -> Proc {
        let mut args = vec![
            "update",
            &self.job,
            "--endpoint",
            &self.sc.dynamo.url,
            "--queue",
            &self.urls.queue,
            "--sqs-endpoint",
            self.moto.url(),
            "--json",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    /// `sql2ddb worker`, given the job's file, with `extra` arguments.
    fn worker(&self, extra: &[&str]) -> Proc {
        self.worker_of(&self.job, extra)
    }

    /// `sql2ddb worker`, given `file` (a job or a mapping).
    fn worker_of(&self, file: &str, extra: &[&str]) -> Proc {
        let mut args = vec![
            "worker",
            file,
            "--endpoint",
            &self.sc.dynamo.url,
            "--queue",
            &self.urls.queue,
            "--sqs-endpoint",
            self.moto.url(),
            "--poll",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    fn store(&self) -> ProgressStore {
        ProgressStore::new(self.sc.dynamo.handle.clone(), default_table(&self.sc.table))
    }

    async fn progress(&self) -> Option<RunProgress> {
        self.store().load(&RUN.parse().unwrap()).await.ok()
    }

    /// Orders incremented so far.
    async fn incremented(&self) -> usize {
        let items = self.sc.items().await;
        items.values().filter(|i| i.contains_key("visits")).count()
    }
}

async fn wait_until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < PATIENCE, "never saw: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_add_through_sqs_survives_a_killed_worker_and_a_killed_reader_and_counts_once() {
    let _heavy = crate::distributed::HEAVY.lock().await;
    let sc = shop().await;
    let before = sc.items().await;
    let w = World::new(sc, 4).await;

    // The reader, slowed by a read-capacity cap so it can be stopped midway.
    let reader = w.reader(&["--run-id", RUN, "--max-rcu", "1"]);
    // A slow worker taking one batch at a time, killed once it has changed
    // some items of its batch and before it could record it.
    let slow = w.worker(&["--concurrency", "1", "--max-wcu", "4"]);
    wait_until("the slow worker's first increments", || async {
        w.incremented().await > 0
    })
    .await;
    slow.kill().await;
    let recorded = w.progress().await.map_or(0, |p| p.batches.len());
    let changed = w.incremented().await;
    assert_eq!(
        recorded, 0,
        "the slow worker finished a batch: not mid-batch"
    );
    assert!(changed < PER_TYPE, "{changed} items changed by one batch");

    // The reader, killed once it has sent some pages but not all.
    wait_until("pages sent by the reader", || async {
        w.progress()
            .await
            .is_some_and(|p| p.cursors.iter().map(|c| c.pages_sent).sum::<u64>() >= 3)
    })
    .await;
    let sent_before = w.progress().await.unwrap();
    assert!(
        sent_before.totals.len() < 2,
        "the reader had already finished"
    );
    reader.kill().await;

    // Two workers drain the queue (the killed one's batch comes back after
    // its visibility timeout) while the reader resumes from its cursors:
    // one given the job, one given the mapping of the table.
    let mapping = w.sc.mapping(SHOP_MAPPING);
    let until_done = ["--until-done", "--run", RUN, "--concurrency", "2"];
    let by_mapping = w.worker_of(&mapping, &until_done);
    wait_until("a batch recorded by the mapping's worker", || async {
        w.progress().await.is_some_and(|p| !p.batches.is_empty())
    })
    .await;
    let workers = [by_mapping, w.worker(&until_done)];
    let resumed = w.reader(&["--resume", RUN]).wait().await;
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stdout, resumed.stderr);
    let report = resumed.report();
    assert_eq!(report["resumed"], true, "{report}");
    assert_eq!(report["queue"], w.urls.queue.as_str(), "{report}");
    let mut applied = Vec::new();
    for worker in workers {
        let run = worker.wait().await;
        assert_eq!(run.code, 0, "worker:\n{}", run.stderr);
        assert_eq!(run.report()["stopped"], "done", "{}", run.stdout);
        applied.push(run.report()["messages"].as_u64().unwrap());
    }
    assert!(
        applied[0] > 0,
        "the mapping's worker applied batches: {applied:?}"
    );

    // verify: every page recorded, every matching item accounted for.
    let table = default_table(&w.sc.table);
    let verify =
        w.sc.sql2ddb(&[
            "verify",
            "--run",
            RUN,
            "--progress-table",
            &table,
            "--endpoint",
            &w.sc.dynamo.url,
            "--json",
        ])
        .await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    let state = verify.report();
    assert_eq!(state["complete"], true, "{state}");
    let e = &state["entities"][0];
    assert_eq!(e["rows_read"], PER_TYPE, "matching items: {state}");
    assert_eq!(e["written"], PER_TYPE, "{state}");

    // Each order incremented exactly once, marked with the run; nothing
    // else changed at all.
    let after = w.sc.items().await;
    assert_eq!(after.len(), before.len());
    for (k, it) in &after {
        let mut was = before[k].clone();
        if k.1.starts_with("ORDER#") {
            was.insert("visits".into(), n(1));
            was.insert("sql2ddb_run".into(), s(RUN));
        }
        assert_item(k, it, &was);
    }
    let sqs = w.moto_client().await;
    delete_queue(&sqs, &w.urls.queue).await.unwrap();
    delete_queue(&sqs, &w.urls.dead_letter).await.unwrap();
}

#[tokio::test]
async fn a_worker_started_with_a_job_refuses_migration_batches_and_leaves_them_queued() {
    // Migration batches need the mapping: a job's worker must never count
    // them written. The batch stays in the queue for a worker that can.
    let w = World::new(Scenario::new("updqjob").start().await, 30).await;
    let sqs = w.moto_client().await;
    let queue = sql2ddb_queue::SqsQueue::open(sqs.clone(), &w.urls.queue)
        .await
        .unwrap();
    let batch = sql2ddb_core::WorkBatch {
        run_id: "a-migration".parse().unwrap(),
        entity: "item".into(),
        segment: 0,
        page: 0,
        part: sql2ddb_core::BatchPart::WHOLE,
        rows_read: 1,
        items: vec![sql2ddb_core::EncodedItem::new(
            &item(vec![("PK", s("ITEM#1")), ("SK", s("ITEM"))]),
            &[],
            serde_json::json!({ "id": 1 }),
            20,
        )],
        pointers: Vec::new(),
    };
    sql2ddb_queue::WorkQueue::send(&queue, vec![batch.into()])
        .await
        .unwrap();
    let worker = w.worker(&["--idle-exit", "3"]).wait().await;
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    let report = worker.report();
    assert_eq!(report["messages"], 0, "{report}");
    assert_eq!(report["left"], 1, "{report}");
    assert!(
        worker.stderr.contains("started with an update job"),
        "{}",
        worker.stderr
    );
    // Nothing was written (the table was never even created), and the
    // batch is still in the queue.
    assert!(!w.sc.table_exists(&w.sc.table).await);
    let depth = sql2ddb_queue::WorkQueue::depth(&queue).await.unwrap();
    assert_eq!(depth.visible + depth.in_flight, 1, "{depth:?}");
    delete_queue(&sqs, &w.urls.queue).await.unwrap();
    delete_queue(&sqs, &w.urls.dead_letter).await.unwrap();
}

impl World {
    async fn moto_client(&self) -> sql2ddb_queue::SqsClient {
        sql2ddb_queue::connect(Some(self.moto.url()), Some("us-east-1"), None)
            .await
            .unwrap()
    }
}
