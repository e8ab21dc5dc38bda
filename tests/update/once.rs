//! An update whose result depends on the item's current value — a list
//! index (`REMOVE tags[0]`), an attribute read by `SET` (`SET a = b, b = a`)
//! — is applied at most once per item per run: after a crash in the middle
//! of a page and `--resume`, and when a call's answer is lost after it
//! landed and the call is retried. The report's counts are exact.

use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::{ensure_table_spec, TableSpec};

use super::hold::HoldingRelay;
use super::{assert_counts_add_up, job, put_items, sql2ddb_update, update_through_faults};
use crate::common::{count, item, n, s, Items, Proc, Scenario};

/// Items in the table, every one of them matched.
const ITEMS: usize = 300;
/// Items per page (`page_size`) of the jobs below.
const PAGE: usize = 100;
/// `UpdateItem` calls let through before the crash: the first page and
/// half of the second.
const LANDED: usize = PAGE + PAGE / 2;

const REMOVE_FIRST_TAG: &str = r#"version = 1
[target]
table = "TABLE"
[update]
name = "drop-first-tag"
scan = { segments = 1 }
page_size = 100
where = "begins_with(PK, :i)"
set = "REMOVE tags[0]"
values = { ":i" = "ITEM#" }
"#;

const SWAP: &str = r#"version = 1
[target]
table = "TABLE"
[update]
name = "swap-a-b"
scan = { segments = 1 }
page_size = 100
set = "SET a = b, b = a"
"#;

const PLAIN: &str = r#"version = 1
[target]
table = "TABLE"
[update]
name = "note-and-drop-b"
set = "SET note = :x REMOVE b"
values = { ":x" = "x" }
"#;

/// Item `i`: three tags, `a` = i, `b` = 1000 + i.
fn numbered(i: usize) -> Item {
    let tags = ["t0", "t1", "t2"].map(s).to_vec();
    item(vec![
        ("PK", s(format!("ITEM#{i:04}"))),
        ("SK", s("A")),
        ("tags", AttrValue::L(tags)),
        ("a", n(i)),
        ("b", n(1000 + i)),
    ])
}

/// A scenario whose table holds the `ITEMS` numbered items; and its items.
async fn numbered_table() -> (Scenario, Items) {
    let sc = Scenario::new("upd5").start().await;
    let keys = vec![
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    ensure_table_spec(
        &sc.dynamo.handle,
        &TableSpec::new(sc.table.clone(), keys),
        true,
    )
    .await
    .unwrap();
    let all: Vec<Item> = (0..ITEMS).map(numbered).collect();
    put_items(&sc, &all).await;
    let before = sc.items().await;
    assert_eq!(before.len(), ITEMS);
    (sc, before)
}

/// Item `was` changed once by `REMOVE tags[0]`.
fn first_tag_removed(was: &Item) -> Item {
    let mut want = was.clone();
    want.insert("tags".into(), AttrValue::L(vec![s("t1"), s("t2")]));
    want
}

/// Item `was` changed once by `SET a = b, b = a`.
fn swapped(was: &Item) -> Item {
    let mut want = was.clone();
    want.insert("a".into(), was["b"].clone());
    want.insert("b".into(), was["a"].clone());
    want
}

/// `item` without the run's marker.
fn unmarked(item: &Item) -> Item {
    let mut item = item.clone();
    item.remove("sql2ddb_run");
    item
}

/// Each item is `once` of what it was — the change applied once, not twice
/// — and carries the run's marker.
async fn assert_changed_once(sc: &Scenario, before: &Items, run_id: &str, once: fn(&Item) -> Item) {
    let after = sc.items().await;
    assert_eq!(after.len(), before.len());
    for (k, was) in before {
        assert_eq!(unmarked(&after[k]), once(was), "{k:?}");
    }
    for (k, got) in &after {
        assert_eq!(got.get("sql2ddb_run"), Some(&s(run_id)), "{k:?}");
    }
}

/// Runs `job_text` as run `run_id` through a relay that lets `LANDED`
/// writes through and holds the next ones, SIGKILLs it there (the first
/// page recorded, half of the second written), then resumes it against the
/// server itself; returns the resumed run's report.
async fn crashed_mid_page_and_resumed(
    sc: &Scenario,
    before: &Items,
    job_text: &str,
    run_id: &str,
    once: fn(&Item) -> Item,
) -> serde_json::Value {
    let relay = HoldingRelay::start(&sc.dynamo.url, LANDED).await;
    let path = job(sc, job_text);
    let runs = sc.path().join("runs").display().to_string();
    let args = [
        "update",
        &path,
        "--endpoint",
        relay.url(),
        "--quiet",
        "--run-id",
        run_id,
        "--runs-dir",
        &runs,
    ];
    let first = Proc::spawn(sc.path(), &args);
    relay.wait_until_holding().await;
    first.kill().await;
    drop(relay);

    // Where the crash left it: exactly the writes let through landed, and
    // the checkpoint holds the first page only.
    let at_crash = sc.items().await;
    let changed = before
        .iter()
        .filter(|(k, was)| at_crash[*k] != **was)
        .inspect(|(k, was)| assert_eq!(unmarked(&at_crash[*k]), once(was), "{k:?}"))
        .count();
    assert_eq!(changed, LANDED);
    let checkpoint = std::path::Path::new(&runs)
        .join(run_id)
        .join("checkpoint.json");
    let checkpoint: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(checkpoint).unwrap()).unwrap();
    assert_eq!(
        checkpoint["segments"][0]["counts"]["updated"], PAGE,
        "{checkpoint}"
    );

    let resumed = sql2ddb_update(
        sc,
        &path,
        &["--json", "--resume", run_id, "--runs-dir", &runs],
    )
    .await;
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_changed_once(sc, before, run_id, once).await;
    let r = resumed.report();
    assert_eq!(r["resumed"], true, "{r}");
    assert_eq!(r["idempotent"], false, "{r}");
    assert_counts_add_up(&r);
    // The items of the page cut short are read again, those it changed too:
    // each counted once, as updated.
    for (field, want) in [
        ("scanned", ITEMS),
        ("matched", ITEMS),
        ("updated", ITEMS),
        ("skipped", 0),
        ("failed", 0),
        ("pending", 0),
    ] {
        assert_eq!(count(&r, field), want as u64, "{field}: {r}");
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_5_update_remove_list_index_applied_once_after_resume() {
    let (sc, before) = numbered_table().await;
    let r =
        crashed_mid_page_and_resumed(&sc, &before, REMOVE_FIRST_TAG, "tag-1", first_tag_removed)
            .await;
    let notes = r["notes"].to_string();
    assert!(notes.contains("a list index, tags[0]"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_5_update_swap_applied_once_after_resume() {
    let (sc, before) = numbered_table().await;
    let r = crashed_mid_page_and_resumed(&sc, &before, SWAP, "swap-1", swapped).await;
    let notes = r["notes"].to_string();
    assert!(notes.contains("SET reads b"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_service_5_update_retried_calls_whose_answers_were_lost_apply_once() {
    use sql2ddb_testkit::FaultConfig;
    let (sc, before) = numbered_table().await;
    // Connections closed without an answer, half of them after the server
    // had the request: the retried call must not remove or swap again.
    let faults = FaultConfig {
        seed: 55,
        dropped_connection: 0.3,
        operations: vec!["UpdateItem".into()],
        ..FaultConfig::default()
    };
    let both = SWAP.replace("SET a = b, b = a", "SET a = b, b = a REMOVE tags[0]");
    let (proxy, run) = update_through_faults(&sc, &both, faults).await;
    assert!(
        proxy.stats().dropped_after_forward > 0,
        "{:?}",
        proxy.stats()
    );
    let r = run.report();
    assert_counts_add_up(&r);
    assert_eq!(count(&r, "updated"), ITEMS as u64, "{r}");
    assert_eq!(count(&r, "skipped"), 0, "a landed write is no skip: {r}");
    assert_eq!(count(&r, "failed"), 0, "{r}");
    let run_id = r["run_id"].as_str().unwrap().to_string();
    assert_changed_once(&sc, &before, &run_id, |was| {
        swapped(&first_tag_removed(was))
    })
    .await;
}

#[tokio::test]
async fn real_service_5_update_dry_run_says_whether_a_job_is_applied_once_per_run() {
    let (sc, before) = numbered_table().await;
    let marked = job(&sc, REMOVE_FIRST_TAG);
    let dry = sql2ddb_update(&sc, &marked, &["--json", "--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(dry.report()["idempotent"], false, "{}", dry.stdout);
    for says in [
        "not idempotent (a list index, tags[0])",
        "applied at most once per item per run",
        "sql2ddb_run",
    ] {
        assert!(dry.stderr.contains(says), "{says}:\n{}", dry.stderr);
    }
    let plain = job(&sc, PLAIN);
    let dry = sql2ddb_update(&sc, &plain, &["--json", "--dry-run"]).await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(dry.report()["idempotent"], true, "{}", dry.stdout);
    assert!(
        dry.stderr
            .contains("the update is idempotent: applied again"),
        "{}",
        dry.stderr
    );
    assert!(!dry.stderr.contains("sql2ddb_run"), "{}", dry.stderr);
    // A dry run writes nothing.
    assert_eq!(sc.items().await, before);
}
