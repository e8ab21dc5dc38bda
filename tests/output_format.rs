//! One way to show a figure, whichever command prints it: counts with
//! thousands separators, one of a thing in the singular, sizes in decimal
//! units, times in RFC 3339 UTC to the second; and a report's words fitted
//! to its job (a dry run maps, an export writes files).

use crate::common::*;

/// The runs of four or more digits in `text` that no separator groups (a
/// count shown raw), outside ids, times, paths and URLs.
fn raw_counts(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|w| !w.contains("://"))
        .flat_map(|w| w.split(|c: char| "(),;:=/".contains(c)))
        .filter(|w| w.len() >= 4 && w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn counts_sizes_and_times_are_shown_one_way_by_run_plan_verify_and_runs() {
    let sc = Scenario::new("shown")
        .postgres(&items_sql(1_500))
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);

    let run = sc.run(&mapping, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("1,500"), "{}", run.stdout);
    assert!(raw_counts(&run.stdout).is_empty(), "{}", run.stdout);
    // The snapshot's time to the second, in UTC.
    let snapshot = run
        .stderr
        .lines()
        .find(|l| l.starts_with("snapshot "))
        .unwrap_or_else(|| panic!("no snapshot line:\n{}", run.stderr));
    let at = snapshot
        .split(" at ")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert_eq!(at.len(), "2026-01-02T03:04:05Z".len(), "{snapshot}");
    assert!(at.ends_with('Z') && !at.contains('.'), "{snapshot}");

    let deep = sc
        .sql2ddb(&["verify", &mapping, "--deep", "--endpoint", &sc.dynamo.url])
        .await;
    assert_eq!(deep.code, 0, "{}", deep.stderr);
    assert!(deep.stdout.contains("1,500"), "{}", deep.stdout);
    assert!(raw_counts(&deep.stdout).is_empty(), "{}", deep.stdout);

    let plan = sc.sql2ddb(&["plan", &mapping]).await;
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("1,500 write request units"),
        "{}",
        plan.stdout
    );
    assert!(!plan.stdout.contains("KiB"), "{}", plan.stdout);
    assert!(plan.stdout.contains(" kB"), "{}", plan.stdout);

    // A dry run and an export in their own words: nothing "written" to a
    // table "at none", no writers.
    let dry = sc.run(&mapping, &["--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let out = sc.path().join("export").display().to_string();
    let export = sc.sql2ddb(&["export", &mapping, "--out", &out]).await;
    assert_eq!(export.code, 0, "{}", export.stderr);
    for (report, header, says) in [
        (
            &dry.stdout,
            "mapped",
            "dry run: every row read and mapped, nothing written",
        ),
        (&export.stdout, "exported", "exported 1,500 items ("),
    ] {
        let head = report.lines().next().unwrap();
        assert!(
            head.contains(header) && !head.contains("written"),
            "{report}"
        );
        assert!(report.contains(says), "{report}");
        assert!(
            !report.contains(" at none") && !report.contains("writers:"),
            "{report}"
        );
    }

    let runs = sc.sql2ddb(&["runs", &mapping]).await;
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    let started = runs
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .nth(1);
    let started = started.unwrap_or_else(|| panic!("{}", runs.stdout));
    assert!(
        started.len() == 20 && started.ends_with('Z') && started.contains('T'),
        "{}",
        runs.stdout
    );
}

#[test]
fn a_raw_count_is_found_and_a_grouped_one_is_not() {
    assert_eq!(raw_counts("read 1500 rows"), vec!["1500"]);
    assert!(raw_counts("read 1,500 rows in 12 s (run 20260102T0304)").is_empty());
    assert!(raw_counts("table t at http://127.0.0.1:34887").is_empty());
}
