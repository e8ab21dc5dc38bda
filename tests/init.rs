//! `sql2ddb init`: the example shop's schema, in SQLite, PostgreSQL and
//! MariaDB, becomes a mapping that passes `check` and whose `run` migrates
//! every row; with `--single-table` orders go into their customer's item
//! collection and order lines are embedded in their order; columns that
//! need a setting get it; a password in `--source` is never printed.

use std::collections::BTreeMap;

use sql2ddb_core::AttrValue;

use crate::common::*;

/// Runs the binary with DATABASE_URL set to `url`.
async fn with_url(sc: &Scenario, url: &str, args: &[&str]) -> Run {
    let out = command(sc.path(), args)
        .env("DATABASE_URL", url)
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `init` with `args` and no `--source` (it reads DATABASE_URL = `url`),
/// written to the scenario's mapping; then `check` with DATABASE_URL =
/// `url`, and `run` with `--source url` and DATABASE_URL not set (the
/// URL given wins over the mapping's `${DATABASE_URL}`); returns the
/// mapping's text.
async fn init_check_run(sc: &Scenario, url: &str, args: &[&str]) -> String {
    let mut all = vec!["init"];
    all.extend_from_slice(args);
    let init = with_url(sc, url, &all).await;
    assert_eq!(init.code, 0, "{}", init.stderr);
    let text = init
        .stdout
        .replace("table = \"sql2ddb-target\"", "table = \"TABLE\"");
    assert!(text.contains("url = \"${DATABASE_URL}\""), "{text}");
    let mapping = sc.mapping(&text);
    let check = with_url(sc, url, &["check", &mapping]).await;
    assert_eq!(check.code, 0, "{text}\n{}{}", check.stdout, check.stderr);
    let run = sc
        .sql2ddb(&[
            "run",
            &mapping,
            "--source",
            url,
            "--endpoint",
            &sc.dynamo.url,
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(run.code, 0, "{text}\n{}{}", run.stdout, run.stderr);
    text
}

/// Items of the table by the text before `#` of their sort key.
fn by_kind(items: &Items) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (_, sk) in items.keys() {
        let kind = sk.split('#').next().unwrap_or_default().to_string();
        *out.entry(kind).or_default() += 1;
    }
    out
}

/// The shop in single-table form: 500 customers and 50 products in their
/// own partitions, 2,000 orders in their customers' collections, each with
/// its lines (6,000 in all) embedded.
async fn assert_single_table_shop(sc: &Scenario) {
    let items = sc.items().await;
    let kinds = by_kind(&items);
    assert_eq!(kinds["CUSTOMERS"], 500, "{kinds:?}");
    assert_eq!(kinds["PRODUCTS"], 50, "{kinds:?}");
    assert_eq!(kinds["ORDERS"], 2000, "{kinds:?}");
    assert_eq!(items.len(), 2550);
    let mut lines = 0;
    for ((pk, sk), item) in &items {
        if !sk.starts_with("ORDERS#") {
            continue;
        }
        let AttrValue::N(customer) = &item["customer_id"] else {
            panic!("{item:?}")
        };
        assert_eq!(pk, &format!("CUSTOMERS#{customer}"), "{item:?}");
        let AttrValue::L(l) = &item["order_lines"] else {
            panic!("{item:?}")
        };
        lines += l.len();
    }
    assert_eq!(lines, 6000);
    let order_1 = &items[&key("CUSTOMERS#32", "ORDERS#0000000001")];
    assert_eq!(order_1["order_id"], AttrValue::N("1".into()));
}

#[tokio::test]
async fn sqlite_shop_single_table_collections_and_embeds() {
    let sc = Scenario::new("init_sqlite").start().await;
    let db = sc.path().join("shop.db");
    std::fs::copy(root().join("examples/shop.db"), &db).unwrap();
    let url = format!("sqlite://{}", db.display());
    let text = init_check_run(&sc, &url, &["--single-table", &sc.table]).await;
    assert!(
        text.contains("[[entity.embed]]\nname = \"order_lines\""),
        "{text}"
    );
    assert!(text.contains("at most 3 per orders (measured)"), "{text}");
    assert!(text.contains("sk = \"ORDERS#{order_id:010}\""), "{text}");
    assert!(text.contains("# [[pointer]]"), "{text}");
    assert_single_table_shop(&sc).await;
}

#[tokio::test]
async fn sqlite_shop_one_entity_per_table_migrates_every_row() {
    let sc = Scenario::new("init_sqlite_all").start().await;
    let db = sc.path().join("shop.db");
    std::fs::copy(root().join("examples/shop.db"), &db).unwrap();
    let url = format!("sqlite://{}", db.display());
    init_check_run(&sc, &url, &[]).await;
    let items = sc.items().await;
    let kinds = by_kind(&items);
    let want: BTreeMap<String, usize> = [
        ("CUSTOMERS", 500),
        ("ORDERS", 2000),
        ("ORDER_LINES", 6000),
        ("PRODUCTS", 50),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(kinds, want);
    // Item by item: every order line as the source holds it.
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let rows: Vec<(i64, i64, String, i64)> =
        sqlx::query_as("SELECT order_id, line_no, sku, qty FROM order_lines")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(rows.len(), 6000);
    for (order, line, sku, qty) in rows {
        let k = key(&format!("ORDER_LINES#{order}#{line}"), "ORDER_LINES");
        let item = &items[&k];
        assert_eq!(item["sku"], AttrValue::S(sku), "{k:?}");
        assert_eq!(item["qty"], AttrValue::N(qty.to_string()), "{k:?}");
        assert_eq!(item["order_id"], AttrValue::N(order.to_string()), "{k:?}");
    }
}

/// docker/postgres-init/shop.sql in the scenario's schema.
fn pg_shop() -> String {
    let sql = std::fs::read_to_string(root().join("docker/postgres-init/shop.sql")).unwrap();
    let body = sql
        .replace("CREATE DATABASE shop;", "")
        .replace("\\connect shop", "");
    format!("SET search_path TO {{schema}};\n{body}")
}

#[tokio::test]
async fn postgres_shop_single_table_and_no_password_printed() {
    let sc = Scenario::new("init_pg").postgres(&pg_shop()).start().await;
    let schema = &sc.pg().name;
    let tables = ["customers", "orders", "order_lines", "products"]
        .map(|t| format!("{schema}.{t}"))
        .join(",");
    let url = pg_url().to_string();
    init_check_run(
        &sc,
        &url,
        &["--tables", &tables, "--single-table", &sc.table],
    )
    .await;
    assert_single_table_shop(&sc).await;

    // A password in the URL (the local server trusts, so it connects) is
    // neither in the mapping nor in any message.
    let secret_url = url.replacen("://root@", "://root:S3cretPw@", 1);
    assert!(secret_url.contains("S3cretPw"), "{secret_url}");
    let init = sc
        .sql2ddb(&["init", "--source", &secret_url, "--tables", &tables])
        .await;
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(!init.stdout.contains("S3cretPw") && !init.stderr.contains("S3cretPw"));
    let missing = sc
        .sql2ddb(&["init", "--source", &secret_url, "--tables", "no_such_table"])
        .await;
    assert_eq!(missing.code, EX_CONFIG, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("no_such_table"),
        "{}",
        missing.stderr
    );
    assert!(!missing.stderr.contains("S3cretPw"), "{}", missing.stderr);
}

const MY_SHOP: &str = r#"
CREATE TABLE customers (customer_id INT PRIMARY KEY, email VARCHAR(80) NOT NULL UNIQUE,
  vip TINYINT(1) NOT NULL, joined DATE NULL, balance DECIMAL(50, 2) NULL);
CREATE TABLE orders (order_id INT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(20) NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES customers (customer_id));
CREATE TABLE order_lines (order_id INT NOT NULL, line_no INT NOT NULL, sku VARCHAR(20) NOT NULL,
  PRIMARY KEY (order_id, line_no), FOREIGN KEY (order_id) REFERENCES orders (order_id));
INSERT INTO customers VALUES (1, 'a@x.org', 1, '2024-01-02', 12345678901234567890123456789012345678901234.25),
  (2, 'b@x.org', 0, NULL, NULL);
INSERT INTO orders VALUES (10, 1, 'placed'), (11, 1, 'shipped'), (12, 2, 'placed');
INSERT INTO order_lines VALUES (10, 1, 'S1'), (10, 2, 'S2'), (11, 1, 'S1'), (12, 1, 'S3');
CREATE TABLE tags (name VARCHAR(20) NOT NULL, note VARCHAR(20) NULL, UNIQUE KEY tag_name (name));
INSERT INTO tags VALUES ('red', NULL), ('blue', 'b');
"#;

#[tokio::test]
async fn mariadb_schema_with_settings_for_wide_numbers_zero_dates_and_tinyint() {
    let sc = Scenario::new("init_my").mariadb(MY_SHOP).start().await;
    let url = sc.my().url.clone();
    let text = init_check_run(&sc, &url, &["--single-table", &sc.table]).await;
    assert!(
        text.contains("balance = { column = \"balance\", type = \"S\" }"),
        "{text}"
    );
    assert!(
        text.contains("joined = { column = \"joined\", invalid = \"null\" }"),
        "{text}"
    );
    assert!(text.contains("# vip: TINYINT(1)"), "{text}");
    // A table without a primary key is paged by its unique NOT NULL index.
    assert!(text.contains("key = [\"name\"]"), "{text}");
    assert!(text.contains("# unique (email)"), "{text}");
    let items = sc.items().await;
    assert_eq!(items.len(), 7, "{items:?}");
    assert_eq!(
        items[&key("TAGS#blue", "TAGS")]["note"],
        AttrValue::S("b".into())
    );
    let c1 = &items[&key("CUSTOMERS#1", "CUSTOMERS")];
    assert_eq!(
        c1["balance"],
        AttrValue::S("12345678901234567890123456789012345678901234.25".into())
    );
    let o10 = &items[&key("CUSTOMERS#1", "ORDERS#0000000010")];
    let AttrValue::L(lines) = &o10["order_lines"] else {
        panic!("{o10:?}")
    };
    assert_eq!(lines.len(), 2);
}

/// `init --follow`: a table without a primary key (mapped as a query by
/// its row address, whose changes could not be matched to items) is left
/// out with its reason; a DEFERRABLE key is
/// named with the statement to run on the source. Once that is run, the
/// mapping passes `check --follow`; nothing is created on the source.
#[tokio::test]
async fn init_follow_writes_a_mapping_that_can_be_followed() {
    let sc = Scenario::new("init_follow")
        .postgres(
            "CREATE TABLE {schema}.orders (id int PRIMARY KEY, total numeric(10,2) NOT NULL);
             INSERT INTO {schema}.orders SELECT i, i * 1.5 FROM generate_series(1, 20) i;
             CREATE TABLE {schema}.carts (id int PRIMARY KEY DEFERRABLE, n int NOT NULL);
             INSERT INTO {schema}.carts SELECT i, i FROM generate_series(1, 5) i;
             CREATE TABLE {schema}.log (at timestamptz NOT NULL, what text);
             INSERT INTO {schema}.log VALUES (now(), 'a'), (now(), 'b');",
        )
        .start()
        .await;
    let s = sc.pg().name.clone();
    let tables = format!("{s}.carts,{s}.log,{s}.orders");
    let init = with_url(&sc, pg_url(), &["init", "--follow", "--tables", &tables]).await;
    assert_eq!(init.code, 0, "{}", init.stderr);
    let text = init
        .stdout
        .replace("table = \"sql2ddb-target\"", "table = \"TABLE\"");
    let head: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
    let head = head.join("\n");
    assert!(
        head.contains("left out: entity log: cannot be followed: it reads a query"),
        "{text}"
    );
    let fix = format!("ALTER TABLE {s}.carts REPLICA IDENTITY FULL");
    assert!(
        head.contains("fix on the source first") && head.contains(&fix),
        "{text}"
    );
    assert!(!text.contains(&format!("from = \"{s}.log\"")), "{text}");
    assert!(text.contains(&format!("from = \"{s}.orders\"")), "{text}");
    assert!(text.contains(&format!("from = \"{s}.carts\"")), "{text}");

    let mapping = sc.mapping(&text);
    let check = with_url(&sc, pg_url(), &["check", &mapping, "--follow"]).await;
    assert_eq!(check.code, EX_CONFIG, "{}", check.stderr);
    assert!(check.stderr.contains(&fix), "{}", check.stderr);
    sc.pg().exec(&fix).await;
    let check = with_url(&sc, pg_url(), &["check", &mapping, "--follow"]).await;
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    let publications: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_publication_tables WHERE schemaname = $1")
            .bind(&s)
            .fetch_one(&sc.pg().pool)
            .await
            .unwrap();
    assert_eq!(publications, 0);

    // A SQLite source cannot be followed at all.
    let lite = with_url(&sc, "sqlite://nowhere.db", &["init", "--follow"]).await;
    assert_eq!(lite.code, EX_CONFIG, "{}", lite.stderr);
    assert!(
        lite.stderr.contains("can only be loaded"),
        "{}",
        lite.stderr
    );
}
