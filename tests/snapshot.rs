//! Point-in-time reads: a run reads one snapshot of a live
//! source; rows written, updated and deleted after it was announced are not
//! in the copy, and the report names the snapshot and its WAL position.
//! MySQL/MariaDB and SQLite alike. `SQL2DDB_TEST_SNAPSHOT_ROWS=200000`
//! runs the live-source test at full size (default 20,000 rows).

use sql2ddb_core::AttrValue;

use crate::common::*;

const ROWS: i64 = 20_000;

/// Rows of the live-source test: `SQL2DDB_TEST_SNAPSHOT_ROWS` (e.g.
/// 200000 for a long run), else [`ROWS`].
fn live_rows() -> i64 {
    std::env::var("SQL2DDB_TEST_SNAPSHOT_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &i64| n >= 100)
        .unwrap_or(ROWS)
}

fn mapping_text() -> String {
    format!(
        "version = 1\n[source]\nurl = \"{}\"\npage_size = 100\n[target]\ntable = \"TABLE\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"acct\"\nfrom = \"SCHEMA.acct\"\npk = \"A#{{id}}\"\n",
        pg_url()
    )
}

fn mapping(sc: &Scenario) -> String {
    sc.mapping(&mapping_text())
}

async fn scenario() -> Scenario {
    Scenario::new("snap")
        .postgres(&format!(
            "CREATE TABLE {{schema}}.acct (id int PRIMARY KEY, v text NOT NULL);
             INSERT INTO {{schema}}.acct SELECT i, 'v' || i FROM generate_series(1, {ROWS}) i;"
        ))
        .start()
        .await
}

/// Starts `run MAPPING` on the scenario's server with `extra` options and
/// returns once the run has announced its snapshot (the test writes then).
async fn start_run(sc: &Scenario, mapping: &str, extra: &[&str]) -> Proc {
    let mut args = vec![
        "run",
        mapping,
        "--endpoint",
        sc.dynamo.url.as_str(),
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let run = Proc::spawn(sc.path(), &args);
    let start = std::time::Instant::now();
    while !run.stderr.lock().unwrap().contains("snapshot ") {
        let failed = run.stderr.lock().unwrap().contains("error");
        assert!(
            start.elapsed() < PATIENCE && !failed,
            "no snapshot announced:\n{}",
            run.stderr.lock().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    run
}

/// Asserts the table holds `rows` items `A#1..=rows` as they were before
/// the test's writes: 2 (deleted), 3 and `rows - 2` (updated) as they were,
/// -1 (inserted) absent.
async fn assert_copied_as_before(sc: &Scenario, rows: i64) {
    let items = sc.items().await;
    assert_eq!(items.len() as i64, rows);
    let v = |id: i64| items[&(format!("A#{id}"), String::new())]["v"].clone();
    assert_eq!(v(2), s("v2"), "deleted after the snapshot: still copied");
    assert_eq!(
        v(3),
        s("v3"),
        "updated after the snapshot: copied as it was"
    );
    assert_eq!(v(rows - 2), s(format!("v{}", rows - 2)));
    assert!(!items.contains_key(&("A#-1".to_string(), String::new())));
}

/// The same rows with one embedded child each (`line`, `qty` = id).
fn mapping_with_lines(sc: &Scenario) -> String {
    sc.mapping(&format!(
        "{}[[entity.embed]]\nname = \"lines\"\nfrom = \"SCHEMA.line\"\nparent_key = [\"acct_id\"]\norder_by = [\"n\"]\nexclude = [\"acct_id\"]\n",
        mapping_text()
    ))
}

/// Asserts the run has not finished yet (the test's writes came while it read).
fn assert_still_running(run: &Proc) {
    assert!(
        !run.stdout.lock().unwrap().contains("\"status\""),
        "the run finished before the test wrote: the writes did not race it"
    );
}

/// The server's current WAL position.
async fn wal_now(sc: &Scenario) -> String {
    let (lsn,): (String,) = sqlx::query_as("SELECT pg_current_wal_lsn()::text")
        .fetch_one(&sc.pg().pool)
        .await
        .unwrap();
    lsn
}

/// Whether WAL position `a` is at or before `b`.
async fn wal_le(sc: &Scenario, a: &str, b: &str) -> bool {
    let (le,): (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT pg_lsn('{a}') <= pg_lsn('{b}')"
    )))
    .fetch_one(&sc.pg().pool)
    .await
    .unwrap();
    le
}

#[tokio::test]
async fn a_run_reads_one_snapshot_of_a_live_source() {
    let rows = live_rows();
    let sc = Scenario::new("snap")
        .postgres(&format!(
            "CREATE TABLE {{schema}}.acct (id int PRIMARY KEY, v text NOT NULL);
             INSERT INTO {{schema}}.acct SELECT i, 'v' || i FROM generate_series(1, {rows}) i;
             CREATE TABLE {{schema}}.line (acct_id int NOT NULL, n int NOT NULL, qty int NOT NULL, PRIMARY KEY (acct_id, n));
             INSERT INTO {{schema}}.line SELECT i, 1, i FROM generate_series(1, {rows}) i;"
        ))
        .start()
        .await;
    let mapping = mapping_with_lines(&sc);
    let before = wal_now(&sc).await;
    // Once the snapshot is announced, the application writes: new rows in
    // ranges read and not yet read, a parent and its child updated together,
    // deletes.
    let run = start_run(
        &sc,
        &mapping,
        &[
            "--concurrency",
            "2",
            "--read-parallelism",
            "8",
            "--max-wcu",
            "5000",
        ],
    )
    .await;
    let announced = wal_now(&sc).await;
    let (mid, last) = (rows / 2, rows - 2);
    sc.pg()
        .exec(&format!(
            "INSERT INTO {{schema}}.acct VALUES (-1, 'new'), ({}, 'new'), (5000, 'x') ON CONFLICT DO NOTHING;
             BEGIN;
             UPDATE {{schema}}.acct SET v = 'changed' WHERE id IN (3, {mid}, {last});
             UPDATE {{schema}}.line SET qty = -1 WHERE acct_id IN (3, {mid}, {last});
             INSERT INTO {{schema}}.line VALUES (3, 2, 7), ({last}, 2, 7);
             DELETE FROM {{schema}}.line WHERE acct_id IN (2, {});
             DELETE FROM {{schema}}.acct WHERE id IN (2, {});
             COMMIT;",
            rows + 1,
            rows - 1,
            rows - 1
        ))
        .await;
    assert_still_running(&run);
    let out = run.wait().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.report();
    let snapshot = &report["snapshot"];
    assert_eq!(snapshot["kind"], "postgres", "{snapshot}");
    let lsn = snapshot["lsn"].as_str().expect("an LSN").to_string();
    assert!(snapshot["id"].as_str().is_some_and(|id| !id.is_empty()));
    let e = out.entity("acct");
    assert_eq!(e["segments"], 8);
    assert_eq!(e["rows_read"], rows);
    assert_eq!(e["rows_counted"], rows);
    assert_eq!(e["items_written"], rows);
    // The table holds the source exactly as it was at the snapshot, parents
    // and their children alike.
    assert_copied_as_before(&sc, rows).await;
    let items = sc.items().await;
    assert!(!items.contains_key(&(format!("A#{}", rows + 1), String::new())));
    for id in [2, 3, mid, last, rows - 1] {
        let got = &items[&(format!("A#{id}"), String::new())];
        assert_eq!(
            got["lines"],
            AttrValue::L(vec![AttrValue::M(item(vec![("n", n(1)), ("qty", n(id))]))]),
            "A#{id}: its children as they were at the snapshot"
        );
    }
    // The reported position is the server's at the moment of the snapshot:
    // after the run started, at or before its announcement.
    assert!(wal_le(&sc, &before, &lsn).await, "{before} then {lsn}");
    assert!(
        wal_le(&sc, &lsn, &announced).await,
        "{lsn} then {announced}"
    );
}

#[tokio::test]
async fn without_a_snapshot_the_report_says_the_copy_is_not_point_in_time() {
    let sc = scenario().await;
    let mapping = mapping(&sc);
    let out = sc
        .run(&mapping, &["--json", "--quiet", "--snapshot", "none"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let snapshot = &out.report()["snapshot"];
    assert_eq!(snapshot["kind"], "none");
    assert!(
        snapshot["note"]
            .as_str()
            .unwrap()
            .contains("not point-in-time"),
        "{snapshot}"
    );
    assert!(out.stderr.contains("snapshot none"), "{}", out.stderr);
    // A snapshot holds a connection: one connection is not enough for it.
    let one = sc
        .run(
            &mapping,
            &[
                "--json",
                "--quiet",
                "--source-connections",
                "1",
                "--if-not-empty",
                "append",
            ],
        )
        .await;
    assert_eq!(one.code, EX_CONFIG, "{}", one.stderr);
    assert!(
        one.stderr.contains("--source-connections 2 or more"),
        "{}",
        one.stderr
    );
}

const MY_ROWS: i64 = 10_000;

/// `SHOW MASTER STATUS`: the binary log's file and position, if it is on.
async fn binlog_now(sc: &Scenario) -> Option<(String, u64)> {
    use sqlx::Row;
    let row = sqlx::query("SHOW MASTER STATUS")
        .fetch_optional(&sc.my().pool)
        .await
        .unwrap()?;
    Some((row.get::<String, _>(0), row.get::<u64, _>(1)))
}

#[tokio::test]
async fn a_mysql_run_reads_one_consistent_snapshot() {
    let sc = Scenario::new("snapmy")
        .mariadb(&format!(
            "CREATE TABLE acct (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL) ENGINE=InnoDB;
             SET SESSION max_recursive_iterations = 100000;
             INSERT INTO acct WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {MY_ROWS}) SELECT i, CONCAT('v', i) FROM s;"
        ))
        .start()
        .await;
    let mapping = sc.mapping(&format!(
        "version = 1\n[source]\nurl = \"{}\"\npage_size = 100\n[target]\ntable = \"TABLE\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"acct\"\nfrom = \"acct\"\npk = \"A#{{id}}\"\n",
        sc.my().url
    ));
    let before = binlog_now(&sc).await;
    let run = start_run(
        &sc,
        &mapping,
        &[
            "--source-connections",
            "3",
            "--read-parallelism",
            "4",
            "--max-wcu",
            "4000",
        ],
    )
    .await;
    let announced = binlog_now(&sc).await;
    sc.my()
        .exec(&format!(
            "INSERT INTO acct VALUES (-1, 'new'), ({}, 'new');
             START TRANSACTION;
             UPDATE acct SET v = 'changed' WHERE id IN (3, {});
             DELETE FROM acct WHERE id IN (2, {});
             COMMIT;",
            MY_ROWS + 1,
            MY_ROWS - 2,
            MY_ROWS - 1
        ))
        .await;
    assert_still_running(&run);
    let out = run.wait().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.report();
    assert_eq!(
        report["snapshot"]["kind"], "mysql",
        "{}",
        report["snapshot"]
    );
    assert_eq!(out.entity("acct")["rows_read"], MY_ROWS);
    assert_copied_as_before(&sc, MY_ROWS).await;
    // The binary-log position is the server's at the snapshot: after the run
    // started, at or before its announcement; none when the log is off.
    let binlog = &report["snapshot"]["binlog"];
    match (before, announced) {
        (Some(before), Some(announced)) => {
            let (file, pos) = binlog
                .as_str()
                .and_then(|b| b.rsplit_once(':'))
                .expect("file:position");
            let at = (file.to_string(), pos.parse::<u64>().unwrap());
            assert!(
                before <= at && at <= announced,
                "{before:?} {at:?} {announced:?}"
            );
        }
        _ => {
            assert!(binlog.is_null(), "{binlog}");
            assert_eq!(report["snapshot"]["id"], "consistent");
        }
    }

    // A user without the RELOAD privilege cannot take the lock: said, with the way out.
    let user = format!("u{}", &sc.my().name[sc.my().name.len() - 8..]);
    sc.my()
        .exec(&format!(
            "CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'; GRANT SELECT ON `{}`.* TO '{user}'@'%';",
            sc.my().name
        ))
        .await;
    let limited = format!("mysql://{user}:pw@127.0.0.1:3306/{}", sc.my().name);
    let out = sc
        .run(
            &mapping,
            &[
                "--json",
                "--quiet",
                "--source",
                &limited,
                "--if-not-empty",
                "append",
            ],
        )
        .await;
    assert_eq!(out.code, EX_CONFIG, "{}", out.stderr);
    assert!(
        out.stderr.contains("RELOAD") && out.stderr.contains("--snapshot none"),
        "{}",
        out.stderr
    );
    let none = sc
        .run(
            &mapping,
            &[
                "--json",
                "--quiet",
                "--source",
                &limited,
                "--snapshot",
                "none",
                "--if-not-empty",
                "append",
            ],
        )
        .await;
    sc.my().exec(&format!("DROP USER '{user}'@'%'")).await;
    assert_eq!(none.code, 0, "{}", none.stderr);
}

#[tokio::test]
async fn a_snapshot_with_two_connections_and_eight_segments_neither_blocks_nor_opens_more() {
    let sc = scenario().await;
    let app = format!("sql2ddb_{}", &sc.pg().name);
    let source = format!("{}?application_name={app}", pg_url());
    let mapping = mapping(&sc);
    let args = [
        "run",
        mapping.as_str(),
        "--endpoint",
        sc.dynamo.url.as_str(),
        "--json",
        "--quiet",
        "--source",
        source.as_str(),
        "--source-connections",
        "2",
        "--read-parallelism",
        "8",
    ];
    let run = Proc::spawn(sc.path(), &args);
    let mut most = 0i64;
    let start = std::time::Instant::now();
    while !run.stdout.lock().unwrap().contains("\"status\"") {
        let (n,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
                .bind(&app)
                .fetch_one(&sc.pg().pool)
                .await
                .unwrap();
        most = most.max(n);
        assert!(start.elapsed() < PATIENCE, "the run did not finish");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let out = run.wait().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.report()["snapshot"]["kind"], "postgres");
    assert_eq!(out.entity("acct")["segments"], 8);
    assert_eq!(out.entity("acct")["rows_read"], ROWS);
    assert!(most >= 1, "the run's connections were seen");
    assert!(most <= 2, "{most} connections open, 2 asked");
}

#[tokio::test]
async fn a_sqlite_run_reads_one_read_transaction() {
    let sc = Scenario::new("snaplite")
        .sqlite(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE acct (id INTEGER PRIMARY KEY, v TEXT NOT NULL);
             WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)
             INSERT INTO acct SELECT i, 'v' || i FROM s;",
        )
        .start()
        .await;
    let mapping = sc.mapping(&format!(
        "version = 1\n[source]\nurl = \"{}\"\npage_size = 50\n[target]\ntable = \"TABLE\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"acct\"\nfrom = \"acct\"\npk = \"A#{{id}}\"\n",
        sc.sqlite_url()
    ));
    // Paced (at least 2.5 s of writes), so the application writes below
    // land while the run is still reading.
    let run = start_run(
        &sc,
        &mapping,
        &["--read-parallelism", "4", "--max-wcu", "2000"],
    )
    .await;
    // The application writes to the file while the run reads (WAL mode).
    let path = sc.sqlite_url().trim_start_matches("sqlite://").to_string();
    let mut app =
        <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!("sqlite://{path}"))
            .await
            .unwrap();
    sqlx::raw_sql(
        "INSERT INTO acct VALUES (-1, 'new'), (5001, 'new');
         BEGIN; UPDATE acct SET v = 'changed' WHERE id IN (3, 4998); DELETE FROM acct WHERE id IN (2, 4999); COMMIT;",
    )
    .execute(&mut app)
    .await
    .unwrap();
    assert_still_running(&run);
    let out = run.wait().await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let snapshot = &out.report()["snapshot"];
    assert_eq!(snapshot["kind"], "sqlite", "{snapshot}");
    assert!(snapshot["taken_at"].as_str().is_some(), "{snapshot}");
    assert_eq!(out.entity("acct")["rows_read"], 5000);
    assert_copied_as_before(&sc, 5000).await;
}
