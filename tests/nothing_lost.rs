//! Nothing lost silently: the ways a run could lose or collapse rows while
//! saying `status ok` are refused, counted or explained, and an interrupted
//! or rejected run can be finished. Each test is named after its case.

use std::path::Path;

use crate::common::*;

/// A SQLite source made by `sql` and a mapping over it (`entity`, the
/// entity's table) writing to the scenario's table.
async fn sqlite_case(prefix: &str, sql: &str, entity: &str) -> (Scenario, String) {
    let sc = Scenario::new(prefix).sqlite(sql).start().await;
    let mapping = sc.mapping(&format!(
        "version = 1\n[source]\nurl = \"{}\"\npage_size = 2\n[target]\ntable = \"TABLE\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\nsk = {{ name = \"SK\", type = \"S\" }}\n{entity}",
        sc.sqlite_url()
    ));
    (sc, mapping)
}

/// The run arguments every case uses, then `extra`.
fn args<'a>(sc: &'a Scenario, mapping: &'a str, runs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        mapping,
        "--endpoint",
        &sc.dynamo.url,
        "--runs-dir",
        runs,
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    args
}

async fn run(sc: &Scenario, mapping: &str, extra: &[&str]) -> Run {
    let runs = sc.path().join("runs");
    sc.sql2ddb(&args(sc, mapping, runs.to_str().unwrap(), extra))
        .await
}

const DUPLICATE_KEYS: &str = "CREATE TABLE t (k INTEGER, v TEXT);
INSERT INTO t VALUES (1,'a'),(1,'b'),(1,'c'),(2,'d'),(2,'e'),(NULL,'f'),(NULL,'g'),(3,'h');";

#[tokio::test]
async fn nothing_lost_01_non_unique_key_is_refused() {
    let entity = "[[entity]]\nname = \"thing\"\nfrom = \"t\"\nkey = [\"k\"]\npk = \"T#{k}\"\nsk = \"V#{v}\"\noverwrite = true\n";
    let (sc, mapping) = sqlite_case("dup", DUPLICATE_KEYS, entity).await;
    let out = run(&sc, &mapping, &[]).await;
    // 8 rows, keyset paging by k would read 5 of them: refused before writing.
    assert_eq!(out.code, EX_CONFIG, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("entity thing"), "{}", out.stderr);
    assert!(
        out.stderr.contains("is not proven unique and non-NULL"),
        "{}",
        out.stderr
    );
    assert!(!sc.table_exists(&sc.table).await, "nothing is written");
}

#[tokio::test]
async fn nothing_lost_01_non_unique_key_is_refused_postgres() {
    let sc = Scenario::new("dup")
        .postgres(
            "CREATE TABLE {schema}.t (k int, v text);
             INSERT INTO {schema}.t VALUES (1,'a'),(1,'b'),(1,'c'),(2,'d'),(2,'e'),(NULL,'f'),(NULL,'g'),(3,'h');",
        )
        .start()
        .await;
    let mapping = sc.mapping(&format!(
        "version = 1\n[source]\nurl = \"{}\"\npage_size = 2\n[target]\ntable = \"TABLE\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\n[[entity]]\nname = \"thing\"\nfrom = \"SCHEMA.t\"\nkey = [\"k\"]\npk = \"T#{{k}}\"\n",
        pg_url()
    ));
    let out = run(&sc, &mapping, &[]).await;
    let ok_after_pk = {
        sc.pg().exec("DELETE FROM {schema}.t WHERE k IS NULL OR v IN ('b','c','e'); ALTER TABLE {schema}.t ADD PRIMARY KEY (k);")
            .await;
        run(&sc, &mapping, &[]).await
    };
    assert_eq!(out.code, EX_CONFIG, "{}", out.stderr);
    assert!(
        out.stderr.contains("entity thing") && out.stderr.contains("not proven unique"),
        "{}",
        out.stderr
    );
    // With a primary key, every row is read and written.
    assert_eq!(ok_after_pk.code, 0, "{}", ok_after_pk.stderr);
    assert_eq!(ok_after_pk.entity("thing")["rows_read"], 3);
    assert_eq!(sc.items().await.len(), 3);
}

const PAIRS: &str =
    "CREATE TABLE c (a TEXT NOT NULL, b TEXT NOT NULL, n INTEGER, PRIMARY KEY (a, b));
INSERT INTO c VALUES ('1','23',1),('12','3',2),('7','7',3);";

#[tokio::test]
async fn nothing_lost_02_collapsing_templates_are_refused_unless_overwrite() {
    let entity = "[[entity]]\nname = \"pair\"\nfrom = \"c\"\npk = \"C#{a}{b}\"\nsk = \"X\"\n";
    let (sc, mapping) = sqlite_case("pairs", PAIRS, entity).await;

    // `check` flags it without a source.
    let check = sc.sql2ddb(&["check", &mapping]).await;
    assert_eq!(check.code, 2, "{}", check.stderr);
    assert!(
        check.stderr.contains("touch with no separator"),
        "{}",
        check.stderr
    );

    // `run` stops before writing.
    let out = run(&sc, &mapping, &[]).await;
    assert_eq!(out.code, EX_CONFIG, "{}", out.stderr);
    assert!(out.stderr.contains("entity pair"), "{}", out.stderr);
    assert!(out.stderr.contains("overwrite = true"), "{}", out.stderr);
    assert!(!sc.table_exists(&sc.table).await);

    // A separator that text can contain is refused too, once the types are known.
    let hashed = std::fs::read_to_string(&mapping)
        .unwrap()
        .replace("C#{a}{b}", "C#{a}#{b}");
    std::fs::write(&mapping, &hashed).unwrap();
    let out = run(&sc, &mapping, &[]).await;
    assert_eq!(out.code, EX_CONFIG, "{}", out.stderr);
    assert!(
        out.stderr.contains("can contain the separator \"#\""),
        "{}",
        out.stderr
    );

    // `overwrite = true`: the user means it; collapsed rows are counted.
    let text = std::fs::read_to_string(&mapping)
        .unwrap()
        .replace("C#{a}#{b}", "C#{a}{b}")
        .replace("sk = \"X\"\n", "sk = \"X\"\noverwrite = true\n");
    std::fs::write(&mapping, text).unwrap();
    let out = run(&sc, &mapping, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let e = out.entity("pair");
    assert_eq!(e["rows_read"], 3);
    assert_eq!(e["overwritten"], 1);
    assert_eq!(e["items_written"], 2);
    assert_eq!(sc.items().await.len(), 2);
    let warnings = out.report()["warnings"].to_string();
    assert!(
        warnings.contains("which row wins is not defined"),
        "{warnings}"
    );
}

#[tokio::test]
async fn nothing_lost_04_items_written_counts_distinct_items() {
    // Five rows, three distinct partition keys; the user accepts overwrites.
    let sql = "CREATE TABLE o (c INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (c, id));
INSERT INTO o VALUES (1,1),(1,2),(2,3),(3,4),(3,5);";
    let entity = "[[entity]]\nname = \"last\"\nfrom = \"o\"\npk = \"C#{c}\"\nsk = \"LAST\"\noverwrite = true\n";
    let (sc, mapping) = sqlite_case("distinct", sql, entity).await;
    let out = run(&sc, &mapping, &["--read-parallelism", "1"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let e = out.entity("last");
    let items = sc.items().await.len() as u64;
    assert_eq!(items, 3);
    assert_eq!(e["items_written"], items);
    assert_eq!(e["overwritten"], 2);
    assert_eq!(e["rows_read"], 5);
    assert!(out.stderr.contains("2 rows overwrote"), "{}", out.stderr);

    // Without overwrites possible, items written is the number of items there.
    let table2 = unique("distinct");
    let text = std::fs::read_to_string(&mapping)
        .unwrap()
        .replace(&sc.table, &table2)
        .replace("sk = \"LAST\"\noverwrite = true", "sk = \"O#{id}\"");
    std::fs::write(&mapping, text).unwrap();
    let out = run(&sc, &mapping, &[]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.entity("last")["items_written"], 5);
    assert_eq!(out.entity("last")["overwritten"], 0);
    assert_eq!(sc.dynamo.scan(&table2).await.len(), 5);
}

/// Rows of [`MANY`].
const MANY_ROWS: u64 = 5_000;

/// [`MANY_ROWS`] rows of one write unit each.
const MANY: &str = "CREATE TABLE m (id INTEGER PRIMARY KEY, v TEXT NOT NULL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 5000)
INSERT INTO m SELECT i, 'row ' || i FROM s;";

/// Write units per second the interrupted runs may spend: the 300 items
/// the test waits for take 3 s, the rest of [`MANY`] at least 47 s more,
/// however fast the machine is. The run is still writing when it is
/// interrupted because it cannot go faster, not because it happens to be slow.
const INTERRUPTED_WCU: &str = "100";

/// Starts a run capped at [`INTERRUPTED_WCU`], waits until 300 items are in
/// `table`, sends SIGINT, and returns what it did.
async fn interrupted_run(sc: &Scenario, mapping: &str, table: &str, extra: &[&str]) -> Run {
    let runs = sc.path().join("runs");
    let mut slow = vec![
        "--page-size",
        "100",
        "--concurrency",
        "1",
        "--read-parallelism",
        "1",
        "--max-wcu",
        INTERRUPTED_WCU,
    ];
    slow.extend_from_slice(extra);
    let child = Proc::spawn(sc.path(), &args(sc, mapping, runs.to_str().unwrap(), &slow));
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let written = match sc
            .dynamo
            .client
            .scan()
            .table_name(table)
            .limit(300)
            .send()
            .await
        {
            Ok(page) => page.items().len(),
            Err(_) => 0,
        };
        if written >= 300 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run wrote nothing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    child.interrupt();
    child.wait().await
}

#[tokio::test]
async fn nothing_lost_07_interrupt_reports_exact_counts_and_how_to_continue() {
    let entity = "[[entity]]\nname = \"m\"\nfrom = \"m\"\npk = \"M#{id}\"\nsk = \"M\"\n";
    let (sc, mapping) = sqlite_case("intr", MANY, entity).await;
    let table = sc.table.clone();

    // Without a progress table: a rerun rewrites the same items.
    let out = interrupted_run(&sc, &mapping, &table, &[]).await;
    assert_eq!(out.code, 130, "{}", out.stderr);
    let report = out.report();
    assert_eq!(report["status"], "interrupted");
    let e = out.entity("m");
    let read = e["rows_read"].as_u64().unwrap();
    let written = e["items_written"].as_u64().unwrap();
    assert!(read < MANY_ROWS, "stopped before the end: {read}");
    assert_eq!(written + e["pending"].as_u64().unwrap(), read);
    assert_eq!(
        sc.dynamo.scan(&table).await.len() as u64,
        written,
        "exact counts"
    );
    assert!(out.stderr.contains("cannot be resumed"), "{}", out.stderr);
    assert!(out.stderr.contains("--progress-table"), "{}", out.stderr);
    let saved = Path::new(report["run_dir"].as_str().unwrap()).join("report.json");
    assert!(std::fs::read_to_string(saved)
        .unwrap()
        .contains("\"interrupted\""));
    // The printed rerun writes into the table that holds the run's items:
    // it says so (a fresh run there is refused), and finishes the copy.
    let command = crate::e2e_resume::printed_command(&out.stderr);
    assert!(
        command
            .windows(2)
            .any(|w| w == ["--if-not-empty", "append"]),
        "{command:?}"
    );
    // Without the cap that kept the first attempt slow.
    let at = command.iter().position(|w| w == "--max-wcu").unwrap();
    let mut command = command;
    command.drain(at..at + 2);
    let rerun = crate::e2e_resume::run_printed(sc.path(), &command).await;
    assert_eq!(rerun.code, 0, "{command:?}\n{}", rerun.stderr);
    assert_eq!(sc.dynamo.scan(&table).await.len() as u64, MANY_ROWS);

    // With a progress table: it says how to resume, and the resume finishes.
    let table2 = unique("intr");
    let text = std::fs::read_to_string(&mapping)
        .unwrap()
        .replace(&table, &table2);
    std::fs::write(&mapping, text).unwrap();
    let out = interrupted_run(&sc, &mapping, &table2, &["--progress-table"]).await;
    assert_eq!(out.code, 130, "{}", out.stderr);
    let run_id = out.report()["run_id"].as_str().unwrap().to_string();
    assert!(
        out.stderr.contains(&format!("--resume {run_id}")),
        "{}",
        out.stderr
    );
    // Pages of 100 rows, as the interrupted run read them (the mapping's 2
    // would make the rest of the rows thousands of pages); no cap.
    let resumed = run(&sc, &mapping, &["--resume", &run_id, "--page-size", "100"]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(sc.dynamo.scan(&table2).await.len() as u64, MANY_ROWS);
}

#[tokio::test]
async fn nothing_lost_09_only_rejects_replays_exactly_those_rows() {
    // Keyed by (day, n); two rows carry a price that is no number.
    let sql = "CREATE TABLE p (day DATE NOT NULL, n INTEGER NOT NULL, price DECIMAL, PRIMARY KEY (day, n));
INSERT INTO p VALUES ('2024-01-01',1,'1.50'),('2024-01-01',2,'abc'),('2024-01-02',1,'2.25'),('2024-01-03',7,'n/a'),('2024-01-04',1,'3');";
    let entity = "[[entity]]\nname = \"price\"\nfrom = \"p\"\npk = \"DAY#{day}\"\nsk = \"N#{n}\"\n";
    let (sc, mapping) = sqlite_case("replay", sql, entity).await;
    let first = run(&sc, &mapping, &[]).await;
    assert_eq!(first.code, 2, "{}", first.stderr);
    assert_eq!(first.entity("price")["rejected"], 2);
    let report = first.report();
    let rejects = rejects_of(sc.path(), &report);
    // The key keeps its type: a date stays a date.
    assert_eq!(
        rejects[0]["key"]["day"],
        serde_json::json!({"$date": "2024-01-01"})
    );
    assert_eq!(sc.items().await.len(), 3);

    // Fix the mapping (the price as text), replay only the rejects.
    let text = std::fs::read_to_string(&mapping).unwrap().replace(
        "sk = \"N#{n}\"\n",
        "sk = \"N#{n}\"\n[entity.attributes]\nprice = { column = \"price\", type = \"S\" }\n",
    );
    std::fs::write(&mapping, text).unwrap();
    let rejects_file = sc.path().join(report["rejects_file"].as_str().unwrap());
    let replay = run(
        &sc,
        &mapping,
        &["--only-rejects", rejects_file.to_str().unwrap()],
    )
    .await;
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    let e = replay.entity("price");
    assert_eq!(e["rows_read"], 2, "exactly the rejected rows");
    assert_eq!(e["items_written"], 2);
    assert_ne!(
        replay.report()["run_id"],
        report["run_id"],
        "a report of its own"
    );
    let items = sc.items().await;
    assert_eq!(items.len(), 5);
    assert_eq!(
        items[&("DAY#2024-01-03".to_string(), "N#7".to_string())]["price"],
        s("n/a")
    );
}

#[tokio::test]
async fn nothing_lost_09_only_rejects_on_the_local_endpoint_fixes_the_run_it_replays() {
    let sql = "CREATE TABLE p (day DATE NOT NULL, n INTEGER NOT NULL, price DECIMAL, PRIMARY KEY (day, n));
INSERT INTO p VALUES ('2024-01-01',1,'1.50'),('2024-01-01',2,'abc'),('2024-01-02',1,'2.25'),('2024-01-03',7,'n/a'),('2024-01-04',1,'3');";
    let entity = "[[entity]]\nname = \"price\"\nfrom = \"p\"\npk = \"DAY#{day}\"\nsk = \"N#{n}\"\n";
    let (sc, mapping) = sqlite_case("replay_local", sql, entity).await;
    let local = |extra: &[&str]| {
        let mut args = vec![
            "run",
            &mapping,
            "--endpoint",
            "local",
            "--runs-dir",
            "runs",
            "--json",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let first_args = local(&[]);
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let first = sc.sql2ddb(&first_args).await;
    assert_eq!(first.code, 2, "{}", first.stderr);
    let report = first.report();
    let run_id = report["run_id"].as_str().unwrap().to_string();
    let run_dir = sc.path().join("runs").join(&run_id);

    // Fix the mapping, replay the rejects: they land in the first run's
    // embedded table, which then holds every row.
    let text = std::fs::read_to_string(&mapping).unwrap().replace(
        "sk = \"N#{n}\"\n",
        "sk = \"N#{n}\"\n[entity.attributes]\nprice = { column = \"price\", type = \"S\" }\n",
    );
    std::fs::write(&mapping, text).unwrap();
    let rejects = run_dir.join("rejects.jsonl");
    let replay_args = local(&["--only-rejects", rejects.to_str().unwrap()]);
    let replay_args: Vec<&str> = replay_args.iter().map(String::as_str).collect();
    let replay = sc.sql2ddb(&replay_args).await;
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    assert_eq!(replay.entity("price")["items_written"], 2);
    let data = replay.report()["local_data_file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        data.ends_with(&format!("{run_id}/dynamodb.sqlite")),
        "the first run's data: {data}"
    );
    let verify = sc
        .sql2ddb(&[
            "verify",
            &mapping,
            "--deep",
            "--json",
            "--endpoint",
            "local",
            "--runs-dir",
            "runs",
            "--run",
            &run_id,
        ])
        .await;
    // Every row has its item in the first run's table: the two replayed
    // ones as the fixed mapping makes them, the three others as the first
    // mapping made them (a number, where the fixed mapping says text).
    let report = verify.report();
    let e = &report["entities"][0];
    assert_eq!(
        (&e["found"], &e["missing"], &e["identical"], &e["different"]),
        (
            &serde_json::json!(5),
            &serde_json::json!(0),
            &serde_json::json!(2),
            &serde_json::json!(3)
        ),
        "{}",
        verify.stdout
    );
}
