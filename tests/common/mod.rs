//! Shared by the end-to-end tests: an in-process DynamoDB-compatible server
//! (dynoxide) on a loopback port, source fixtures of each test's own, the
//! built binary run the way a person would, a [`Scenario`] that ties them
//! together, and the values and assertions the tests compare items with.

mod process;
mod scenario;
mod sources;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sql2ddb_core::{AttrValue, Item};
use sql2ddb_dynamo::{connect, Endpoint};
use sql2ddb_testkit::sdk::{self, Client};

pub use process::{command, sql2ddb, wait_all, Proc, Run, PATIENCE};
pub use scenario::Scenario;
pub use sources::{pg_url, sqlite_file, MyDatabase, PgSchema};

/// A table's items, keyed by (PK, SK) rendered as text.
pub type Items = BTreeMap<(String, String), Item>;

/// A DynamoDB-compatible server: in this process (stopped when dropped), or
/// the one `SQL2DDB_TEST_DYNAMODB_URL` names (tests use table names of their
/// own, so they can share it).
pub struct Dynamo {
    /// Its `http://127.0.0.1:PORT` endpoint.
    pub url: String,
    /// A bare SDK client of it, to look at tables directly.
    pub client: Client,
    /// sql2ddb's handle of it.
    pub handle: sql2ddb_dynamo::Dynamo,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Dynamo {
    /// Connects to `SQL2DDB_TEST_DYNAMODB_URL` if it is set, else starts a
    /// server with an empty in-memory database.
    pub async fn start() -> Dynamo {
        let external = sources::from_env("SQL2DDB_TEST_DYNAMODB_URL", "");
        if !external.is_empty() {
            let handle = connect(&Endpoint::Url(external.clone()), Some("us-east-1"))
                .await
                .unwrap();
            return Dynamo {
                client: sdk::client(&external),
                url: external,
                handle,
                shutdown: None,
            };
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let db = dynoxide::Database::memory().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = rx.await;
        }));
        let handle = connect(&Endpoint::Url(url.clone()), Some("us-east-1"))
            .await
            .unwrap();
        Dynamo {
            client: sdk::client(&url),
            url,
            handle,
            shutdown: Some(tx),
        }
    }

    /// Every item of a table, keyed by (PK, SK) rendered as text.
    pub async fn scan(&self, table: &str) -> Items {
        let mut out = BTreeMap::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(table)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for raw in page.items() {
                let item = sdk::item_from_sdk(raw);
                let key = key_of(&item);
                assert!(
                    out.insert(key.clone(), item).is_none(),
                    "duplicate key {key:?}"
                );
            }
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => break,
            }
        }
        out
    }
}

impl Drop for Dynamo {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn text(v: &AttrValue) -> String {
    match v {
        AttrValue::S(s) | AttrValue::N(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// An item's (PK, SK) as text, as [`Items`] keys it.
pub fn key_of(item: &Item) -> (String, String) {
    (
        text(&item["PK"]),
        item.get("SK").map(text).unwrap_or_default(),
    )
}

/// The [`Items`] key of `pk` and `sk`.
pub fn key(pk: &str, sk: &str) -> (String, String) {
    (pk.to_string(), sk.to_string())
}

/// A unique name for this test's schema, table, directory.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos:x}", std::process::id())
}

/// The workspace root (mappings and examples are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Writes a mapping file into `dir` and returns its path as text.
pub fn write_mapping(dir: &Path, text: &str) -> String {
    let path = dir.join("mapping.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The lines of a run's rejects file, as JSON.
pub fn rejects_of(dir: &Path, report: &serde_json::Value) -> Vec<serde_json::Value> {
    let path = dir.join(report["rejects_file"].as_str().unwrap());
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `S` value.
pub fn s(v: impl Into<String>) -> AttrValue {
    AttrValue::S(v.into())
}

/// `N` value.
pub fn n(v: impl ToString) -> AttrValue {
    AttrValue::N(v.to_string())
}

/// An item of these attributes.
pub fn item(pairs: Vec<(&str, AttrValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `units / 10^scale` in plain notation without trailing zeros, as
/// DynamoDB returns a number.
pub fn decimal(units: i64, scale: u32) -> String {
    let p = 10i64.pow(scale);
    let (sign, a) = if units < 0 {
        ("-", -units)
    } else {
        ("", units)
    };
    let frac = format!("{:0width$}", a % p, width = scale as usize);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{sign}{}", a / p)
    } else {
        format!("{sign}{}.{frac}", a / p)
    }
}

/// Asserts that every expected item is in `items` (a [`Dynamo::scan`]) and
/// equal to it attribute by attribute.
pub fn assert_items(items: &Items, expected: &[Item]) {
    for want in expected {
        let key = key_of(want);
        let got = items.get(&key).unwrap_or_else(|| panic!("no item {key:?}"));
        assert_item(&key, got, want);
    }
}

/// Asserts two items are equal attribute by attribute, naming the first difference.
pub fn assert_item(key: &(String, String), got: &Item, want: &Item) {
    for (name, w) in want {
        match got.get(name) {
            Some(g) => assert_eq!(g, w, "item {key:?}: attribute {name}"),
            None => panic!("item {key:?}: attribute {name} missing; item: {got:?}"),
        }
    }
    for name in got.keys() {
        assert!(
            want.contains_key(name),
            "item {key:?}: unexpected attribute {name} = {:?}",
            got[name]
        );
    }
}
