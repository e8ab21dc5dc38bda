//! Single-table design end to end: child rows nested into their parents (two
//! levels), GSIs created from the mapping and queried, a pointer item under
//! concurrent writers and replays, a table whose keys differ stopping the run
//! before any write, and `check` flagging keys that can collide.

use sql2ddb_core::{AttrValue, Item};
use sql2ddb_testkit::sdk::types::AttributeValue as Sdk;

use crate::common::*;

/// Eight pages of 500 orders in four segments (about 100,000 line rows).
const ORDERS: i64 = 4_000;
/// An order whose lines push it over 400 KB.
const BIG: i64 = 3_977;

const FIXTURE: &str = "
CREATE TABLE {schema}.orders (order_id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL);
INSERT INTO {schema}.orders SELECT o, o % 300 + 1, (ARRAY['new','paid','sent'])[o % 3 + 1] FROM generate_series(1, 4000) o;
CREATE TABLE {schema}.order_lines (order_id bigint NOT NULL, line_no int NOT NULL, sku text NOT NULL, qty int NOT NULL,
  price numeric(10,2) NOT NULL, note text, PRIMARY KEY (order_id, line_no));
INSERT INTO {schema}.order_lines
  SELECT o, l, 'SKU-' || ((o * 7 + l) % 100), (o + l) % 9 + 1, ((o * l) % 1000) / 100.0,
         CASE WHEN o = 3977 THEN repeat('x', 9000) END
  FROM generate_series(1, 4000) o, generate_series(1, 50) l WHERE l <= o % 51;
CREATE TABLE {schema}.line_notes (order_id bigint NOT NULL, line_no int NOT NULL, note_no int NOT NULL, body text NOT NULL,
  PRIMARY KEY (order_id, line_no, note_no));
INSERT INTO {schema}.line_notes
  SELECT order_id, line_no, n, 'note ' || n || ' of ' || order_id || '/' || line_no
  FROM {schema}.order_lines, generate_series(1, 2) n WHERE order_id <= 100;
";

const GSIS: &str = r#"[[target.gsi]]
name = "by_customer"
pk = { name = "GSI1PK", type = "S" }
sk = { name = "GSI1SK", type = "S" }
[[target.gsi]]
name = "by_status"
pk = { name = "GSI2PK", type = "S" }
sk = { name = "GSI2SK", type = "N" }
projection = "keys_only""#;

const GSI_ATTRIBUTES: &str = r#"GSI1PK = "CUST#{customer_id}"
GSI1SK = "{order_id:06}"
GSI2PK = "STATUS#{status}"
GSI2SK = "{order_id}""#;

/// The mapping, with or without the two GSIs.
fn mapping(gsis: bool) -> String {
    MAPPING
        .replace("GSIS", if gsis { GSIS } else { "" })
        .replace("GSI_ATTRIBUTES", if gsis { GSI_ATTRIBUTES } else { "" })
}

const MAPPING: &str = pg_mapping!(
    "page_size = 500\nread_parallelism = 4",
    r#"GSIS
[writer]
concurrency = 8

[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "ORDER#{order_id:06}"
sk = "ORDER"
[entity.attributes]
GSI_ATTRIBUTES

[[entity.embed]]
name = "lines"
from = "SCHEMA.order_lines"
parent_key = ["order_id"]
order_by = ["line_no"]
exclude = ["order_id"]

[[entity.embed.embed]]
name = "notes"
from = "SCHEMA.line_notes"
parent_key = ["order_id", "line_no"]
order_by = ["note_no"]
exclude = ["order_id", "line_no"]

[[pointer]]
entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { customer = "{customer_id}" }
"#
);

fn expected_order(o: i64, gsis: bool) -> Item {
    let lines = (1..=o % 51)
        .map(|l| {
            let notes = if o <= 100 {
                (1..=2)
                    .map(|k| {
                        let mut note = Item::new();
                        note.insert("note_no".into(), n(k));
                        note.insert("body".into(), s(format!("note {k} of {o}/{l}")));
                        AttrValue::M(note)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let mut line = Item::new();
            line.insert("line_no".into(), n(l));
            line.insert("sku".into(), s(format!("SKU-{}", (o * 7 + l) % 100)));
            line.insert("qty".into(), n((o + l) % 9 + 1));
            line.insert("price".into(), n(decimal((o * l) % 1000, 2)));
            line.insert("notes".into(), AttrValue::L(notes));
            AttrValue::M(line)
        })
        .collect();
    let status = ["new", "paid", "sent"][(o % 3) as usize];
    let mut it = Item::new();
    it.insert("PK".into(), s(format!("ORDER#{o:06}")));
    it.insert("SK".into(), s("ORDER"));
    it.insert("order_id".into(), n(o));
    it.insert("customer_id".into(), n(o % 300 + 1));
    it.insert("status".into(), s(status));
    if gsis {
        it.insert("GSI1PK".into(), s(format!("CUST#{}", o % 300 + 1)));
        it.insert("GSI1SK".into(), s(format!("{o:06}")));
        it.insert("GSI2PK".into(), s(format!("STATUS#{status}")));
        it.insert("GSI2SK".into(), n(o));
    }
    it.insert("lines".into(), AttrValue::L(lines));
    it
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_children_and_a_pointer_under_concurrent_writers() {
    let sc = Scenario::new("single").postgres(FIXTURE).start().await;
    let mapping = sc.mapping(&mapping(false));

    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(
        run.code, 2,
        "one order is rejected; stderr:\n{}",
        run.stderr
    );
    let report = run.report();
    let e = run.entity("order");
    assert_eq!(e["rows_read"], ORDERS);
    assert_eq!(e["items_written"], ORDERS - 1);
    assert_eq!(e["rejected"], 1);
    assert_eq!(e["segments"], 4);
    let pages = e["pages"].as_u64().unwrap();

    // The order over 400 KB is rejected whole, with the reason and the child count.
    let rejects = rejects_of(sc.path(), &report);
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0]["key"]["order_id"], BIG);
    let reason = rejects[0]["reason"].as_str().unwrap();
    assert!(reason.contains("400 KB"), "{reason}");
    assert!(
        reason.contains("embed lines holds 50 child rows"),
        "{reason}"
    );

    // Every other order carries exactly its lines (and their notes), in order.
    let items = sc.items().await;
    assert_eq!(
        items.len(),
        ORDERS as usize - 1 + 1,
        "orders plus the pointer item"
    );
    for o in (1..=ORDERS).filter(|o| *o != BIG) {
        let want = expected_order(o, false);
        let key = (format!("ORDER#{o:06}"), "ORDER".to_string());
        let got = items
            .get(&key)
            .unwrap_or_else(|| panic!("order {o} missing"));
        assert_item(&key, got, &want);
    }
    assert!(!items.contains_key(&(format!("ORDER#{BIG:06}"), "ORDER".to_string())));

    // The pointer ends at the true max with its row's attributes, after at
    // most one conditional write per batch.
    let pointer = &items[&("LAST_ORDER".to_string(), "LAST_ORDER".to_string())];
    assert_eq!(pointer["orderId"], n(ORDERS));
    assert_eq!(pointer["customer"], n(ORDERS % 300 + 1));
    let p = &report["pointers"][0];
    assert_eq!(p["value"], serde_json::json!({ "N": ORDERS.to_string() }));
    let writes = p["moved"].as_u64().unwrap() + p["already_newer"].as_u64().unwrap();
    assert!(
        writes <= pages,
        "{writes} pointer writes for {pages} batches"
    );

    // Replaying the whole run leaves the pointer where it is: no write moves it.
    let again = sc
        .run(&mapping, &["--if-not-empty", "append", "--json", "--quiet"])
        .await;
    assert_eq!(again.code, 2, "{}", again.stderr);
    let p = &again.report()["pointers"][0];
    assert_eq!(p["moved"], 0, "{p}");
    assert!(p["already_newer"].as_u64().unwrap() > 0);
    assert_eq!(p["value"], serde_json::json!({ "N": ORDERS.to_string() }));
    let items = sc.items().await;
    assert_eq!(
        items[&("LAST_ORDER".to_string(), "LAST_ORDER".to_string())]["orderId"],
        n(ORDERS)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_two_gsis_is_created_and_queried_through_each() {
    // The same fixture, cut to 600 orders (the GSIs are what this test is about).
    let sc = Scenario::new("gsis")
        .postgres(&FIXTURE.replace("generate_series(1, 4000) o", "generate_series(1, 600) o"))
        .start()
        .await;
    let mapping = sc.mapping(&mapping(true));
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.report()["table_created"], true);
    const ORDERS: i64 = 600;
    let items = sc.items().await;
    for o in 1..=ORDERS {
        let key = (format!("ORDER#{o:06}"), "ORDER".to_string());
        assert_item(&key, &items[&key], &expected_order(o, true));
    }
    // Both GSIs exist and answer queries.
    let by_customer = sc
        .dynamo
        .client
        .query()
        .table_name(&sc.table)
        .index_name("by_customer")
        .key_condition_expression("GSI1PK = :c")
        .expression_attribute_values(":c", Sdk::S("CUST#7".into()))
        .send()
        .await
        .unwrap();
    let want: Vec<i64> = (1..=ORDERS).filter(|o| o % 300 + 1 == 7).collect();
    let got: Vec<i64> = by_customer
        .items()
        .iter()
        .map(|i| i["order_id"].as_n().unwrap().parse().unwrap())
        .collect();
    assert_eq!(got, want, "by_customer, in GSI1SK order");
    let by_status = sc
        .dynamo
        .client
        .query()
        .table_name(&sc.table)
        .index_name("by_status")
        .key_condition_expression("GSI2PK = :s AND GSI2SK BETWEEN :a AND :b")
        .expression_attribute_values(":s", Sdk::S("STATUS#paid".into()))
        .expression_attribute_values(":a", Sdk::N("100".into()))
        .expression_attribute_values(":b", Sdk::N("130".into()))
        .send()
        .await
        .unwrap();
    let got: Vec<i64> = by_status
        .items()
        .iter()
        .map(|i| i["GSI2SK"].as_n().unwrap().parse().unwrap())
        .collect();
    assert_eq!(got, (100..=130).filter(|o| o % 3 == 1).collect::<Vec<_>>());
    assert!(
        by_status.items().iter().all(|i| !i.contains_key("lines")),
        "keys_only projection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_table_with_other_keys_stops_the_run_before_any_write() {
    let sc = Scenario::new("mismatch")
        .postgres("CREATE TABLE {schema}.orders (order_id bigint PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL); INSERT INTO {schema}.orders VALUES (1, 1, 'new');")
        .start()
        .await;
    // The table exists with a numeric partition key and no sort key.
    sc.dynamo
        .client
        .create_table()
        .table_name(&sc.table)
        .billing_mode(sql2ddb_testkit::sdk::types::BillingMode::PayPerRequest)
        .key_schema(
            sql2ddb_testkit::sdk::types::KeySchemaElement::builder()
                .attribute_name("PK")
                .key_type(sql2ddb_testkit::sdk::types::KeyType::Hash)
                .build()
                .unwrap(),
        )
        .attribute_definitions(
            sql2ddb_testkit::sdk::types::AttributeDefinition::builder()
                .attribute_name("PK")
                .attribute_type(sql2ddb_testkit::sdk::types::ScalarAttributeType::N)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let mapping = sc.mapping(pg_mapping!(
        r#"[[entity]]
name = "order"
from = "SCHEMA.orders"
pk = "ORDER#{order_id}"
sk = "ORDER"
"#
    ));
    let run = sc.run(&mapping, &[]).await;
    assert_eq!(run.code, EX_CONFIG, "{}", run.stderr);
    assert!(run.stderr.contains("key schema"), "{}", run.stderr);
    assert!(sc.items().await.is_empty(), "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_flags_keys_that_can_collide() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = write_mapping(
        dir.path(),
        r#"version = 1
[source]
url = "postgres://root@127.0.0.1:5432/test"
[target]
table = "shop"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }

[[entity]]
name = "customer"
from = "customers"
key = ["customer_id"]
pk = "CUSTOMER#{country}"
sk = "PROFILE"

[[entity]]
name = "order"
from = "orders"
pk = "CUSTOMER#{customer_id}"
sk = "ORDER#{order_id:010}"

[[entity]]
name = "vip"
from = "vips"
pk = "CUSTOMER#{customer_id}"
sk = "PROFILE"
"#,
    );
    let run = sql2ddb(dir.path(), &["check", &mapping]).await;
    assert_eq!(run.code, 2, "valid, with warnings: {}", run.stderr);
    // customer's keys leave out its unique key (line 12's template on line 13).
    assert!(run.stderr.contains("mapping.toml:13:"), "{}", run.stderr);
    assert!(run.stderr.contains("customer_id"), "{}", run.stderr);
    // customer and vip can both produce CUSTOMER#…/PROFILE; order cannot.
    let collision: Vec<&str> = run.stderr.lines().filter(|l| l.contains("vip")).collect();
    assert!(
        !collision.is_empty() && collision.iter().any(|l| l.contains("customer")),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr
            .lines()
            .any(|l| l.contains("order") && l.contains("vip")),
        "{}",
        run.stderr
    );
}
