//! The harness of the distributed end-to-end tests: child processes of the
//! binary with their output collected, and one test's world (a PostgreSQL
//! table, a DynamoDB server, an SQS server with a queue, a mapping).
#![allow(dead_code)]

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::common::*;
use super::moto_server::MotoServer;
use sql2ddb_core::Item;
use sql2ddb_dynamo::progress::{default_table, ProgressStore};
use sql2ddb_queue::{create_queue, QueueUrls, SqsQueue};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// Gives up on a condition that never comes (generous: nothing here measures speed).
pub const PATIENCE: Duration = Duration::from_secs(240);
pub const PAGE: i64 = 2_500;

/// The large runs one at a time: each already keeps several processes busy.
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `units / 10^2` in plain notation without trailing zeros.
pub fn cents(units: i64) -> String {
    let frac = format!("{:02}", units % 100);
    let frac = frac.trim_end_matches('0');
    match frac.is_empty() {
        true => format!("{}", units / 100),
        false => format!("{}.{frac}", units / 100),
    }
}

pub fn expected(i: i64) -> Item {
    [
        ("PK", s(format!("ITEM#{i}"))),
        ("SK", s("ITEM")),
        ("entity", s("item")),
        ("id", n(i)),
        ("name", s(format!("Name {i}"))),
        ("qty", n(i % 100)),
        ("price", n(cents(i * 7 % 100_000))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A child process of the binary, its output collected as it comes.
pub struct Proc {
    pub child: Child,
    pub stdout: Arc<Mutex<String>>,
    pub stderr: Arc<Mutex<String>>,
}

pub fn collect(mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let into = text.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

impl Proc {
    pub fn spawn(dir: &Path, args: &[&str]) -> Proc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sql2ddb"))
            .args(args)
            .current_dir(dir)
            .env_remove("SQL2DDB_SQS_ENDPOINT")
            .env_remove("SQL2DDB_PROGRESS_TABLE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Proc {
            child,
            stdout,
            stderr,
        }
    }

    /// The run id a `run` prints first.
    pub async fn run_id(&self) -> String {
        let start = Instant::now();
        loop {
            let text = self.stderr.lock().unwrap().clone();
            if let Some(line) = text.lines().find(|l| l.starts_with("run ")) {
                let id = line[4..].split(':').next().unwrap().trim();
                return id.to_string();
            }
            assert!(start.elapsed() < PATIENCE, "no run id printed:\n{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn wait(mut self) -> Run {
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "process still running after {PATIENCE:?}:\n{}",
                    self.stderr.lock().unwrap()
                )
            })
            .unwrap();
        // The readers see the end of the pipes just after the exit.
        tokio::time::sleep(Duration::from_millis(100)).await;
        Run {
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.lock().unwrap().clone(),
            stderr: self.stderr.lock().unwrap().clone(),
        }
    }

    /// SIGTERM, as a scheduler stopping the process would.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGKILL, as a crash would.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// One test's world: a PostgreSQL table of `rows` rows, a DynamoDB server,
/// an SQS server with a queue and its dead-letter queue, a mapping.
pub struct Fixture {
    pub pg: PgSchema,
    pub dynamo: Dynamo,
    pub moto: MotoServer,
    pub urls: QueueUrls,
    pub queue: SqsQueue,
    pub dir: tempfile::TempDir,
    pub table: String,
    pub mapping: String,
    pub rows: i64,
}

impl Fixture {
    pub async fn new(prefix: &str, rows: i64, visibility: u64, max_receive_count: u32) -> Fixture {
        let pg = PgSchema::create(prefix).await;
        pg.exec(&format!(
            "CREATE TABLE {{schema}}.items (id bigint PRIMARY KEY, name text NOT NULL,
                 qty int NOT NULL, price numeric(10,2) NOT NULL);
             INSERT INTO {{schema}}.items
                 SELECT i, 'Name ' || i, i % 100, ((i * 7) % 100000) / 100.0
                 FROM generate_series(1, {rows}) AS i;"
        ))
        .await;
        let dynamo = Dynamo::start().await;
        let moto = MotoServer::start();
        let sqs = sql2ddb_queue::connect(Some(moto.url()), Some("us-east-1"), None)
            .await
            .unwrap();
        let urls = create_queue(
            &sqs,
            &pg.name.replace('_', "-"),
            Duration::from_secs(visibility),
            max_receive_count,
        )
        .await
        .unwrap();
        let queue = SqsQueue::open(sqs, &urls.queue).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let table = pg.name.clone();
        let mapping = write_mapping(
            dir.path(),
            &format!(
                r#"
version = 1
[source]
url = "{PG_URL}"
page_size = {PAGE}
[target]
table = "{table}"
endpoint = "{}"
region = "us-east-1"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}
[writer]
concurrency = 4

[[entity]]
name = "item"
from = "{}.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
[entity.attributes]
entity = "item"
"#,
                dynamo.url, pg.name
            ),
        );
        Fixture {
            pg,
            dynamo,
            moto,
            urls,
            queue,
            dir,
            table,
            mapping,
            rows,
        }
    }

    pub fn pages(&self) -> u64 {
        (self.rows as u64).div_ceil(PAGE as u64)
    }

    pub fn spawn(&self, args: &[&str]) -> Proc {
        Proc::spawn(self.dir.path(), args)
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

    /// A worker that exits once `run_id` is complete.
    pub fn worker(&self, run_id: &str, concurrency: &str) -> Proc {
        self.spawn(&[
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
        ])
    }

    pub async fn command(&self, command: &str, run_id: &str) -> Run {
        sql2ddb(
            self.dir.path(),
            &[
                command,
                &self.mapping,
                "--run",
                run_id,
                "--sqs-endpoint",
                self.moto.url(),
                "--json",
            ],
        )
        .await
    }

    pub fn store(&self) -> ProgressStore {
        ProgressStore::new(self.dynamo.client.clone(), default_table(&self.table))
    }

    /// Waits until `done` holds for the run's records.
    pub async fn wait_for(
        &self,
        run_id: &str,
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

        let items = self.dynamo.scan(&self.table).await;
        assert_eq!(items.len(), self.rows as usize);
        for i in 1..=self.rows {
            let key = (format!("ITEM#{i}"), "ITEM".to_string());
            let got = items
                .get(&key)
                .unwrap_or_else(|| panic!("item {key:?} missing"));
            assert_item(&key, got, &expected(i));
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
        self.pg.drop_schema().await;
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

pub async fn wait_all(procs: Vec<Proc>) -> Vec<Run> {
    let mut runs = Vec::new();
    for p in procs {
        runs.push(p.wait().await);
    }
    runs
}
