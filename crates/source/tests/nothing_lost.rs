//! Issue #9, source side: a key that is not proven unique and non-NULL is
//! reported (case 1), and a query entity's SQL error names the entity and
//! the place in the query (case 12). Against real PostgreSQL, MariaDB and SQLite.

mod common;

use common::{my_database, mysql_url, pg_schema, pg_url, sqlite_file};
use sql2ddb_source::{KeyProof, Relation, Source, SourceErrorKind};

fn keys(k: &[&str]) -> Vec<String> {
    k.iter().map(|s| s.to_string()).collect()
}

async fn proof(source: &Source, from: Relation<'_>, key: &[&str]) -> KeyProof {
    let shape = source.describe(&from).await.unwrap();
    source
        .prove_unique_key(&from, &shape, &keys(key))
        .await
        .unwrap()
}

fn reason(p: &KeyProof) -> &str {
    match p {
        KeyProof::NotProven { reason } => reason,
        other => panic!("expected NotProven, got {other:?}"),
    }
}

/// The tables every dialect gets, in its own syntax. `dup`: no key, the
/// values that lose rows under keyset paging; `pk`: a primary key;
/// `uniq_null`: a unique index on a nullable column; `uniq`: a unique index
/// over NOT NULL columns; `comp`: a unique index on (a) and a key (a, b).
const ROWS: &str = "INSERT INTO {t}dup VALUES (1, 'a'), (1, 'b'), (1, 'c'), (2, 'd'), (2, 'e'), (NULL, 'f'), (NULL, 'g'), (3, 'h');
     INSERT INTO {t}pk VALUES (1, 'a'), (2, 'b');
     INSERT INTO {t}uniq_null VALUES (1, 'a'), (NULL, 'b');
     INSERT INTO {t}uniq VALUES (1, 'a');
     INSERT INTO {t}comp VALUES (1, 1, 'a'), (2, 1, 'b');";

async fn assert_table_proofs(source: &Source, prefix: &str) {
    let t = |name: &str| format!("{prefix}{name}");
    let dup = t("dup");
    let p = proof(source, Relation::Table(&dup), &["k"]).await;
    let r = reason(&p);
    assert!(r.contains("k") && r.contains("NULL"), "{r}");
    assert!(r.contains("no primary key or unique index"), "{r}");

    let pk = t("pk");
    assert_eq!(
        proof(source, Relation::Table(&pk), &[]).await,
        KeyProof::PrimaryKey
    );
    assert_eq!(
        proof(source, Relation::Table(&pk), &["k"]).await,
        KeyProof::PrimaryKey
    );

    let uniq_null = t("uniq_null");
    let p = proof(source, Relation::Table(&uniq_null), &["k"]).await;
    let r = reason(&p);
    assert!(r.contains("can hold NULL"), "{r}");
    assert!(!r.contains("no primary key or unique index"), "{r}");

    let uniq = t("uniq");
    assert_eq!(
        proof(source, Relation::Table(&uniq), &["k"]).await,
        KeyProof::UniqueIndex {
            name: "uniq_k".into()
        }
    );
    // A key over other columns than the index is not proven.
    let p = proof(source, Relation::Table(&uniq), &["v"]).await;
    assert!(reason(&p).contains("no primary key or unique index"));

    let comp = t("comp");
    assert_eq!(
        proof(source, Relation::Table(&comp), &["a", "b"]).await,
        KeyProof::UniqueIndex {
            name: "comp_a".into()
        }
    );
    // The index (a) is not within the key (b).
    assert!(!proof(source, Relation::Table(&comp), &["b"])
        .await
        .is_proven());
}

async fn assert_query_proofs(source: &Source, prefix: &str) {
    let q = format!("SELECT k, v FROM {prefix}dup WHERE k IS NOT NULL");
    let p = proof(source, Relation::Query(&q), &["k"]).await;
    let r = reason(&p);
    // An example duplicate is quoted with how often it appears.
    assert!(
        r.contains("k = 1 appears 3 times") || r.contains("k = 2 appears 2 times"),
        "{r}"
    );

    let q = format!("SELECT k, v FROM {prefix}dup");
    let p = proof(source, Relation::Query(&q), &["v"]).await;
    assert_eq!(p, KeyProof::Checked { rows: 8 });
    let p = proof(source, Relation::Query(&q), &["k", "v"]).await;
    let r = reason(&p);
    assert!(r.contains("2 row(s)") && r.contains("NULL"), "{r}");

    let q = format!("SELECT k, v FROM {prefix}dup WHERE k = 3");
    assert_eq!(
        proof(source, Relation::Query(&q), &["k"]).await,
        KeyProof::Checked { rows: 1 }
    );
}

#[tokio::test]
async fn nothing_lost_01_key_uniqueness_postgres() {
    let (s, _guard) = pg_schema(
        "nl_pg",
        &("CREATE TABLE {s}.dup (k int, v text);
           CREATE TABLE {s}.pk (k int PRIMARY KEY, v text);
           CREATE TABLE {s}.uniq_null (k int, v text);
           CREATE UNIQUE INDEX uniq_null_k ON {s}.uniq_null (k);
           CREATE TABLE {s}.uniq (k int NOT NULL, v text);
           CREATE UNIQUE INDEX uniq_k ON {s}.uniq (k);
           CREATE UNIQUE INDEX uniq_partial ON {s}.uniq (v) WHERE v IS NOT NULL;
           CREATE UNIQUE INDEX uniq_expr ON {s}.uniq (lower(v));
           CREATE TABLE {s}.comp (a int NOT NULL, b int NOT NULL, v text);
           CREATE UNIQUE INDEX comp_a ON {s}.comp (a);
           "
        .to_string()
            + &ROWS.replace("{t}", "{s}.")),
    )
    .await;
    let source = Source::connect(pg_url(), 2).await.unwrap();
    let prefix = format!("{s}.");
    assert_table_proofs(&source, &prefix).await;
    // A partial or expression unique index proves nothing.
    let uniq = format!("{s}.uniq");
    let p = proof(&source, Relation::Table(&uniq), &["v"]).await;
    assert!(reason(&p).contains("no primary key or unique index"));
    assert_query_proofs(&source, &format!("\"{s}\".")).await;
}

#[tokio::test]
async fn nothing_lost_01_key_uniqueness_mariadb() {
    let (d, _guard) = my_database(
        "nl_my",
        &("CREATE TABLE {d}.dup (k INT, v VARCHAR(10));
           CREATE TABLE {d}.pk (k INT PRIMARY KEY, v VARCHAR(10));
           CREATE TABLE {d}.uniq_null (k INT, v VARCHAR(10), UNIQUE KEY uniq_null_k (k));
           CREATE TABLE {d}.uniq (k INT NOT NULL, v VARCHAR(10), UNIQUE KEY uniq_k (k));
           CREATE TABLE {d}.comp (a INT NOT NULL, b INT NOT NULL, v VARCHAR(10), UNIQUE KEY comp_a (a));
           "
        .to_string()
            + &ROWS.replace("{t}", "{d}.")),
    )
    .await;
    let source = Source::connect(mysql_url(), 2).await.unwrap();
    assert_table_proofs(&source, &format!("{d}.")).await;
    assert_query_proofs(&source, &format!("`{d}`.")).await;
}

#[tokio::test]
async fn nothing_lost_01_key_uniqueness_sqlite() {
    let (_dir, url) = sqlite_file(
        &("CREATE TABLE dup (k INT, v TEXT);
           CREATE TABLE pk (k INTEGER PRIMARY KEY, v TEXT);
           CREATE TABLE uniq_null (k INT, v TEXT);
           CREATE UNIQUE INDEX uniq_null_k ON uniq_null (k);
           CREATE TABLE uniq (k INT NOT NULL, v TEXT);
           CREATE UNIQUE INDEX uniq_k ON uniq (k);
           CREATE UNIQUE INDEX uniq_partial ON uniq (v) WHERE v IS NOT NULL;
           CREATE TABLE comp (a INT NOT NULL, b INT NOT NULL, v TEXT);
           CREATE UNIQUE INDEX comp_a ON comp (a);
           -- A text primary key of a rowid table can hold NULL in SQLite.
           CREATE TABLE text_pk (k TEXT PRIMARY KEY, v TEXT);
           INSERT INTO text_pk VALUES (NULL, 'a'), (NULL, 'b');
           CREATE TABLE text_pk_nn (k TEXT NOT NULL PRIMARY KEY, v TEXT);
           CREATE TABLE wr (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
           "
        .to_string()
            + &ROWS.replace("{t}", "")),
    )
    .await;
    let source = Source::connect(&url, 2).await.unwrap();
    assert_table_proofs(&source, "").await;
    assert_table_proofs(&source, "main.").await;
    let p = proof(&source, Relation::Table("text_pk"), &["k"]).await;
    assert!(reason(&p).contains("can hold NULL"), "{p:?}");
    assert_eq!(
        proof(&source, Relation::Table("text_pk_nn"), &[]).await,
        KeyProof::PrimaryKey
    );
    assert_eq!(
        proof(&source, Relation::Table("wr"), &[]).await,
        KeyProof::PrimaryKey
    );
    let p = proof(&source, Relation::Table("uniq"), &["v"]).await;
    assert!(reason(&p).contains("no primary key or unique index"));
    assert_query_proofs(&source, "").await;
}

#[tokio::test]
async fn nothing_lost_12_query_syntax_error_names_entity() {
    // PostgreSQL gives a position: line 2, column of the misspelt FROM.
    let source = Source::connect(pg_url(), 1).await.unwrap();
    // `name FORM` reads as a column alias: the error is at `customers`.
    let query = "SELECT id, name\n  FORM customers\n WHERE id > 0";
    let caret = format!("\n      FORM customers\n    {}^", " ".repeat(7));
    let err = source
        .describe_named("customers_q", &Relation::Query(query))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Refused);
    let msg = err.to_string();
    assert!(msg.contains("customers_q"), "{msg}");
    assert!(msg.contains("syntax error"), "{msg}");
    assert!(msg.contains("line 2, column 8"), "{msg}");
    assert!(msg.contains(&caret), "{msg}");

    // MariaDB names the line and the text where it stopped.
    let source = Source::connect(mysql_url(), 1).await.unwrap();
    let err = source
        .describe_named("customers_q", &Relation::Query(query))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SourceErrorKind::Refused);
    let msg = err.to_string();
    assert!(msg.contains("customers_q"), "{msg}");
    assert!(msg.contains("SQL syntax"), "{msg}");
    assert!(msg.contains("line 2, column 8"), "{msg}");
    assert!(msg.contains(&caret), "{msg}");
}
