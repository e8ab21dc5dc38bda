//! `init` on shapes real schemas have beyond keys and foreign keys: a
//! PostgreSQL partitioned table and an inheritance parent (one entity each,
//! read from the parent, each row once; partitions never offered).

use std::collections::BTreeSet;

use crate::common::*;

/// `init ARGS`, then `check`, `run` and `verify --deep` with `url` as
/// `DATABASE_URL`, each exiting 0; returns the mapping.
async fn init_run_verify(sc: &Scenario, url: &str, init: &[&str]) -> String {
    let mut args = vec!["init", "--source", url];
    args.extend_from_slice(init);
    let out = sc.sql2ddb(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mapping = sc.mapping(&out.stdout);
    let endpoint = sc.dynamo.url.clone();
    for args in [
        vec!["check", mapping.as_str()],
        vec!["run", &mapping, "--endpoint", &endpoint, "--quiet"],
        vec!["verify", &mapping, "--deep", "--endpoint", &endpoint],
    ] {
        let run = command(sc.path(), &args)
            .env("DATABASE_URL", url)
            .output()
            .await
            .unwrap();
        assert_eq!(
            run.status.code(),
            Some(0),
            "{args:?}\n{}\n{}{}",
            out.stdout,
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
    out.stdout
}

/// A PostgreSQL URL whose current schema is `schema`.
fn pg_url_in(schema: &str) -> String {
    let sep = if pg_url().contains('?') { '&' } else { '?' };
    format!("{}{sep}options=-c%20search_path%3D{schema}", pg_url())
}

const PAYMENTS: usize = 1_200;

const PARTITIONED: &str = "SET search_path TO {schema};
CREATE TABLE payment (payment_id INT NOT NULL, paid_on DATE NOT NULL, amount NUMERIC(8,2) NOT NULL,
  PRIMARY KEY (payment_id, paid_on)) PARTITION BY RANGE (paid_on);
CREATE TABLE payment_p2024 PARTITION OF payment FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE payment_p2025 PARTITION OF payment FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE payment_rest PARTITION OF payment DEFAULT;
INSERT INTO payment SELECT g, DATE '2023-10-01' + g, g * 1.5 FROM generate_series(1, 1200) g;
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
    assert_eq!(named.code, 1, "{}", named.stdout);
    assert!(
        named.stderr.contains("is a partition of")
            && named.stderr.contains(&format!("Map {schema}.payment")),
        "{}",
        named.stderr
    );

    let text = init_run_verify(&sc, &url, &["--single-table", &sc.table]).await;
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
    // Five readings, two of them in the child table, one a duplicate row:
    // each its own item.
    let readings = items.keys().filter(|(_, sk)| sk == "READING").count();
    assert_eq!(readings, 5, "{:?}", items.keys().collect::<Vec<_>>());
    assert_eq!(items.len(), PAYMENTS + 5);
}
