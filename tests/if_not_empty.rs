//! End to end, what a fresh load does with a destination that already
//! holds data (`--if-not-empty`): a second `run` into a table with items is
//! refused (exit 78) before anything is read or written, unless told to
//! append (write as before) or truncate (delete every item first, then
//! load); a resumed run is not asked; `run --queue` refuses the same way
//! before sending a page; `export` treats an earlier export's files alike.
//! The source is PostgreSQL, the target a DynamoDB-compatible server in
//! this process, SQS moto's server.

use std::time::{Duration, Instant};

use sql2ddb_queue::WorkQueue;
use sql2ddb_testkit::sdk::types::AttributeValue;

use crate::common::*;
use crate::distributed::Fixture as Queued;
use sql2ddb_testkit::support::{Bucket, Moto};

/// A scenario with `rows` items in PostgreSQL and a mapping copying them
/// to the scenario's table.
async fn fixture(prefix: &str, rows: u64) -> (Scenario, String) {
    let sc = Scenario::new(prefix)
        .postgres(&items_sql(rows))
        .start()
        .await;
    let mapping = sc.mapping(&format!(
        r#"{}
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "ITEM#{{id}}"
sk = "ITEM"
"#,
        mapping_head("", "TABLE", &sc.dynamo.url)
    ));
    (sc, mapping)
}

/// Puts an item straight into the table, as an application (or an
/// `update`) would: `PK`, `SK` and `name`.
async fn put(sc: &Scenario, pk: &str, name: &str) {
    sc.dynamo
        .client
        .put_item()
        .table_name(&sc.table)
        .item("PK", AttributeValue::S(pk.into()))
        .item("SK", AttributeValue::S("ITEM".into()))
        .item("name", AttributeValue::S(name.into()))
        .send()
        .await
        .unwrap();
}

/// The `name` of item `PK = pk` in the table.
async fn name_of(sc: &Scenario, pk: &str) -> Option<String> {
    let items = sc.items().await;
    match items
        .get(&(pk.to_string(), "ITEM".to_string()))?
        .get("name")
    {
        Some(sql2ddb_core::AttrValue::S(name)) => Some(name.clone()),
        other => panic!("{pk}: name {other:?}"),
    }
}

/// The run directories under the scenario's runs directory.
fn run_dirs(sc: &Scenario) -> usize {
    std::fs::read_dir(sc.path().join("sql2ddb-runs"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_into_a_table_with_items_is_refused_and_the_table_left_as_it_was() {
    let (sc, mapping) = fixture("again_refused", 300).await;
    let first = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    // What a mass update did since: the run must not undo it.
    put(&sc, "ITEM#7", "changed by an update").await;

    let again = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(again.code, EX_CONFIG, "{}", again.stderr);
    let err = &again.stderr;
    for part in [
        format!("table {} already holds 300 items", sc.table),
        "nothing was read or written".to_string(),
        "--if-not-empty append".to_string(),
        "--if-not-empty truncate".to_string(),
        "--if-not-empty fail (the default)".to_string(),
    ] {
        assert!(err.contains(&part), "{part}:\n{err}");
    }
    assert!(
        again.stdout.trim().is_empty(),
        "no report: {}",
        again.stdout
    );
    assert_eq!(
        name_of(&sc, "ITEM#7").await.as_deref(),
        Some("changed by an update")
    );
    assert_eq!(sc.items().await.len(), 300);
    assert_eq!(run_dirs(&sc), 1, "the refused run left no directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_writes_into_the_table_as_it_is() {
    let (sc, mapping) = fixture("again_append", 200).await;
    let first = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    put(&sc, "ITEM#7", "changed by an update").await;
    put(&sc, "OTHER#1", "not from the source").await;

    let again = sc
        .run(&mapping, &["--if-not-empty", "append", "--json", "--quiet"])
        .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.entity("item")["items_written"], 200);
    assert_eq!(again.report().get("table_emptied"), None);
    // Rewritten from the source, and the other item kept.
    assert_eq!(name_of(&sc, "ITEM#7").await.as_deref(), Some("Name 7"));
    assert_eq!(
        name_of(&sc, "OTHER#1").await.as_deref(),
        Some("not from the source")
    );
    assert_eq!(sc.items().await.len(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncate_leaves_exactly_the_sources_items() {
    let (sc, mapping) = fixture("again_truncate", 1_000).await;
    let first = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    put(&sc, "ITEM#7", "changed by an update").await;
    put(&sc, "OTHER#1", "not from the source").await;
    // A row gone from the source since: its item must go too.
    sc.pg()
        .exec("DELETE FROM {schema}.items WHERE id = 9")
        .await;

    let again = sc
        .run(
            &mapping,
            &[
                "--if-not-empty",
                "truncate",
                "--concurrency",
                "3",
                "--json",
                "--quiet",
            ],
        )
        .await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains(&format!(
            "table {} holds 1,001 items: deleting them first",
            sc.table
        )),
        "{}",
        again.stderr
    );
    assert!(
        again.stderr.contains("1,001 items deleted"),
        "{}",
        again.stderr
    );
    assert_eq!(again.report()["table_emptied"], 1001);
    assert!(
        again
            .stderr
            .contains("(emptied first: 1,001 items deleted, --if-not-empty truncate)"),
        "the report's table says so: {}",
        again.stderr
    );
    let items = sc.items().await;
    let expected: Vec<(String, String)> = (1..=1_000)
        .filter(|i| *i != 9)
        .map(|i| (format!("ITEM#{i}"), "ITEM".to_string()))
        .collect();
    let keys: Vec<(String, String)> = items.keys().cloned().collect();
    let mut expected = expected;
    expected.sort();
    assert_eq!(keys, expected, "exactly the source's items");
    assert_eq!(name_of(&sc, "ITEM#7").await.as_deref(), Some("Name 7"));
    // The table was emptied, not dropped: still there under its name, and
    // a run into it now is refused again.
    let refused = sc.run(&mapping, &["--quiet"]).await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("already holds 999 items"),
        "{}",
        refused.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_writes_into_its_own_table_without_being_asked() {
    let (sc, mapping) = fixture("again_resume", 2_000).await;
    let progress = format!("{}_progress", sc.table);
    let common = [
        "--endpoint",
        sc.dynamo.url.as_str(),
        "--progress-table",
        progress.as_str(),
        "--page-size",
        "20",
        "--concurrency",
        "1",
        "--json",
        "--quiet",
    ];
    // Slowed down by a capacity cap, killed once some pages are written.
    let mut args = vec!["run", mapping.as_str(), "--max-wcu", "100"];
    args.extend(common);
    let running = Proc::spawn(sc.path(), &args);
    let run_id = running.run_id().await;
    let store = sql2ddb_dynamo::progress::ProgressStore::new(sc.dynamo.handle.clone(), &progress);
    let start = Instant::now();
    loop {
        if let Ok(p) = store.load(&run_id).await {
            if p.batches.len() >= 3 {
                break;
            }
        }
        assert!(start.elapsed() < PATIENCE, "no pages written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.kill().await;
    let held = sc.items().await.len();
    assert!((1..2_000).contains(&held), "{held} items after the kill");

    // A fresh run into that table is refused; the resume is not.
    let mut fresh = vec!["run", mapping.as_str()];
    fresh.extend(common);
    let refused = sc.sql2ddb(&fresh).await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    let mut resume = vec!["run", mapping.as_str(), "--resume", run_id.as_str()];
    resume.extend(common);
    let resumed = sc.sql2ddb(&resume).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(resumed.report()["run_id"], run_id.as_str());
    assert_eq!(sc.items().await.len(), 2_000);
    // Told what to do with the table, a resume is a usage error: it has
    // nothing to decide.
    let mut told = resume.clone();
    told.extend(["--if-not-empty", "truncate"]);
    let told = sc.sql2ddb(&told).await;
    assert_eq!(told.code, 64, "{}", told.stderr);
    assert!(told.stderr.contains("--if-not-empty"), "{}", told.stderr);
    assert_eq!(sc.items().await.len(), 2_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_at_the_queue_is_refused_before_it_sends_a_page() {
    let f = Queued::new("queued_refused", 3_000, 30, 5).await;
    // The table holds the rows already, written by a run in this process.
    let first = f.sc.run(&f.mapping, &["--quiet"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);

    let refused = f.reader(&[]).wait().await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains(&format!("table {} already holds 3,000 items", f.table)),
        "{}",
        refused.stderr
    );
    let depth = f.queue.depth().await.unwrap();
    assert_eq!((depth.visible, depth.in_flight), (0, 0), "nothing sent");

    // Told to append, it reads and sends as before.
    let reader = f.reader(&["--if-not-empty", "append"]);
    let run_id = reader.run_id().await;
    let read = reader.wait().await;
    assert_eq!(read.code, 0, "{}", read.stderr);
    assert_eq!(read.report()["totals"]["rows_read"], 3_000);
    let worker = f.worker(&run_id, "2").wait().await;
    assert_eq!(worker.code, 0, "{}", worker.stderr);
    f.assert_verified_and_complete(&run_id).await;
    f.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_follow_is_refused_before_it_makes_a_replication_slot() {
    let (sc, mapping) = fixture("follow_refused", 50).await;
    let first = sc.run(&mapping, &["--quiet"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);

    let refused = sc
        .run(
            &mapping,
            &["--follow", "--follow-until-idle", "1", "--quiet"],
        )
        .await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains(&format!("table {} already holds 50 items", sc.table)),
        "{}",
        refused.stderr
    );
    assert!(
        !refused.stderr.contains("replication slot"),
        "refused before a slot was made (none created, none kept): {}",
        refused.stderr
    );
    assert_eq!(run_dirs(&sc), 1, "no run directory for the refused run");
}

/// `export MAPPING --out OUT EXTRA… --json --quiet`.
async fn export(sc: &Scenario, mapping: &str, out: &str, extra: &[&str]) -> Run {
    let mut args = vec!["export", mapping, "--out", out];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--quiet"]);
    sc.sql2ddb(&args).await
}

/// The names of the files in `dir`, sorted.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_into_an_earlier_exports_folder_is_refused_unless_told() {
    let (sc, mapping) = fixture("export_again", 300).await;
    let out = sc.path().join("out");
    let out_text = out.display().to_string();
    let first = export(&sc, &mapping, &out_text, &["--items-per-file", "100"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let data = out.join("data");
    let first_files = names(&data);
    assert!(first_files.len() >= 3, "{first_files:?}");
    // A file of the user's own beside the export.
    std::fs::write(out.join("README.txt"), "mine").unwrap();
    let manifest = std::fs::read(out.join("manifest.json")).unwrap();

    let refused = export(&sc, &mapping, &out_text, &[]).await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    for part in [
        format!(
            "{out_text} already holds {} export files",
            first_files.len() + 2
        ),
        "--if-not-empty append".to_string(),
        "--if-not-empty truncate".to_string(),
    ] {
        assert!(
            refused.stderr.contains(&part),
            "{part}:\n{}",
            refused.stderr
        );
    }
    assert_eq!(names(&data), first_files, "nothing removed or added");
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), manifest);

    // Appended: the earlier files are kept, this export's carry its run id.
    let appended = export(&sc, &mapping, &out_text, &["--if-not-empty", "append"]).await;
    assert_eq!(appended.code, 0, "{}", appended.stderr);
    let run_id = appended.report()["run_id"].as_str().unwrap().to_string();
    assert_eq!(std::fs::read(out.join("manifest.json")).unwrap(), manifest);
    let own = format!("manifest-{run_id}.json");
    assert!(out.join(&own).is_file(), "{:?}", names(&out));
    let now = names(&data);
    assert!(
        first_files.iter().all(|f| now.contains(f)),
        "earlier files kept: {now:?}"
    );
    let added: Vec<&String> = now.iter().filter(|f| !first_files.contains(f)).collect();
    assert!(
        !added.is_empty()
            && added
                .iter()
                .all(|f| f.starts_with(&format!("part-{run_id}-"))),
        "{added:?}"
    );

    // Truncated: the exports' files go, the user's file stays, and the
    // folder holds this export alone.
    let truncated = export(&sc, &mapping, &out_text, &["--if-not-empty", "truncate"]).await;
    assert_eq!(truncated.code, 0, "{}", truncated.stderr);
    let listed: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let mut listed: Vec<String> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["name"]
                .as_str()
                .unwrap()
                .trim_start_matches("data/")
                .to_string()
        })
        .collect();
    listed.sort();
    assert_eq!(
        names(&data),
        listed,
        "data/ holds this export's files alone"
    );
    assert_eq!(
        names(&out),
        ["README.txt", "data", "manifest.json", "table-creation.json"]
    );

    // A file no export wrote under data/ is refused whatever the choice,
    // and kept.
    std::fs::write(data.join("notes.txt"), "mine too").unwrap();
    let foreign = export(&sc, &mapping, &out_text, &["--if-not-empty", "truncate"]).await;
    assert_eq!(foreign.code, EX_CONFIG, "{}", foreign.stderr);
    assert!(
        foreign.stderr.contains("notes.txt, which no export wrote"),
        "{}",
        foreign.stderr
    );
    assert!(data.join("notes.txt").is_file());
    assert_eq!(names(&data).len(), listed.len() + 1);
}

/// The keys under `prefix` in `bucket`, sorted.
async fn keys_under(bucket: &Bucket, prefix: &str) -> Vec<String> {
    let listed = bucket
        .client
        .list_objects_v2()
        .bucket(&bucket.name)
        .prefix(prefix)
        .send()
        .await
        .unwrap();
    let mut keys: Vec<String> = listed
        .contents()
        .iter()
        .map(|o| o.key().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_to_s3_is_refused_appended_or_truncated_as_a_directory_is() {
    let moto = Moto::s3();
    let url = moto.url().to_string();
    let (sc, mapping) = fixture("export_s3_again", 300).await;
    let bucket = Bucket::create(&url, "again").await;
    let out = format!("s3://{}/shop", bucket.name);
    let s3 = ["--s3-endpoint", url.as_str()];
    let first = export(
        &sc,
        &mapping,
        &out,
        &[&s3[..], &["--items-per-file", "100"]].concat(),
    )
    .await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    let earlier = keys_under(&bucket, "shop/data/").await;
    assert!(earlier.len() >= 3, "{earlier:?}");
    // An object of the user's own beside the export.
    bucket.put("shop/README.txt", b"mine").await;

    let refused = export(&sc, &mapping, &out, &s3).await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "{out} already holds {} export files",
            earlier.len() + 2
        )),
        "{}",
        refused.stderr
    );
    assert_eq!(keys_under(&bucket, "shop/data/").await, earlier);

    let appended = export(
        &sc,
        &mapping,
        &out,
        &[&s3[..], &["--if-not-empty", "append"]].concat(),
    )
    .await;
    assert_eq!(appended.code, 0, "{}", appended.stderr);
    let run_id = appended.report()["run_id"].as_str().unwrap().to_string();
    let both = keys_under(&bucket, "shop/data/").await;
    assert!(earlier.iter().all(|k| both.contains(k)), "{both:?}");
    assert!(
        both.iter()
            .filter(|k| !earlier.contains(k))
            .all(|k| k.starts_with(&format!("shop/data/part-{run_id}-"))),
        "{both:?}"
    );
    bucket.get(&format!("shop/manifest-{run_id}.json")).await;

    let truncated = export(
        &sc,
        &mapping,
        &out,
        &[&s3[..], &["--if-not-empty", "truncate"]].concat(),
    )
    .await;
    assert_eq!(truncated.code, 0, "{}", truncated.stderr);
    let manifest: serde_json::Value =
        serde_json::from_slice(&bucket.get("shop/manifest.json").await).unwrap();
    let mut named: Vec<String> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("shop/{}", f["name"].as_str().unwrap()))
        .collect();
    named.sort();
    assert_eq!(keys_under(&bucket, "shop/data/").await, named);
    assert_eq!(
        keys_under(&bucket, "shop/").await.len(),
        named.len() + 3,
        "beside data/: the manifest, the table parameters and the user's object"
    );
    assert_eq!(bucket.get("shop/README.txt").await, b"mine");
}
