//! `init` on shapes real schemas have beyond keys and foreign keys: a
//! PostgreSQL partitioned table and an inheritance parent (one entity each,
//! read from the parent, each row once; partitions never offered).

use std::collections::BTreeSet;

use crate::common::*;

/// A PostgreSQL URL whose current schema is `schema`.
fn pg_url_in(schema: &str) -> String {
    let sep = if pg_url().contains('?') { '&' } else { '?' };
    format!("{}{sep}options=-c%20search_path%3D{schema}", pg_url())
}

const PAYMENTS: usize = 1_200;

const PARTITIONED: &str = "SET search_path TO {schema};
CREATE DOMAIN year AS integer CHECK (VALUE BETWEEN 1901 AND 2155);
CREATE TABLE payment (payment_id INT NOT NULL, paid_on DATE NOT NULL, amount NUMERIC(8,2) NOT NULL,
  fiscal year NOT NULL DEFAULT 2024, PRIMARY KEY (payment_id, paid_on)) PARTITION BY RANGE (paid_on);
CREATE TABLE payment_p2024 PARTITION OF payment FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE payment_p2025 PARTITION OF payment FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE payment_rest PARTITION OF payment DEFAULT;
INSERT INTO payment SELECT g, DATE '2023-10-01' + g, g * 1.5, 2024 FROM generate_series(1, 1200) g;
CREATE TABLE reading (city TEXT NOT NULL, value INT NOT NULL);
CREATE TABLE reading_2024 () INHERITS (reading);
INSERT INTO reading VALUES ('a', 1), ('a', 1), ('b', 2);
INSERT INTO reading_2024 VALUES ('a', 1), ('c', 3);
";

#[tokio::test]
async fn postgres_partitioned_and_inherited_tables_are_one_entity_each_rows_once() {
    let sc = Scenario::new("init_parts_pg")
        .postgres(PARTITIONED)
        .start()
        .await;
    let schema = sc.pg().name.clone();
    let url = pg_url_in(&schema);

    // Naming a partition says what to do instead.
    let part = format!("{schema}.payment_p2024");
    let named = sc
        .sql2ddb(&["init", "--source", &url, "--tables", &part])
        .await;
    assert_eq!(named.code, EX_CONFIG, "{}", named.stderr);
    assert!(
        named.stderr.contains("is a partition of")
            && named.stderr.contains(&format!("Map {schema}.payment")),
        "{}",
        named.stderr
    );

    let text = sc
        .init_run_verify(&url, &["--single-table", &sc.table])
        .await;
    // The parents only: no partition, no inheritance child.
    let entities: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("name = "))
        .collect();
    assert_eq!(entities, ["\"payment\"", "\"reading\""], "{text}");
    assert!(
        text.contains("# read from payment: its 3 partitions"),
        "{text}"
    );

    let items = sc.items().await;
    let payments: BTreeSet<&String> = items
        .keys()
        .filter(|(pk, _)| pk.starts_with("PAYMENT#"))
        .map(|(pk, _)| pk)
        .collect();
    assert_eq!(payments.len(), PAYMENTS);
    // A domain over an integer is written as a number.
    let payment = items
        .iter()
        .find(|((pk, _), _)| pk.starts_with("PAYMENT#"))
        .unwrap()
        .1;
    assert_eq!(payment["fiscal"], n(2024), "{payment:?}");
    // Five readings, two of them in the child table, one a duplicate row:
    // each its own item.
    let readings = items.keys().filter(|(_, sk)| sk == "READING").count();
    assert_eq!(readings, 5, "{:?}", items.keys().collect::<Vec<_>>());
    assert_eq!(items.len(), PAYMENTS + 5);

    // `plan --estimate` sums the partitions' estimates: as autovacuum does,
    // only the partitions were analysed, never the partitioned table.
    sc.pg()
        .exec(&format!(
            "ANALYZE {schema}.payment_p2024, {schema}.payment_p2025, {schema}.payment_rest"
        ))
        .await;
    let mapping = sc.path().join("mapping.toml").display().to_string();
    let plan = command(sc.path(), &["plan", &mapping, "--estimate", "--json"])
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    let report: serde_json::Value =
        serde_json::from_slice(&plan.stdout).unwrap_or_else(|e| panic!("{e}: {plan:?}"));
    let rows = |name: &str| {
        report["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| (e["rows"].clone(), e["rows_estimated"].clone()))
            .unwrap()
    };
    assert_eq!(
        rows("payment"),
        (serde_json::json!(PAYMENTS), serde_json::json!(true)),
        "{report:#}"
    );
    assert_eq!(
        // A table without a key is a query entity: counted, not estimated.
        rows("reading"),
        (serde_json::json!(5), serde_json::json!(false)),
        "{report:#}"
    );
}

const CUSTOMERS: i64 = 100;
const INVOICES: i64 = 500;
const LINES_PER_INVOICE: i64 = 3;
/// Lines of an invoice that does not exist.
const ORPHANS: usize = 2;
const NO_SUCH_INVOICE: i64 = 9_999;

/// Customers, their invoices (in the customer's collection) and the
/// invoices' lines (embedded), two lines of which have no invoice: the
/// foreign key is not enforced for them (`fk_off`/`fk_on` wrap the rows in
/// what each dialect needs for that, `fk` is the clause in the table).
fn orphan_fixture(fk_off: &str, fk: &str, fk_on: &str) -> String {
    let values = |rows: Vec<String>| rows.join(", ");
    let mut sql = format!(
        "CREATE TABLE customer (customer_id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE invoice (invoice_id INT NOT NULL PRIMARY KEY, customer_id INT NOT NULL, total INT NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES customer (customer_id) ON DELETE CASCADE);
CREATE TABLE invoice_line (invoice_id INT NOT NULL, line_no INT NOT NULL, amount INT NOT NULL,
  PRIMARY KEY (invoice_id, line_no){fk});
{fk_off}
"
    );
    sql += &format!(
        "INSERT INTO customer VALUES {};\n",
        values((1..=CUSTOMERS).map(|c| format!("({c}, 'c{c}')")).collect())
    );
    sql += &format!(
        "INSERT INTO invoice VALUES {};\n",
        values(
            (1..=INVOICES)
                .map(|i| format!("({i}, {}, {})", (i - 1) % CUSTOMERS + 1, i * 10))
                .collect()
        )
    );
    let lines = (1..=INVOICES)
        .flat_map(|i| (1..=LINES_PER_INVOICE).map(move |l| format!("({i}, {l}, {})", i + l)))
        .chain((1..=ORPHANS).map(|l| format!("({NO_SUCH_INVOICE}, {l}, 1)")));
    sql += &format!(
        "INSERT INTO invoice_line VALUES {};\n{fk_on}\n",
        values(lines.collect())
    );
    sql
}

/// `init --single-table` embeds the lines in their invoices; `run` rejects
/// the two lines without an invoice ("no parent", exit 2) and counts them
/// per embed; `verify --deep` says so (exit 1) until they are gone.
async fn orphans_are_rejected_and_counted(sc: &Scenario, url: &str, tables: &[String]) {
    let init = sc
        .sql2ddb(&[
            "init",
            "--source",
            url,
            "--tables",
            &tables.join(","),
            "--single-table",
            &sc.table,
        ])
        .await;
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(
        init.stdout
            .contains("[[entity.embed]]\nname = \"invoice_line\""),
        "{}",
        init.stdout
    );
    let mapping = sc.mapping(&init.stdout);
    let endpoint = sc.dynamo.url.clone();
    let with_url = |args: &[&str]| {
        let mut c = command(sc.path(), args);
        c.env("DATABASE_URL", url);
        c
    };
    let run = with_url(&[
        "run",
        &mapping,
        "--endpoint",
        &endpoint,
        "--json",
        "--quiet",
    ])
    .output()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(2),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let invoice = report["entities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "invoice")
        .unwrap();
    let lines = (INVOICES * LINES_PER_INVOICE) as u64;
    // read = nested + rejected, for the child rows too.
    assert_eq!(
        invoice["embeds"],
        serde_json::json!([{
            "name": "invoice.invoice_line",
            "rows_read": lines + ORPHANS as u64,
            "nested": lines,
            "rejected_with_parent": 0,
            "no_parent": ORPHANS,
        }]),
        "{report:#}"
    );
    assert_eq!(report["status"], "rejected");
    let rejects = rejects_of(sc.path(), &report);
    assert_eq!(rejects.len(), ORPHANS, "{rejects:?}");
    for r in &rejects {
        assert_eq!(r["entity"], "invoice.invoice_line", "{r}");
        assert!(
            r["reason"].as_str().unwrap().starts_with("no parent"),
            "{r}"
        );
        assert!(r["key"].get("line_no").is_some(), "{r}");
        assert!(r["row"].get("amount").is_some(), "{r}");
    }
    // Every invoice holds its three lines; the orphans are in no item.
    let items = sc.items().await;
    let invoices: Vec<_> = items
        .iter()
        .filter(|((_, sk), _)| sk.starts_with("INVOICE#"))
        .collect();
    assert_eq!(invoices.len(), INVOICES as usize);
    for (key, item) in invoices {
        match &item["invoice_line"] {
            sql2ddb_core::AttrValue::L(l) => {
                assert_eq!(l.len(), LINES_PER_INVOICE as usize, "{key:?}")
            }
            other => panic!("{key:?}: {other:?}"),
        }
    }

    let verify = with_url(&["verify", &mapping, "--deep", "--endpoint", &endpoint])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert_eq!(verify.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "invoice: {ORPHANS} child rows of its embeds have no parent row"
        )),
        "{stderr}"
    );
}

/// Runs `verify --deep` again after the orphans were deleted: exit 0.
async fn verified_without_orphans(sc: &Scenario, url: &str) {
    let mapping = sc.path().join("mapping.toml").display().to_string();
    let out = command(
        sc.path(),
        &["verify", &mapping, "--deep", "--endpoint", &sc.dynamo.url],
    )
    .env("DATABASE_URL", url)
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

const DELETE_ORPHANS: &str = "DELETE FROM invoice_line WHERE invoice_id = 9999";

#[tokio::test]
async fn sqlite_orphaned_child_rows_are_rejected_and_counted() {
    let sql = orphan_fixture(
        "PRAGMA foreign_keys = OFF;",
        ", FOREIGN KEY (invoice_id) REFERENCES invoice (invoice_id) ON DELETE CASCADE",
        "",
    );
    let sc = Scenario::new("orphans_sqlite").sqlite(&sql).start().await;
    let url = sc.sqlite_url().to_string();
    let tables = ["customer", "invoice", "invoice_line"].map(String::from);
    orphans_are_rejected_and_counted(&sc, &url, &tables).await;
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::raw_sql(DELETE_ORPHANS).execute(&pool).await.unwrap();
    pool.close().await;
    verified_without_orphans(&sc, &url).await;
}

#[tokio::test]
async fn postgres_orphaned_child_rows_are_rejected_and_counted() {
    // A foreign key added NOT VALID leaves the rows before it unchecked.
    let sql = orphan_fixture(
        "SET search_path TO {schema};",
        "",
        "ALTER TABLE invoice_line ADD FOREIGN KEY (invoice_id) REFERENCES invoice (invoice_id) NOT VALID;",
    );
    let sql = format!("SET search_path TO {{schema}};\n{sql}");
    let sc = Scenario::new("orphans_pg").postgres(&sql).start().await;
    let schema = sc.pg().name.clone();
    let tables = ["customer", "invoice", "invoice_line"].map(|t| format!("{schema}.{t}"));
    orphans_are_rejected_and_counted(&sc, pg_url(), &tables).await;
    sc.pg()
        .exec(&format!("SET search_path TO {schema}; {DELETE_ORPHANS}"))
        .await;
    verified_without_orphans(&sc, pg_url()).await;
}

#[tokio::test]
async fn mariadb_orphaned_child_rows_are_rejected_and_counted() {
    let sql = orphan_fixture(
        "SET FOREIGN_KEY_CHECKS = 0;",
        ", FOREIGN KEY (invoice_id) REFERENCES invoice (invoice_id) ON DELETE CASCADE",
        "SET FOREIGN_KEY_CHECKS = 1;",
    );
    let sc = Scenario::new("orphans_my").mariadb(&sql).start().await;
    let url = sc.my().url.clone();
    let tables = ["customer", "invoice", "invoice_line"].map(String::from);
    orphans_are_rejected_and_counted(&sc, &url, &tables).await;
    sc.my().exec(DELETE_ORPHANS).await;
    verified_without_orphans(&sc, &url).await;
}

/// Thirty playlists, playlist 15 with 75 tracks and every other with 2: the
/// playlist's own item shares its partition with its tracks.
fn playlists() -> String {
    let mut sql = String::from(
        "CREATE TABLE playlist (playlist_id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE playlist_track (playlist_id INTEGER NOT NULL, track_id INTEGER NOT NULL,
  PRIMARY KEY (playlist_id, track_id));
",
    );
    for p in 1..=30 {
        sql += &format!("INSERT INTO playlist VALUES ({p}, 'list {p}');\n");
        let tracks = if p == 15 { 75 } else { 2 };
        for t in 1..=tracks {
            sql += &format!("INSERT INTO playlist_track VALUES ({p}, {t});\n");
        }
    }
    sql
}

const PLAYLIST_MAPPING: &str = pg_mapping!(
    url = "URL",
    "",
    r#"
[[entity]]
name = "playlist"
from = "playlist"
pk = "PLAYLIST#{playlist_id}"
sk = "PLAYLIST"
[[entity]]
name = "playlist_track"
from = "playlist_track"
pk = "PLAYLIST#{playlist_id}"
sk = "TRACK#{track_id:010}"
"#
);

#[tokio::test]
async fn plan_counts_a_partition_two_entities_share_exactly() {
    let sc = Scenario::new("plan_shared")
        .sqlite(&playlists())
        .start()
        .await;
    let mapping = sc.mapping(&PLAYLIST_MAPPING.replace("URL", sc.sqlite_url()));
    let out = sc.sql2ddb(&["plan", &mapping, "--json"]).await;
    assert!(out.code == 0 || out.code == 2, "{}", out.stderr);
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let hot = &report["hot_partitions"][0];
    // 75 tracks and the playlist's own item: one of 30 one-row keys, never
    // among the playlist entity's own largest.
    assert_eq!(hot["key"], "PLAYLIST#15", "{report:#}");
    assert_eq!(hot["items"], 76, "{report:#}");
    assert_eq!(
        hot["entities"],
        serde_json::json!(["playlist", "playlist_track"]),
        "{report:#}"
    );
    // Every key shown counts both entities' items.
    for p in report["hot_partitions"].as_array().unwrap() {
        assert_eq!(p["entities"].as_array().unwrap().len(), 2, "{p}");
        assert_eq!(
            p["items"],
            if p["key"] == "PLAYLIST#15" { 76 } else { 3 },
            "{p}"
        );
    }
}

/// A table, a view over it with a row twice, and (PostgreSQL) a
/// materialized view.
const CITIES: &str =
    "CREATE TABLE city (city_id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL,
  country VARCHAR(20) NOT NULL);
INSERT INTO city VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'a', 'y'), (4, 'c', 'y'), (5, 'a', 'x');
CREATE VIEW city_name AS SELECT name, country FROM city;
";

/// Views are offered, not mapped, by default; named with `--tables`, each
/// is an entity that runs and verifies, a row per item (the row that is
/// there twice too).
async fn views_offered_and_mapped(sc: &Scenario, url: &str, views: &[&str], names: &[String]) {
    let listed = sc.sql2ddb(&["init", "--source", url]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed
            .stdout
            .contains(&format!("with --tables naming it: {}\n", views.join(", "))),
        "{}",
        listed.stdout
    );
    for v in views {
        assert!(
            !listed.stdout.contains(&format!("name = \"{v}\"")),
            "{}",
            listed.stdout
        );
    }
    let tables = names.join(",");
    let text = sc
        .init_run_verify(url, &["--tables", &tables, "--single-table", &sc.table])
        .await;
    let items = sc.items().await;
    let count = |sk: &str| items.keys().filter(|(_, s)| s == sk).count();
    assert_eq!(count("CITY_NAME"), 5, "{text}");
    assert_eq!(items.len(), 5 + 5 + if views.len() > 1 { 2 } else { 0 });
}

#[tokio::test]
async fn sqlite_views_are_offered_and_mapped_when_named() {
    let sc = Scenario::new("views_sqlite").sqlite(CITIES).start().await;
    let url = sc.sqlite_url().to_string();
    let names = ["city", "city_name"].map(String::from);
    views_offered_and_mapped(&sc, &url, &["city_name"], &names).await;
}

#[tokio::test]
async fn mariadb_views_are_offered_and_mapped_when_named() {
    let sc = Scenario::new("views_my").mariadb(CITIES).start().await;
    let url = sc.my().url.clone();
    let names = ["city", "city_name"].map(String::from);
    views_offered_and_mapped(&sc, &url, &["city_name"], &names).await;
}

#[tokio::test]
async fn postgres_views_and_materialized_views_are_offered_and_mapped_when_named() {
    let sql = format!(
        "SET search_path TO {{schema}};\n{CITIES}\
         CREATE MATERIALIZED VIEW city_count AS SELECT country, count(*) AS n FROM city GROUP BY country;\n"
    );
    let sc = Scenario::new("views_pg").postgres(&sql).start().await;
    let schema = sc.pg().name.clone();
    let url = pg_url_in(&schema);
    let names = ["city", "city_name", "city_count"].map(|t| format!("{schema}.{t}"));
    views_offered_and_mapped(&sc, &url, &["city_count", "city_name"], &names).await;
    assert_eq!(
        sc.items()
            .await
            .keys()
            .filter(|(_, s)| s == "CITY_COUNT")
            .count(),
        2
    );
}
