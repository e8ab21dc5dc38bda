//! `status` of a followed run, on PostgreSQL and MariaDB: a `run --follow`
//! applies known changes (`status` says it is following) and is stopped;
//! its summary (changes applied, the
//! position, how to go on) is on stdout, and `status --run` shows the same
//! position, the state and the lag (PostgreSQL: the slot and the WAL it
//! keeps). PostgreSQL's run keeps a progress table, so `status` without the
//! run's directory (another machine) sees the follow too, and a cutover
//! shows as such; MariaDB's keeps none, so `status` reads the run's
//! directory, and says so when the source cannot be reached.
//!
//! 300 rows and 60 changes: the follow is what is looked at.

use std::time::Instant;

use crate::common::*;
use crate::follow_scenario::{wait_for, Db, SlotGuard};

const MARIADB_ITEMS: &str = "
CREATE TABLE items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
INSERT INTO items SELECT seq, CONCAT('Name ', seq), seq % 100 FROM seq_1_to_300;
";

const MAPPING: &str = pg_mapping!(
    url = "SOURCE_URL",
    "",
    r#"
[[entity]]
name = "item"
from = "ROWS_FROM"
pk = "ITEM#{id}"
sk = "ITEM"
"#
);

/// 40 rows updated, 10 deleted, 10 inserted: 60 row changes in three
/// transactions, the insert last.
fn changes(db: Db) -> [&'static str; 3] {
    match db {
        Db::Postgres => [
            "UPDATE SCHEMA.items SET name = 'changed ' || id WHERE id <= 40",
            "DELETE FROM SCHEMA.items WHERE id > 290",
            "INSERT INTO SCHEMA.items SELECT i, 'new ' || i, 0 FROM generate_series(301, 310) i",
        ],
        Db::MariaDb => [
            "UPDATE items SET name = CONCAT('changed ', id) WHERE id <= 40",
            "DELETE FROM items WHERE id > 290",
            "INSERT INTO items SELECT seq, CONCAT('new ', seq), 0 FROM seq_301_to_310",
        ],
    }
}

async fn exec(sc: &Scenario, db: Db, sql: &str) {
    match db {
        Db::Postgres => {
            let sql = sql.replace("SCHEMA", &sc.pg().name);
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&sc.pg().pool)
                .await
                .unwrap();
        }
        Db::MariaDb => {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
                .execute(&sc.my().pool)
                .await
                .unwrap();
        }
    };
}

/// `status MAPPING --run RUN_ID --endpoint URL EXTRA…`.
async fn status(sc: &Scenario, mapping: &str, run_id: &str, extra: &[&str]) -> Run {
    let mut args = vec!["status", mapping, "--run", run_id];
    args.extend_from_slice(&["--endpoint", &sc.dynamo.url]);
    args.extend_from_slice(extra);
    let out = sc.sql2ddb(&args).await;
    assert_eq!(out.code, 0, "{args:?}\n{}\n{}", out.stdout, out.stderr);
    out
}

async fn status_shows_where_a_stopped_follow_is(db: Db, prefix: &str) {
    let sc = match db {
        Db::Postgres => Scenario::new(prefix).postgres(&items_sql(300)),
        Db::MariaDb => Scenario::new(prefix).mariadb(MARIADB_ITEMS),
    }
    .start()
    .await;
    let (url, from) = match db {
        Db::Postgres => (pg_url().to_string(), "SCHEMA.items"),
        Db::MariaDb => (sc.my().url.clone(), "items"),
    };
    let text = MAPPING
        .replace("SOURCE_URL", &url)
        .replace("ROWS_FROM", from);
    let mapping = sc.mapping(&text);
    let endpoint = sc.dynamo.url.clone();
    let mut run = vec![
        "run",
        &mapping,
        "--endpoint",
        &endpoint,
        "--follow",
        "--quiet",
    ];
    if db == Db::Postgres {
        run.push("--progress-table");
    }
    let follower = Proc::spawn(sc.path(), &run);
    let run_id = follower.run_id().await;
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = (db == Db::Postgres).then(|| SlotGuard(slot.clone()));
    wait_for(&follower, "following ").await;
    for sql in changes(db) {
        exec(&sc, db, sql).await;
    }
    // Transactions are applied in commit order: once the last one's items
    // are there, every change is in hand; a stop applies them all first.
    let start = Instant::now();
    while !sc.items().await.contains_key(&key("ITEM#310", "ITEM")) {
        assert!(
            start.elapsed() < PATIENCE,
            "the changes were never applied:\n{}",
            follower.stderr.lock().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // While it runs, `status` says so.
    let running = status(&sc, &mapping, &run_id, &["--json"]).await.report();
    assert_eq!(
        running["follow"]["record"]["state"], "following",
        "{running}"
    );
    follower.interrupt();
    let stopped = follower.wait().await;

    // The summary is the follow's report: on stdout, not among the logs.
    let said = format!("{}\n{}", stopped.stdout, stopped.stderr);
    let summary = stopped
        .stdout
        .lines()
        .find(|l| l.starts_with("follow of "))
        .unwrap_or_else(|| panic!("no summary on stdout:\n{said}"));
    assert!(summary.contains(" 60 changes applied "), "{said}");
    let position = summary
        .rsplit_once("; applied to ")
        .map(|(_, p)| p.trim().to_string())
        .unwrap_or_else(|| panic!("no position in the summary:\n{said}"));
    assert!(
        stopped.stdout.contains(&format!("stopped at {position}"))
            && stopped.stdout.contains("--cutover"),
        "{said}"
    );
    assert!(!stopped.stderr.contains("changes applied"), "{said}");

    // `status` shows the position the follow reported, its state and lag.
    let text = status(&sc, &mapping, &run_id, &[]).await;
    for shown in [
        "follow: stopped".to_string(),
        format!("applied to {position}"),
        "60 changes applied since".to_string(),
        "behind: ".to_string(),
    ] {
        assert!(
            text.stdout.contains(&shown),
            "{shown:?} in\n{}\n{}",
            text.stdout,
            text.stderr
        );
    }
    let json = status(&sc, &mapping, &run_id, &["--json"]).await.report();
    let follow = &json["follow"];
    assert_eq!(follow["applied"], position.as_str(), "{json}");
    assert_eq!(follow["record"]["position"], position.as_str(), "{json}");
    assert_eq!(follow["record"]["state"], "stopped", "{json}");
    assert_eq!(follow["record"]["counts"]["changes"], 60, "{json}");
    assert!(follow["source"]["position"].is_string(), "{json}");
    assert!(follow["behind_seconds"].is_number(), "{json}");
    // MariaDB: the GTID position the checkpoint holds is shown with it.
    match db {
        Db::MariaDb => {
            let held = std::fs::read_to_string(
                sc.path()
                    .join("sql2ddb-runs")
                    .join(&run_id)
                    .join(sql2ddb_engine::follow::BINLOG_CHECKPOINT),
            )
            .unwrap();
            let gtid = held
                .lines()
                .nth(1)
                .and_then(|l| l.strip_prefix("gtid "))
                .unwrap_or_else(|| panic!("no GTID position in the checkpoint: {held:?}"));
            assert_eq!(follow["applied_gtid"], gtid, "{json}");
            assert!(
                text.stdout.contains(&format!("GTID position {gtid}")),
                "{}",
                text.stdout
            );
        }
        Db::Postgres => assert!(follow.get("applied_gtid").is_none(), "{json}"),
    }

    // `follow --status` says where the follow stands too, on stdout.
    let follow_status = sc
        .sql2ddb(&["follow", &mapping, "--run", &run_id, "--status"])
        .await;
    assert_eq!(follow_status.code, 0, "{}", follow_status.stderr);
    assert!(
        follow_status
            .stdout
            .contains(&format!("run {run_id}: stopped")),
        "{}",
        follow_status.stdout
    );

    match db {
        Db::Postgres => postgres_status(&sc, &mapping, &run_id, &slot, &position, &json).await,
        Db::MariaDb => mariadb_status(&sc, &text, &url, &run_id, &position, &json).await,
    }
}

/// The slot and its WAL; from another machine through the progress table;
/// cut over.
async fn postgres_status(
    sc: &Scenario,
    mapping: &str,
    run_id: &str,
    slot: &str,
    position: &str,
    json: &serde_json::Value,
) {
    let follow = &json["follow"];
    assert_eq!(follow["record"]["slot"], slot, "{json}");
    assert!(follow["source"]["retained_bytes"].is_number(), "{json}");
    assert!(json["entities"].is_array(), "the run's counts: {json}");
    let elsewhere = status(sc, mapping, run_id, &["--runs-dir", "elsewhere", "--json"])
        .await
        .report();
    let follow = &elsewhere["follow"];
    assert_eq!(follow["applied"], position, "{elsewhere}");
    assert_eq!(follow["record"]["counts"]["changes"], 60, "{elsewhere}");
    assert!(
        follow["recorded_in"]
            .as_str()
            .is_some_and(|r| r.starts_with("progress table ")),
        "{elsewhere}"
    );

    let cut = sc
        .sql2ddb(&[
            "follow",
            mapping,
            "--run",
            run_id,
            "--endpoint",
            &sc.dynamo.url,
            "--cutover",
            "--no-verify",
        ])
        .await;
    assert!(
        cut.stdout.contains(&format!(
            "replication slot {slot} and its publication are dropped"
        )),
        "{}\n{}",
        cut.stdout,
        cut.stderr
    );
    let after = status(sc, mapping, run_id, &[]).await;
    assert!(
        after.stdout.contains("follow: cut over") && after.stdout.contains("the slot is dropped"),
        "{}",
        after.stdout
    );
}

/// No progress table: the run's directory alone; a source that cannot be
/// reached leaves what the record holds.
async fn mariadb_status(
    sc: &Scenario,
    text: &Run,
    url: &str,
    run_id: &str,
    position: &str,
    json: &serde_json::Value,
) {
    assert!(
        text.stderr.contains("no counts for this run"),
        "{}",
        text.stderr
    );
    assert!(
        json["follow"]["recorded_in"]
            .as_str()
            .is_some_and(|r| r.ends_with("follow.json")),
        "{json}"
    );
    let down = tempfile::tempdir().unwrap();
    let unreachable = url.replace(":3306/", ":1/");
    assert_ne!(unreachable, url, "the source URL names port 3306");
    let dead = write_mapping(
        down.path(),
        &MAPPING
            .replace("SOURCE_URL", &unreachable)
            .replace("ROWS_FROM", "items")
            .replace("TABLE", &sc.table),
    );
    let runs_dir = sc.path().join("sql2ddb-runs").display().to_string();
    let out = status(sc, &dead, run_id, &["--runs-dir", &runs_dir]).await;
    assert!(
        out.stdout.contains("source not reachable")
            && out.stdout.contains(&format!("applied to {position}"))
            && out.stdout.contains("behind: unknown"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn status_shows_where_a_stopped_postgres_follow_is() {
    status_shows_where_a_stopped_follow_is(Db::Postgres, "follow_status").await;
}

#[tokio::test]
async fn status_shows_where_a_stopped_mariadb_follow_is() {
    status_shows_where_a_stopped_follow_is(Db::MariaDb, "follow_status_my").await;
}
