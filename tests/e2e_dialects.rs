//! One type matrix, three dialects: the same logical table created in
//! PostgreSQL, MariaDB and SQLite (tests/fixtures/matrix_*.sql) is migrated
//! by the built binary into three tables of one DynamoDB-compatible server.
//! The three item sets must be identical attribute for attribute, and equal
//! to the items computed here from the row number; each dialect's own types
//! (`extras`) have their own assertions.

use chrono::{Duration, NaiveDate};
use sql2ddb_core::{AttrValue, Item};

use crate::common::*;

const ROWS: i64 = 2000;

const MAPPING: &str = pg_mapping!(
    url = "SOURCE",
    "page_size = 300\nread_parallelism = 3",
    r#"
[[entity]]
name = "matrix"
from = "PREFIXmatrix"
pk = "M#{id}"
sk = "ROW"

[[entity]]
name = "extras"
from = "PREFIXextras"
pk = "X#{id}"
sk = "EXTRA"
"#
);

/// The item every dialect must produce for row `i` of `matrix`.
fn expected_matrix(i: i64) -> Item {
    let sign = if i % 2 == 0 { 1 } else { -1 };
    let wake = i * 37 % 86400;
    let seen = NaiveDate::from_ymd_opt(2024, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        + Duration::seconds(i * 67)
        + Duration::milliseconds(i % 1000);
    let mut photo = vec![0xff];
    photo.extend((i as u32).to_be_bytes());
    let mut it = item(vec![
        ("PK", s(format!("M#{i}"))),
        ("SK", s("ROW")),
        ("id", n(i)),
        ("big", n(sign * i * 4611686018427387)),
        ("small", n(i % 30000 - 15000)),
        ("score", n(format!("{}", (i % 100) as f32 / 10.0))),
        ("ratio", n(format!("{}", i as f64 / 7.0))),
        ("name", s(format!("Zoë {i} — café"))),
        ("code", s(format!("C{i:05}"))),
        ("active", AttrValue::Bool(i % 3 == 0)),
        (
            "born",
            s((NaiveDate::from_ymd_opt(2000, 1, 1).unwrap() + Duration::days(i)).to_string()),
        ),
        (
            "wake",
            s(format!(
                "{:02}:{:02}:{:02}",
                wake / 3600,
                wake / 60 % 60,
                wake % 60
            )),
        ),
        (
            "seen_at",
            s(seen.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string()),
        ),
        ("photo", AttrValue::B(photo)),
        (
            "doc",
            AttrValue::M(item(vec![
                ("n", n(i)),
                ("tags", AttrValue::L(vec![s("a"), s(format!("b{i}"))])),
                ("price", n("1.5")),
                ("ok", AttrValue::Bool(i % 2 == 0)),
                ("none", AttrValue::Null),
                ("name", s("Zoë")),
            ])),
        ),
    ]);
    if i % 11 != 0 {
        it.insert("price".into(), n(decimal(i * 12345 % 1_000_000, 2)));
    }
    if i % 5 != 0 {
        it.insert("note".into(), s(format!("note {i}")));
    }
    if i % 4 != 0 {
        it.insert("qty".into(), n(i * 3));
    }
    it
}

/// Migrates with the binary and returns every item of the new table.
async fn migrate(sc: &Scenario, url: &str, prefix: &str, table: &str) -> Items {
    let mapping = write_mapping(
        sc.path(),
        &MAPPING
            .replace("SOURCE", url)
            .replace("PREFIX", prefix)
            .replace("TABLE", table),
    );
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{url}: stderr:\n{}", run.stderr);
    let matrix = run.entity("matrix");
    assert_eq!(matrix["rows_read"], ROWS, "{url}");
    assert_eq!(matrix["items_written"], ROWS, "{url}");
    assert_eq!(matrix["rejected"], 0, "{url}");
    // `read_parallelism = 3`: the integer key range is read as three segments.
    assert_eq!(matrix["segments"], 3, "{url}");
    sc.dynamo.scan(table).await
}

/// Splits a table's items into the shared matrix and the dialect's extras.
fn split(items: Items) -> (Items, Items) {
    items
        .into_iter()
        .partition(|((pk, _), _)| pk.starts_with("M#"))
}

fn extras_item(id: i64, pairs: Vec<(&str, AttrValue)>) -> Item {
    let mut it = item(pairs);
    it.insert("PK".into(), s(format!("X#{id}")));
    it.insert("SK".into(), s("EXTRA"));
    it.insert("id".into(), n(id));
    it
}

/// Asserts `got` holds exactly the items `want`.
fn assert_exactly(dialect: &str, got: &Items, want: &[Item]) {
    assert_eq!(got.len(), want.len(), "{dialect}: {got:#?}");
    for w in want {
        let key = key_of(w);
        let g = got
            .get(&key)
            .unwrap_or_else(|| panic!("{dialect}: no item {key:?}"));
        assert_item(&key, g, w);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: each dialect's extras listed in full.
async fn three_dialects_migrate_to_identical_items() {
    let sc = Scenario::new("e2e_matrix")
        .postgres(include_str!("fixtures/matrix_postgres.sql"))
        .mariadb(include_str!("fixtures/matrix_mysql.sql"))
        .sqlite(include_str!("fixtures/matrix_sqlite.sql"))
        .start()
        .await;

    let pg_prefix = format!("{}.", sc.pg().name);
    let pg = migrate(&sc, pg_url(), &pg_prefix, &unique("matrix_pg")).await;
    let mysql = migrate(&sc, &sc.my().url, "", &unique("matrix_my")).await;
    let sqlite = migrate(&sc, sc.sqlite_url(), "", &unique("matrix_lite")).await;
    let (pg, pg_extras) = split(pg);
    let (mysql, my_extras) = split(mysql);
    let (sqlite, lite_extras) = split(sqlite);

    // The shared types: one expected item per row, the same in all three.
    let expected: Vec<Item> = (1..=ROWS).map(expected_matrix).collect();
    assert_exactly("postgres", &pg, &expected);
    for (dialect, items) in [("mysql", &mysql), ("sqlite", &sqlite)] {
        assert_eq!(items.len(), pg.len(), "{dialect}");
        for (key, want) in &pg {
            let got = items
                .get(key)
                .unwrap_or_else(|| panic!("{dialect}: no item {key:?}"));
            assert_item(key, got, want);
        }
    }

    // PostgreSQL only: uuid, arrays, timestamptz, interval, enum.
    assert_exactly(
        "postgres extras",
        &pg_extras,
        &[
            extras_item(
                1,
                vec![
                    ("uid", s("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")),
                    ("nums", AttrValue::L(vec![n(1), AttrValue::Null, n(3)])),
                    ("at", s("2024-03-10T07:04:56.500Z")),
                    ("span", s("1 day 02:00:00")),
                    ("mood", s("happy")),
                ],
            ),
            extras_item(
                2,
                vec![
                    ("uid", s("00000000-0000-0000-0000-000000000000")),
                    ("nums", AttrValue::L(vec![])),
                    ("at", s("1970-01-01T00:00:00Z")),
                    ("span", s("00:00:01")),
                    ("mood", s("sad")),
                ],
            ),
        ],
    );

    // MySQL only: ENUM, SET (an empty set is left out), YEAR, BIT, BIGINT
    // UNSIGNED, latin1 text, TIMESTAMP.
    assert_exactly(
        "mysql extras",
        &my_extras,
        &[
            extras_item(
                1,
                vec![
                    ("size", s("large")),
                    ("opts", AttrValue::SS(vec!["a".into(), "c".into()])),
                    ("yr", n(2024)),
                    ("bits", n(1023)),
                    ("ubig", n("18446744073709551615")),
                    ("lat", s("café crème")),
                    ("at", s("2024-03-10T12:34:56Z")),
                ],
            ),
            extras_item(
                2,
                vec![
                    ("size", s("small")),
                    ("yr", n(1901)),
                    ("bits", n(0)),
                    ("ubig", n(0)),
                    ("lat", s("Ærø")),
                ],
            ),
        ],
    );

    // SQLite only: a column without a type takes each value's storage class;
    // ISO text in a DATETIME column with an offset is converted to UTC.
    assert_exactly(
        "sqlite extras",
        &lite_extras,
        &[
            extras_item(
                1,
                vec![
                    ("loose", n(42)),
                    ("price", n("12.3")),
                    ("at", s("2024-01-02T01:04:05Z")),
                ],
            ),
            extras_item(
                2,
                vec![
                    ("loose", n("2.5")),
                    ("price", n(7)),
                    ("at", s("2024-01-02T03:04:05Z")),
                ],
            ),
            extras_item(3, vec![("loose", s("text"))]),
            extras_item(
                4,
                vec![
                    ("loose", AttrValue::B(vec![0, 0xff])),
                    ("at", s("not a date")),
                ],
            ),
        ],
    );
}
