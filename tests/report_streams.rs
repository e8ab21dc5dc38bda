//! Where each command's output goes, as the README promises: the report
//! (the final table of `run`, `export`, `update`, `verify --deep`, the
//! state `status` prints, the verdict of `verify --run`, the summary of a
//! follow when it stops, and the results of `plan`, `get`, `runs`, `check`
//! and `init`) on stdout, and nothing else there; progress and logs on
//! stderr, which repeats no line of the report; with `--json`, stdout holds
//! one JSON document alone.

use crate::common::*;

/// Lines that are logs, never part of a report (a report's own warnings
/// and notes are part of it).
const LOG_PREFIXES: [&str; 3] = ["error:", "hint:", "snapshot "];

/// One command: its arguments (`MAPPING`, `ENDPOINT`, `RUN`, `JOB` and
/// `OUT` filled in by the test), and a line its text report holds.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    says: &'static str,
    /// Whether it takes `--json`.
    json: bool,
}

const CASES: [Case; 11] = [
    Case {
        name: "run",
        args: &[
            "run",
            "MAPPING",
            "--endpoint",
            "ENDPOINT",
            "--if-not-empty",
            "append",
        ],
        says: "total ",
        json: true,
    },
    Case {
        name: "export",
        args: &["export", "MAPPING", "--out", "OUT"],
        says: "exported 300 items",
        json: true,
    },
    Case {
        name: "verify --deep",
        args: &["verify", "MAPPING", "--deep", "--endpoint", "ENDPOINT"],
        says: "verified: every item is exactly what the mapping makes of the source",
        json: true,
    },
    Case {
        name: "status",
        args: &[
            "status",
            "MAPPING",
            "--run",
            "RUN",
            "--endpoint",
            "ENDPOINT",
        ],
        says: "complete: every row is accounted for",
        json: true,
    },
    Case {
        name: "verify --run",
        args: &[
            "verify",
            "MAPPING",
            "--run",
            "RUN",
            "--endpoint",
            "ENDPOINT",
        ],
        says: "verified: every row is written",
        json: true,
    },
    Case {
        name: "get",
        args: &["get", "MAPPING", "item", "id=7", "--endpoint", "ENDPOINT"],
        says: "ITEM#7",
        json: true,
    },
    Case {
        name: "plan",
        args: &["plan", "MAPPING"],
        says: "plan for table",
        json: true,
    },
    Case {
        name: "runs",
        args: &["runs", "MAPPING"],
        says: "RUN",
        json: true,
    },
    Case {
        name: "check",
        args: &["check", "MAPPING", "--source"],
        says: "fits its source",
        json: false,
    },
    Case {
        name: "init",
        args: &["init", "--source", "SOURCE", "--tables", "SCHEMA.items"],
        says: "[[entity]]",
        json: false,
    },
    // Last: the items it changes are no longer what the mapping makes.
    Case {
        name: "update",
        args: &["update", "JOB", "--endpoint", "ENDPOINT"],
        says: "updated",
        json: true,
    },
];

/// Sets `touched` on every item: the update job of the cases.
const TOUCH: &str = r#"version = 1
[target]
table = "TABLE"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }
[update]
name = "touch"
scan = { segments = 2 }
where = "begins_with(SK, :item)"
set = "SET touched = :yes"
values = { ":item" = "ITEM#", ":yes" = true }
"#;

/// Checks where `out`, of `case` (`json` when run with --json), put what.
fn assert_streams(case: &Case, json: bool, run_id: &str, out: &Run) {
    let said = format!(
        "{} (json: {json})\nstdout:\n{}\nstderr:\n{}",
        case.name, out.stdout, out.stderr
    );
    assert!(out.code == 0 || out.code == 2, "{said}");
    if json {
        let doc: Result<serde_json::Value, _> = serde_json::from_str(out.stdout.trim());
        assert!(doc.is_ok(), "stdout is not one JSON document: {said}");
        return;
    }
    let says = case.says.replace("RUN", run_id);
    assert!(out.stdout.contains(&says), "no {says:?} on stdout: {said}");
    // Where the report was saved is part of it.
    assert!(
        !out.stderr.contains(&says) && !out.stderr.contains("report: "),
        "the report on stderr: {said}"
    );
    for line in out.stdout.lines() {
        assert!(
            !LOG_PREFIXES.iter().any(|p| line.starts_with(p)),
            "a log line on stdout: {line:?}\n{said}"
        );
        let line = line.trim();
        assert!(
            line.len() < 12 || !out.stderr.contains(line),
            "a report line on stderr too: {line:?}\n{said}"
        );
    }
}

#[tokio::test]
async fn every_report_on_stdout_alone_and_json_alone_with_json() {
    let sc = Scenario::new("streams")
        .postgres(&items_sql(300))
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);
    let first = sc
        .run(&mapping, &["--progress-table", "--quiet", "--json"])
        .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let run_id = first.report()["run_id"].as_str().unwrap().to_string();
    let job = sc.path().join("job.toml");
    std::fs::write(&job, TOUCH.replace("TABLE", &sc.table)).unwrap();
    let job = job.display().to_string();
    let items = format!("{}.items", sc.pg().name);
    for case in &CASES {
        for json in [false, true].into_iter().filter(|j| case.json || !j) {
            let out = sc.path().join(format!("out-{json}"));
            let out = out.display().to_string();
            let mut args: Vec<&str> = case
                .args
                .iter()
                .map(|a| match *a {
                    "MAPPING" => mapping.as_str(),
                    "ENDPOINT" => sc.dynamo.url.as_str(),
                    "RUN" => run_id.as_str(),
                    "JOB" => job.as_str(),
                    "OUT" => out.as_str(),
                    "SOURCE" => pg_url(),
                    "SCHEMA.items" => items.as_str(),
                    a => a,
                })
                .collect();
            if json {
                args.push("--json");
            }
            let run = sc.sql2ddb(&args).await;
            assert_streams(case, json, &run_id, &run);
        }
    }
}

/// Items keyed by the primary key alone: a mapping `run --follow` follows.
const FOLLOWED: &str = pg_mapping!(
    r#"
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{id}"
sk = "ITEM"
"#
);

#[tokio::test]
async fn a_follows_stop_summary_on_stdout_alone_and_json_alone_with_json() {
    let sc = Scenario::new("streams_follow")
        .postgres(&items_sql(50))
        .start()
        .await;
    let mapping = sc.mapping(FOLLOWED);
    let endpoint = sc.dynamo.url.clone();
    let idle = ["--follow-until-idle", "1"];
    let first = sc
        .run(&mapping, &[&["--follow", "--quiet"][..], &idle].concat())
        .await;
    let run_id = first
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no run id:\n{}", first.stderr));
    let slot = sql2ddb_engine::follow::slot_name(&run_id);
    let _dropped_at_the_end = crate::follow_scenario::SlotGuard(slot.clone());
    let case = Case {
        name: "run --follow",
        args: &[],
        says: "follow of ",
        json: true,
    };
    assert_streams(&case, false, &run_id, &first);

    for json in [false, true] {
        let mut args = vec!["follow", &mapping, "--slot", &slot, "--endpoint", &endpoint];
        args.extend_from_slice(&idle);
        if json {
            args.push("--json");
        }
        let out = sc.sql2ddb(&args).await;
        let case = Case {
            name: "follow",
            args: &[],
            says: "follow of ",
            json: true,
        };
        assert_streams(&case, json, &run_id, &out);
    }
}
