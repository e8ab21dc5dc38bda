//! End to end, the README's example: the bundled SQLite shop
//! (examples/shop.db) migrated with mappings/shop.toml. Every item is compared
//! with the mapping of its row, computed here from the database itself.

use chrono::NaiveDateTime;
use sql2ddb_core::{AttrValue, Item};
use sqlx::Row;

use crate::common::*;

fn json_to_attr(v: &serde_json::Value) -> AttrValue {
    match v {
        serde_json::Value::Null => AttrValue::Null,
        serde_json::Value::Bool(b) => AttrValue::Bool(*b),
        serde_json::Value::Number(x) => n(x.to_string()),
        serde_json::Value::String(x) => s(x.clone()),
        serde_json::Value::Array(a) => AttrValue::L(a.iter().map(json_to_attr).collect()),
        serde_json::Value::Object(o) => AttrValue::M(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_attr(v)))
                .collect(),
        ),
    }
}

/// SQLite's `datetime()` text as the item carries it: RFC 3339, UTC.
fn ts(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
}

fn rfc3339(text: &str) -> AttrValue {
    s(ts(text).format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

fn float(x: f64) -> AttrValue {
    n(format!("{x}"))
}

fn put(item: &mut Item, k: &str, v: AttrValue) {
    item.insert(k.to_string(), v);
}

// Long on purpose: the expected items of four tables, read back from the file.
async fn expected(db: &sqlx::SqlitePool) -> Vec<Item> {
    let mut all = Vec::new();
    for r in sqlx::query(
        "SELECT customer_id, email, name, created_at, vip, country, prefs FROM customers",
    )
    .fetch_all(db)
    .await
    .unwrap()
    {
        let id: i64 = r.get(0);
        let created: String = r.get(3);
        let mut it = Item::new();
        put(&mut it, "PK", s(format!("CUSTOMER#{id}")));
        put(&mut it, "SK", s("PROFILE"));
        put(&mut it, "entity", s("customer"));
        put(&mut it, "code", s(format!("C-{id:08}")));
        put(&mut it, "signup", n(ts(&created).and_utc().timestamp()));
        put(
            &mut it,
            "GSI1PK",
            s(format!("EMAIL#{}", r.get::<String, _>(1))),
        );
        put(&mut it, "GSI1SK", s("CUSTOMER"));
        put(&mut it, "customer_id", n(id));
        put(&mut it, "email", s(r.get::<String, _>(1)));
        put(&mut it, "name", s(r.get::<String, _>(2)));
        put(&mut it, "created_at", rfc3339(&created));
        put(&mut it, "vip", AttrValue::Bool(r.get::<i64, _>(4) == 1));
        if let Some(c) = r.get::<Option<String>, _>(5) {
            put(&mut it, "country", s(c));
        }
        if let Some(p) = r.get::<Option<String>, _>(6) {
            put(
                &mut it,
                "prefs",
                json_to_attr(&serde_json::from_str(&p).unwrap()),
            );
        }
        all.push(it);
    }
    for r in sqlx::query("SELECT sku, title, price, weight_kg, thumbnail FROM products")
        .fetch_all(db)
        .await
        .unwrap()
    {
        let sku: String = r.get(0);
        let mut it = Item::new();
        put(&mut it, "PK", s(format!("PRODUCT#{sku}")));
        put(&mut it, "SK", s("PRODUCT"));
        put(&mut it, "entity", s("product"));
        put(&mut it, "sku", s(sku));
        put(&mut it, "title", s(r.get::<String, _>(1)));
        put(&mut it, "price", float(r.get(2)));
        if let Some(w) = r.get::<Option<f64>, _>(3) {
            put(&mut it, "weight_kg", float(w));
        }
        if let Some(b) = r.get::<Option<Vec<u8>>, _>(4) {
            put(&mut it, "thumbnail", AttrValue::B(b));
        }
        all.push(it);
    }
    // Order lines are embedded in their order, in line_no order.
    let mut lines: std::collections::BTreeMap<i64, Vec<AttrValue>> = Default::default();
    for r in sqlx::query(
        "SELECT order_id, line_no, sku, qty, price FROM order_lines ORDER BY order_id, line_no",
    )
    .fetch_all(db)
    .await
    .unwrap()
    {
        let mut line = Item::new();
        put(&mut line, "line_no", n(r.get::<i64, _>(1)));
        put(&mut line, "sku", s(r.get::<String, _>(2)));
        put(&mut line, "qty", n(r.get::<i64, _>(3)));
        put(&mut line, "price", float(r.get(4)));
        lines.entry(r.get(0)).or_default().push(AttrValue::M(line));
    }
    let mut last: Option<Item> = None;
    for r in sqlx::query(
        "SELECT order_id, customer_id, created_at, status, total FROM orders ORDER BY order_id",
    )
    .fetch_all(db)
    .await
    .unwrap()
    {
        let id: i64 = r.get(0);
        let customer: i64 = r.get(1);
        let created: String = r.get(2);
        let status: String = r.get(3);
        let mut it = Item::new();
        put(&mut it, "PK", s(format!("CUSTOMER#{customer}")));
        put(&mut it, "SK", s(format!("ORDER#{id:010}")));
        put(&mut it, "entity", s("order"));
        put(&mut it, "GSI1PK", s(format!("STATUS#{status}")));
        let rfc = ts(&created).format("%Y-%m-%dT%H:%M:%SZ").to_string();
        put(&mut it, "GSI1SK", s(format!("{rfc}#{id:010}")));
        put(&mut it, "order_id", n(id));
        put(&mut it, "customer_id", n(customer));
        put(&mut it, "created_at", rfc3339(&created));
        put(&mut it, "status", s(status));
        put(&mut it, "total", float(r.get(4)));
        put(
            &mut it,
            "lines",
            AttrValue::L(lines.remove(&id).unwrap_or_default()),
        );
        all.push(it);
        let mut pointer = Item::new();
        put(&mut pointer, "PK", s("LAST_ORDER"));
        put(&mut pointer, "SK", s("LAST_ORDER"));
        put(&mut pointer, "orderId", n(id));
        put(&mut pointer, "createdAt", rfc3339(&created));
        put(&mut pointer, "customerId", n(customer));
        last = Some(pointer);
    }
    // The pointer holds the newest order.
    all.push(last.expect("orders exist"));
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_example_migrates_exactly() {
    let root = root();
    let db_path = root.join("examples/shop.db");
    let db = sqlx::sqlite::SqlitePoolOptions::new()
        .connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&db_path)
                .read_only(true),
        )
        .await
        .unwrap();
    let want = expected(&db).await;
    db.close().await;
    assert_eq!(want.len(), 500 + 50 + 2000 + 1);

    let sc = Scenario::new("shop").start().await;
    // The mapping names table "shop" on the embedded endpoint; the test points
    // the same file at its own server and table through a copy.
    let text = std::fs::read_to_string(root.join("mappings/shop.toml"))
        .unwrap()
        .replace("table = \"shop\"", &format!("table = \"{}\"", sc.table));
    let mapping = sc.path().join("shop.toml");
    std::fs::write(&mapping, text).unwrap();

    let run = sql2ddb(
        &root,
        &[
            "run",
            mapping.to_str().unwrap(),
            "--endpoint",
            &sc.dynamo.url,
            "--runs-dir",
            sc.path().to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    for (name, rows) in [("customer", 500), ("product", 50), ("order", 2000)] {
        let e = run.entity(name);
        assert_eq!(e["rows_read"], rows, "{name}");
        assert_eq!(e["items_written"], rows, "{name}");
        assert_eq!(e["rejected"], 0, "{name}");
    }
    // The human report goes to stderr, as a table with totals.
    assert!(run.stderr.contains("total"), "{}", run.stderr);
    assert!(run.stderr.contains("2,550"), "{}", run.stderr);
    let report = run.report();
    let pointer = &report["pointers"][0];
    assert_eq!(pointer["name"], "LAST_ORDER");
    assert_eq!(pointer["value"], serde_json::json!({ "N": "2000" }));

    let items = sc.items().await;
    assert_eq!(items.len(), want.len());
    assert_items(&items, &want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_embedded_defaults_and_again() {
    // Exactly the README's first command, on the mapping's own settings:
    // embedded local endpoint, data file under the run directory. Run
    // twice in a row, as people do: each run has a table of its own, in
    // its own directory, so the second is not refused as a second load.
    let root = root();
    let runs = tempfile::tempdir().unwrap();
    let mut data_files = Vec::new();
    for _ in 0..2 {
        let run = sql2ddb(
            &root,
            &[
                "run",
                "mappings/shop.toml",
                "--runs-dir",
                runs.path().to_str().unwrap(),
                "--json",
            ],
        )
        .await;
        assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
        let report = run.report();
        assert_eq!(report["endpoint"], "local");
        assert_eq!(report["table_created"], true);
        assert_eq!(report["totals"]["items_written"], 2550);
        let data = report["local_data_file"].as_str().unwrap().to_string();
        assert!(
            std::path::Path::new(&data).starts_with(runs.path()),
            "{data}"
        );
        assert!(std::path::Path::new(&data).exists());
        assert!(run.stderr.contains(&data), "the report names the data file");
        data_files.push(data);
    }
    assert_ne!(data_files[0], data_files[1], "each run its own table");
}
