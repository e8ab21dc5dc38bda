//! `sql2ddb plan`: from the source alone, exact write units with the 1 KB
//! rounding (and an index's projected size), exact row counts, the hot
//! partition key of a skewed table and its warning, the rows that collide
//! on one key, sample items equal to the items `run` writes (embedded
//! children included), sampled rejects by reason, and `--json` as one
//! valid object.

use std::collections::BTreeMap;

use serde_json::Value;
use sql2ddb_core::Item;

use crate::common::*;

/// Two rows whose items are 1,023 and 1,025 bytes by DynamoDB's rules:
/// `PK` (2 + 3 bytes), `id` (2 + 2), `GK` (2 + 1), `pad` (3 + its length).
const SIZED: &str = r#"
CREATE TABLE sized (id INTEGER PRIMARY KEY, pad TEXT NOT NULL);
INSERT INTO sized VALUES (1, substr(hex(zeroblob(1008)), 1, 1008));
INSERT INTO sized VALUES (2, substr(hex(zeroblob(1010)), 1, 1010));
"#;

fn sized_mapping(url: &str) -> String {
    format!(
        r#"version = 1
[source]
url = "{url}"

[target]
table = "TABLE"
create = true
pk = {{ name = "PK", type = "S" }}

[[target.gsi]]
name = "byG"
pk = {{ name = "GK", type = "S" }}
projection = "keys_only"

[[entity]]
name = "sized"
from = "sized"
pk = "I#{{id}}"
[entity.attributes]
GK = "G"
"#
    )
}

/// The `--json` plan of `mapping`, checked to be one JSON object.
async fn plan(sc: &Scenario, mapping: &str, extra: &[&str]) -> (Run, Value) {
    let mut args = vec!["plan", mapping, "--json"];
    args.extend_from_slice(extra);
    let run = sc.sql2ddb(&args).await;
    assert!(
        run.code == 0 || run.code == 2,
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    let report = run.report();
    assert!(report.is_object(), "{}", run.stdout);
    (run, report)
}

fn entity<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no entity {name}: {report}"))
}

#[tokio::test]
async fn write_units_round_each_item_up_to_1_kb_and_a_keys_only_index_costs_its_projection() {
    let sc = Scenario::new("plan_sized").sqlite(SIZED).start().await;
    let mapping = sc.mapping(&sized_mapping(sc.sqlite_url()));
    let (_, report) = plan(&sc, &mapping, &[]).await;
    let e = entity(&report, "sized");
    assert_eq!(e["rows"], 2);
    assert_eq!(e["rows_estimated"], false);
    assert_eq!(e["exact"], true);
    assert_eq!(e["items"], 2);
    assert_eq!(e["item_size"]["p50"], 1023);
    assert_eq!(e["item_size"]["max"], 1025);
    // 1,023 bytes: 1 unit; 1,025 bytes: 2 units.
    assert_eq!(e["write_units"], 3);
    let index = &e["indexes"][0];
    assert_eq!(index["name"], "byG");
    assert_eq!(index["projection"], "keys_only");
    // PK and GK only: 8 bytes each, 1 unit each.
    assert_eq!(index["projected_size"]["max"], 8);
    assert_eq!(index["write_units"], 2);
    assert_eq!(report["totals"]["write_units"], 3);
    assert_eq!(report["totals"]["index_write_units"], 2);
    // Storage: each item and index entry plus 100 bytes.
    assert_eq!(e["storage_bytes"], 1023 + 1025 + 200);
    let prices = &report["prices"];
    let writes = report["cost"]["writes_usd"].as_f64().unwrap();
    let expected = 5.0 / 1e6 * prices["write_per_million"].as_f64().unwrap();
    assert!((writes - expected).abs() < 1e-12, "{writes} vs {expected}");

    // Overridden prices are the ones used.
    let (_, priced) = plan(
        &sc,
        &mapping,
        &["--price-wru", "2000000", "--price-gb", "0"],
    )
    .await;
    assert_eq!(priced["cost"]["writes_usd"].as_f64().unwrap(), 10.0);
    assert_eq!(priced["cost"]["storage_month_usd"].as_f64().unwrap(), 0.0);

    // The sample items are the items `run` writes.
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_sample_items_written(e, &sc.items().await);
    // Planning wrote nothing: only `run` made the table's two items.
    assert_eq!(sc.items().await.len(), 2);
}

/// The cli's money and time as the plan's table prints them.
fn usd(v: f64) -> String {
    match v {
        v if v >= 1.0 => format!("${v:.2}"),
        v => format!("${v:.4}"),
    }
}

/// The line of the "ways to load" table that starts with `path`.
fn load_path_row<'a>(text: &'a str, path: &str) -> &'a str {
    let table = text.split("\nways to load\n").nth(1).expect("ways to load");
    table
        .lines()
        .find(|l| l.starts_with(path))
        .unwrap_or_else(|| panic!("no row {path}:\n{table}"))
}

#[tokio::test]
async fn plan_compares_the_three_load_paths_with_published_figures_and_overridden_prices() {
    let sc = Scenario::new("plan_paths").sqlite(SIZED).start().await;
    // max_wcu 2: the planned rate, and bulk put items' cap.
    let text = format!(
        "{}\n[writer]\nmax_wcu = 2\n",
        sized_mapping(sc.sqlite_url())
    );
    let mapping = sc.mapping(&text);
    let path = |report: &Value, name: &str| -> Value {
        report["load_paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["path"] == name)
            .unwrap_or_else(|| panic!("no path {name}: {report}"))
            .clone()
    };

    let (_, report) = plan(&sc, &mapping, &[]).await;
    let names: Vec<&str> = report["load_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "writes (on demand)",
            "writes (provisioned)",
            "import from S3",
            "bulk put items"
        ]
    );
    let on_demand = path(&report, "writes (on demand)");
    assert_eq!(on_demand["table"], "new or existing");
    assert_eq!(on_demand["cost_usd"], report["cost"]["writes_usd"]);
    // No provisioned price in the price table: no cost, and how to give one.
    let provisioned = path(&report, "writes (provisioned)");
    assert!(provisioned["cost_usd"].is_null(), "{provisioned}");
    assert!(
        provisioned["cost_basis"]
            .as_str()
            .unwrap()
            .contains("--price-wcu-hour"),
        "{provisioned}"
    );
    // 3 write units (the table's; index units are not provisioned capacity) at 2 WCU/s.
    assert_eq!(provisioned["seconds"], 1.5, "{provisioned}");
    let import = path(&report, "import from S3");
    assert_eq!(import["table"], "new only");
    assert_eq!(import["cost_usd"], report["cost"]["import_from_s3_usd"]);
    assert!(import["seconds"].is_null(), "{import}");
    let not_published = |v: &Value| v.as_str().unwrap().starts_with("not published");
    assert!(not_published(&import["time_basis"]), "{import}");
    let bulk = path(&report, "bulk put items");
    assert_eq!(bulk["table"], "existing only");
    assert!(bulk["cost_usd"].is_null(), "{bulk}");
    assert!(not_published(&bulk["cost_basis"]), "{bulk}");
    assert_eq!(bulk["seconds"], 1.5, "at max_wcu 2: {bulk}");

    // Overridden prices change the figures, and only theirs.
    let prices = ["--price-import-gb", "1000000000", "--price-wcu-hour", "5"];
    let (_, priced) = plan(&sc, &mapping, &prices).await;
    let import_bytes = priced["totals"]["import_bytes"].as_f64().unwrap();
    assert!(import_bytes > 2048.0, "{}", priced["totals"]);
    let import = path(&priced, "import from S3");
    let want = import_bytes / (1u64 << 30) as f64 * 1e9;
    let got = import["cost_usd"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    // 2 WCU for the one (started) hour at $5/WCU-hour.
    let provisioned = path(&priced, "writes (provisioned)");
    assert_eq!(provisioned["cost_usd"], 10.0, "{provisioned}");
    assert_eq!(
        path(&priced, "writes (on demand)")["cost_usd"],
        on_demand["cost_usd"]
    );

    // The terminal's table shows the JSON's figures, "-" where none is published.
    let text = sc
        .sql2ddb(&[&["plan", &mapping][..], &prices].concat())
        .await;
    assert!(text.code == 0 || text.code == 2, "{}", text.stderr);
    let out = &text.stdout;
    let row = load_path_row(out, "import from S3");
    assert!(row.contains(&usd(got)) && row.ends_with(" -"), "{row}");
    let row = load_path_row(out, "writes (provisioned)");
    assert!(row.contains("$10.00") && row.ends_with("1.5 s"), "{row}");
    let row = load_path_row(out, "bulk put items");
    assert!(
        row.contains("existing only") && row.ends_with("1.5 s"),
        "{row}"
    );
    assert!(row.contains(" - "), "no cost published: {row}");
    for p in priced["load_paths"].as_array().unwrap() {
        let basis = format!(
            "  {}: cost {}; time {}",
            p["path"].as_str().unwrap(),
            p["cost_basis"].as_str().unwrap(),
            p["time_basis"].as_str().unwrap()
        );
        assert!(out.contains(&basis), "{basis}:\n{out}");
    }
}

/// Each sample item of the plan's entity `e` is an item of the table, equal.
fn assert_sample_items_written(e: &Value, items: &Items) {
    let samples = e["sample_items"].as_array().unwrap();
    assert!(!samples.is_empty());
    for s in samples {
        let item: Item = serde_json::from_value(s.clone()).unwrap();
        let key = key_of(&item);
        let written = items
            .get(&key)
            .unwrap_or_else(|| panic!("{key:?} not written"));
        assert_eq!(written, &item, "{key:?}");
    }
}

/// 1,000 orders, 900 of them of customer 7.
const SKEWED: &str = r#"
CREATE TABLE {schema}.orders (id INT PRIMARY KEY, customer_id INT NOT NULL, note TEXT);
INSERT INTO {schema}.orders
  SELECT g, CASE WHEN g % 10 = 0 THEN g ELSE 7 END, 'n' || g FROM generate_series(1, 1000) AS g;
ANALYZE {schema}.orders;
"#;

const SKEWED_MAPPING: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"

[target]
table = "TABLE"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUSTOMER#{customer_id}"
sk = "ORDER#{id:08}"
"#;

#[tokio::test]
async fn a_skewed_table_shows_its_hot_partition_key_and_warns_at_the_planned_rate() {
    let sc = Scenario::new("plan_skew").postgres(SKEWED).start().await;
    let mapping = sc.mapping(SKEWED_MAPPING);
    let (run, report) = plan(&sc, &mapping, &["--rate", "2000", "--sample", "100"]).await;
    assert_eq!(run.code, 2, "warnings give exit 2: {}", run.stdout);
    let e = entity(&report, "order");
    assert_eq!(e["rows"], 1000);
    assert_eq!(e["exact"], false);
    let sampled = e["sampled_rows"].as_u64().unwrap();
    assert!((1..=100).contains(&sampled), "{sampled}");
    // The sample is spread over the key range, not the first 100 rows.
    let ids: Vec<u64> = e["sample_items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"]["N"].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids[0] < ids[1] && ids[1] < ids[2], "{ids:?}");
    assert!(ids[2] - ids[0] > 10, "not spread: {ids:?}");
    let hot = &report["hot_partitions"][0];
    assert_eq!(hot["key"], "CUSTOMER#7");
    assert_eq!(hot["items"], 900);
    // 2,000 items/s of 1 unit each, 90% of them on customer 7.
    let wcu = hot["wcu_per_second"].as_f64().unwrap();
    assert!((wcu - 1800.0).abs() < 1.0, "{wcu}");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("\"CUSTOMER#7\"")
                && w.as_str().unwrap().contains("1000 WCU/s")),
        "{warnings:?}"
    );
    assert_eq!(e["collisions"]["rows"], 0);
    let times: BTreeMap<String, f64> = report["time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["at"].as_str().unwrap().to_string(),
                t["seconds"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(times["--rate 2000 items/s"], 0.5);

    // The human table names the hot key too, and the sample keys are spread.
    let human = sc.sql2ddb(&["plan", &mapping, "--rate", "2000"]).await;
    assert_eq!(human.code, 2, "{}", human.stderr);
    assert!(human.stdout.contains("CUSTOMER#7"), "{}", human.stdout);
    assert!(human.stdout.contains("hot partitions"), "{}", human.stdout);

    // With --estimate: the catalog's count, partitions from the sample.
    let (_, estimated) = plan(&sc, &mapping, &["--estimate", "--rate", "2000"]).await;
    let e = entity(&estimated, "order");
    assert_eq!(e["rows_estimated"], true);
    assert_eq!(e["rows"], 1000);
    assert_eq!(e["partitions_exact"], false);
    assert_eq!(estimated["hot_partitions"][0]["key"], "CUSTOMER#7");
}

/// Users whose e-mail is the key: a@x.org three times, b@x.org twice.
const PEOPLE: &str = r#"
CREATE TABLE people (id INT PRIMARY KEY, email VARCHAR(50) NOT NULL, name VARCHAR(20));
INSERT INTO people VALUES (1, 'a@x.org', 'A1'), (2, 'a@x.org', 'A2'), (3, 'b@x.org', 'B1'),
  (4, 'c@x.org', 'C1'), (5, 'a@x.org', 'A3'), (6, 'b@x.org', 'B2');
"#;

#[tokio::test]
async fn rows_that_collide_on_one_key_are_counted_with_examples() {
    let sc = Scenario::new("plan_collide").mariadb(PEOPLE).start().await;
    let text = format!(
        r#"version = 1
[source]
url = "{}"

[target]
table = "TABLE"
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "user"
from = "people"
pk = "USER#{{email}}"
sk = "PROFILE"
"#,
        sc.my().url
    );
    let mapping = sc.mapping(&text);
    let (run, report) = plan(&sc, &mapping, &[]).await;
    assert_eq!(run.code, 2);
    let c = &entity(&report, "user")["collisions"];
    assert_eq!(c["exact"], true);
    assert_eq!(c["keys"], 2);
    assert_eq!(c["rows"], 5);
    assert_eq!(c["examples"][0]["key"], "USER#a@x.org | PROFILE");
    assert_eq!(c["examples"][0]["rows"], 3);
    assert_eq!(c["examples"][1]["key"], "USER#b@x.org | PROFILE");
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("5 rows map to 2 keys"), "{warnings}");
    // The password-free URL is shown; nothing about DynamoDB was needed.
    assert!(report["source"].as_str().unwrap().starts_with("mysql://"));
}

#[tokio::test]
async fn the_shop_plan_counts_every_row_and_its_sample_items_are_what_run_writes() {
    let sc = Scenario::new("plan_shop").start().await;
    let mapping = shop_mapping(&sc);
    let (_, report) = plan(&sc, &mapping, &[]).await;
    for (name, rows) in [("customer", 500), ("product", 50), ("order", 2000)] {
        let e = entity(&report, name);
        assert_eq!(e["rows"], rows, "{name}");
        assert_eq!(e["items"], rows, "{name}");
        assert_eq!(e["exact"], true, "{name}");
        // Every item of the shop is under 1 KB: one unit each.
        assert_eq!(e["write_units"], rows, "{name}");
        assert!(e["rejects"].as_array().unwrap().is_empty(), "{name}");
    }
    // Products carry no GSI1 keys; customers and orders are projected whole.
    assert_eq!(report["totals"]["index_write_units"], 2500);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let items = sc.items().await;
    for name in ["customer", "product", "order"] {
        // Orders carry their embedded lines: the same as the run's.
        assert_sample_items_written(entity(&report, name), &items);
    }
}

/// Codes used in the partition key, one of them NULL.
const CODES: &str = r#"
CREATE TABLE codes (id INTEGER PRIMARY KEY, code TEXT);
INSERT INTO codes VALUES (1, 'a'), (2, NULL), (3, 'c'), (4, NULL);
"#;

#[tokio::test]
async fn rows_the_mapping_would_reject_are_listed_by_reason() {
    let sc = Scenario::new("plan_rejects").sqlite(CODES).start().await;
    let text = format!(
        r#"version = 1
[source]
url = "{}"

[target]
table = "TABLE"
pk = {{ name = "PK", type = "S" }}

[[entity]]
name = "code"
from = "codes"
pk = "CODE#{{code}}#{{id}}"
"#,
        sc.sqlite_url()
    );
    let mapping = sc.mapping(&text);
    let (run, report) = plan(&sc, &mapping, &[]).await;
    assert_eq!(run.code, 2);
    let e = entity(&report, "code");
    assert_eq!(e["rows"], 4);
    assert_eq!(e["items"], 2);
    let rejects = e["rejects"].as_array().unwrap();
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    assert_eq!(rejects[0]["rows"], 2);
    assert_eq!(rejects[0]["column"], "code");
    assert!(
        rejects[0]["reason"].as_str().unwrap().contains("NULL"),
        "{rejects:?}"
    );
    assert_eq!(rejects[0]["example_key"]["id"], 2);
}

/// 2,000 orders on 2,000 customers, and 2,000 orders of which 1,000 are
/// customer HOT's: every item under 1 KB, one write unit.
const SPREAD_AND_SKEWED: &str = r#"
CREATE TABLE spread (id INTEGER PRIMARY KEY, customer TEXT NOT NULL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO spread SELECT i, 'C' || i FROM n;
CREATE TABLE skewed (id INTEGER PRIMARY KEY, customer TEXT NOT NULL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO skewed SELECT i, CASE WHEN i <= 1000 THEN 'HOT' ELSE 'C' || i END FROM n;
"#;

fn orders_mapping(url: &str, from: &str) -> String {
    format!(
        r#"version = 1
[source]
url = "{url}"

[target]
table = "TABLE"
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "order"
from = "{from}"
pk = "CUSTOMER#{{customer}}"
sk = "ORDER#{{id}}"
"#
    )
}

/// The units of each of `partitions` partitions, by hand: one unit per
/// row, placed by the hash of its partition key value.
fn by_hand(customers: impl Iterator<Item = String>, partitions: u64) -> Vec<u64> {
    let mut units = vec![0; partitions as usize];
    for c in customers {
        let hash =
            sql2ddb_core::capacity::key_hash(&serde_json::json!({ "S": format!("CUSTOMER#{c}") }));
        units[(hash.unwrap() % partitions) as usize] += 1;
    }
    units
}

fn units_of(capacity: &Value) -> Vec<u64> {
    capacity["partition_units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn capacity_predicts_per_partition_and_a_hot_key_makes_the_run_longer() {
    let sc = Scenario::new("plan_capacity")
        .sqlite(SPREAD_AND_SKEWED)
        .start()
        .await;
    // A table of 400 WCU/s over 4 partitions of 100.
    let flags = [
        "--capacity",
        "400",
        "--partitions",
        "4",
        "--partition-wcu",
        "100",
    ];

    let mapping = sc.mapping(&orders_mapping(sc.sqlite_url(), "spread"));
    let (_, spread) = plan(&sc, &mapping, &flags).await;
    let c = &spread["capacity"];
    assert_eq!(c["limits"]["table_wcu"], 400);
    assert_eq!(c["limits"]["partitions"], 4);
    assert_eq!(c["write_units"], 2000);
    // 2,000 units at 400 a second: 5 s; each partition about 500 units.
    assert_eq!(c["table_seconds"], 5.0);
    let units = units_of(c);
    assert_eq!(units, by_hand((1..=2000).map(|i| format!("C{i}")), 4));
    let busiest = *units.iter().max().unwrap();
    assert!(busiest < 600, "{units:?}");
    assert_eq!(c["partition_seconds"], busiest as f64 / 100.0);
    let spread_seconds = c["seconds"].as_f64().unwrap();
    assert_eq!(spread_seconds, 5.0_f64.max(busiest as f64 / 100.0));

    let mapping = sc.mapping(&orders_mapping(sc.sqlite_url(), "skewed"));
    let (run, skewed) = plan(&sc, &mapping, &flags).await;
    let c = &skewed["capacity"];
    assert_eq!(c["table_seconds"], 5.0);
    let units = units_of(c);
    let hand = by_hand(
        (1..=2000).map(|i| match i <= 1000 {
            true => "HOT".to_string(),
            false => format!("C{i}"),
        }),
        4,
    );
    assert_eq!(units, hand);
    // HOT's 1,000 units and the others that hash there: over 10 s.
    let busiest = *hand.iter().max().unwrap();
    assert!(busiest > 1000, "{hand:?}");
    assert_eq!(c["partition_seconds"], busiest as f64 / 100.0);
    assert_eq!(c["seconds"], busiest as f64 / 100.0);
    assert!(c["seconds"].as_f64().unwrap() > 1.8 * spread_seconds);
    assert_eq!(c["partition_bound"], true);
    assert_eq!(c["hot_key"], "CUSTOMER#HOT");
    let share = c["hot_key_share"].as_f64().unwrap();
    assert!((share - 1000.0 / busiest as f64).abs() < 1e-9, "{share}");
    assert_eq!(run.code, 2, "the hot key is a warning: {}", run.stdout);
    let warnings = skewed["warnings"].to_string();
    assert!(
        warnings.contains("CUSTOMER#HOT") && warnings.contains("per-partition limit"),
        "{warnings}"
    );
    // The hot-partition table is judged at the same capacity: HOT's half of
    // the units at 400 WCU/s is 200 WCU/s, over the 100 of a partition.
    assert_eq!(skewed["planned_wcu_per_second"], 400.0);
    assert_eq!(skewed["planned_rate_from"], "--capacity 400 WCU/s");
    let hot = &skewed["hot_partitions"][0];
    assert_eq!(hot["key"], "CUSTOMER#HOT");
    assert_eq!(hot["wcu_per_second"], 200.0);
    assert!(
        warnings
            .contains("about 200 WCU/s at --capacity 400 WCU/s, over --partition-wcu 100 WCU/s"),
        "{warnings}"
    );

    // The terminal names the hot key and says why the time is longer.
    let human = sc
        .sql2ddb(&[&["plan", mapping.as_str()][..], &flags].concat())
        .await;
    assert!(
        human.stdout.contains("time the table's capacity allows")
            && human.stdout.contains("key CUSTOMER#HOT")
            && human
                .stdout
                .contains("the per-partition limit makes it longer"),
        "{}",
        human.stdout
    );

    // On demand: a new table's 4,000 WCU/s over 4 partitions of 1,000.
    let (_, on_demand) = plan(&sc, &mapping, &["--capacity", "on-demand"]).await;
    let c = &on_demand["capacity"];
    assert_eq!(c["limits"]["table_wcu"], 4000);
    assert_eq!(c["limits"]["partitions"], 4);
    assert_eq!(c["table_seconds"], 0.5);
    assert_eq!(c["seconds"], busiest as f64 / 1000.0);
    assert_eq!(on_demand["planned_wcu_per_second"], 4000.0);
    // Without --capacity, no prediction.
    let (_, none) = plan(&sc, &mapping, &[]).await;
    assert!(none.get("capacity").is_none(), "{none}");
}

/// The page `plan` saved, found by the path it printed on stderr.
fn saved_page(sc: &Scenario, run: &Run) -> String {
    let at = run
        .stderr
        .split("(to look at: ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no page in {}", run.stderr));
    std::fs::read_to_string(sc.path().join(at.trim())).unwrap()
}

#[tokio::test]
async fn a_fleet_shares_the_cap_and_the_pacer_s_retries_are_estimated() {
    let sc = Scenario::new("plan_fleet")
        .sqlite(SPREAD_AND_SKEWED)
        .start()
        .await;
    let mapping = sc.mapping(&orders_mapping(sc.sqlite_url(), "spread"));
    // A table of 400 WCU/s over 4 partitions of 100, capped at its rate
    // and shared by four workers.
    let flags = [
        "--capacity",
        "400",
        "--partitions",
        "4",
        "--partition-wcu",
        "100",
        "--max-wcu",
        "400",
    ];
    let (_, one) = plan(&sc, &mapping, &flags).await;
    let (run, four) = plan(&sc, &mapping, &[&flags[..], &["--workers", "4"]].concat()).await;
    assert_eq!(one["fleet"]["workers"], 1);
    assert_eq!(one["fleet"]["join_seconds"], 0.0);
    assert_eq!(four["fleet"]["workers"], 4);
    assert_eq!(four["fleet"]["cap_wcu"], 400);
    assert_eq!(four["fleet"]["share_wcu"], 100.0);
    assert_eq!(four["fleet"]["join_seconds"], 5.0);
    let (c1, c4) = (&one["capacity"], &four["capacity"]);
    // 2,000 units over 400 WCU/s: 5 s, for one process or four.
    assert_eq!(c4["cap_seconds"], 5.0);
    assert_eq!(c4["seconds"], c1["seconds"]);
    let bound = c1["seconds"].as_f64().unwrap().max(5.0);
    assert_eq!(c1["fleet_seconds"], bound);
    assert_eq!(c4["fleet_seconds"], bound + 5.0);
    // Every time gains the join for the fleet, and only for the fleet.
    let capped = &four["time"][0];
    assert_eq!(capped["at"], "max_wcu 400 WCU/s");
    assert_eq!(
        capped["fleet_seconds"],
        capped["seconds"].as_f64().unwrap() + 5.0
    );
    assert!(one["time"][0].get("fleet_seconds").is_none(), "{one}");
    // At the table's rate the pacer lets about 5% of the items be refused:
    // 100 of 2,000, none of them of a key with more than one item.
    let retries = &c4["retries"];
    assert_eq!(retries["at_limit"], 100, "{retries}");
    assert_eq!(retries["keys"], 0, "{retries}");
    assert_eq!(retries["items"], 100, "{retries}");
    assert_eq!(c1["retries"], c4["retries"]);

    // A cap well below the table keeps every partition under its limit.
    let mut low = flags.to_vec();
    low[7] = "40";
    let (_, under) = plan(&sc, &mapping, &low).await;
    assert_eq!(under["capacity"]["retries"]["items"], 0);
    assert_eq!(under["capacity"]["cap_seconds"], 50.0);

    // The terminal and the page show the fleet's figures.
    let human = sc
        .sql2ddb(&[&["plan", mapping.as_str(), "--workers", "4"][..], &flags].concat())
        .await;
    for needle in [
        "4 workers share max_wcu 400 WCU/s: 100 WCU/s each",
        "(4 workers: 10.0 s)",
        "items retried, paced    about 100 (an estimate",
    ] {
        assert!(
            human.stdout.contains(needle),
            "no {needle:?} in\n{}",
            human.stdout
        );
    }
    let page = saved_page(&sc, &run);
    assert!(
        page.contains("data-field=\"share_wcu\" data-value=\"100\"")
            && page.contains("data-field=\"retried_items\" data-value=\"100\""),
        "{page}"
    );

    // The skewed table's hot key adds its own refusals (its mapping
    // replaces the spread one's file: last).
    let skewed = sc.mapping(&orders_mapping(sc.sqlite_url(), "skewed"));
    let (_, hot) = plan(&sc, &skewed, &flags).await;
    assert_eq!(hot["capacity"]["retries"]["keys"], 1);
    assert!(hot["capacity"]["retries"]["items"].as_u64().unwrap() > 100);

    // No fleet of no worker.
    let none = sc
        .sql2ddb(&["plan", mapping.as_str(), "--workers", "0"])
        .await;
    assert_eq!(none.code, 64, "{}", none.stderr);
    assert!(none.stderr.contains("--workers"), "{}", none.stderr);
}

/// Orders whose customer is not known yet (NULL in the column the partition
/// key reads), and customers keyed the same way: a second entity makes
/// `plan` look up the first one's largest keys in it.
const NULL_KEYS: &str = r#"
CREATE TABLE {schema}.orders (id INT PRIMARY KEY, customer_id INT, note TEXT);
INSERT INTO {schema}.orders
  SELECT g, CASE WHEN g % 4 = 0 THEN NULL ELSE g % 3 END, 'n' || g FROM generate_series(1, 100) AS g;
CREATE TABLE {schema}.customers (customer_id INT PRIMARY KEY, name TEXT NOT NULL);
INSERT INTO {schema}.customers SELECT g, 'c' || g FROM generate_series(0, 2) AS g;
"#;

const NULL_KEYS_MAPPING: &str = r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"

[target]
table = "TABLE"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUSTOMER#{customer_id}"
sk = "ORDER#{id:08}"

[[entity]]
name = "customer"
from = "SCHEMA.customers"
pk = "CUSTOMER#{customer_id}"
sk = "PROFILE"
"#;

#[tokio::test]
async fn a_nullable_key_column_is_reported_with_its_null_rows_not_a_crash() {
    let sc = Scenario::new("plan_nullkey")
        .postgres(NULL_KEYS)
        .start()
        .await;
    let mapping = sc.mapping(NULL_KEYS_MAPPING);
    let (run, report) = plan(&sc, &mapping, &[]).await;
    assert_eq!(run.code, 2, "a warning, not a failure: {}", run.stderr);
    let e = entity(&report, "order");
    // 25 of the 100 orders have no customer: they make no key.
    assert_eq!(e["null_key_rows"], 25, "{e}");
    assert_eq!(entity(&report, "customer")["null_key_rows"], 0);
    // The hot partitions are real keys, counted over both entities; none
    // is made of a NULL.
    let hot: Vec<(String, u64)> = report["hot_partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["key"].as_str().unwrap().to_string(),
                p["items"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(hot.iter().all(|(k, _)| !k.contains("NULL")), "{hot:?}");
    // Customer 1: orders 1, 5, 7, 10, … (g % 3 = 1, g % 4 ≠ 0) and its profile.
    let ones = (1..=100).filter(|g| g % 4 != 0 && g % 3 == 1).count() as u64;
    assert!(
        hot.contains(&("CUSTOMER#1".to_string(), ones + 1)),
        "{hot:?}"
    );
    // NULL rows share no key with each other: no collisions.
    assert_eq!(e["collisions"]["rows"], 0, "{e}");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("\"order\"") && w.contains("25 rows hold NULL") && w.contains("customer_id")
        }),
        "{warnings:?}"
    );
    // The terminal's page says it too.
    let human = sc.sql2ddb(&["plan", &mapping]).await;
    assert_eq!(human.code, 2, "{}", human.stderr);
    assert!(
        format!("{}{}", human.stdout, human.stderr).contains("25 rows hold NULL"),
        "{}\n{}",
        human.stdout,
        human.stderr
    );
}
