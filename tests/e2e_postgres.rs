//! End to end, PostgreSQL → DynamoDB: 60,000 rows of every supported type in
//! three tables (one with a composite key) are migrated by the built binary;
//! every item is compared, attribute by attribute, with the mapping of its
//! row computed here independently, and the JSON report's counts are checked.

use chrono::{Duration, NaiveDate, NaiveDateTime};
use sql2ddb_core::{AttrValue, Item};

use crate::common::*;

const ROWS: i64 = 20_000;

fn rfc3339(ts: NaiveDateTime) -> String {
    ts.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string()
}

// Long on purpose: one attribute per PostgreSQL type.
fn expected_customer(i: i64) -> Item {
    let created = NaiveDate::from_ymd_opt(2020, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        + Duration::minutes(i);
    let updated = NaiveDate::from_ymd_opt(2019, 12, 31)
        .unwrap()
        .and_hms_opt(22, 0, 0)
        .unwrap()
        + Duration::seconds(i)
        + Duration::milliseconds(i % 1000);
    let wake = i % 86400;
    let mut it = item(vec![
        ("PK", s(format!("CUSTOMER#{i}"))),
        ("SK", s("PROFILE")),
        ("entity", s("customer")),
        ("ref", s(format!("C-{i:08}"))),
        ("signup", n(created.and_utc().timestamp())),
        (
            "balance_text",
            s(format!("{}.{:02}", i * 125 / 100, i * 125 % 100)),
        ),
        ("id", n(i)),
        ("email", s(format!("user{i}@example.com"))),
        ("name", s(format!("Name {i}"))),
        ("code", s(format!("{:03}   ", i % 1000))),
        ("active", AttrValue::Bool(i % 2 == 0)),
        ("balance", n(decimal(i * 125, 2))),
        ("score", n(format!("{}", (i % 100) as f32 / 10.0))),
        ("ratio", n(format!("{}", i as f64 / 7.0))),
        ("avatar", AttrValue::B((i as u32).to_be_bytes().to_vec())),
        (
            "birthday",
            s(
                (NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + Duration::days(i % 20000))
                    .to_string(),
            ),
        ),
        (
            "wake_at",
            s(format!(
                "{:02}:{:02}:{:02}",
                wake / 3600,
                wake / 60 % 60,
                wake % 60
            )),
        ),
        ("created_at", s(rfc3339(created))),
        ("updated_at", s(rfc3339(updated))),
        ("uid", s(format!("00000000-0000-0000-0000-{i:012x}"))),
        (
            "prefs",
            AttrValue::M(item(vec![
                ("n", n(i)),
                ("big", n("123456789012345678901234567890.5")),
                ("name", s(format!("x{i}"))),
                (
                    "nested",
                    AttrValue::M(item(vec![
                        ("ok", AttrValue::Bool(i % 2 == 0)),
                        ("list", AttrValue::L(vec![n(1), s("two"), AttrValue::Null])),
                    ])),
                ),
            ])),
        ),
        (
            "tags",
            AttrValue::L(vec![
                s(format!("t{}", i % 5)),
                if i % 7 == 0 { AttrValue::Null } else { s("u") },
            ]),
        ),
        ("lucky", AttrValue::L(vec![n(i), n(i * 2)])),
        ("tier", s(["bronze", "silver", "gold"][(i % 3) as usize])),
        ("small", n(i % 30000)),
        ("delta", n(i * 3 - 50000)),
    ]);
    if i % 4 != 0 {
        it.insert("country".into(), s(format!("C{}", i % 4)));
    }
    it
}

fn expected_order(i: i64) -> Item {
    let placed = NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_opt(12, 0, 0)
        .unwrap()
        + Duration::seconds(90 * i);
    let customer = 1 + (i * 31) % 20000;
    let mut it = item(vec![
        ("PK", s(format!("CUSTOMER#{customer}"))),
        ("SK", s(format!("ORDER#{:010}", 3 * i))),
        ("entity", s("order")),
        ("order_id", n(3 * i)),
        ("customer_id", n(customer)),
        ("total", n(decimal(i * 10007 % 1_000_000, 2))),
        ("placed_at", s(rfc3339(placed))),
    ]);
    if i % 2 == 0 {
        it.insert("meta".into(), AttrValue::L(vec![n(i), s("x")]));
    }
    it
}

fn expected_line(i: i64) -> Item {
    let order_id = ((i - 1) / 4 + 1) * 3;
    let line_no = (i - 1) % 4 + 1;
    item(vec![
        ("PK", s(format!("ORDER#{order_id:010}"))),
        ("SK", s(format!("LINE#{line_no:03}"))),
        ("entity", s("line")),
        ("order_id", n(order_id)),
        ("line_no", n(line_no)),
        ("sku", s(format!("SKU-{}", i % 97))),
        ("qty", n(i % 9 + 1)),
    ])
}

const MAPPING: &str = pg_mapping!(
    "page_size = 2000",
    r#"
[[entity]]
name = "customer"
from = "SCHEMA.customers"
pk = "CUSTOMER#{id}"
sk = "PROFILE"
exclude = ["secret"]
[entity.attributes]
entity = "customer"
ref = "C-{id:08}"
signup = { column = "created_at", format = "epoch_seconds" }
balance_text = { column = "balance", numeric_as = "string" }

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "CUSTOMER#{customer_id}"
sk = "ORDER#{order_id:010}"
[entity.attributes]
entity = "order"

[[entity]]
name = "line"
from = "SCHEMA.order_lines"
pk = "ORDER#{order_id:010}"
sk = "LINE#{line_no:03}"
[entity.attributes]
entity = "line"
"#
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_every_type_arrives_as_mapped() {
    let sc = Scenario::new("e2e_pg")
        .postgres(include_str!("fixtures/pg_shop.sql"))
        .start()
        .await;
    let mapping = sc.mapping(MAPPING);

    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);

    let report = run.report();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["table_created"], true);
    for name in ["customer", "order", "line"] {
        let e = run.entity(name);
        assert_eq!(e["rows_read"], ROWS, "{name}");
        assert_eq!(e["items_written"], ROWS, "{name}");
        assert_eq!(e["rejected"], 0, "{name}");
        assert_eq!(e["pages"], ROWS / 2000, "{name}");
        assert!(e["bytes"].as_u64().unwrap() > 0);
        assert!(e["write_units"].as_u64().unwrap() >= ROWS as u64);
    }
    assert_eq!(report["totals"]["rows_read"], 3 * ROWS);
    assert_eq!(report["totals"]["items_written"], 3 * ROWS);
    assert!(
        report["rejects_file"].is_null(),
        "nothing rejected: no rejects file named, {}",
        report["rejects_file"]
    );

    let items = sc.items().await;
    assert_eq!(items.len(), 3 * ROWS as usize);
    let mut expected = Vec::new();
    for i in 1..=ROWS {
        expected.push(expected_customer(i));
        expected.push(expected_order(i));
        expected.push(expected_line(i));
    }
    assert_items(&items, &expected);
}
