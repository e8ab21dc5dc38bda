//! End to end, resuming a run: a resume refuses a mapping whose items would
//! differ from those already written, explains a run that cannot be resumed,
//! and reports the whole run's figures, not those of its last attempt. The
//! source is PostgreSQL, the target a DynamoDB-compatible server in this
//! process; interrupted runs are killed with SIGKILL.

use std::time::{Duration, Instant};

use sql2ddb_core::SqlValue;
use sql2ddb_dynamo::progress::ProgressStore;

use crate::common::*;

/// One test's scenario (`rows` items in PostgreSQL) and mappings over it.
struct Fixture {
    sc: Scenario,
    rows: i64,
}

impl Fixture {
    async fn new(prefix: &str, rows: i64) -> Fixture {
        let sc = Scenario::new(prefix)
            .postgres(&items_sql(rows as u64))
            .start()
            .await;
        Fixture { sc, rows }
    }

    /// A target table name of this test's own.
    fn table(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.sc.pg().name)
    }

    /// Writes mapping file `file` copying the items to `table` with
    /// partition key template `pk` and `[writer]` settings `writer`.
    fn mapping(&self, file: &str, table: &str, pk: &str, writer: &str) -> String {
        let path = self.sc.path().join(file);
        std::fs::write(
            &path,
            format!(
                r#"{}[writer]
{writer}

[[entity]]
name = "item"
from = "{}.items"
pk = "{pk}"
sk = "ITEM"
"#,
                mapping_head("", table, &self.sc.dynamo.url),
                self.sc.pg().name,
            ),
        )
        .unwrap();
        path.display().to_string()
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.sc.sql2ddb(args).await
    }

    /// `run MAPPING --progress-table PROGRESS EXTRA… --json --quiet`.
    async fn tracked(&self, mapping: &str, progress: &str, extra: &[&str]) -> Run {
        let mut args = vec!["run", mapping, "--progress-table", progress];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--json", "--quiet"]);
        self.run(&args).await
    }

    fn store(&self, table: &str) -> ProgressStore {
        ProgressStore::new(self.sc.dynamo.handle.clone(), table)
    }
}

/// The run id of a finished run, from its JSON report.
fn run_id(run: &Run) -> String {
    run.report()["run_id"].as_str().unwrap().to_string()
}

/// Every item is there, keyed by `pk`'s format (`ITEM#` or `I#`), and no other.
async fn assert_all_items(f: &Fixture, table: &str, prefix: &str) {
    let items = f.sc.dynamo.scan(table).await;
    assert_eq!(items.len() as i64, f.rows, "items in {table}");
    for i in [1, f.rows / 2, f.rows] {
        let key = (format!("{prefix}{i}"), "ITEM".to_string());
        let item = items.get(&key).unwrap_or_else(|| panic!("no item {key:?}"));
        assert_eq!(item["name"], s(format!("Name {i}")));
        assert_eq!(item["qty"], n(i % 100));
    }
    let other: Vec<_> = items
        .keys()
        .filter(|(pk, _)| !pk.starts_with(prefix))
        .take(3)
        .collect();
    assert!(other.is_empty(), "items of another key format: {other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_03_resume_with_changed_mapping_is_refused() {
    let f = Fixture::new("resume_changed", 300).await;
    let table = f.table("t");
    let progress = f.table("p");
    let first = f.mapping("first.toml", &table, "ITEM#{id}", "concurrency = 4");
    let done = f.tracked(&first, &progress, &[]).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    let run = run_id(&done);

    // The same run, resumed with another partition key template.
    let changed = f.mapping("changed.toml", &table, "I#{id}", "concurrency = 4");
    let resumed = f.tracked(&changed, &progress, &["--resume", &run]).await;
    assert_eq!(resumed.code, 1, "refused:\n{}", resumed.stderr);
    assert!(
        resumed.stdout.trim().is_empty(),
        "no report: {}",
        resumed.stdout
    );
    let err = resumed.stderr;
    assert!(
        err.contains(&format!("run {run} cannot be resumed"))
            && err.contains("the mapping changed since the run started")
            && err.contains("entity item: pk template"),
        "the refusal names what changed:\n{err}"
    );
    assert!(!err.contains("attributes"), "only what changed:\n{err}");
    // Refused before any write: only the first format is in the table.
    assert_all_items(&f, &table, "ITEM#").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_03_resume_with_changed_concurrency_is_allowed() {
    // A guard against refusing too much: settings that do not change items
    // (concurrency, page size, capacity cap) may differ between attempts.
    let f = Fixture::new("resume_settings", 300).await;
    let table = f.table("t");
    let progress = f.table("p");
    let first = f.mapping("first.toml", &table, "ITEM#{id}", "concurrency = 4");
    let done = f.tracked(&first, &progress, &[]).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    let run = run_id(&done);

    let settings = f.mapping(
        "settings.toml",
        &table,
        "ITEM#{id}",
        "concurrency = 2\nmax_wcu = 5000\nadaptive = false",
    );
    let resumed = f
        .tracked(
            &settings,
            &progress,
            &["--resume", &run, "--concurrency", "1", "--page-size", "7"],
        )
        .await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let report = resumed.report();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["totals"]["items_written"], f.rows);
    assert_all_items(&f, &table, "ITEM#").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_lost_08_resume_without_progress_table_is_explained() {
    let f = Fixture::new("resume_untracked", 50).await;
    let table = f.table("t");
    let mapping = f.mapping("m.toml", &table, "ITEM#{id}", "concurrency = 4");
    // A run without --progress-table records nothing to resume from.
    let done = f.run(&["run", &mapping, "--json", "--quiet"]).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    let run = run_id(&done);

    let resumed = f
        .run(&["run", &mapping, "--resume", &run, "--json", "--quiet"])
        .await;
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    let err = &resumed.stderr;
    let default_progress = format!("{table}-sql2ddb-progress");
    assert!(
        err.contains(&format!("there is no progress table {default_progress}"))
            && err.contains("not started with --progress-table")
            && err.contains("run again without --resume and with --if-not-empty append")
            && err.contains("overwritten with the same values"),
        "says what happened and what to do:\n{err}"
    );
    assert!(!err.contains("ResourceNotFoundException"), "{err}");

    // A progress table that exists, and a run id it does not hold.
    let progress = f.table("p");
    let tracked = f
        .tracked(&mapping, &progress, &["--if-not-empty", "append"])
        .await;
    assert_eq!(tracked.code, 0, "{}", tracked.stderr);
    let unknown = "20000101T000000Z-000000";
    let resumed = f.tracked(&mapping, &progress, &["--resume", unknown]).await;
    assert_eq!(resumed.code, 1, "{}", resumed.stderr);
    let err = &resumed.stderr;
    assert!(
        err.contains(&format!(
            "run {unknown} cannot be resumed: it is not recorded in the progress table {progress}"
        )) && err.contains("Check the run id")
            && err.contains("run again without --resume and with --if-not-empty append"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: reference run, killed run, resume, figure by figure.
async fn nothing_lost_10_resumed_report_shows_run_totals() {
    let f = Fixture::new("resume_totals", 2_000).await;
    let common_args = [
        "--page-size",
        "20",
        "--read-parallelism",
        "2",
        "--json",
        "--quiet",
    ];

    // The reference: the same rows copied in one go.
    let whole_table = f.table("whole");
    let whole_mapping = f.mapping("whole.toml", &whole_table, "ITEM#{id}", "concurrency = 4");
    let mut args = vec!["run", whole_mapping.as_str()];
    args.extend(common_args);
    let whole = f.run(&args).await;
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let whole = whole.entity("item");
    assert_eq!(whole["rows_read"], f.rows);
    assert_eq!(whole["items_written"], f.rows);

    // Slowed down by a capacity cap, killed once some pages are written.
    let table = f.table("t");
    let progress = f.table("p");
    let mapping = f.mapping("m.toml", &table, "ITEM#{id}", "concurrency = 1");
    let mut args = vec![
        "run",
        mapping.as_str(),
        "--progress-table",
        progress.as_str(),
        "--max-wcu",
        "100",
    ];
    args.extend(common_args);
    let running = Proc::spawn(f.sc.path(), &args);
    let run_id = running.run_id().await;
    let store = f.store(&progress);
    let start = Instant::now();
    loop {
        if let Ok(p) = store.load(&run_id).await {
            if p.batches.len() >= 4 {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no pages written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.kill().await;
    let before = store.load(&run_id).await.unwrap();
    let total_pages = whole["pages"].as_u64().unwrap();
    assert!(
        (before.batches.len() as u64) < total_pages,
        "the run finished before it was killed"
    );

    // Between the attempts the application deletes a row the first attempt
    // had already read: the next snapshot holds one row fewer than were read.
    let read_id = match before.cursors.first().map(|c| &c.cursor[..]) {
        Some([SqlValue::Int(id)]) => *id,
        other => panic!("a segment cursor of one integer, got {other:?}"),
    };
    f.sc.pg()
        .exec(&format!(
            "DELETE FROM {{schema}}.items WHERE id = {read_id}"
        ))
        .await;

    // Resumed without the cap (a setting, not part of the items).
    let mut args = vec![
        "run",
        mapping.as_str(),
        "--progress-table",
        progress.as_str(),
        "--resume",
        run_id.as_str(),
    ];
    args.extend(common_args);
    let resumed = f.run(&args).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let report = resumed.report();
    assert_eq!(report["status"], "ok");
    let item = resumed.entity("item");
    for figure in [
        "rows_read",
        "items_written",
        "rejected",
        "failed",
        "segments",
        "pages",
        "bytes",
        "write_units",
    ] {
        assert_eq!(
            item[figure], whole[figure],
            "{figure}: the resumed run's report shows the whole run's\nresumed: {item}\nwhole: {whole}"
        );
        assert_eq!(report["totals"][figure], whole[figure], "totals.{figure}");
    }
    assert_all_items(&f, &table, "ITEM#").await;
    // Each attempt read its own snapshot: the report shows both positions,
    // and the WAL only moves forward.
    let snapshot = &report["snapshot"];
    let lsn = snapshot["lsn"].as_str().expect("the resumed attempt's LSN");
    let earlier = snapshot["earlier"].as_array().expect("earlier snapshots");
    assert_eq!(earlier.len(), 1, "{snapshot}");
    let first = earlier[0]["lsn"]
        .as_str()
        .expect("the killed attempt's LSN");
    assert!(earlier[0]["taken_at"].as_str().is_some(), "{snapshot}");
    let (forward,): (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT pg_lsn('{first}') <= pg_lsn('{lsn}')"
    )))
    .fetch_one(&f.sc.pg().pool)
    .await
    .unwrap();
    assert!(forward, "{first} then {lsn}");
    // Rows read from two snapshots are not compared with one count: said,
    // not failed; each attempt was checked against its own, per segment.
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("2 attempts read 2 snapshots"),
        "{warnings}"
    );
    assert!(
        resumed
            .stderr
            .contains("resumed: the run's earlier attempt read another snapshot"),
        "{}",
        resumed.stderr
    );
}

/// The words of the command a run printed to continue it (the first line
/// of `output` that starts with `sql2ddb run`: stdout, or stderr with
/// `--json`), split as a POSIX shell splits them.
pub(crate) fn printed_command(output: &str) -> Vec<String> {
    let line = output
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sql2ddb run "))
        .unwrap_or_else(|| panic!("no command printed:\n{output}"));
    let words = shlex::split(line)
        .unwrap_or_else(|| panic!("the printed command does not parse as shell words: {line}"));
    assert_eq!(words[0], "sql2ddb", "{line}");
    words
}

/// Runs a printed command (without its leading `sql2ddb`) as pasted in `dir`.
pub(crate) async fn run_printed(dir: &std::path::Path, command: &[String]) -> Run {
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    sql2ddb(dir, &args).await
}

#[tokio::test]
async fn real_service_7_resume_command_keeps_endpoint_and_runs_dir() {
    let f = Fixture::new("resume_paste", 600).await;
    let table = f.table("t");
    let progress = f.table("p");
    // Neither endpoint nor region in the mapping: only the command line
    // says where the run writes; pasted without them, it would go to AWS.
    let mapping = f.sc.path().join("paste.toml");
    std::fs::write(
        &mapping,
        format!(
            "version = 1\n[source]\nurl = \"{}\"\n[target]\ntable = \"{table}\"\ncreate = true\npk = {{ name = \"PK\", type = \"S\" }}\nsk = {{ name = \"SK\", type = \"S\" }}\n[writer]\nconcurrency = 1\n\n[[entity]]\nname = \"item\"\nfrom = \"{}.items\"\npk = \"ITEM#{{id}}\"\nsk = \"ITEM\"\n",
            pg_url(),
            f.sc.pg().name
        ),
    )
    .unwrap();
    let mapping = mapping.display().to_string();
    let endpoint = f.sc.dynamo.url.clone();
    // A runs directory whose name the shell must be given quoted.
    let runs = "runs of today";
    let running = Proc::spawn(
        f.sc.path(),
        &[
            "run",
            &mapping,
            "--endpoint",
            &endpoint,
            "--runs-dir",
            runs,
            "--progress-table",
            &progress,
            "--page-size",
            "20",
            "--max-wcu",
            "100",
            "--quiet",
        ],
    );
    let run_id = running.run_id().await;
    let store = f.store(&progress);
    let start = Instant::now();
    while store
        .load(&run_id)
        .await
        .map_or(true, |p| p.batches.len() < 3)
    {
        assert!(start.elapsed() < PATIENCE, "no pages written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.interrupt();
    let first = running.wait().await;
    assert_eq!(first.code, 130, "{}", first.stderr);

    // Without --json the report, and the command with it, is on stdout.
    let command = printed_command(&first.stdout);
    let resumed = run_printed(f.sc.path(), &command).await;
    assert_eq!(
        resumed.code, 0,
        "pasted as printed: {command:?}\n{}",
        resumed.stderr
    );
    // The same run, in the same runs directory, against the same endpoint.
    let saved = f.sc.path().join(runs).join(&run_id).join("report.json");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(report["status"], "ok", "{report}");
    assert_eq!(report["endpoint"], endpoint.as_str(), "{report}");
    assert_eq!(report["progress_table"], progress.as_str(), "{report}");
    assert_eq!(report["totals"]["items_written"], f.rows, "{report}");
    assert_all_items(&f, &table, "ITEM#").await;
}
