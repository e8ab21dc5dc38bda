//! The harness of the distributed end-to-end tests: one test's world (a
//! scenario with a PostgreSQL table, an SQS server with a queue, a mapping)
//! and the reader, worker and verify processes run against it.

use std::time::{Duration, Instant};

use crate::common::*;
use sql2ddb_core::Item;
use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_engine::RunId;
use sql2ddb_queue::{create_queue, QueueUrls, SqsQueue, WorkQueue};
use sql2ddb_testkit::support::Moto;

pub const PAGE: i64 = 2_500;

/// The large runs one at a time: each already keeps several processes busy.
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn expected(i: i64) -> Item {
    item(vec![
        ("PK", s(format!("ITEM#{i}"))),
        ("SK", s("ITEM")),
        ("entity", s("item")),
        ("id", n(i)),
        ("name", s(format!("Name {i}"))),
        ("qty", n(i % 100)),
        ("price", n(decimal(i * 7 % 100_000, 2))),
    ])
}

/// One test's world: a scenario (a PostgreSQL table of `rows` rows, a
/// DynamoDB server, a directory), an SQS server with a queue and its
/// dead-letter queue, a mapping.
pub struct Fixture {
    pub sc: Scenario,
    /// The capacity model in front of the table, when the test has one.
    pub proxy: Option<sql2ddb_testkit::FaultProxy>,
    pub moto: Moto,
    pub urls: QueueUrls,
    pub queue: SqsQueue,
    pub table: String,
    pub mapping: String,
    pub rows: i64,
}

impl Fixture {
    pub async fn new(prefix: &str, rows: i64, visibility: u64, max_receive_count: u32) -> Fixture {
        Fixture::with(prefix, rows, visibility, max_receive_count, PAGE, None).await
    }

    /// A fixture whose table is written through a proxy with the capacity
    /// model `capacity`, read in pages of `page` rows.
    pub async fn capped(
        prefix: &str,
        rows: i64,
        page: i64,
        capacity: sql2ddb_testkit::capacity::CapacityConfig,
    ) -> Fixture {
        Fixture::with(prefix, rows, 60, 5, page, Some(capacity)).await
    }

    async fn with(
        prefix: &str,
        rows: i64,
        visibility: u64,
        max_receive_count: u32,
        page: i64,
        capacity: Option<sql2ddb_testkit::capacity::CapacityConfig>,
    ) -> Fixture {
        let sc = Scenario::new(prefix)
            .postgres(&format!(
                "{}
                 ALTER TABLE {{schema}}.items ADD COLUMN price numeric(10,2);
                 UPDATE {{schema}}.items SET price = ((id * 7) % 100000) / 100.0;
                 ALTER TABLE {{schema}}.items ALTER COLUMN price SET NOT NULL;",
                items_sql(rows as u64)
            ))
            .start()
            .await;
        let moto = Moto::sqs();
        let sqs = sql2ddb_queue::connect(Some(moto.url()), Some("us-east-1"), None)
            .await
            .unwrap();
        let urls = create_queue(
            &sqs,
            &sc.table.replace('_', "-"),
            Duration::from_secs(visibility),
            max_receive_count,
        )
        .await
        .unwrap();
        let queue = SqsQueue::open(sqs, &urls.queue).await.unwrap();
        let table = sc.table.clone();
        let proxy = match capacity {
            Some(model) => {
                let proxy = sc.proxy(sql2ddb_testkit::FaultConfig::default()).await;
                proxy.set_capacity(Some(model)).unwrap();
                Some(proxy)
            }
            None => None,
        };
        let endpoint = proxy.as_ref().map_or(sc.dynamo.url.clone(), |p| p.url());
        let head = mapping_head(&format!("page_size = {page}"), "TABLE", &endpoint);
        let mapping = sc.mapping(&format!(
            r#"{head}[writer]
concurrency = 4

[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
[entity.attributes]
entity = "item"
"#
        ));
        Fixture {
            sc,
            proxy,
            moto,
            urls,
            queue,
            table,
            mapping,
            rows,
        }
    }

    pub fn pages(&self) -> u64 {
        (self.rows as u64).div_ceil(PAGE as u64)
    }

    pub fn spawn(&self, args: &[&str]) -> Proc {
        Proc::spawn(self.sc.path(), args)
    }

    /// `run --queue` reading in two segments.
    pub fn reader(&self, extra: &[&str]) -> Proc {
        let mut args = vec![
            "run",
            &self.mapping,
            "--queue",
            &self.urls.queue,
            "--sqs-endpoint",
            self.moto.url(),
            "--read-parallelism",
            "2",
            "--json",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    /// Runs the [`Fixture::reader`] to its end, exiting 0, and returns its run id.
    pub async fn read_into_queue(&self) -> RunId {
        let reader = self.reader(&[]);
        let run_id = reader.run_id().await;
        let read = reader.wait().await;
        assert_eq!(read.code, 0, "{}", read.stderr);
        run_id
    }

    /// A worker that exits once `run_id` is complete.
    pub fn worker(&self, run_id: &str, concurrency: &str) -> Proc {
        self.worker_with(run_id, concurrency, &[])
    }

    /// [`Fixture::worker`] with `extra` arguments.
    pub fn worker_with(&self, run_id: &str, concurrency: &str, extra: &[&str]) -> Proc {
        let mut args = vec![
            "worker",
            &self.mapping,
            "--queue",
            &self.urls.queue,
            "--sqs-endpoint",
            self.moto.url(),
            "--concurrency",
            concurrency,
            "--until-done",
            "--run",
            run_id,
            "--poll",
            "1",
            "--json",
        ];
        args.extend_from_slice(extra);
        self.spawn(&args)
    }

    pub async fn command(&self, command: &str, run_id: &str) -> Run {
        self.sc
            .sql2ddb(&[
                command,
                &self.mapping,
                "--run",
                run_id,
                "--sqs-endpoint",
                self.moto.url(),
                "--json",
            ])
            .await
    }

    pub fn store(&self) -> ProgressStore {
        ProgressStore::new(self.sc.dynamo.handle.clone(), default_table(&self.table))
    }

    /// Waits until `done` holds for the run's records.
    pub async fn wait_for(
        &self,
        run_id: &RunId,
        what: &str,
        done: impl Fn(&sql2ddb_dynamo::progress::RunProgress) -> bool,
    ) {
        let start = Instant::now();
        loop {
            if let Ok(p) = self.store().load(run_id).await {
                if done(&p) {
                    return;
                }
            }
            assert!(start.elapsed() < PATIENCE, "never saw: {what}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `verify` passes and its counts are exactly the fixture's rows, each
    /// once; every item in the table is its row's mapping.
    pub async fn assert_verified_and_complete(&self, run_id: &str) {
        let v = self.command("verify", run_id).await;
        assert_eq!(v.code, 0, "verify:\n{}\n{}", v.stdout, v.stderr);
        let state = v.report();
        assert_eq!(state["complete"], true);
        let e = &state["entities"][0];
        let rows = self.rows as u64;
        assert_eq!(e["rows_read"], rows, "{state}");
        assert_eq!(e["rows_recorded"], rows, "{state}");
        assert_eq!(e["written"], rows, "{state}");
        assert_eq!(
            (e["rejected"].as_u64(), e["failed"].as_u64()),
            (Some(0), Some(0))
        );
        assert!(state["missing"].as_array().unwrap().is_empty());

        let items = self.sc.items().await;
        assert_eq!(items.len(), self.rows as usize);
        for i in 1..=self.rows {
            let key = (format!("ITEM#{i}"), "ITEM".to_string());
            let got = items
                .get(&key)
                .unwrap_or_else(|| panic!("item {key:?} missing"));
            assert_item(&key, got, &expected(i));
        }
    }

    /// Takes whatever is still in the queue, waiting out the visibility
    /// timeout of messages taken but never deleted, and deletes it; returns
    /// the messages taken.
    pub async fn drain_leftovers(&self) -> Vec<sql2ddb_queue::Message> {
        let start = Instant::now();
        let mut taken = Vec::new();
        loop {
            let depth = self.queue.depth().await.unwrap();
            if depth.visible == 0 && depth.in_flight == 0 {
                return taken;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "messages stayed in the queue: {depth:?}"
            );
            for r in self
                .queue
                .receive(10, Duration::from_secs(1))
                .await
                .unwrap()
            {
                self.queue.ack(&r.handle).await.unwrap();
                taken.push(r.message);
            }
        }
    }

    pub async fn clean_up(self) {
        let sqs = self.queue.client().clone();
        sql2ddb_queue::delete_queue(&sqs, &self.urls.queue)
            .await
            .unwrap();
        sql2ddb_queue::delete_queue(&sqs, &self.urls.dead_letter)
            .await
            .unwrap();
    }
}

pub fn worker_messages(runs: &[Run]) -> u64 {
    runs.iter()
        .map(|r| {
            assert_eq!(r.code, 0, "worker:\n{}", r.stderr);
            r.report()["messages"].as_u64().unwrap()
        })
        .sum()
}
