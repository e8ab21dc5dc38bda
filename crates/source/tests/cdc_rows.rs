//! Against the real PostgreSQL server, on generated rows: every row of the
//! column types a follower reads, written by the application and read back
//! from the logical slot, decodes to the very row the full load's page read
//! gives (the slot's text values and the page's values agree for every
//! value generated, NULLs included).

mod common;

use common::{pg_schema, pg_url, read_all};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sql2ddb_source::cdc::{ChangeOp, Relations, TupleValue};
use sql2ddb_source::{Relation, Source};
use sql2ddb_testkit::support::unique_name;

/// The followed table: the type matrix's columns and PostgreSQL's own.
const TABLE: &str = "CREATE TYPE {s}.mood AS ENUM ('sad', 'happy', 'Zoë''s');
CREATE TABLE {s}.t (
  id int PRIMARY KEY, big bigint, small smallint, price numeric(12,2), wide numeric,
  score real, ratio double precision, name text, code varchar(10), pad char(5),
  active boolean, born date, wake time, seen_at timestamp(3), at timestamptz,
  photo bytea, doc jsonb, uid uuid, nums int[], tags text[], span interval,
  mood {s}.mood);";

/// Each column after `id` and the type its text is cast to.
const COLUMNS: &[(&str, &str)] = &[
    ("big", "bigint"),
    ("small", "smallint"),
    ("price", "numeric(12,2)"),
    ("wide", "numeric"),
    ("score", "real"),
    ("ratio", "double precision"),
    ("name", "text"),
    ("code", "varchar(10)"),
    ("pad", "char(5)"),
    ("active", "boolean"),
    ("born", "date"),
    ("wake", "time"),
    ("seen_at", "timestamp(3)"),
    ("at", "timestamptz"),
    ("photo", "bytea"),
    ("doc", "jsonb"),
    ("uid", "uuid"),
    ("nums", "int[]"),
    ("tags", "text[]"),
    ("span", "interval"),
    ("mood", "MOOD"),
];

/// Text without NUL, which PostgreSQL's text cannot hold.
fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>().prop_filter("no NUL", |c| *c != '\0'), 0..=max)
        .prop_map(|c| c.into_iter().collect())
}

/// A decimal with up to `digits` digits, `scale` of them after the point.
fn decimal(digits: u32, scale: u32) -> impl Strategy<Value = String> {
    (any::<bool>(), 0..10u128.pow(digits)).prop_map(move |(neg, units)| {
        let p = 10u128.pow(scale);
        let sign = if neg { "-" } else { "" };
        match scale {
            0 => format!("{sign}{units}"),
            _ => format!("{sign}{}.{:0w$}", units / p, units % p, w = scale as usize),
        }
    })
}

fn date() -> impl Strategy<Value = chrono::NaiveDate> {
    (1i32..3_652_059).prop_map(|d| chrono::NaiveDate::from_num_days_from_ce_opt(d).unwrap())
}

fn time(fraction_digits: u32) -> impl Strategy<Value = String> {
    (0u32..86_400, 0u32..10u32.pow(fraction_digits)).prop_map(move |(s, f)| {
        let t = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
        match fraction_digits {
            0 => t,
            w => format!("{t}.{f:0w$}", w = w as usize),
        }
    })
}

/// An array literal's element, quoted (any text) or NULL.
fn element(e: Option<String>) -> String {
    match e {
        None => "NULL".into(),
        Some(t) => format!("\"{}\"", t.replace('\\', "\\\\").replace('"', "\\\"")),
    }
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e15f64..1e15).prop_map(serde_json::Value::from),
        text(8).prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(text(6), inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// One row's values after `id`, in [`COLUMNS`]' order, as text (or NULL).
fn row() -> impl Strategy<Value = Vec<Option<String>>> {
    let values: Vec<BoxedStrategy<String>> = vec![
        any::<i64>().prop_map(|v| v.to_string()).boxed(),
        any::<i16>().prop_map(|v| v.to_string()).boxed(),
        decimal(12, 2).boxed(),
        prop_oneof![decimal(30, 0), decimal(38, 17), decimal(5, 5)].boxed(),
        any::<f32>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f.to_string())
            .boxed(),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| f.to_string())
            .boxed(),
        text(40).boxed(),
        text(10).boxed(),
        text(5).boxed(),
        any::<bool>().prop_map(|b| b.to_string()).boxed(),
        date().prop_map(|d| d.to_string()).boxed(),
        time(6).boxed(),
        (date(), time(3))
            .prop_map(|(d, t)| format!("{d} {t}"))
            .boxed(),
        (date(), time(6), -12i32..=14)
            .prop_map(|(d, t, h)| format!("{d} {t}{h:+03}"))
            .boxed(),
        prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(|b| {
                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                format!("\\x{hex}")
            })
            .boxed(),
        json().prop_map(|j| j.to_string()).boxed(),
        any::<[u8; 16]>()
            .prop_map(|b| uuid::Uuid::from_bytes(b).to_string())
            .boxed(),
        prop::collection::vec(prop::option::of(any::<i32>()), 0..5)
            .prop_map(|v| {
                let items: Vec<String> = v
                    .into_iter()
                    .map(|e| e.map_or("NULL".into(), |n| n.to_string()))
                    .collect();
                format!("{{{}}}", items.join(","))
            })
            .boxed(),
        prop::collection::vec(prop::option::of(text(6)), 0..4)
            .prop_map(|v| {
                let items: Vec<String> = v.into_iter().map(element).collect();
                format!("{{{}}}", items.join(","))
            })
            .boxed(),
        (
            -1000i32..1000,
            -1000i32..1000,
            -10i64.pow(12)..10i64.pow(12),
        )
            .prop_map(|(m, d, us)| format!("{m} mons {d} days {us} microseconds"))
            .boxed(),
        prop::sample::select(vec!["sad", "happy", "Zoë's"])
            .prop_map(String::from)
            .boxed(),
    ];
    let values = values
        .into_iter()
        .map(|s| prop::option::weighted(0.85, s))
        .collect::<Vec<_>>();
    // Half the rows hold NULL wherever the server casts the text (floats,
    // dates and times, bytea, arrays): those tuples are decoded in the
    // process, beside the others in the same batch.
    (values, any::<bool>()).prop_map(|(mut row, narrow)| {
        if narrow {
            for (value, (name, _)) in row.iter_mut().zip(COLUMNS) {
                if SERVER_CAST.contains(name) {
                    *value = None;
                }
            }
        }
        row
    })
}

/// The columns whose text a follower has the server cast.
const SERVER_CAST: &[&str] = &[
    "score", "ratio", "born", "wake", "seen_at", "at", "photo", "nums", "tags",
];

/// Inserts `rows` with ids from `first` in one transaction: each value
/// bound as text and cast by the server, as an application's literal is.
async fn insert(pool: &sqlx::PgPool, schema: &str, first: i32, rows: &[Vec<Option<String>>]) {
    let casts: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| {
            format!(
                "${}::text::{}",
                i + 2,
                ty.replace("MOOD", &format!("{schema}.mood"))
            )
        })
        .collect();
    let sql = format!("INSERT INTO {schema}.t VALUES ($1, {})", casts.join(", "));
    let mut tx = pool.begin().await.unwrap();
    for (i, row) in rows.iter().enumerate() {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone())).bind(first + i as i32);
        for v in row {
            q = q.bind(v.clone());
        }
        q.execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("{row:?}: {e}"));
    }
    tx.commit().await.unwrap();
}

/// Drops the slot and publication even when an assertion fails.
struct SlotGuard(String);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let slot = self.0.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                if let Ok(s) = Source::connect(pg_url(), 1).await {
                    let _ = s.drop_slot(&slot, &slot).await;
                    s.close().await;
                }
            })
        })
        .join();
    }
}

#[test]
fn generated_rows_decode_from_the_slot_as_the_full_load_reads_them() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (s, _schema) = rt.block_on(pg_schema("src_cdc_rows", TABLE));
    let table = format!("{s}.t");
    let slot = unique_name("slot_rows").to_lowercase();
    let _slot = SlotGuard(slot.clone());
    let (source, pool, q) = rt.block_on(async {
        let source = Source::connect(pg_url(), 2).await.unwrap();
        source.create_slot(&slot, &slot, &[&table]).await.unwrap();
        let pool = sqlx::PgPool::connect(pg_url()).await.unwrap();
        let from = Relation::Table(&table);
        let shape = source.describe(&from).await.unwrap();
        let q = source.page_query(&from, &shape, &[], 1000).unwrap();
        (source, pool, q)
    });
    // The runner's closure is `Fn`: what it changes lives in cells.
    let relations = std::cell::Cell::new(Relations::default());
    let next_id = std::cell::Cell::new(1);
    let mut runner = TestRunner::new(Config::with_cases(128));
    let rows = prop::collection::vec(row(), 1..6);
    runner
        .run(&rows, |rows| {
            let first = next_id.get();
            next_id.set(first + rows.len() as i32);
            rt.block_on(async {
                insert(&pool, &format!("\"{s}\""), first, &rows).await;
                let mut described = relations.take();
                let batch = source
                    .peek_changes(&slot, &slot, 10_000, &mut described)
                    .await
                    .unwrap();
                relations.set(described);
                let inserts: Vec<_> = batch
                    .changes
                    .iter()
                    .filter(|c| c.op == ChangeOp::Insert)
                    .collect();
                prop_assert_eq!(inserts.len(), rows.len());
                let tuples: Vec<&[TupleValue]> =
                    inserts.iter().map(|c| c.new.as_deref().unwrap()).collect();
                let decoded = source
                    .rows_of_tuples(&q, &inserts[0].columns, &tuples)
                    .await
                    .unwrap();
                let read: Vec<_> = read_all(&source, &q)
                    .await
                    .into_iter()
                    .skip(first as usize - 1)
                    .collect();
                let decoded: Vec<_> = decoded.into_iter().map(Option::unwrap).collect();
                prop_assert_eq!(decoded, read, "rows {:?}", rows);
                source
                    .advance_slot(&slot, batch.end_lsn.unwrap())
                    .await
                    .unwrap();
                Ok(())
            })
        })
        .unwrap();
    rt.block_on(async {
        source.drop_slot(&slot, &slot).await.unwrap();
        source.close().await;
    });
}
