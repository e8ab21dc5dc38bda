//! `sql2ddb update`: the mass UPDATE/DELETE … WHERE on an existing table,
//! against a real DynamoDB-compatible server. The table holds three entity
//! types (customers, orders, products); the jobs match a known set of them,
//! and every other item must come out byte for byte as it went in.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::{ensure_table_spec, GsiSpec, Projection, TableSpec};
use sql2ddb_engine::update::{update, UpdateOptions, UpdateProgress};
use sql2ddb_mapping::UpdateJob;
use sql2ddb_testkit::sdk::types::{PutRequest, WriteRequest};

use crate::common::{count, item, key, n, s, Items, Run, Scenario, EX_CONFIG, EX_UNAVAILABLE};

mod capacity;
mod hold;
mod once;

/// Items per entity type: customers, orders and products, a third each.
pub(crate) const PER_TYPE: usize = 1000;

/// Items per entity type of the largest job: 20,001 items in all.
const LARGE_PER_TYPE: usize = 6667;

/// The customer, order and product of number `i`. Orders are `new`, in GSI1
/// under `STATUS#new`, half of them in region `eu`; customers have a
/// `status` too, so `where` must look at the sort key to pick orders.
fn entities(i: usize) -> [Item; 3] {
    let customer = item(vec![
        ("PK", s(format!("CUSTOMER#{i}"))),
        ("SK", s("PROFILE")),
        ("entity", s("customer")),
        ("status", s("new")),
        ("name", s(format!("Customer {i}"))),
    ]);
    let order = item(vec![
        ("PK", s(format!("CUSTOMER#{i}"))),
        ("SK", s(format!("ORDER#{i:06}"))),
        ("entity", s("order")),
        ("status", s("new")),
        ("total", n(i * 3 + 1)),
        ("retry_count", n(2)),
        ("region", s(if i.is_multiple_of(2) { "eu" } else { "us" })),
        ("GSI1PK", s("STATUS#new")),
        ("GSI1SK", s(format!("{i:06}"))),
    ]);
    let product = item(vec![
        ("PK", s(format!("PRODUCT#{i}"))),
        ("SK", s("PRODUCT")),
        ("entity", s("product")),
        ("price", n(i + 10)),
        ("status", s("new")),
    ]);
    [customer, order, product]
}

/// A scenario whose table holds `PER_TYPE` items of each entity type.
pub(crate) async fn shop() -> Scenario {
    shop_of(PER_TYPE).await
}

/// A scenario whose table holds `per_type` items of each entity type.
async fn shop_of(per_type: usize) -> Scenario {
    let sc = Scenario::new("upd").start().await;
    let spec = TableSpec {
        gsis: vec![GsiSpec {
            name: "GSI1".into(),
            keys: vec![
                KeyAttr::new("GSI1PK", KeyType::S),
                KeyAttr::new("GSI1SK", KeyType::S),
            ],
            projection: Projection::All,
        }],
        ..TableSpec::new(
            sc.table.clone(),
            vec![
                KeyAttr::new("PK", KeyType::S),
                KeyAttr::new("SK", KeyType::S),
            ],
        )
    };
    ensure_table_spec(&sc.dynamo.handle, &spec, true)
        .await
        .unwrap();
    let all: Vec<Item> = (0..per_type).flat_map(entities).collect();
    put_items(&sc, &all).await;
    sc
}

/// Writes `items` into the scenario's table, 25 a call.
async fn put_items(sc: &Scenario, items: &[Item]) {
    for chunk in items.chunks(25) {
        let requests: Vec<WriteRequest> = chunk
            .iter()
            .map(|it| {
                let put = PutRequest::builder()
                    .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(it)))
                    .build()
                    .unwrap();
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        let out = sc
            .dynamo
            .client
            .batch_write_item()
            .request_items(&sc.table, requests)
            .send()
            .await
            .unwrap();
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }
}

/// Writes `job.toml` (`TABLE` replaced by the scenario's table); returns its path.
pub(crate) fn job(sc: &Scenario, text: &str) -> String {
    let path = sc.path().join("job.toml");
    std::fs::write(&path, text.replace("TABLE", &sc.table)).unwrap();
    path.display().to_string()
}

async fn sql2ddb_update(sc: &Scenario, job: &str, extra: &[&str]) -> Run {
    let mut args = vec!["update", job, "--endpoint", &sc.dynamo.url, "--quiet"];
    args.extend_from_slice(extra);
    sc.sql2ddb(&args).await
}

/// Runs `job_text` through a fault proxy injecting `faults`; the run must succeed.
async fn update_through_faults(
    sc: &Scenario,
    job_text: &str,
    faults: sql2ddb_testkit::FaultConfig,
) -> (sql2ddb_testkit::FaultProxy, Run) {
    let proxy = sc.proxy(faults).await;
    let run = update_via(sc, &proxy.url(), &job(sc, job_text)).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    (proxy, run)
}

/// `sql2ddb update JOB --endpoint ENDPOINT --json --quiet`.
async fn update_via(sc: &Scenario, endpoint: &str, job: &str) -> Run {
    sc.sql2ddb(&["update", job, "--endpoint", endpoint, "--json", "--quiet"])
        .await
}

/// scanned = not matched + matched; matched = updated + skipped + failed + pending.
fn assert_counts_add_up(report: &serde_json::Value) {
    let c = |f| count(report, f);
    assert_eq!(c("scanned"), c("not_matched") + c("matched"), "{report}");
    assert_eq!(
        c("matched"),
        c("updated") + c("skipped") + c("failed") + c("pending"),
        "{report}"
    );
}

pub(crate) fn is_order(k: &(String, String)) -> bool {
    k.1.starts_with("ORDER#")
}

const CLOSE_ORDERS: &str = r##"version = 1
[target]
table = "TABLE"
[update]
name = "close-new-orders"
scan = { segments = 4 }
page_size = 300
where = "begins_with(SK, :o) AND #st = :new"
set = "SET #st = :closed, closed_at = :now REMOVE retry_count"
names = { "#st" = "status" }
values = { ":o" = "ORDER#", ":new" = "new", ":closed" = "closed", ":now" = "${CLOSED_AT:-2024-06-01}" }
"##;

/// What closing an order makes of it.
fn closed(mut order: Item) -> Item {
    order.insert("status".into(), s("closed"));
    order.insert("closed_at".into(), s("2024-06-01"));
    order.remove("retry_count");
    order
}

/// Asserts that `after` holds the items of `before`, each order closed as
/// [`CLOSE_ORDERS`] closes it and every other item as it was.
fn assert_orders_closed(before: &Items, after: &Items) {
    assert_eq!(after.len(), before.len());
    for (k, was) in before {
        let want = if is_order(k) {
            closed(was.clone())
        } else {
            was.clone()
        };
        assert_eq!(after[k], want, "{k:?}");
    }
}

#[tokio::test]
async fn update_changes_exactly_the_matching_items_and_dry_run_changes_nothing() {
    const PER_TYPE: usize = LARGE_PER_TYPE;
    let sc = shop_of(PER_TYPE).await;
    let before = sc.items().await;
    assert_eq!(before.len(), 3 * PER_TYPE);
    let path = job(&sc, CLOSE_ORDERS);

    let dry = sql2ddb_update(&sc, &path, &["--dry-run", "--json", "--max-wcu", "100"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let r = dry.report();
    assert_eq!(count(&r, "scanned"), 3 * PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "matched"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "updated"), 0, "{r}");
    assert_counts_add_up(&r);
    let e = &r["estimate"];
    assert_eq!(e["write_units"], PER_TYPE, "one unit per small item: {e}");
    assert_eq!(e["index_write_units"][0]["index"], "GSI1", "{e}");
    assert_eq!(e["index_write_units"][0]["items"], PER_TYPE, "{e}");
    assert_eq!(e["total_write_units"], 2 * PER_TYPE, "{e}");
    assert_eq!(
        e["seconds_at_max_wcu"],
        (2 * PER_TYPE) as f64 / 100.0,
        "{e}"
    );
    assert!(
        dry.stderr.contains("dry run, nothing written"),
        "{}",
        dry.stderr
    );
    assert_eq!(sc.items().await, before, "a dry run writes nothing");

    let run = sql2ddb_update(&sc, &path, &["--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = run.report();
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(count(&r, "matched"), count(&dry.report(), "matched"));
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "skipped") + count(&r, "failed"), 0, "{r}");
    assert_counts_add_up(&r);
    let saved = sc
        .path()
        .join(r["run_dir"].as_str().unwrap())
        .join("report.json");
    assert!(saved.exists(), "{}", saved.display());
    // The page beside it: the job's figures and its items changed per second.
    let timeline = &r["timeline"]["items_written"];
    let per_second: u64 = timeline
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(
        per_second, PER_TYPE as u64,
        "every change falls in a second: {r}"
    );
    let page = std::fs::read_to_string(saved.with_file_name("report.html")).unwrap();
    assert!(
        page.contains(&format!("data-field=\"updated\" data-value=\"{PER_TYPE}\"")),
        "{page}"
    );

    let after = sc.items().await;
    assert_orders_closed(&before, &after);
    // Run again: nothing matches any more, nothing changes.
    let again = sql2ddb_update(&sc, &path, &["--json"]).await;
    assert_eq!(count(&again.report(), "matched"), 0, "{}", again.stdout);
    assert_eq!(sc.items().await, after);
}

#[tokio::test]
async fn items_changed_between_read_and_write_are_skipped_not_overwritten() {
    let sc = shop().await;
    let before = sc.items().await;
    let text = CLOSE_ORDERS.replace("TABLE", &sc.table);
    let job = UpdateJob::parse(&text, Path::new("job.toml"), &|_| None).unwrap();
    // A concurrent writer: before each page is written, it marks 200
    // matching items in all `paid`, so they no longer match.
    let changed = Arc::new(std::sync::Mutex::new(Vec::new()));
    let budget = Arc::new(AtomicUsize::new(200));
    let client = sc.dynamo.client.clone();
    let table = sc.table.clone();
    let (seen, left) = (changed.clone(), budget.clone());
    let hook: sql2ddb_engine::update::PageHook = Arc::new(move |items: Vec<Item>| {
        let (client, table, seen, left) =
            (client.clone(), table.clone(), seen.clone(), left.clone());
        Box::pin(async move {
            for it in items {
                let take =
                    left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |l| l.checked_sub(1));
                if take.is_err() {
                    return;
                }
                let mut paid = it.clone();
                paid.insert("status".into(), s("paid"));
                client
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(sql2ddb_testkit::sdk::item_to_sdk(&paid)))
                    .send()
                    .await
                    .unwrap();
                seen.lock().unwrap().push(crate::common::key_of(&it));
            }
        })
    });
    let opts = UpdateOptions {
        endpoint: Some(sc.dynamo.url.clone()),
        runs_dir: sc.path().join("runs"),
        on_page: Some(hook),
        ..UpdateOptions::default()
    };
    let report = update(&job, &opts, Arc::new(UpdateProgress::default()))
        .await
        .unwrap();
    let changed = changed.lock().unwrap().clone();
    assert_eq!(changed.len(), 200);
    assert_eq!(report.matched, PER_TYPE as u64);
    assert_eq!(report.skipped, 200, "{report:?}");
    assert_eq!(report.updated, PER_TYPE as u64 - 200, "{report:?}");
    assert_eq!(report.failed, 0);
    let after = sc.items().await;
    for (k, was) in &before {
        let want = match (is_order(k), changed.contains(k)) {
            (true, true) => {
                let mut paid = was.clone();
                paid.insert("status".into(), s("paid"));
                paid
            }
            (true, false) => closed(was.clone()),
            (false, _) => was.clone(),
        };
        assert_eq!(after[k], want, "{k:?}");
    }
}

#[tokio::test]
async fn delete_removes_exactly_the_matching_items() {
    let sc = shop().await;
    let before = sc.items().await;
    let path = job(
        &sc,
        r##"version = 1
[target]
table = "TABLE"
[update]
name = "drop-cheap-products"
where = "#e = :p AND price < :limit"
delete = true
names = { "#e" = "entity" }
values = { ":p" = "product", ":limit" = 510 }
"##,
    );
    let run = sql2ddb_update(&sc, &path, &["--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = run.report();
    assert_eq!(r["action"], "delete");
    assert_eq!(count(&r, "updated"), 500, "{r}");
    assert_counts_add_up(&r);
    let after = sc.items().await;
    let cheap = |it: &Item| {
        it["entity"] == s("product")
            && matches!(&it["price"], AttrValue::N(p) if p.parse::<u64>().unwrap() < 510)
    };
    let expected: Items = before
        .iter()
        .filter(|(_, it)| !cheap(it))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(after.len(), 3 * PER_TYPE - 500);
    assert_eq!(after, expected);
}

#[tokio::test]
async fn a_query_on_an_index_reads_one_partition() {
    let sc = shop().await;
    let before = sc.items().await;
    let path = job(
        &sc,
        r##"version = 1
[target]
table = "TABLE"
[update]
name = "flag-eu-orders"
query = { index = "GSI1", key = "GSI1PK = :s", values = { ":s" = "STATUS#new" } }
where = "#r = :eu"
set = "SET flagged = :t"
names = { "#r" = "region" }
values = { ":eu" = "eu", ":t" = true }
"##,
    );
    let run = sql2ddb_update(&sc, &path, &["--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = run.report();
    assert_eq!(
        count(&r, "scanned"),
        PER_TYPE as u64,
        "only the partition is read: {r}"
    );
    assert_eq!(count(&r, "matched"), PER_TYPE as u64 / 2, "{r}");
    assert_eq!(count(&r, "updated"), PER_TYPE as u64 / 2, "{r}");
    let after = sc.items().await;
    for (k, was) in &before {
        let mut want = was.clone();
        if is_order(k) && was["region"] == s("eu") {
            want.insert("flagged".into(), AttrValue::Bool(true));
        }
        assert_eq!(after[k], want, "{k:?}");
    }
}

#[tokio::test]
async fn a_non_idempotent_job_run_again_with_its_run_id_changes_each_item_once() {
    let sc = shop().await;
    let path = job(
        &sc,
        r#"version = 1
[target]
table = "TABLE"
[update]
name = "count-visits"
scan = { segments = 3 }
where = "begins_with(SK, :o)"
set = "ADD visits :one"
values = { ":o" = "ORDER#", ":one" = 1 }
"#,
    );
    let first = sql2ddb_update(&sc, &path, &["--json", "--run-id", "visits-1"]).await;
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(count(&first.report(), "updated"), PER_TYPE as u64);
    assert!(
        first.stderr.contains("not idempotent (ADD)"),
        "{}",
        first.stderr
    );
    // Redelivered or resumed: the same run again changes nothing.
    let again = sql2ddb_update(&sc, &path, &["--json", "--run-id", "visits-1"]).await;
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(count(&again.report(), "matched"), 0, "{}", again.stdout);
    let after = sc.items().await;
    for (k, it) in &after {
        if is_order(k) {
            assert_eq!(it["visits"], n(1), "{k:?}");
            assert_eq!(it["sql2ddb_run"], s("visits-1"), "{k:?}");
        } else {
            assert!(!it.contains_key("visits"), "{k:?}");
        }
    }
    // A new run is a new increment.
    let second = sql2ddb_update(&sc, &path, &["--json", "--run-id", "visits-2"]).await;
    assert_eq!(count(&second.report(), "updated"), PER_TYPE as u64);
    let order = &sc.items().await[&key("CUSTOMER#7", "ORDER#000007")];
    assert_eq!(order["visits"], n(2));
}

#[tokio::test]
async fn each_static_mistake_is_a_clear_error_and_nothing_is_written() {
    let sc = shop().await;
    let before = sc.items().await;
    let cases: [(&str, &str, &str); 7] = [
        (
            r#"":new" = "new", "#,
            "",
            "job.toml:8:40: where uses :new, which values does not define",
        ),
        (
            r##"names = { "#st" = "status" }"##,
            "",
            "where uses #st, which names does not define",
        ),
        (
            r#"":o" = "ORDER#","#,
            r#"":o" = "ORDER#", ":x" = 1,"#,
            "job.toml:11:",
        ),
        (
            "closed_at = :now",
            "SK = :now",
            "set writes SK, a key attribute of table",
        ),
        (
            "REMOVE retry_count\"\n",
            "REMOVE retry_count\"\ndelete = true\n",
            "either set (UPDATE) or delete = true",
        ),
        (
            "AND #st = :new",
            "AND status = :new AND #st = :new",
            "job.toml:8:34: where: status is a reserved word of DynamoDB",
        ),
        (
            "scan = { segments = 4 }",
            "query = { index = \"GSI7\", key = \"GSI1PK = :o\" }",
            "query.index GSI7 is not an index of table",
        ),
    ];
    for (from, to, says) in cases {
        assert!(CLOSE_ORDERS.contains(from), "{from}");
        let path = job(&sc, &CLOSE_ORDERS.replace(from, to));
        let run = sql2ddb_update(&sc, &path, &[]).await;
        assert_eq!(run.code, EX_CONFIG, "{says}: {}", run.stderr);
        assert!(
            run.stderr.contains(says),
            "wanted {says:?} in:\n{}",
            run.stderr
        );
        assert!(run.stderr.contains("job.toml:"), "{}", run.stderr);
    }
    assert_eq!(sc.items().await, before, "nothing written");
    let runs = sc.path().join("sql2ddb-runs");
    let left = std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "no run directory for a job that never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_of_calls_faulted_and_the_table_ends_as_without_faults() {
    // DescribeTable, Scan and UpdateItem calls alike.
    use sql2ddb_testkit::FaultConfig;
    let sc = shop().await;
    let before = sc.items().await;
    let faults = FaultConfig {
        operations: vec!["DescribeTable".into(), "Scan".into(), "UpdateItem".into()],
        ..FaultConfig::mix(0.30, 11)
    };
    let (proxy, run) = update_through_faults(&sc, CLOSE_ORDERS, faults).await;
    let r = run.report();
    assert_counts_add_up(&r);
    assert_eq!(count(&r, "scanned"), 3 * PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "matched"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "failed"), 0, "{r}");
    // A write whose answer was lost after it landed is tried again and
    // then no longer matches: `skipped`, with the item as wanted.
    assert_eq!(
        count(&r, "updated") + count(&r, "skipped"),
        PER_TYPE as u64,
        "{r}"
    );
    assert!(count(&r, "retries") > 0, "{r}");
    assert!(proxy.stats().faults() > 0, "{:?}", proxy.stats());
    assert_orders_closed(&before, &sc.items().await);
}

/// An `ADD` on every order of the shop: not idempotent, so each item must
/// be changed exactly once whatever is retried.
pub(crate) const ADD_VISITS: &str = r#"version = 1
[target]
table = "TABLE"
[update]
name = "count-visits"
scan = { segments = 3 }
page_size = 200
where = "begins_with(SK, :o)"
set = "ADD visits :one"
values = { ":o" = "ORDER#", ":one" = 1 }
"#;

/// Every order has visits = 1 and nothing else changed.
async fn assert_visited_once(sc: &Scenario, before: &Items) {
    let after = sc.items().await;
    assert_eq!(after.len(), before.len());
    for (k, was) in before {
        let got = &after[k];
        if is_order(k) {
            assert_eq!(got["visits"], n(1), "{k:?}");
        } else {
            assert_eq!(got, was, "{k:?}");
        }
    }
}

/// Runs `ADD_VISITS` as run `visits-r` with a progress table and a
/// Ctrl-C as the first page arrives: each segment finishes the page it
/// holds, records where it stands, and stops. Returns the job's path and
/// the runs directory.
async fn interrupted_visits(sc: &Scenario, progress: &str) -> (String, std::path::PathBuf) {
    let path = job(sc, ADD_VISITS);
    let text = std::fs::read_to_string(&path).unwrap();
    let visits = UpdateJob::parse(&text, Path::new(&path), &|_| None).unwrap();
    let stop = sql2ddb_engine::StopSignal::new();
    let raise = stop.clone();
    let hook: sql2ddb_engine::update::PageHook = Arc::new(move |_items: Vec<Item>| {
        raise.stop();
        Box::pin(async {})
    });
    let runs = sc.path().join("runs");
    let opts = UpdateOptions {
        endpoint: Some(sc.dynamo.url.clone()),
        runs_dir: runs.clone(),
        run_id: Some("visits-r".parse().unwrap()),
        progress_table: Some(progress.to_string()),
        stop: Some(stop),
        on_page: Some(hook),
        ..UpdateOptions::default()
    };
    let first = update(&visits, &opts, Arc::new(UpdateProgress::default()))
        .await
        .unwrap();
    assert_eq!(
        first.status,
        sql2ddb_engine::update::UpdateStatus::Interrupted
    );
    assert!(
        first.updated > 0 && first.updated < PER_TYPE as u64,
        "{first:?}"
    );
    assert_eq!(first.pending, 0, "the pages read were written: {first:?}");
    (path, runs)
}

#[tokio::test]
async fn an_interrupted_job_resumes_elsewhere_from_the_progress_table_and_changes_each_item_once() {
    let sc = shop().await;
    let before = sc.items().await;
    let progress = format!("{}-progress", sc.table);
    let (path, runs) = interrupted_visits(&sc, &progress).await;
    let verify = [
        "verify",
        "--run",
        "visits-r",
        "--progress-table",
        &progress,
        "--endpoint",
        &sc.dynamo.url,
    ];
    let unfinished = sc.sql2ddb(&verify).await;
    assert_eq!(
        unfinished.code, 1,
        "not every segment finished: {}",
        unfinished.stdout
    );

    // Another machine: the progress table alone, no run directory.
    assert!(runs.join("visits-r").join("checkpoint.json").exists());
    let elsewhere = sc.path().join("elsewhere");
    let runs_dir = elsewhere.display().to_string();
    // The same run id started afresh would mix its pages with the first's.
    let again = ["--run-id", "visits-r", "--runs-dir", &runs_dir];
    let again = [&again[..], &["--progress-table", &progress]].concat();
    let refused = sql2ddb_update(&sc, &path, &again).await;
    assert_eq!(refused.code, EX_CONFIG, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--resume visits-r"),
        "{}",
        refused.stderr
    );
    // Resuming another job's run is refused.
    let other = job(&sc, &ADD_VISITS.replace("segments = 3", "segments = 2"));
    let resume = ["--resume", "visits-r", "--runs-dir", &runs_dir];
    let resume = [&resume[..], &["--progress-table", &progress]].concat();
    let refused = sql2ddb_update(&sc, &other, &resume).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("resume it with its own job file"),
        "{}",
        refused.stderr
    );
    let path = job(&sc, ADD_VISITS);
    let resumed = sql2ddb_update(
        &sc,
        &path,
        &[
            "--json",
            "--resume",
            "visits-r",
            "--runs-dir",
            &runs_dir,
            "--progress-table",
            &progress,
        ],
    )
    .await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let r = resumed.report();
    assert_eq!(r["resumed"], true);
    assert_eq!(
        count(&r, "scanned"),
        3 * PER_TYPE as u64,
        "every attempt: {r}"
    );
    assert_eq!(count(&r, "matched"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_counts_add_up(&r);
    assert_visited_once(&sc, &before).await;
    assert!(elsewhere.join("visits-r").join("report.json").exists());
    let finished = sc.sql2ddb(&verify).await;
    assert_eq!(finished.code, 0, "{}\n{}", finished.stdout, finished.stderr);
}

#[tokio::test]
async fn max_seconds_stops_cleanly_and_resume_finishes_the_job() {
    let sc = shop().await;
    let before = sc.items().await;
    let path = job(&sc, ADD_VISITS);
    // At 2 read units a second the reads alone take far more than a second
    // (each page of 200 items is a few units), so the limit is reached.
    let args = ["--json", "--max-seconds", "1", "--max-rcu", "2"];
    let boxed = sql2ddb_update(&sc, &path, &args).await;
    assert_eq!(boxed.code, 75, "{}", boxed.stderr);
    let r = boxed.report();
    assert_eq!(r["status"], "time_up", "{r}");
    assert!(count(&r, "scanned") < 3 * PER_TYPE as u64, "{r}");
    assert_counts_add_up(&r);
    let run_id = r["run_id"].as_str().unwrap().to_string();
    // The command that continues it keeps its limits.
    assert!(
        boxed.stderr.contains(&format!("--resume {run_id}"))
            && boxed.stderr.contains("--max-rcu 2 --max-seconds 1"),
        "{}",
        boxed.stderr
    );
    let resumed = sql2ddb_update(&sc, &path, &["--json", "--resume", &run_id]).await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let r = resumed.report();
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_counts_add_up(&r);
    assert_visited_once(&sc, &before).await;
    // A resume of another job is refused.
    let other = job(&sc, &ADD_VISITS.replace("segments = 3", "segments = 2"));
    let refused = sql2ddb_update(&sc, &other, &["--resume", &run_id]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("resume it with its own job file"),
        "{}",
        refused.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_whose_answers_are_lost_is_applied_once_and_counted_updated() {
    use sql2ddb_testkit::FaultConfig;
    let sc = shop().await;
    let before = sc.items().await;
    // Connections closed without an answer, half of them after DynamoDB
    // had the request: the retried ADD must not add again.
    let faults = FaultConfig {
        seed: 5,
        dropped_connection: 0.3,
        operations: vec!["UpdateItem".into()],
        ..FaultConfig::default()
    };
    let (proxy, run) = update_through_faults(&sc, ADD_VISITS, faults).await;
    assert!(
        proxy.stats().dropped_after_forward > 0,
        "{:?}",
        proxy.stats()
    );
    let r = run.report();
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "skipped"), 0, "a landed write is no skip: {r}");
    assert_counts_add_up(&r);
    assert_visited_once(&sc, &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_job_cancels_the_stale_orders_of_the_example_shop() {
    let root = crate::common::root();
    let sc = Scenario::new("updshop").start().await;
    let own_table = format!("table = \"{}\"", sc.table);
    let copy = |from: &str, to: &str| {
        let text = std::fs::read_to_string(root.join(from)).unwrap();
        let path = sc.path().join(to);
        std::fs::write(&path, text.replace("table = \"shop\"", &own_table)).unwrap();
        path.display().to_string()
    };
    let mapping = copy("mappings/shop.toml", "shop.toml");
    let job = copy("examples/cancel-stale-orders.toml", "job.toml");
    let runs = sc.path().display().to_string();
    let base = [
        "--endpoint",
        &sc.dynamo.url,
        "--runs-dir",
        &runs,
        "--json",
        "--quiet",
    ];
    let mut run = vec!["run", &mapping];
    run.extend_from_slice(&base);
    assert_eq!(crate::common::sql2ddb(&root, &run).await.code, 0);
    let before = sc.items().await;
    let stale = |it: &Item| {
        it.get("status") == Some(&s("placed"))
            && matches!(it.get("created_at"), Some(AttrValue::S(t)) if t.as_str() < "2024-07-01")
    };
    let expected = before.values().filter(|it| stale(it)).count() as u64;
    assert!(expected > 0);

    let mut dry = vec!["update", &job, "--dry-run", "--max-wcu", "50"];
    dry.extend_from_slice(&base);
    let dry = crate::common::sql2ddb(&root, &dry).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let r = dry.report();
    assert_eq!(count(&r, "matched"), expected, "{r}");
    // One unit on the table, two on GSI1 (its key changes) per small order.
    assert_eq!(r["estimate"]["total_write_units"], 3 * expected, "{r}");
    assert_eq!(sc.items().await, before);

    let mut go = vec!["update", &job];
    go.extend_from_slice(&base);
    let done = crate::common::sql2ddb(&root, &go).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(count(&done.report(), "updated"), expected);
    let after = sc.items().await;
    for (k, was) in &before {
        let mut want = was.clone();
        if stale(was) {
            want.insert("status".into(), s("cancelled"));
            want.insert("GSI1PK".into(), s("STATUS#cancelled"));
            want.insert("cancelled_at".into(), s("2024-09-01T00:00:00Z"));
        }
        assert_eq!(after[k], want, "{k:?}");
    }
}

#[tokio::test]
async fn batch_put_mode_rewrites_the_matching_items_and_says_what_it_risks() {
    let sc = shop().await;
    let before = sc.items().await;
    let text = CLOSE_ORDERS.replace("[update]\n", "[update]\nmode = \"batch-put\"\n");
    let path = job(&sc, &text);
    let dry = sql2ddb_update(&sc, &path, &["--json", "--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(dry.stderr.contains("is LOST"), "{}", dry.stderr);
    assert_eq!(count(&dry.report(), "matched"), PER_TYPE as u64);
    assert_eq!(sc.items().await, before);

    let run = sql2ddb_update(&sc, &path, &["--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = run.report();
    assert_eq!(r["mode"], "batch-put", "{r}");
    assert_eq!(count(&r, "updated"), PER_TYPE as u64, "{r}");
    assert_eq!(count(&r, "skipped") + count(&r, "failed"), 0, "{r}");
    assert_counts_add_up(&r);
    assert_orders_closed(&before, &sc.items().await);
}

/// Each of `update`, `status` and `verify --run` prints its report on
/// stdout (`> report.txt` keeps it) and nothing of it on stderr.
fn assert_report_on_stdout(run: &Run, says: &[&str]) {
    for s in says {
        assert!(run.stdout.contains(s), "{s} not on stdout:\n{}", run.stdout);
        assert!(!run.stderr.contains(s), "{s} on stderr:\n{}", run.stderr);
    }
}

#[tokio::test]
async fn status_and_verify_follow_an_update_run_through_its_progress_table() {
    let sc = shop().await;
    let path = job(&sc, CLOSE_ORDERS);
    let table = format!("{}-progress", sc.table);
    let args = ["--progress-table", &table, "--run-id", "close-1"];
    let run = sql2ddb_update(&sc, &path, &args).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_report_on_stdout(
        &run,
        &[
            "  scanned ",
            "  updated ",
            &format!("progress table: {table}"),
            "report.json",
        ],
    );
    let look = |command, json: &[&'static str]| {
        let args = [command, "--run", "close-1", "--progress-table", &table];
        [&args[..], &["--endpoint", &sc.dynamo.url], json].concat()
    };
    let text = sc.sql2ddb(&look("status", &[])).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_report_on_stdout(&text, &["run close-1", "complete: every row"]);
    let text = sc.sql2ddb(&look("verify", &[])).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert_report_on_stdout(&text, &["run close-1", "verified: every row"]);
    let verify = sc.sql2ddb(&look("verify", &["--json"])).await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    let state: serde_json::Value = serde_json::from_str(verify.stdout.trim()).unwrap();
    assert_eq!(state["progress_table"], table.as_str(), "{state}");
    let status = sc.sql2ddb(&look("status", &["--json"])).await;
    let st: serde_json::Value = serde_json::from_str(status.stdout.trim()).unwrap();
    assert_eq!(st["complete"], true, "{st}");
    let e = &st["entities"][0];
    assert_eq!(e["entity"], "close-new-orders", "{st}");
    assert_eq!(e["segments_finished"], 4, "{st}");
    assert_eq!(e["rows_read"], PER_TYPE, "matched items: {st}");
    assert_eq!(e["written"], PER_TYPE, "updated and skipped: {st}");
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_without_printing_its_password() {
    let sc = Scenario::new("updsecret").start().await;
    let path = job(&sc, CLOSE_ORDERS);
    let endpoint = "http://admin:hunter2secret@127.0.0.1:1";
    let run = sc
        .sql2ddb(&["update", &path, "--endpoint", endpoint, "--quiet"])
        .await;
    assert_eq!(run.code, EX_UNAVAILABLE, "{}", run.stderr);
    assert!(run.stderr.contains("DescribeTable"), "{}", run.stderr);
    assert!(!run.stderr.contains("hunter2secret"), "{}", run.stderr);
    assert!(!run.stdout.contains("hunter2secret"), "{}", run.stdout);
}
