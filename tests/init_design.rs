//! The single-table design `init --single-table` proposes, on one schema in
//! SQLite, PostgreSQL and MariaDB: a 4-row lookup referenced by 2,000 books
//! (never their partition key), books owned by their author (ON DELETE
//! CASCADE) with a second foreign key to the lookup and a nullable one,
//! loans linking readers and books (adjacency list plus inverted GSI), and a
//! table without a primary key. The design is the same on every dialect,
//! and `check`, `run` and `verify --deep` accept it as it is.

use std::collections::{BTreeMap, BTreeSet};

use sql2ddb_core::AttrValue;
use sql2ddb_testkit::sdk::AttributeValue as Sdk;

use crate::common::*;

const GENRES: i64 = 4;
const AUTHORS: i64 = 200;
const EDITORS: i64 = 20;
const BOOKS: i64 = 2_000;
const READERS: i64 = 300;
const LOANS_PER_READER: i64 = 5;
/// Rows of the table without a key (one row twice).
const EVENTS: usize = 201;

const TABLES: [&str; 7] = [
    "author",
    "book",
    "editor",
    "event_log",
    "genre",
    "loan",
    "reader",
];

/// The books reader `r` borrowed.
fn loans_of(r: i64) -> Vec<i64> {
    (0..LOANS_PER_READER)
        .map(|k| (r * 7 + k * 401) % BOOKS + 1)
        .collect()
}

/// The schema and its rows, in SQL every dialect runs.
fn fixture() -> String {
    let mut sql = String::from(
        "CREATE TABLE genre (genre_id INT NOT NULL PRIMARY KEY, name VARCHAR(20) NOT NULL);
CREATE TABLE author (author_id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE editor (editor_id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE book (book_id INT NOT NULL PRIMARY KEY, author_id INT NOT NULL, genre_id INT NOT NULL,
  editor_id INT NULL, title VARCHAR(60) NOT NULL,
  FOREIGN KEY (author_id) REFERENCES author (author_id) ON DELETE CASCADE,
  FOREIGN KEY (genre_id) REFERENCES genre (genre_id),
  FOREIGN KEY (editor_id) REFERENCES editor (editor_id));
CREATE TABLE reader (reader_id INT NOT NULL PRIMARY KEY, name VARCHAR(40) NOT NULL);
CREATE TABLE loan (reader_id INT NOT NULL, book_id INT NOT NULL, PRIMARY KEY (reader_id, book_id),
  FOREIGN KEY (reader_id) REFERENCES reader (reader_id), FOREIGN KEY (book_id) REFERENCES book (book_id));
CREATE TABLE event_log (author_id INT NULL, message VARCHAR(60) NOT NULL);
",
    );
    let values = |rows: Vec<String>| rows.join(", ");
    let named = |table: &str, n: i64| {
        format!(
            "INSERT INTO {table} VALUES {};\n",
            values((1..=n).map(|i| format!("({i}, '{table} {i}')")).collect())
        )
    };
    sql += &named("genre", GENRES);
    sql += &named("author", AUTHORS);
    sql += &named("editor", EDITORS);
    sql += &named("reader", READERS);
    let books = (1..=BOOKS).map(|b| {
        let editor = match b % 3 {
            0 => "NULL".to_string(),
            _ => (b % EDITORS + 1).to_string(),
        };
        format!(
            "({b}, {}, {}, {editor}, 'Book {b}')",
            (b - 1) % AUTHORS + 1,
            (b - 1) % GENRES + 1
        )
    });
    sql += &format!("INSERT INTO book VALUES {};\n", values(books.collect()));
    let loans =
        (1..=READERS).flat_map(|r| loans_of(r).into_iter().map(move |b| format!("({r}, {b})")));
    sql += &format!("INSERT INTO loan VALUES {};\n", values(loans.collect()));
    let events = (1..EVENTS).map(|e| format!("({}, 'event {e}')", e as i64 % AUTHORS + 1));
    sql += &format!(
        "INSERT INTO event_log VALUES {}, (2, 'event 1');\n",
        values(events.collect())
    );
    sql
}

/// The design of a mapping: the lines that place entities and the comments
/// that explain them, without what differs by dialect (the schema in
/// `from`, the table without a key, column settings).
fn design_of(text: &str) -> Vec<String> {
    let placing = [
        "name =",
        "pk =",
        "sk =",
        "parent_key",
        "GSI1P",
        "GSI1S",
        "[[",
    ];
    let explaining = [
        "# not under",
        "# in the item",
        "# embedded in",
        "# many-to-many",
        "# read from",
        "# a partition",
        "# its own",
        "# Keys are",
        "# change each",
    ];
    text.split("\n\n")
        .filter(|block| !block.contains("event_log") && !block.contains("EVENT_LOG"))
        .flat_map(str::lines)
        .filter(|l| {
            placing.iter().any(|p| l.starts_with(p)) || explaining.iter().any(|p| l.starts_with(p))
        })
        .map(str::to_string)
        .collect()
}

/// `init --single-table` of `tables`, `check`, `run` and `verify --deep`
/// on `url`, each exiting 0; returns the mapping.
async fn init_to_verify(sc: &Scenario, url: &str, tables: &[String]) -> String {
    let tables = tables.join(",");
    sc.init_run_verify(url, &["--tables", &tables, "--single-table", &sc.table])
        .await
}

/// What every dialect must have written.
async fn assert_design_holds(sc: &Scenario, keyless_items: usize) {
    let items = sc.items().await;
    let keyed =
        (GENRES + AUTHORS + EDITORS + BOOKS + READERS + READERS * LOANS_PER_READER) as usize;
    assert_eq!(items.len(), keyed + keyless_items);
    // No partition key holds more than 5% of the items.
    let mut per_pk: BTreeMap<&str, usize> = BTreeMap::new();
    for (pk, _) in items.keys() {
        *per_pk.entry(pk.as_str()).or_default() += 1;
    }
    let (hottest, most) = per_pk.iter().max_by_key(|(_, n)| **n).unwrap();
    assert!(
        *most * 20 <= items.len(),
        "{hottest} holds {most} of {}",
        items.len()
    );
    // The lookup is an entity of its own, never a partition of books.
    assert_eq!(per_pk["GENRE#1"], 1);
    assert!(items.contains_key(&key("GENRE#1", "GENRE")));
    // Every book in its author's collection, nullable editor or not.
    let mut books = 0;
    let mut without_editor = 0;
    for ((pk, sk), item) in &items {
        if !sk.starts_with("BOOK#") || !pk.starts_with("AUTHOR#") {
            continue;
        }
        books += 1;
        assert_eq!(
            item["author_id"],
            AttrValue::N(pk["AUTHOR#".len()..].into()),
            "{item:?}"
        );
        without_editor += usize::from(!item.contains_key("editor_id"));
    }
    assert_eq!(books, BOOKS as usize);
    assert_eq!(without_editor, (BOOKS / 3) as usize);
    // A reader's loans in the reader's collection…
    let reader = 7;
    let got: BTreeSet<String> = items
        .keys()
        .filter(|(pk, sk)| pk == &format!("READER#{reader}") && sk.starts_with("BOOK#"))
        .map(|(_, sk)| sk.clone())
        .collect();
    let want: BTreeSet<String> = loans_of(reader)
        .iter()
        .map(|b| format!("BOOK#{b:010}"))
        .collect();
    assert_eq!(got, want);
    // …and a book's readers through the inverted index.
    let book = loans_of(reader)[0];
    let readers: BTreeSet<i64> = (1..=READERS)
        .filter(|r| loans_of(*r).contains(&book))
        .collect();
    let by_book = sc
        .dynamo
        .client
        .query()
        .table_name(&sc.table)
        .index_name("GSI1")
        .key_condition_expression("GSI1PK = :b")
        .expression_attribute_values(":b", Sdk::S(format!("BOOK#{book}")))
        .send()
        .await
        .unwrap();
    let got: BTreeSet<i64> = by_book
        .items()
        .iter()
        .map(|i| match &i["reader_id"] {
            Sdk::N(n) => n.parse().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, readers);
    assert!(got.contains(&reader));
}

/// The design every dialect proposes for the fixture.
const DESIGN: &str = r#"
# Keys are chosen from foreign keys and measured row counts (docs/planning.md says how, and how to
# change each choice); shares are of the 4024 rows of the tables with a key.
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }
[[target.gsi]]
name = "GSI1"
pk = { name = "GSI1PK", type = "S" }
sk = { name = "GSI1SK", type = "S" }
[[entity]]
name = "author"
# its own partition per row: no foreign key to another mapped table's primary key
# a partition holds at most 11 items (its own, 10 book): 0.3% of the 4024 rows mapped
pk = "AUTHOR#{author_id}"
sk = "AUTHOR"
[[entity]]
name = "book"
# not under editor (editor_id): nullable, and a NULL in a key would reject the row; it stays an attribute
# not under genre (genre_id): a lookup — its largest value holds 500 rows, 12.5% of the 4024 rows mapped; it stays an attribute, genre its own entity
# in the item collection of its author (author_id: NOT NULL, ON DELETE CASCADE): at most 10 per author (measured), 0.3% of the 4024 rows mapped
pk = "AUTHOR#{author_id}"
sk = "BOOK#{book_id:010}"   # integers zero-padded: string order is numeric order
[[entity]]
name = "editor"
# its own partition per row: no foreign key to another mapped table's primary key
pk = "EDITOR#{editor_id}"
sk = "EDITOR"
[[entity]]
name = "genre"
# its own partition per row: no foreign key to another mapped table's primary key
pk = "GENRE#{genre_id}"
sk = "GENRE"
[[entity]]
name = "loan"
# many-to-many link of reader and book: one item per link in the collection of its reader (at most 5 per reader, 0.1% of the 4024 rows mapped; 1 per book at most)
# read from the book side through GSI1: Query GSI1 with GSI1PK = "BOOK#<book_id>"
pk = "READER#{reader_id}"
sk = "BOOK#{book_id:010}"
GSI1PK = "BOOK#{book_id}"
GSI1SK = "READER#{reader_id:010}"
[[entity]]
name = "reader"
# its own partition per row: no foreign key to another mapped table's primary key
# a partition holds at most 6 items (its own, 5 loan): 0.1% of the 4024 rows mapped
pk = "READER#{reader_id}"
sk = "READER"
"#;

fn assert_same_design(text: &str) {
    let got = design_of(text).join("\n");
    assert_eq!(
        got,
        DESIGN.trim(),
        "the design differs:\n{got}\n\nmapping:\n{text}"
    );
}

#[tokio::test]
async fn sqlite_design_lookups_owners_links_and_a_table_without_key() {
    let sc = Scenario::new("init_design_sqlite")
        .sqlite(&fixture())
        .start()
        .await;
    let url = sc.sqlite_url().to_string();
    let tables: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    let text = init_to_verify(&sc, &url, &tables).await;
    assert!(
        text.contains("query = \"SELECT rowid, * FROM \\\"event_log\\\"\""),
        "{text}"
    );
    assert_design_holds(&sc, EVENTS).await;
    assert_same_design(&text);
}

#[tokio::test]
async fn postgres_design_lookups_owners_links_and_a_table_without_key() {
    let sql = format!("SET search_path TO {{schema}};\n{}", fixture());
    let sc = Scenario::new("init_design_pg").postgres(&sql).start().await;
    let schema = sc.pg().name.clone();
    let tables: Vec<String> = TABLES.iter().map(|t| format!("{schema}.{t}")).collect();
    let text = init_to_verify(&sc, pg_url(), &tables).await;
    assert!(text.contains("key = [\"ctid\"]"), "{text}");
    assert_design_holds(&sc, EVENTS).await;
    assert_same_design(&text);
}

#[tokio::test]
async fn mariadb_design_lookups_owners_links_and_a_table_without_key() {
    let sc = Scenario::new("init_design_my")
        .mariadb(&fixture())
        .start()
        .await;
    let url = sc.my().url.clone();
    let tables: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
    let text = init_to_verify(&sc, &url, &tables).await;
    // MySQL has no row address: the table without a key is left out, saying why.
    assert!(text.contains("# event_log: not mapped"), "{text}");
    assert_design_holds(&sc, 0).await;
    assert_same_design(&text);
}

#[tokio::test]
async fn postgres_one_entity_per_table_maps_the_table_without_key_too() {
    let sql = format!("SET search_path TO {{schema}};\n{}", fixture());
    let sc = Scenario::new("init_flat_pg").postgres(&sql).start().await;
    let schema = sc.pg().name.clone();
    let tables: Vec<String> = TABLES.iter().map(|t| format!("{schema}.{t}")).collect();
    let init = sc
        .sql2ddb(&["init", "--source", pg_url(), "--tables", &tables.join(",")])
        .await;
    assert_eq!(init.code, 0, "{}", init.stderr);
    let text = init
        .stdout
        .replace("table = \"sql2ddb-target\"", "table = \"TABLE\"");
    // One entity per table, none nested, no index.
    assert_eq!(text.matches("[[entity]]").count(), TABLES.len(), "{text}");
    assert!(
        !text.contains("[[entity.embed]]") && !text.contains("GSI1"),
        "{text}"
    );
    let mapping = sc.mapping(&text);
    let endpoint = sc.dynamo.url.clone();
    for args in [
        vec!["check", mapping.as_str()],
        vec!["run", &mapping, "--endpoint", &endpoint, "--quiet"],
    ] {
        let out = command(sc.path(), &args)
            .env("DATABASE_URL", pg_url())
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}\n{text}\n{out:?}");
    }
    let items = sc.items().await;
    let events = items.keys().filter(|(_, sk)| sk == "EVENT_LOG").count();
    assert_eq!(events, EVENTS);
    let keyed =
        (GENRES + AUTHORS + EDITORS + BOOKS + READERS + READERS * LOANS_PER_READER) as usize;
    assert_eq!(items.len(), keyed + EVENTS);
}
