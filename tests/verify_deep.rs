//! `sql2ddb verify MAPPING --deep`: after a clean run every item is
//! identical; after the table is tampered with through the SDK (and a row
//! added to the source) exactly each difference is found and written to
//! `diff.jsonl`, also when a tiny memory budget forces both sides to spill;
//! `--sample` finds the missing and different items of its sample and no
//! extra ones; rows that collapse onto one key are named with both source
//! keys; data of `--endpoint local` is verified from its run directory; an
//! identical table of 20,000 items is proven by its per-bucket digests alone
//! (no bucket resolved, nothing spilled), one changed item resolves one.

use std::collections::BTreeSet;

use serde_json::{json, Value as Json};
use sql2ddb_core::limits::KeyType;
use sql2ddb_core::{Item, KeyAttr};
use sql2ddb_engine::deep::canon::{in_sample, key_text, stable_hash};
use sql2ddb_testkit::sdk::types::AttributeValue as Sdk;

use sql2ddb_testkit::FaultConfig;

use crate::common::*;

const FIXTURE: &str = "
CREATE TABLE {schema}.customers (customer_id int PRIMARY KEY, name text NOT NULL, credit numeric(10,2) NOT NULL);
INSERT INTO {schema}.customers SELECT c, 'customer ' || c, c * 1.25 FROM generate_series(1, 20) c;
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total numeric(10,2) NOT NULL);
INSERT INTO {schema}.orders SELECT o, o % 20 + 1, (ARRAY['new','paid'])[o % 2 + 1], o * 10 FROM generate_series(1, 30) o;
CREATE TABLE {schema}.order_lines (order_id int NOT NULL, line_no int NOT NULL, sku text NOT NULL, PRIMARY KEY (order_id, line_no));
INSERT INTO {schema}.order_lines SELECT o, l, 'SKU-' || (o + l) FROM generate_series(1, 30) o, generate_series(1, 3) l;
CREATE TABLE {schema}.products (sku text PRIMARY KEY, title text NOT NULL);
INSERT INTO {schema}.products SELECT 'SKU-' || p, 'product ' || p FROM generate_series(1, 10) p;
";

const MAPPING: &str = pg_mapping!(
    "page_size = 7\nread_parallelism = 2",
    r#"[[target.gsi]]
name = "by_status"
pk = { name = "GSI1PK", type = "S" }
sk = { name = "GSI1SK", type = "S" }

[[entity]]
name = "customer"
from = "SCHEMA.customers"
pk = "CUST#{customer_id:04}"
sk = "PROFILE"

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUST#{customer_id:04}"
sk = "ORDER#{order_id:04}"
[entity.attributes]
GSI1PK = "STATUS#{status}"
GSI1SK = "{order_id:04}"

[[entity.embed]]
name = "lines"
from = "SCHEMA.order_lines"
parent_key = ["order_id"]
order_by = ["line_no"]
exclude = ["order_id"]

[[entity]]
name = "product"
from = "SCHEMA.products"
pk = "PRODUCT#{sku}"
sk = "PRODUCT"

[[pointer]]
entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
"#
);

/// `verify MAPPING --deep --json EXTRA…` against the scenario's server.
async fn deep(sc: &Scenario, mapping: &str, extra: &[&str]) -> (Run, Json) {
    deep_at(sc, &sc.dynamo.url, mapping, extra).await
}

/// `verify MAPPING --deep --json EXTRA…` against `endpoint`.
async fn deep_at(sc: &Scenario, endpoint: &str, mapping: &str, extra: &[&str]) -> (Run, Json) {
    let mut args = vec![
        "verify",
        mapping,
        "--deep",
        "--json",
        "--endpoint",
        endpoint,
    ];
    args.extend_from_slice(extra);
    let run = sc.sql2ddb(&args).await;
    let report = run.report();
    (run, report)
}

/// An entity's counts: expected, found, identical, missing, extra, different, collapsed.
fn counts(report: &Json, entity: &str) -> [u64; 7] {
    let e = report["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entity"] == entity)
        .unwrap_or_else(|| panic!("no entity {entity} in {report}"));
    [
        "expected",
        "found",
        "identical",
        "missing",
        "extra",
        "different",
        "collapsed",
    ]
    .map(|k| e[k].as_u64().unwrap())
}

/// The lines of the report's `diff.jsonl`.
fn diff_lines(sc: &Scenario, report: &Json) -> Vec<Json> {
    let path = sc.path().join(report["diff_file"].as_str().unwrap());
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each line as (kind, entity, PK, SK, differing attribute names).
fn summary(lines: &[Json]) -> BTreeSet<(String, String, String, String, Vec<String>)> {
    lines
        .iter()
        .map(|l| {
            let attrs = l["attributes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|a| a["name"].as_str().unwrap().to_string())
                        .collect()
                })
                .unwrap_or_default();
            (
                l["kind"].as_str().unwrap().to_string(),
                l["entity"].as_str().unwrap().to_string(),
                l["key"]["PK"]["S"].as_str().unwrap().to_string(),
                l["key"]["SK"]["S"].as_str().unwrap().to_string(),
                attrs,
            )
        })
        .collect()
}

fn line(
    kind: &str,
    entity: &str,
    pk: &str,
    sk: &str,
    attrs: &[&str],
) -> (String, String, String, String, Vec<String>) {
    let attrs = attrs.iter().map(|a| a.to_string()).collect();
    (kind.into(), entity.into(), pk.into(), sk.into(), attrs)
}

/// Deletes 1 item, changes 4 (a number, a string, a type, a dropped
/// attribute), rewrites a number as equal text, adds an item in the
/// mapping's key space and one outside it, moves the pointer back.
async fn tamper(sc: &Scenario) {
    let items = sc.items().await;
    for (pk, sk) in [
        ("CUST#0003", "PROFILE"),
        ("CUST#0005", "PROFILE"),
        ("CUST#0011", "ORDER#0010"),
    ] {
        sc.dynamo
            .client
            .delete_item()
            .table_name(&sc.table)
            .key("PK", Sdk::S(pk.into()))
            .key("SK", Sdk::S(sk.into()))
            .send()
            .await
            .unwrap();
    }
    let edit = |pk: &str, sk: &str, f: &dyn Fn(&mut Item)| {
        let mut item = items[&key(pk, sk)].clone();
        f(&mut item);
        item
    };
    let changed = [
        edit("CUST#0004", "PROFILE", &|i| {
            i.insert("name".into(), s("someone else"));
        }),
        // Equal as DynamoDB compares numbers: not a difference.
        edit("CUST#0001", "PROFILE", &|i| {
            i.insert("credit".into(), n("1.250"));
        }),
        edit("CUST#0002", "ORDER#0001", &|i| {
            i.insert("total".into(), n("10.5"));
        }),
        edit("CUST#0003", "ORDER#0002", &|i| {
            i.insert("total".into(), s("20"));
        }),
        edit("CUST#0004", "ORDER#0003", &|i| {
            i.remove("status");
        }),
        edit("LAST_ORDER", "LAST_ORDER", &|i| {
            i.insert("orderId".into(), n(5));
        }),
        item(vec![
            ("PK", s("CUST#0999")),
            ("SK", s("PROFILE")),
            ("name", s("x")),
        ]),
        item(vec![
            ("PK", s("CUST#0998")),
            ("SK", s("PROFILE")),
            ("name", s("y")),
        ]),
        item(vec![("PK", s("SESSION#1")), ("SK", s("X"))]),
        item(vec![("PK", s("SESSION#2")), ("SK", s("X"))]),
    ];
    for i in &changed {
        sc.put(i).await;
    }
}

/// The differences after [`tamper`] and a customer row added to the source.
fn tampered() -> BTreeSet<(String, String, String, String, Vec<String>)> {
    [
        line("missing", "customer", "CUST#0003", "PROFILE", &[]),
        line("missing", "customer", "CUST#0005", "PROFILE", &[]),
        line("missing", "order", "CUST#0011", "ORDER#0010", &[]),
        line("missing", "customer", "CUST#0021", "PROFILE", &[]),
        line("different", "customer", "CUST#0004", "PROFILE", &["name"]),
        line("different", "order", "CUST#0002", "ORDER#0001", &["total"]),
        line("different", "order", "CUST#0003", "ORDER#0002", &["total"]),
        line("different", "order", "CUST#0004", "ORDER#0003", &["status"]),
        line("extra", "customer", "CUST#0998", "PROFILE", &[]),
        line("extra", "customer", "CUST#0999", "PROFILE", &[]),
        line(
            "pointer",
            "LAST_ORDER",
            "LAST_ORDER",
            "LAST_ORDER",
            &["orderId"],
        ),
    ]
    .into_iter()
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_verify_finds_exactly_each_difference() {
    let sc = Scenario::new("deep").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    let (clean, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(counts(&report, "customer"), [20, 20, 20, 0, 0, 0, 0]);
    assert_eq!(counts(&report, "order"), [30, 30, 30, 0, 0, 0, 0]);
    assert_eq!(counts(&report, "product"), [10, 10, 10, 0, 0, 0, 0]);
    assert_eq!(report["pointers"][0]["ok"], true, "{report}");
    assert!(diff_lines(&sc, &report).is_empty());

    tamper(&sc).await;
    sc.pg()
        .exec("INSERT INTO {schema}.customers VALUES (21, 'customer 21', 26.25)")
        .await;
    let (dirty, report) = deep(&sc, &mapping, &["--segments", "3"]).await;
    assert_eq!(dirty.code, 1, "{}", dirty.stderr);
    assert_eq!(counts(&report, "customer"), [21, 18, 17, 3, 2, 1, 0]);
    assert_eq!(counts(&report, "order"), [30, 29, 26, 1, 0, 3, 0]);
    assert_eq!(counts(&report, "product"), [10, 10, 10, 0, 0, 0, 0]);
    assert_eq!(
        report["outside"], 2,
        "the other application's items are ignored"
    );
    let lines = diff_lines(&sc, &report);
    assert_eq!(summary(&lines), tampered());
    assert_eq!(lines.len(), 11);
    let total = lines
        .iter()
        .find(|l| l["key"]["SK"] == json!({"S": "ORDER#0001"}))
        .unwrap();
    assert_eq!(total["attributes"][0]["expected"], json!({"N": "10"}));
    assert_eq!(total["attributes"][0]["actual"], json!({"N": "10.5"}));
    let missing = lines
        .iter()
        .find(|l| l["key"]["PK"] == json!({"S": "CUST#0021"}))
        .unwrap();
    assert_eq!(missing["source_keys"], json!([{"customer_id": 21}]));

    // One entity (read units capped): its differences and its pointer only.
    let (one, only) = deep(&sc, &mapping, &["--entity", "order", "--max-rcu", "1000"]).await;
    assert_eq!(one.code, 1, "{}", one.stderr);
    assert_eq!(only["entities"].as_array().unwrap().len(), 1, "{only}");
    assert_eq!(counts(&only, "order"), [30, 29, 26, 1, 0, 3, 0]);
    let orders: BTreeSet<_> = tampered()
        .into_iter()
        .filter(|l| l.1 == "order" || l.0 == "pointer")
        .collect();
    assert_eq!(summary(&diff_lines(&sc, &only)), orders);

    // Both sides spilled to files at every item: the same findings.
    let (spilled, tiny) = deep(&sc, &mapping, &["--memory-budget", "1"]).await;
    assert_eq!(spilled.code, 1, "{}", spilled.stderr);
    assert!(tiny["spilled_bytes"].as_u64().unwrap() > 0, "{tiny}");
    assert_eq!(tiny["entities"], report["entities"]);
    assert_eq!(summary(&diff_lines(&sc, &tiny)), tampered());

    // The whole sample: the same missing and different, no extra.
    let (all, sample) = deep(&sc, &mapping, &["--sample", "1.0"]).await;
    assert_eq!(all.code, 1, "{}", all.stderr);
    let without_extra: BTreeSet<_> = tampered().into_iter().filter(|l| l.0 != "extra").collect();
    assert_eq!(summary(&diff_lines(&sc, &sample)), without_extra);

    // Half: exactly those whose key hash falls in the sample.
    let (half, report) = deep(&sc, &mapping, &["--sample", "0.5"]).await;
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let sampled = |pk: &str, sk: &str| {
        let item = item(vec![("PK", s(pk)), ("SK", s(sk))]);
        in_sample(stable_hash(&key_text(&item, &keys).unwrap()), 0.5)
    };
    let want: BTreeSet<_> = without_extra
        .into_iter()
        .filter(|l| l.0 == "pointer" || sampled(&l.2, &l.3))
        .collect();
    assert_eq!(
        half.code, 1,
        "the pointer is always checked: {}",
        half.stderr
    );
    assert_eq!(summary(&diff_lines(&sc, &report)), want);
    assert!(counts(&report, "customer")[0] < 21);
}

const PEOPLE: &str = "
CREATE TABLE {schema}.people (person_id int PRIMARY KEY, email text NOT NULL, name text NOT NULL);
INSERT INTO {schema}.people VALUES (1, 'a@example.com', 'Ann'), (2, 'b@example.com', 'Bob'), (3, 'a@example.com', 'Ann again');
";

const BY_EMAIL: &str = pg_mapping!(
    r#"
[[entity]]
name = "person"
from = "SCHEMA.people"
pk = "EMAIL#{email}"
sk = "PERSON"
overwrite = true
"#
);

#[tokio::test(flavor = "multi_thread")]
async fn rows_collapsed_onto_one_key_are_named_with_both_source_keys() {
    let sc = Scenario::new("deep_collapse")
        .postgres(PEOPLE)
        .start()
        .await;
    let mapping = sc.mapping(BY_EMAIL);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (verify, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(verify.code, 1, "{}", verify.stderr);
    // The table holds one of the two rows' items: identical, and collapsed.
    assert_eq!(counts(&report, "person"), [2, 2, 2, 0, 0, 0, 1]);
    let lines = diff_lines(&sc, &report);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["kind"], "collapsed");
    assert_eq!(lines[0]["key"]["PK"], json!({"S": "EMAIL#a@example.com"}));
    let mut sources: Vec<i64> = lines[0]["source_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["person_id"].as_i64().unwrap())
        .collect();
    sources.sort();
    assert_eq!(sources, [1, 3]);
    // Found though every item the table holds is right: the bucket of the
    // collapsed key counts one item more on the source's side.
    assert_eq!(report["buckets_resolved"], 1, "{report}");
}

const MANY: &str = "
CREATE TABLE {schema}.readings (reading_id int PRIMARY KEY, sensor text NOT NULL, value numeric(10,2) NOT NULL);
INSERT INTO {schema}.readings SELECT r, 'sensor ' || (r % 97), r * 0.25 FROM generate_series(1, 20000) r;
";

const READINGS: &str = pg_mapping!(
    "page_size = 1000",
    r#"
[[entity]]
name = "reading"
from = "SCHEMA.readings"
pk = "READING#{reading_id}"
sk = "V"
"#
);

#[tokio::test(flavor = "multi_thread")]
async fn an_identical_table_resolves_no_bucket_and_one_difference_one() {
    let sc = Scenario::new("deep_digest").postgres(MANY).start().await;
    let mapping = sc.mapping(READINGS);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);

    // A budget of one byte: nothing is held, so nothing may be spilled either.
    let (clean, report) = deep(&sc, &mapping, &["--memory-budget", "1"]).await;
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(
        counts(&report, "reading"),
        [20_000, 20_000, 20_000, 0, 0, 0, 0]
    );
    assert!(report["buckets"].as_u64().unwrap() > 1, "{report}");
    assert_eq!(report["buckets_resolved"], 0, "{report}");
    assert_eq!(report["spilled_bytes"], 0, "{report}");
    assert_eq!(report["items_read"], 20_000, "{report}");

    // One attribute of one item changed through the SDK.
    let mut changed = sc.items().await[&key("READING#777", "V")].clone();
    changed.insert("sensor".into(), s("sensor 2"));
    sc.put(&changed).await;
    let (dirty, report) = deep(&sc, &mapping, &["--memory-budget", "1"]).await;
    assert_eq!(dirty.code, 1, "{}", dirty.stderr);
    assert_eq!(report["buckets_resolved"], 1, "{report}");
    assert_eq!(
        counts(&report, "reading"),
        [20_000, 20_000, 19_999, 0, 0, 1, 0]
    );
    let lines = diff_lines(&sc, &report);
    assert_eq!(
        summary(&lines),
        [line(
            "different",
            "reading",
            "READING#777",
            "V",
            &["sensor"]
        )]
        .into_iter()
        .collect()
    );
    assert_eq!(report["items_read"], 20_000, "{report}");
}

#[tokio::test(flavor = "multi_thread")]
async fn local_endpoint_data_is_verified_from_its_run_directory() {
    let sc = Scenario::new("deep_local").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let run = sc
        .sql2ddb(&["run", &mapping, "--endpoint", "local", "--json", "--quiet"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run.report()["run_id"].as_str().unwrap().to_string();
    let args = [
        "verify",
        &mapping,
        "--deep",
        "--json",
        "--endpoint",
        "local",
        "--run",
        &id,
    ];
    let verify = sc.sql2ddb(&args).await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    let report = verify.report();
    assert_eq!(counts(&report, "order"), [30, 30, 30, 0, 0, 0, 0]);
    let dir = sc.path().join("sql2ddb-runs").join(&id);
    assert!(dir.join("diff.jsonl").exists());
    assert!(dir.join("dynamodb.sqlite").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_are_listed_and_the_newest_is_verified_without_naming_it() {
    let sc = Scenario::new("deep_latest").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let run = sc
            .sql2ddb(&["run", &mapping, "--endpoint", "local", "--json", "--quiet"])
            .await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        ids.push(run.report()["run_id"].as_str().unwrap().to_string());
        // Run ids begin with the second they start at.
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    }
    // Another mapping's run in the same directory is not this mapping's.
    let other = sc.path().join("other.toml");
    std::fs::copy(&mapping, &other).unwrap();
    let other = other.display().to_string();
    let run = sc
        .sql2ddb(&["run", &other, "--endpoint", "local", "--json", "--quiet"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let other_id = run.report()["run_id"].as_str().unwrap().to_string();

    // `runs MAPPING`: this mapping's runs, newest first, on stdout.
    let listed = sc.sql2ddb(&["runs", &mapping, "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let runs: Vec<serde_json::Value> = serde_json::from_str(&listed.stdout).unwrap();
    let listed_ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(listed_ids, [ids[1].as_str(), ids[0].as_str()]);
    assert!(runs
        .iter()
        .all(|r| r["status"] == "ok" && r["mapping"] == mapping.as_str()));
    let all = sc.sql2ddb(&["runs"]).await;
    assert_eq!(all.code, 0, "{}", all.stderr);
    let lines: Vec<&str> = all.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "a header and three runs: {}", all.stdout);
    assert!(lines[1].starts_with(&other_id), "{}", all.stdout);
    assert!(all.stderr.is_empty(), "{}", all.stderr);

    // verify --deep on the local endpoint without --run: the newest run of
    // this mapping, said on stderr.
    let verify = sc
        .sql2ddb(&[
            "verify",
            &mapping,
            "--deep",
            "--json",
            "--endpoint",
            "local",
        ])
        .await;
    assert_eq!(verify.code, 0, "{}\n{}", verify.stdout, verify.stderr);
    assert!(
        verify
            .stderr
            .contains(&format!("run {} (the newest", ids[1])),
        "{}",
        verify.stderr
    );
    let dir = sc.path().join("sql2ddb-runs");
    assert!(dir.join(&ids[1]).join("diff.jsonl").exists());
    assert!(!dir.join(&ids[0]).join("diff.jsonl").exists());

    // --run latest of a mapping with no run says where it looked.
    let none = sc.path().join("none.toml");
    std::fs::copy(&mapping, &none).unwrap();
    let none = none.display().to_string();
    let status = sc.sql2ddb(&["status", &none, "--run", "latest"]).await;
    assert_eq!(status.code, EX_CONFIG, "{}", status.stderr);
    assert!(status.stderr.contains("no run of"), "{}", status.stderr);
}

/// The same data as [`FIXTURE`], for MariaDB.
fn mariadb_fixture() -> String {
    let values =
        |n: i64, row: &dyn Fn(i64) -> String| (1..=n).map(row).collect::<Vec<_>>().join(", ");
    format!(
        "CREATE TABLE customers (customer_id INT PRIMARY KEY, name VARCHAR(50) NOT NULL, credit DECIMAL(10,2) NOT NULL);
INSERT INTO customers VALUES {};
CREATE TABLE orders (order_id INT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(10) NOT NULL, total DECIMAL(10,2) NOT NULL);
INSERT INTO orders VALUES {};
CREATE TABLE order_lines (order_id INT NOT NULL, line_no INT NOT NULL, sku VARCHAR(20) NOT NULL, PRIMARY KEY (order_id, line_no));
INSERT INTO order_lines VALUES {};
CREATE TABLE products (sku VARCHAR(20) PRIMARY KEY, title VARCHAR(50) NOT NULL);
INSERT INTO products VALUES {};",
        values(20, &|c| format!("({c}, 'customer {c}', {c} * 1.25)")),
        values(30, &|o| {
            let status = if o % 2 == 0 { "new" } else { "paid" };
            format!("({o}, {}, '{status}', {})", o % 20 + 1, o * 10)
        }),
        values(90, &|i| {
            let (o, l) = ((i - 1) / 3 + 1, (i - 1) % 3 + 1);
            format!("({o}, {l}, 'SKU-{}')", o + l)
        }),
        values(10, &|p| format!("('SKU-{p}', 'product {p}')")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_verify_on_mariadb_finds_the_same_differences() {
    let sc = Scenario::new("deep_my")
        .mariadb(&mariadb_fixture())
        .start()
        .await;
    let text = MAPPING
        .replace("postgres://root@127.0.0.1:5432/test", &sc.my().url)
        .replace("SCHEMA.", "");
    let mapping = sc.mapping(&text);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (clean, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(counts(&report, "order"), [30, 30, 30, 0, 0, 0, 0]);

    tamper(&sc).await;
    sc.my()
        .exec("INSERT INTO customers VALUES (21, 'customer 21', 26.25)")
        .await;
    let (dirty, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(dirty.code, 1, "{}", dirty.stderr);
    assert_eq!(counts(&report, "customer"), [21, 18, 17, 3, 2, 1, 0]);
    assert_eq!(counts(&report, "order"), [30, 29, 26, 1, 0, 3, 0]);
    assert_eq!(summary(&diff_lines(&sc, &report)), tampered());
}

#[tokio::test(flavor = "multi_thread")]
async fn throttled_failing_and_dropped_reads_are_retried() {
    let sc = Scenario::new("deep_faults").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    tamper(&sc).await;
    sc.pg()
        .exec("INSERT INTO {schema}.customers VALUES (21, 'customer 21', 26.25)")
        .await;
    let faults = FaultConfig {
        seed: 13,
        provisioned_throughput_exceeded: 0.1,
        throttling: 0.1,
        internal_error: 0.1,
        service_unavailable: 0.1,
        dropped_connection: 0.05,
        operations: vec!["Scan".into(), "BatchGetItem".into()],
        ..FaultConfig::default()
    };
    let proxy = sc.proxy(faults).await;
    let endpoint = proxy.url();
    let (full, report) = deep_at(&sc, &endpoint, &mapping, &["--segments", "4"]).await;
    assert_eq!(full.code, 1, "{}", full.stderr);
    assert_eq!(summary(&diff_lines(&sc, &report)), tampered());
    let (all, sample) = deep_at(&sc, &endpoint, &mapping, &["--sample", "1"]).await;
    assert_eq!(all.code, 1, "{}", all.stderr);
    let without_extra: BTreeSet<_> = tampered().into_iter().filter(|l| l.0 != "extra").collect();
    assert_eq!(summary(&diff_lines(&sc, &sample)), without_extra);
    assert!(proxy.stats().faults() > 0, "faults were injected");
}

const STAMPED: &str = "
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO {schema}.orders SELECT o, o % 7 + 1,
  timestamptz '2024-01-01 00:00:00+00' + (CASE WHEN o = 1 THEN 30 ELSE o END) * interval '1 day'
  FROM generate_series(1, 30) o;
";

/// Two pointers carrying attributes: the newest order, and the latest day,
/// which orders 1 and 30 share (on different pages, so either may be the
/// one the run wrote).
const STAMPED_MAPPING: &str = pg_mapping!(
    "page_size = 7",
    r#"
[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "ORDER#{order_id:04}"
sk = "ORDER"

[[pointer]]
entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { createdAt = { column = "created_at", format = "rfc3339" }, customerId = { column = "customer_id" } }

[[pointer]]
entity = "order"
pk = "LATEST_DAY"
sk = "LATEST_DAY"
max = { attribute = "day", column = "created_at" }
attributes = { orderId = { column = "order_id" } }
"#
);

/// Issue 33, case 6: a pointer item whose value is right but whose carried
/// attributes are corrupted (one retyped to garbage, one removed), or which
/// holds an attribute the mapping does not put there, is a difference.
#[tokio::test(flavor = "multi_thread")]
async fn real_service_6_verify_deep_finds_a_corrupted_pointer() {
    let sc = Scenario::new("deep_ptr").postgres(STAMPED).start().await;
    let mapping = sc.mapping(STAMPED_MAPPING);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let items = sc.items().await;
    let last = items[&key("LAST_ORDER", "LAST_ORDER")].clone();
    assert_eq!(last["customerId"], n(3), "{last:?}");
    let latest = items[&key("LATEST_DAY", "LATEST_DAY")].clone();

    let (clean, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(report["pointers"].as_array().unwrap().len(), 2, "{report}");
    assert!(
        report["pointers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["ok"] == true),
        "{report}"
    );

    // The other order of the latest day is as right as the one written.
    let mut other = latest.clone();
    let written = latest["orderId"].clone();
    other.insert("orderId".into(), if written == n(1) { n(30) } else { n(1) });
    sc.put(&other).await;
    let mut corrupted = last.clone();
    corrupted.insert("createdAt".into(), s("garbage"));
    corrupted.remove("customerId");
    sc.put(&corrupted).await;

    let (dirty, report) = deep(&sc, &mapping, &[]).await;
    assert_eq!(dirty.code, 1, "{}\n{}", dirty.stdout, dirty.stderr);
    assert_eq!(report["differences"], 1, "{report}");
    let lines = diff_lines(&sc, &report);
    assert_eq!(
        summary(&lines),
        [line(
            "pointer",
            "LAST_ORDER",
            "LAST_ORDER",
            "LAST_ORDER",
            &["createdAt", "customerId"]
        )]
        .into_iter()
        .collect()
    );
    let attrs = &lines[0]["attributes"];
    assert_eq!(attrs[0]["expected"], last["createdAt"].to_dynamo_json());
    assert_eq!(attrs[0]["actual"], json!({"S": "garbage"}));
    assert_eq!(attrs[1]["expected"], json!({"N": "3"}));
    assert_eq!(attrs[1]["actual"], Json::Null);
    assert_eq!(counts(&report, "order"), [30, 30, 30, 0, 0, 0, 0]);

    // On the terminal: not verified, both attributes named.
    let text = sc
        .sql2ddb(&["verify", &mapping, "--deep", "--endpoint", &sc.dynamo.url])
        .await;
    assert_eq!(text.code, 1, "{}", text.stderr);
    assert!(
        !text.stdout.contains("verified: every item"),
        "{}",
        text.stdout
    );
    for name in ["createdAt", "customerId"] {
        assert!(text.stdout.contains(name), "{name}: {}", text.stdout);
    }

    // A number written as text, and an attribute the mapping does not put there.
    let mut retyped = last.clone();
    retyped.insert("customerId".into(), s("3"));
    retyped.insert("note".into(), s("hand-edited"));
    sc.put(&retyped).await;
    let (again, report) = deep(&sc, &mapping, &["--sample", "1"]).await;
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert_eq!(
        summary(&diff_lines(&sc, &report)),
        [line(
            "pointer",
            "LAST_ORDER",
            "LAST_ORDER",
            "LAST_ORDER",
            &["customerId", "note"]
        )]
        .into_iter()
        .collect()
    );

    sc.put(&last).await;
    let (restored, _) = deep(&sc, &mapping, &[]).await;
    assert_eq!(restored.code, 0, "{}\n{}", restored.stdout, restored.stderr);
}
