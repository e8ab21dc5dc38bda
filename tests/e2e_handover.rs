//! The hand-over from the full load to the follow: the follow writes with
//! the settings the full load was given (a write-capacity cap the table
//! would throttle without), a pointer carries its newest row whole (a NULL
//! removes the older row's value), a resumed full load is followed from
//! its first attempt's position (nothing the first attempt wrote stays
//! stale), an endpoint that cannot be reached is exit 69 whatever the
//! follow was writing, and each job loads one AWS context and makes one
//! DynamoDB handle for all its phases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sql2ddb_core::AttrValue;
use sql2ddb_testkit::capacity::CapacityConfig;
use sql2ddb_testkit::FaultConfig;

use crate::common::*;
use crate::follow_scenario::{wait_for, Db, SlotGuard};

const ITEMS: &str = pg_mapping!(
    url = "SOURCE_URL",
    "WRITER",
    r#"
[[entity]]
name = "item"
from = "ROWS_FROM"
pk = "ITEM#{id}"
sk = "ITEM"
"#
);

/// The items mapping over `db`'s `items`, with `[source]` lines `source`.
fn items_mapping(sc: &Scenario, db: Db, source: &str, writer: &str) -> String {
    let (url, from) = match db {
        Db::Postgres => (pg_url().to_string(), "SCHEMA.items"),
        Db::MariaDb => (sc.my().url.clone(), "items"),
    };
    sc.mapping(
        &ITEMS
            .replace("SOURCE_URL", &url)
            .replace("ROWS_FROM", from)
            .replace("WRITER", &format!("{source}\n"))
            .replace("[[entity]]", &format!("{writer}\n[[entity]]")),
    )
}

/// The run id a finished `run` printed first.
fn run_id_of(run: &Run) -> String {
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("run "))
        .unwrap_or_else(|| panic!("no run id:\n{}", run.stderr));
    line[4..].split(':').next().unwrap().trim().to_string()
}

/// Waits until the table holds `n` items.
async fn until_items(sc: &Scenario, n: usize) {
    let start = Instant::now();
    loop {
        let got = match sc.table_exists(&sc.table).await {
            true => sc.items().await.len(),
            false => 0,
        };
        if got >= n {
            return;
        }
        assert!(start.elapsed() < PATIENCE, "{got} items of {n}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `run --follow --max-wcu 100` and `follow --max-wcu 100` against a table
/// of 400 write units a second with 100 banked (the capacity model, one
/// partition, time 4x): 500 inserted rows arrive as one transaction,
/// written uncapped (8 calls of 25 items at once) the table throttles
/// them; under the cap nothing is throttled, in either phase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follow_writes_with_the_full_loads_capacity_cap() {
    let sc = Scenario::new("handover_cap")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = items_mapping(&sc, Db::Postgres, "", "");
    let proxy = sc.proxy(FaultConfig::default()).await;
    let model = CapacityConfig {
        time_scale: 4.0,
        burst: false,
        ..CapacityConfig::provisioned(100, 1, 100)
    };
    proxy.set_capacity(Some(model)).unwrap();
    let endpoint = proxy.url();
    let throttled = || {
        let s = proxy.capacity_stats().unwrap();
        s.throttled_calls() + s.partial_calls
    };
    let insert = |from: i64| {
        format!(
            "INSERT INTO {}.items SELECT i, 'new ' || i, 1 FROM generate_series({from}, {}) i",
            sc.pg().name,
            from + 499
        )
    };

    let args = [
        "run",
        &mapping,
        "--endpoint",
        &endpoint,
        "--follow",
        "--max-wcu",
        "100",
        "--quiet",
    ];
    let follower = Proc::spawn(sc.path(), &args);
    let run_id = follower.run_id().await;
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = SlotGuard(slot.clone());
    wait_for(&follower, "following ").await;
    assert!(
        follower
            .stderr
            .lock()
            .unwrap()
            .contains("capped at 100 write units per second"),
        "{}",
        follower.stderr.lock().unwrap()
    );
    sc.pg().exec(&insert(21)).await;
    until_items(&sc, 520).await;
    follower.interrupt();
    let out = follower.wait().await;
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert_eq!(throttled(), 0, "{:?}", proxy.capacity_stats());
    // The command printed to go on names the mapping and the endpoint, and
    // keeps the cap: it can be pasted as it is.
    let go_on =
        format!("sql2ddb follow {mapping} --endpoint {endpoint} --slot {slot} --max-wcu 100`");
    assert!(out.stdout.contains(&go_on), "{}", out.stdout);

    // `follow` on its own, with the flag of its own.
    sc.pg().exec(&insert(521)).await;
    let out = sc
        .sql2ddb(&[
            "follow",
            &mapping,
            "--slot",
            &slot,
            "--endpoint",
            &endpoint,
            "--max-wcu",
            "100",
            "--follow-until-idle",
            "2",
            "--json",
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(report["writer"]["max_wcu"], 100, "{report}");
    assert_eq!(report["counts"]["puts"], 500, "{report}");
    assert_eq!(sc.items().await.len(), 1020);
    assert_eq!(throttled(), 0, "{:?}", proxy.capacity_stats());
}

const POINTER_FIXTURE: &str = "
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer text, note text);
INSERT INTO {schema}.orders VALUES (1, 'ann', 'first'), (2, 'bob', 'second'), (3, 'cid', NULL);
";

const POINTER_MAPPING: &str = pg_mapping!(
    "page_size = 2\nread_parallelism = 1",
    r#"
[writer]
concurrency = 1

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "ORDER#{order_id}"
sk = "ORDER"

[[pointer]]
entity = "order"
name = "LAST_ORDER"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { customer = "{customer}", note = "{note}" }
"#
);

/// The LAST_ORDER pointer item's attributes other than its key.
async fn pointer(sc: &Scenario) -> BTreeMap<String, AttrValue> {
    let mut item = sc
        .items()
        .await
        .remove(&key("LAST_ORDER", "LAST_ORDER"))
        .expect("the pointer item");
    item.remove("PK");
    item.remove("SK");
    item
}

/// Waits until the pointer holds order `id`; returns its attributes.
async fn pointer_at(sc: &Scenario, id: i64) -> BTreeMap<String, AttrValue> {
    let start = Instant::now();
    loop {
        let p = pointer(sc).await;
        if p.get("orderId") == Some(&n(id)) {
            return p;
        }
        assert!(start.elapsed() < PATIENCE, "pointer at {p:?}, not {id}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A row whose carried column is NULL moves the pointer with that
/// attribute removed: pages of 2 rows written one after the other (the
/// full load), and one transaction after another (the follow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pointer_carries_its_newest_row_whole_nulls_included() {
    let sc = Scenario::new("handover_ptr")
        .postgres(POINTER_FIXTURE)
        .start()
        .await;
    let mapping = sc.mapping(POINTER_MAPPING);
    let endpoint = sc.dynamo.url.clone();
    let args = [
        "run",
        &mapping,
        "--endpoint",
        &endpoint,
        "--follow",
        "--quiet",
    ];
    let follower = Proc::spawn(sc.path(), &args);
    let run_id = follower.run_id().await;
    let _dropped_at_the_end = SlotGuard(sql2ddb_engine::follow::slot_name(&run_id));
    wait_for(&follower, "following ").await;
    // The full load: page 1 moved it to order 2 with its note; order 3 has none.
    let whole = |id: i64, customer: &str, note: Option<&str>| {
        let mut p = BTreeMap::from([
            ("orderId".to_string(), n(id)),
            ("customer".to_string(), s(customer)),
        ]);
        if let Some(note) = note {
            p.insert("note".to_string(), s(note));
        }
        p
    };
    assert_eq!(pointer_at(&sc, 3).await, whole(3, "cid", None));

    let pg = sc.pg();
    let orders = format!("{}.orders", pg.name);
    pg.exec(&format!("INSERT INTO {orders} VALUES (4, 'dan', 'fourth')"))
        .await;
    assert_eq!(pointer_at(&sc, 4).await, whole(4, "dan", Some("fourth")));
    pg.exec(&format!("INSERT INTO {orders} VALUES (5, NULL, NULL)"))
        .await;
    let mut last = BTreeMap::from([("orderId".to_string(), n(5))]);
    assert_eq!(pointer_at(&sc, 5).await, last);
    pg.exec(&format!("INSERT INTO {orders} VALUES (6, 'fay', NULL)"))
        .await;
    last = whole(6, "fay", None);
    assert_eq!(pointer_at(&sc, 6).await, last);

    follower.interrupt();
    let out = follower.wait().await;
    assert_eq!(out.code, 130, "{}", out.stderr);
    assert_eq!(pointer(&sc).await, last);
    // The cutover's `verify --deep` compares the pointer item whole with
    // the source's newest row.
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let out = sc
        .sql2ddb(&[
            "follow",
            &mapping,
            "--slot",
            &slot,
            "--endpoint",
            &endpoint,
            "--cutover",
        ])
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
}

/// Rows of the resume test, and the writer's pace.
const RESUMED_ROWS: i64 = 20_000;

/// `run --follow` killed (MariaDB) or stopped (PostgreSQL) during its full
/// load, `run --resume`, then `follow --run`: a writer updates rows all along (also rows the first
/// attempt had written before the resumed attempt's snapshot), and the
/// cutover finds the table equal to the source.
async fn a_resumed_full_load_is_followed_from_its_first_attempt(db: Db, prefix: &str) {
    let sc = match db {
        Db::Postgres => Scenario::new(prefix).postgres(&items_sql(RESUMED_ROWS as u64)),
        Db::MariaDb => Scenario::new(prefix).mariadb(&format!(
            "CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
             INSERT INTO items SELECT seq, CONCAT('Name ', seq), seq % 100 FROM seq_1_to_{RESUMED_ROWS};"
        )),
    }
    .start()
    .await;
    let mapping = items_mapping(&sc, db, "page_size = 500", "[writer]\nmax_wcu = 2000\n");
    let endpoint = sc.dynamo.url.clone();
    let table = match db {
        Db::Postgres => format!("{}.items", sc.pg().name),
        Db::MariaDb => "items".to_string(),
    };

    // The writer: one row updated at a time, all through the test.
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, updates, table) = (stop.clone(), updates.clone(), table.clone());
        let pg = (db == Db::Postgres).then(|| sc.pg().pool.clone());
        let my = (db == Db::MariaDb).then(|| sc.my().pool.clone());
        tokio::spawn(async move {
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let id = (i * 7919) % RESUMED_ROWS + 1;
                let sql =
                    format!("UPDATE {table} SET qty = qty + 1000, name = 'w{i}' WHERE id = {id}");
                let sql = sqlx::AssertSqlSafe(sql);
                match (&pg, &my) {
                    (Some(p), _) => drop(sqlx::raw_sql(sql).execute(p).await.unwrap()),
                    (_, Some(m)) => drop(sqlx::raw_sql(sql).execute(m).await.unwrap()),
                    _ => unreachable!(),
                }
                updates.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    let first = Proc::spawn(
        sc.path(),
        &[
            "run",
            &mapping,
            "--endpoint",
            &endpoint,
            "--follow",
            "--progress-table",
            "--quiet",
        ],
    );
    let run_id = first.run_id().await;
    let _dropped_at_the_end =
        (db == Db::Postgres).then(|| SlotGuard(sql2ddb_engine::follow::slot_name(&run_id)));
    until_items(&sc, 4_000).await;
    match db {
        // Killed: no report, only what the progress table recorded.
        Db::MariaDb => first.kill().await,
        // Stopped: the report says what is kept and how to go on.
        Db::Postgres => {
            first.interrupt();
            let out = first.wait().await;
            assert_eq!(out.code, 130, "{}", out.stderr);
            let slot = sql2ddb_engine::follow::slot_name(&run_id);
            let kept = format!("replication slot {slot} is kept: follow the changes once the full load is complete (`sql2ddb follow {mapping} --endpoint {endpoint} --slot {slot}`)");
            assert!(out.stderr.contains(&kept), "{}", out.stderr);
        }
    }
    let written_first = sc.items().await.len();
    assert!(
        written_first < RESUMED_ROWS as usize,
        "killed after the full load"
    );
    // Changes between the attempts, to rows the first attempt wrote.
    let before = updates.load(Ordering::Relaxed);
    let start = Instant::now();
    while updates.load(Ordering::Relaxed) < before + 200 {
        assert!(start.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let resumed = sc
        .run(
            &mapping,
            &["--resume", &run_id, "--progress-table", "--quiet"],
        )
        .await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();

    let follow = sc
        .sql2ddb(&[
            "follow",
            &mapping,
            "--run",
            &run_id,
            "--endpoint",
            &endpoint,
            "--cutover",
        ])
        .await;
    assert_eq!(follow.code, 0, "{}\n{}", follow.stdout, follow.stderr);

    // Independently of `verify --deep`: every item as its row is now.
    let rows: Vec<(i64, String, i64)> = match db {
        Db::Postgres => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, name, qty::bigint FROM {table}"
        )))
        .fetch_all(&sc.pg().pool)
        .await
        .unwrap(),
        Db::MariaDb => sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, name, CAST(qty AS SIGNED) FROM {table}"
        )))
        .fetch_all(&sc.my().pool)
        .await
        .unwrap(),
    };
    let items = sc.items().await;
    assert_eq!(items.len(), rows.len());
    let stale: Vec<i64> = rows
        .iter()
        .filter(|(id, name, qty)| {
            let item = &items[&key(&format!("ITEM#{id}"), "ITEM")];
            item.get("name") != Some(&s(name.as_str())) || item.get("qty") != Some(&n(*qty))
        })
        .map(|(id, _, _)| *id)
        .collect();
    assert!(
        stale.is_empty(),
        "{} stale items, e.g. {:?}",
        stale.len(),
        &stale[..stale.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_full_load_is_followed_from_its_first_attempt_on_mariadb() {
    a_resumed_full_load_is_followed_from_its_first_attempt(Db::MariaDb, "handover_res_my").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_full_load_is_followed_from_its_first_attempt_on_postgres() {
    a_resumed_full_load_is_followed_from_its_first_attempt(Db::Postgres, "handover_res_pg").await;
}

/// A follow whose DynamoDB endpoint is down exits 69 (unavailable), not
/// 78, and keeps its position: a follow against the endpoint back writes
/// every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_endpoint_during_a_follow_is_unavailable() {
    let sc = Scenario::new("handover_down")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = items_mapping(&sc, Db::Postgres, "", "[writer]\nmax_attempts = 3\n");
    let endpoint = sc.dynamo.url.clone();
    let run = sc
        .run(
            &mapping,
            &["--follow", "--follow-until-idle", "1", "--quiet"],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let slot = sql2ddb_engine::follow::slot_name(&run_id_of(&run));
    let _dropped_at_the_end = SlotGuard(slot.clone());
    sc.pg()
        .exec(&format!(
            "INSERT INTO {}.items SELECT i, 'new ' || i, 0 FROM generate_series(21, 60) i",
            sc.pg().name
        ))
        .await;

    // A port nobody listens on: the server is down.
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let follow = |endpoint: String| {
        let (mapping, slot) = (mapping.clone(), slot.clone());
        let dir = sc.path().to_path_buf();
        async move {
            let args = [
                "follow",
                &mapping,
                "--slot",
                &slot,
                "--endpoint",
                &endpoint,
                "--follow-until-idle",
                "1",
            ];
            sql2ddb(&dir, &args).await
        }
    };
    let out = follow(down).await;
    assert_eq!(out.code, EX_UNAVAILABLE, "{}", out.stderr);
    assert!(
        out.stderr.contains("replication slot") && out.stderr.contains("is kept"),
        "{}",
        out.stderr
    );
    assert_eq!(sc.items().await.len(), 20);

    let out = follow(endpoint).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let items = sc.items().await;
    assert_eq!(items.len(), 60);
    assert_eq!(items[&key("ITEM#60", "ITEM")]["name"], s("new 60"));
}

/// AWS credentials from a profile whose `credential_process` counts its
/// runs: an AWS context runs it at its first signed call and caches what
/// it gave, so the count is how many contexts a process loaded and used.
struct CountedCredentials {
    config: PathBuf,
    counter: PathBuf,
    missing: PathBuf,
}

impl CountedCredentials {
    fn new(dir: &Path, name: &str) -> CountedCredentials {
        use std::os::unix::fs::PermissionsExt;
        let counter = dir.join(format!("{name}.runs"));
        let script = dir.join(format!("{name}.sh"));
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho run >> '{}'\nprintf '%s' '{{\"Version\": 1, \"AccessKeyId\": \"counted\", \"SecretAccessKey\": \"counted\"}}'\n",
                counter.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = dir.join(format!("{name}.config"));
        std::fs::write(
            &config,
            format!(
                "[profile counted]\ncredential_process = {}\n",
                script.display()
            ),
        )
        .unwrap();
        CountedCredentials {
            config,
            counter,
            missing: dir.join(format!("{name}.no-such-file")),
        }
    }

    /// The binary in `dir` with `args`, its credentials this profile's
    /// alone.
    async fn sql2ddb(&self, dir: &Path, args: &[&str]) -> Run {
        let mut cmd = command(dir, args);
        for var in AWS_CREDENTIAL_VARS {
            cmd.env_remove(var);
        }
        cmd.env("AWS_PROFILE", "counted")
            .env("AWS_CONFIG_FILE", &self.config)
            .env("AWS_SHARED_CREDENTIALS_FILE", &self.missing)
            .env("AWS_EC2_METADATA_DISABLED", "true");
        let out = cmd.output().await.unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// How many times the credentials were asked for.
    fn runs(&self) -> usize {
        std::fs::read_to_string(&self.counter)
            .unwrap_or_default()
            .lines()
            .count()
    }
}

/// `run --follow` (the table's check, the full load, the follow) and
/// `follow --cutover` (the follow, the comparison with the source) each
/// load one AWS context, shared by their phases: the credentials are
/// asked for once per job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_job_loads_one_aws_context_for_all_its_phases() {
    let sc = Scenario::new("handover_aws")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = items_mapping(&sc, Db::Postgres, "", "");
    let endpoint = sc.dynamo.url.clone();

    let loaded = CountedCredentials::new(sc.path(), "run-follow");
    let run = loaded
        .sql2ddb(
            sc.path(),
            &[
                "run",
                &mapping,
                "--endpoint",
                &endpoint,
                "--follow",
                "--follow-until-idle",
                "1",
                "--quiet",
            ],
        )
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let slot = sql2ddb_engine::follow::slot_name(&run_id_of(&run));
    let _dropped_at_the_end = SlotGuard(slot.clone());
    assert_eq!(sc.items().await.len(), 20);
    assert_eq!(loaded.runs(), 1, "credentials asked for once per context");

    sc.pg()
        .exec(&format!(
            "INSERT INTO {}.items SELECT i, 'new ' || i, 0 FROM generate_series(21, 40) i",
            sc.pg().name
        ))
        .await;
    let cut = CountedCredentials::new(sc.path(), "cutover");
    let out = cut
        .sql2ddb(
            sc.path(),
            &[
                "follow",
                &mapping,
                "--slot",
                &slot,
                "--endpoint",
                &endpoint,
                "--cutover",
            ],
        )
        .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(sc.items().await.len(), 40);
    assert_eq!(cut.runs(), 1, "credentials asked for once per context");
}

/// `run --follow` ending in a cutover with its comparison, in this
/// process: the table's check, the full load, the follow and the
/// comparison each take the job's one DynamoDB handle (one connection
/// pool), and no phase makes another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_phase_of_run_follow_takes_the_jobs_one_dynamodb_handle() {
    use sql2ddb_engine::follow::{run_and_follow, FollowAfterLoad};
    use sql2ddb_engine::{AwsContext, JobContext, RunOptions, RunProgress};

    let sc = Scenario::new("handover_handle")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = items_mapping(&sc, Db::Postgres, "", "");
    let text = std::fs::read_to_string(&mapping).unwrap();
    let plan = sql2ddb_mapping::Plan::parse(&text, mapping.as_ref(), &|_| None).unwrap();
    let job = JobContext::new(AwsContext::load(None, false).await);
    let run_id = sql2ddb_engine::new_run_id();
    let _dropped_at_the_end = SlotGuard(sql2ddb_engine::follow::slot_name(&run_id));
    let opts = RunOptions {
        endpoint: Some(sc.dynamo.url.clone()),
        runs_dir: sc.path().join("runs"),
        run_id: Some(run_id),
        job_context: Some(job.clone()),
        ..RunOptions::default()
    };
    let after = FollowAfterLoad {
        cutover: true,
        compare: true,
        ..FollowAfterLoad::default()
    };
    let outcome = run_and_follow(&plan, &opts, &after, RunProgress::new(), &|_| {})
        .await
        .unwrap();
    if let Err(e) = &outcome.load {
        panic!("the full load failed: {e}");
    }
    let (_, followed) = outcome.follow.expect("the follow ran");
    if let Err(e) = &followed.follow {
        panic!("the follow failed: {e}");
    }
    let cutover = followed.cutover.expect("the follow cut over");
    assert!(
        cutover.compared.equal_or_skipped(),
        "the table equals the source"
    );
    assert_eq!(sc.items().await.len(), 20);
    assert_eq!(
        job.dynamo_handles(),
        (1, 4),
        "one handle made, taken by the check, the load, the follow and the comparison"
    );
}
