//! `sql2ddb get MAPPING ENTITY KEY=VALUE…`: after a run, a row's item (its
//! embedded child rows included) is shown equal to the table's; once an
//! attribute is changed in the table, `get` names it with both values and
//! exits 1; a deleted item is "missing in the table"; a key no row has is
//! said to be not in the source; a wrong key column is refused naming the
//! entity's key columns; a row the mapping rejects is said so with the
//! reason; `--endpoint local` reads the data a run kept.

use serde_json::json;
use sql2ddb_testkit::sdk::types::AttributeValue as Sdk;

use crate::common::*;

const FIXTURE: &str = "
CREATE TABLE {schema}.orders (order_id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, total numeric(10,2) NOT NULL);
INSERT INTO {schema}.orders SELECT o, o % 5 + 1, 'new', o * 10 FROM generate_series(1, 6) o;
CREATE TABLE {schema}.order_lines (order_id int NOT NULL, line_no int NOT NULL, sku text NOT NULL, PRIMARY KEY (order_id, line_no));
INSERT INTO {schema}.order_lines SELECT o, l, 'SKU-' || (o + l) FROM generate_series(1, 6) o, generate_series(1, 2) l;
";

const MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUST#{customer_id:04}"
sk = "ORDER#{order_id:04}"

[[entity.embed]]
name = "lines"
from = "SCHEMA.order_lines"
parent_key = ["order_id"]
order_by = ["line_no"]
exclude = ["order_id"]
"#
);

/// The one item of a `get --json` report.
fn only_item(report: &serde_json::Value) -> &serde_json::Value {
    let items = report["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{report}");
    &items[0]
}

fn attribute<'a>(item: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    item["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no attribute {name} in {item}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn get_explains_one_row_beside_the_table() {
    let sc = Scenario::new("get").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let url = sc.dynamo.url.clone();
    let get = |extra: Vec<&'static str>| {
        let (sc, mapping, url) = (&sc, mapping.clone(), url.clone());
        async move {
            let mut args = vec!["get", mapping.as_str(), "order"];
            args.extend(extra);
            args.extend(["--endpoint", url.as_str()]);
            sc.sql2ddb(&args).await
        }
    };

    // Equal: every attribute shown, the embedded lines included.
    let equal = get(vec!["order_id=3"]).await;
    assert_eq!(equal.code, 0, "{}\n{}", equal.stdout, equal.stderr);
    assert!(equal.stdout.contains("CUST#0004"), "{}", equal.stdout);
    assert!(equal.stdout.contains(": equal"), "{}", equal.stdout);
    for name in ["status", "total", "lines"] {
        assert!(equal.stdout.contains(name), "{name}: {}", equal.stdout);
    }
    assert!(equal.stdout.contains("SKU-4"), "{}", equal.stdout);
    let report = get(vec!["order_id=3", "--json"]).await.report();
    let item = only_item(&report);
    assert_eq!(item["missing"], false);
    assert_eq!(
        item["key"],
        json!({"PK": {"S": "CUST#0004"}, "SK": {"S": "ORDER#0003"}})
    );
    assert_eq!(attribute(item, "total")["expected"], json!({"N": "30"}));
    assert_eq!(attribute(item, "lines")["differs"], false);

    // An attribute changed in the table: named, with both values.
    sc.dynamo
        .client
        .update_item()
        .table_name(&sc.table)
        .key("PK", Sdk::S("CUST#0004".into()))
        .key("SK", Sdk::S("ORDER#0003".into()))
        .update_expression("SET #s = :v")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":v", Sdk::S("shipped".into()))
        .send()
        .await
        .unwrap();
    let differs = get(vec!["order_id=3"]).await;
    assert_eq!(differs.code, 1, "{}\n{}", differs.stdout, differs.stderr);
    assert!(
        differs.stdout.contains("differs in status"),
        "{}",
        differs.stdout
    );
    let status_line = differs
        .stdout
        .lines()
        .find(|l| l.contains("status") && l.contains('≠'))
        .unwrap_or_else(|| panic!("no marked status line:\n{}", differs.stdout));
    assert!(
        status_line.contains("\"new\"") && status_line.contains("\"shipped\""),
        "{status_line}"
    );
    let report = get(vec!["order_id=3", "--json"]).await.report();
    let status = attribute(only_item(&report), "status").clone();
    assert_eq!(status["expected"], json!({"S": "new"}));
    assert_eq!(status["actual"], json!({"S": "shipped"}));
    assert_eq!(status["differs"], true);
    assert_eq!(attribute(only_item(&report), "total")["differs"], false);

    // The item deleted from the table: missing.
    sc.dynamo
        .client
        .delete_item()
        .table_name(&sc.table)
        .key("PK", Sdk::S("CUST#0002".into()))
        .key("SK", Sdk::S("ORDER#0001".into()))
        .send()
        .await
        .unwrap();
    let missing = get(vec!["order_id=1"]).await;
    assert_eq!(missing.code, 1, "{}\n{}", missing.stdout, missing.stderr);
    assert!(
        missing.stdout.contains("missing in the table"),
        "{}",
        missing.stdout
    );

    // No such row in the source.
    let absent = get(vec!["order_id=999"]).await;
    assert_eq!(absent.code, 1, "{}\n{}", absent.stdout, absent.stderr);
    assert!(
        absent.stdout.contains("not in the source"),
        "{}",
        absent.stdout
    );
    let report = get(vec!["order_id=999", "--json"]).await.report();
    assert_eq!(report["outcome"], "not_in_source");

    // A row the mapping rejects (no customer for its key): the reason.
    sc.pg()
        .exec("ALTER TABLE {schema}.orders ALTER customer_id DROP NOT NULL; INSERT INTO {schema}.orders VALUES (7, NULL, 'new', 70)")
        .await;
    let rejected = get(vec!["order_id=7"]).await;
    assert_eq!(rejected.code, 1, "{}\n{}", rejected.stdout, rejected.stderr);
    assert!(
        rejected.stdout.contains("rejected by the mapping"),
        "{}",
        rejected.stdout
    );
    assert!(
        rejected.stdout.contains("customer_id"),
        "{}",
        rejected.stdout
    );

    // Only the run's directory and the rejected row's are left.
    let dirs = std::fs::read_dir(sc.path().join("sql2ddb-runs"))
        .unwrap()
        .count();
    assert_eq!(dirs, 2, "every other `get` leaves no directory behind");

    // A column that is not the key, or none of the key: the key is named.
    for wrong in [vec!["customer_id=4"], vec!["order_id=3", "status=new"]] {
        let bad = get(wrong).await;
        assert_eq!(bad.code, EX_CONFIG, "{}\n{}", bad.stdout, bad.stderr);
        assert!(
            bad.stderr.contains("keyed by order_id") && bad.stderr.contains("order_id=VALUE"),
            "{}",
            bad.stderr
        );
    }
    // Not KEY=VALUE at all: a usage error.
    let usage = get(vec!["3"]).await;
    assert_eq!(usage.code, 64, "{}", usage.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn get_reads_the_data_a_local_run_kept() {
    let sc = Scenario::new("get_local").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(MAPPING);
    let run = sc
        .sql2ddb(&["run", &mapping, "--endpoint", "local", "--json", "--quiet"])
        .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let got = sc
        .sql2ddb(&[
            "get",
            &mapping,
            "order",
            "order_id=2",
            "--endpoint",
            "local",
        ])
        .await;
    assert_eq!(got.code, 0, "{}\n{}", got.stdout, got.stderr);
    assert!(
        got.stdout.contains("ORDER#0002: equal") || got.stdout.contains(": equal"),
        "{}",
        got.stdout
    );
}
