//! `check MAPPING --source [URL]`: the mapping bound against the live
//! source as `run` binds it before reading, every problem listed at once
//! with its file:line:col, its field and a "did you mean"; what plain
//! `check` (no connection) cannot see.

use crate::common::*;

/// Three column typos (the first before a separator, the last nearer the
/// first typo than any column), a table typo and a key that is not unique:
/// plain `check` passes all five, `run` refuses the first.
const TYPOS: &str = pg_mapping!(
    r#"
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{id}"
sk = "NAME#{nmae}#{id}"
[entity.attributes]
count = { column = "qtty" }
label = { column = "nmea" }

[[entity]]
name = "other"
from = "SCHEMA.itemz"
pk = "OTHER#{id}"
sk = "X"

[[entity]]
name = "by_qty"
from = "SCHEMA.items"
key = ["qty"]
pk = "Q#{qty}"
sk = "Q"
"#
);

#[tokio::test]
async fn typos_pass_plain_check_and_are_all_named_by_check_source() {
    let sc = Scenario::new("check_src")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = sc.mapping(TYPOS);
    let plain = sc.sql2ddb(&["check", &mapping]).await;
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);

    let live = sc.sql2ddb(&["check", &mapping, "--source"]).await;
    assert_eq!(live.code, EXIT_FAILED, "{}{}", live.stdout, live.stderr);
    let err = &live.stderr;
    assert!(err.contains("5 problems"), "{err}");
    // Each problem on its own line, at its place in the file, naming the
    // field, the column and what it most likely stands for.
    let line = |needle: &str| {
        err.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{err}"))
            .to_string()
    };
    let sk = line("\"nmae\"");
    assert!(sk.contains("mapping.toml:14:"), "{sk}");
    assert!(sk.contains("sk template"), "{sk}");
    assert!(sk.contains("did you mean \"name\""), "{sk}");
    assert!(sk.contains("available columns: id, name, qty"), "{sk}");
    let count = line("\"qtty\"");
    assert!(count.contains("mapping.toml:16:"), "{count}");
    assert!(count.contains("attribute \"count\""), "{count}");
    assert!(count.contains("did you mean \"qty\""), "{count}");
    // Nothing near it among the source's columns: no suggestion, though
    // the first typo is one edit away.
    let label = line("\"nmea\"");
    assert!(label.contains("mapping.toml:17:"), "{label}");
    assert!(!label.contains("did you mean"), "{label}");
    assert!(
        label.contains("available columns: id, name, qty"),
        "{label}"
    );
    let table = line("itemz");
    assert!(table.contains("mapping.toml:19:"), "{table}");
    assert!(
        table.contains(&format!("{}.items", sc.pg().name)),
        "{table}"
    );
    let key = line("by_qty");
    assert!(key.contains("mapping.toml:25:"), "{key}");
    assert!(key.contains("not proven unique"), "{key}");
    assert!(!sc.table_exists(&sc.table).await);

    // What `run` refuses, `check --source` named first.
    let run = sc.run(&mapping, &["--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(run.stderr.contains("\"nmae\""), "{}", run.stderr);
}

#[tokio::test]
async fn a_mapping_that_fits_passes_and_the_url_given_wins() {
    let sc = Scenario::new("check_src_ok")
        .postgres(&items_sql(20))
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);
    let ok = sc.sql2ddb(&["check", &mapping, "--source"]).await;
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.contains("fits its source: 1 entity bound"),
        "{}",
        ok.stdout
    );
    assert!(ok.stderr.is_empty(), "{}", ok.stderr);

    // A mapping whose URL names a variable that is not set: the URL given
    // is used; a URL where nothing listens is said so, exit 69.
    let unset = ITEMS_MAPPING.replace(
        "postgres://root@127.0.0.1:5432/test",
        "${CHECK_SOURCE_UNSET_URL}",
    );
    let mapping = sc.mapping(&unset);
    let given = sc.sql2ddb(&["check", &mapping, "--source", pg_url()]).await;
    assert_eq!(given.code, 0, "{}{}", given.stdout, given.stderr);
    let down = sc
        .sql2ddb(&[
            "check",
            &mapping,
            "--source",
            "postgres://root@127.0.0.1:1/test",
        ])
        .await;
    assert_eq!(down.code, EX_UNAVAILABLE, "{}", down.stderr);
    let missing = sc.sql2ddb(&["check", &mapping, "--source"]).await;
    assert_eq!(missing.code, EX_CONFIG, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("CHECK_SOURCE_UNSET_URL"),
        "{}",
        missing.stderr
    );

    // An update job file reads a table, not a source: checked as without
    // --source, which is said.
    let job = sc.path().join("job.toml");
    std::fs::write(
        &job,
        "version = 1\n[target]\ntable = \"some-table\"\n[update]\nname = \"touch\"\nscan = { segments = 1 }\nset = \"SET touched = :yes\"\nvalues = { \":yes\" = true }\n",
    )
    .unwrap();
    let job = job.display().to_string();
    let checked = sc.sql2ddb(&["check", &job, "--source"]).await;
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked.stdout.contains("ok (update job"),
        "{}",
        checked.stdout
    );
    assert!(
        checked
            .stderr
            .contains("--source does not apply to an update job file"),
        "{}",
        checked.stderr
    );
}

/// A number key filled from a text column: valid, but every row whose
/// name is not a number would be rejected.
const TEXT_IN_NUMBER_KEY: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"
[target]
table = "TABLE"
create = true
pk = { name = "PK", type = "N" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "{name}"
sk = "ITEM#{id}"
"#;

#[tokio::test]
async fn a_text_column_in_a_number_key_is_a_warning() {
    let sc = Scenario::new("check_src_n")
        .postgres(&items_sql(5))
        .start()
        .await;
    let mapping = sc.mapping(TEXT_IN_NUMBER_KEY);
    let plain = sc.sql2ddb(&["check", &mapping]).await;
    assert_eq!(plain.code, 0, "{}{}", plain.stdout, plain.stderr);
    let live = sc.sql2ddb(&["check", &mapping, "--source"]).await;
    assert_eq!(live.code, 2, "{}{}", live.stdout, live.stderr);
    let warning = live
        .stderr
        .lines()
        .find(|l| l.starts_with("warning: "))
        .unwrap_or_else(|| panic!("no warning:\n{}", live.stderr));
    assert!(warning.contains("mapping.toml:13:"), "{warning}");
    assert!(
        warning.contains("key attribute PK is of type N, but column \"name\" is text"),
        "{warning}"
    );
}
