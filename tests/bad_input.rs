//! Bad input gets a clear error and loses nothing: bad rows are rejected one
//! by one with their key and reason (exit 2), bad mappings name file, line and
//! column (exit 1), and passwords never appear in any output.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: four bad rows, each reject checked.
async fn bad_rows_are_rejected_alone_with_key_and_reason() {
    let sc = Scenario::new("bad_rows")
        .postgres(
            "CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL, amount numeric, ratio float8, body text);
             INSERT INTO {schema}.items SELECT i, 'n' || i, 1.5, 0.5, 'x' FROM generate_series(1, 20) i;
             INSERT INTO {schema}.items VALUES
               (21, 'n21', 12345678901234567890123456789012345678901, 0.5, 'x'),
               (22, 'n22', 1.5, 'NaN', 'x'),
               (23, '', 1.5, 0.5, 'x'),
               (24, 'n24', 1.5, 0.5, repeat('y', 500000));",
        )
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);

    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(
        run.code, 2,
        "exit 2 when rows were rejected; stderr:\n{}",
        run.stderr
    );
    let report = run.report();
    assert_eq!(report["status"], "rejected");
    let e = run.entity("item");
    assert_eq!(e["rows_read"], 24);
    assert_eq!(e["items_written"], 20);
    assert_eq!(e["rejected"], 4);
    assert!(
        run.stderr.contains("rejects:"),
        "the human report points at the rejects file"
    );

    let mut rejected = rejects_of(sc.path(), &report);
    rejected.sort_by_key(|r| r["key"]["id"].as_i64());
    assert_eq!(rejected.len(), 4, "{rejected:#?}");
    let ids: Vec<i64> = rejected
        .iter()
        .map(|r| r["key"]["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![21, 22, 23, 24]);
    for r in &rejected {
        assert_eq!(r["entity"], "item");
        assert_eq!(
            r["row"]["id"], r["key"]["id"],
            "the row travels with its reject: {r}"
        );
    }
    assert_eq!(rejected[0]["column"], "amount");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap()
            .contains("41 significant digits"),
        "{}",
        rejected[0]
    );
    assert_eq!(rejected[1]["column"], "ratio");
    assert!(
        rejected[1]["reason"].as_str().unwrap().contains("NaN"),
        "{}",
        rejected[1]
    );
    assert!(
        rejected[2]["reason"].as_str().unwrap().contains("empty"),
        "{}",
        rejected[2]
    );
    assert!(
        rejected[3]["reason"].as_str().unwrap().contains("400 KB"),
        "{}",
        rejected[3]
    );

    let items = sc.items().await;
    assert_eq!(items.len(), 20);
    for i in 1..=20 {
        assert!(
            items.contains_key(&(format!("n{i}"), format!("ITEM#{i}"))),
            "row {i} written"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelled_key_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let text = ITEMS_MAPPING.replace("from = \"SCHEMA.items\"", "frm = \"items\"");
    let mapping = write_mapping(dir.path(), &text);
    let run = sql2ddb(dir.path(), &["check", &mapping]).await;
    assert_eq!(run.code, 1);
    // `frm` stands on line 12, column 1.
    assert!(run.stderr.contains("mapping.toml:12:1"), "{}", run.stderr);
    assert!(run.stderr.contains("frm"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_template_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let text = ITEMS_MAPPING.replace("sk = \"ITEM#{id}\"", "sk = \"ITEM#{id\"");
    let mapping = write_mapping(dir.path(), &text);
    let run = sql2ddb(dir.path(), &["check", &mapping]).await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("mapping.toml:14:"), "{}", run.stderr);
    assert!(
        run.stderr.to_lowercase().contains("template"),
        "{}",
        run.stderr
    );

    let ok = write_mapping(dir.path(), ITEMS_MAPPING);
    let run = sql2ddb(dir.path(), &["check", &ok]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_column_stops_the_run_before_any_write() {
    let sc = Scenario::new("bad_col")
        .postgres("CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO {schema}.items VALUES (1, 'a');")
        .start()
        .await;
    let mapping =
        sc.mapping(&ITEMS_MAPPING.replace("sk = \"ITEM#{id}\"", "sk = \"ITEM#{item_id}\""));
    let run = sc.run(&mapping, &["--quiet"]).await;
    // The mapping does not fit its source.
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(run.stderr.contains("mapping.toml:14:"), "{}", run.stderr);
    assert!(run.stderr.contains("item_id"), "{}", run.stderr);
    let tables = sc.dynamo.client.list_tables().send().await.unwrap();
    assert!(
        !tables.table_names().contains(&sc.table),
        "no table created, nothing written"
    );
}

/// A mistyped column and a mistyped table are each answered with the name
/// they most likely stand for, and a hint about that cause (not the
/// source's URL); a name close to nothing gets no guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typo_is_answered_with_did_you_mean_and_a_hint_of_its_cause() {
    let sc = Scenario::new("typo")
        .postgres("CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO {schema}.items VALUES (1, 'a');")
        .start()
        .await;
    let s = sc.pg().name.clone();
    let column = sc.mapping(&ITEMS_MAPPING.replace("pk = \"{name}\"", "pk = \"{nmae}\""));
    let run = sc.run(&column, &["--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("column \"nmae\", which the source does not return; did you mean \"name\"?"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("hint: check the source URL"),
        "{}",
        run.stderr
    );

    let table = sc.mapping(&ITEMS_MAPPING.replace("SCHEMA.items", "SCHEMA.itmes"));
    let run = sc.run(&table, &["--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("table {s}.itmes does not exist"))
            && run.stderr.contains(&format!("did you mean {s}.items?")),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("hint: the mapping names a table the source does not have"),
        "{}",
        run.stderr
    );

    let far = sc.mapping(&ITEMS_MAPPING.replace("SCHEMA.items", "SCHEMA.invoices"));
    let run = sc.run(&far, &["--quiet"]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(!run.stderr.contains("did you mean"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_source_url_never_appears() {
    const SECRET: &str = "Sup3rS3cretPw";
    let sc = Scenario::new("secret")
        .postgres("CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL); INSERT INTO {schema}.items VALUES (1, 'a'), (2, '');")
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);

    // A run that succeeds (trust auth ignores the password) and rejects a row.
    let url = format!("postgres://root:{SECRET}@127.0.0.1:5432/test");
    let run = sc.run(&mapping, &["--source", &url, "--json"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!run.stdout.contains(SECRET) && !run.stderr.contains(SECRET));
    let report = run.report();
    assert_eq!(report["source"], "postgres://root:***@127.0.0.1:5432/test");
    let run_dir = sc.path().join(report["run_dir"].as_str().unwrap());
    for entry in std::fs::read_dir(&run_dir).unwrap() {
        let path = entry.unwrap().path();
        if let Ok(text) = std::fs::read_to_string(&path) {
            assert!(
                !text.contains(SECRET),
                "{} holds the password",
                path.display()
            );
        }
    }

    // A run that fails to connect (into the table the first run wrote).
    let url = format!("postgres://root:{SECRET}@127.0.0.1:1/test");
    let run = sc
        .run(&mapping, &["--source", &url, "--if-not-empty", "append"])
        .await;
    assert_eq!(run.code, EX_UNAVAILABLE, "{}", run.stderr);
    assert!(
        run.stderr.contains("127.0.0.1:1"),
        "the error says where: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("hint: check the source URL"),
        "a source error says what to check: {}",
        run.stderr
    );
    assert!(
        !run.stdout.contains(SECRET) && !run.stderr.contains(SECRET),
        "{}",
        run.stderr
    );

    // The same through an environment variable in the mapping.
    let mapping = sc
        .mapping(&ITEMS_MAPPING.replace("postgres://root@127.0.0.1:5432/test", "${SECRET_DB_URL}"));
    let args = ["run", &mapping, "--endpoint", &sc.dynamo.url];
    let out = command(
        sc.path(),
        &[&args[..], &["--if-not-empty", "append"]].concat(),
    )
    .env(
        "SECRET_DB_URL",
        format!("mysql://root:{SECRET}@127.0.0.1:1/test"),
    )
    .output()
    .await
    .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(EX_UNAVAILABLE), "{all}");
    assert!(!all.contains(SECRET), "{all}");
}
