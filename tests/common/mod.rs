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
pub use sql2ddb_testkit::support::Dynamo;

pub use process::{
    blocking_command, command, sql2ddb, wait_all, Proc, Run, AWS_CREDENTIAL_VARS, EXIT_FAILED,
    EX_CONFIG, EX_IOERR, EX_TEMPFAIL, EX_UNAVAILABLE, PATIENCE,
};
pub use scenario::Scenario;
pub use sources::{items_sql, mapping_head, pg_url, sqlite_file, unique, MyDatabase, PgSchema};

/// A table's items, keyed by (PK, SK) rendered as text.
pub type Items = BTreeMap<(String, String), Item>;

/// Reading a table back keyed by its items' (PK, SK).
#[allow(async_fn_in_trait)] // used by this test binary alone
pub trait ScanKeyed {
    /// Every item of a table, keyed by (PK, SK) rendered as text; a key
    /// seen twice fails the test.
    async fn scan(&self, table: &str) -> Items;
}

impl ScanKeyed for Dynamo {
    async fn scan(&self, table: &str) -> Items {
        let mut out = BTreeMap::new();
        for item in self.scan_all(table).await {
            let key = key_of(&item);
            assert!(
                out.insert(key.clone(), item).is_none(),
                "duplicate key {key:?}"
            );
        }
        out
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

/// The workspace root (mappings and examples are relative to it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The example shop's mapping, into the scenario's table on its server.
pub fn shop_mapping(sc: &Scenario) -> String {
    let text = std::fs::read_to_string(root().join("mappings/shop.toml")).unwrap();
    let db = root().join("examples/shop.db");
    let text = text
        .replace("table = \"shop\"", "table = \"TABLE\"")
        .replace("endpoint = \"local\"", "")
        .replace(
            "${SHOP_DATABASE_URL:-sqlite://examples/shop.db}",
            &format!("sqlite://{}", db.display()),
        );
    sc.mapping(&text)
}

/// A mapping's text, a literal (usable in a `const`): version 1, the local
/// PostgreSQL with the `[source]` options `$source` (TOML lines, optional),
/// the scenario's `TABLE` created on a run and keyed by string `PK` and
/// `SK`, then `$rest` (more of `[target]`, `[writer]`, the entities);
/// `url = "…"` first puts another URL in the `[source]`.
/// [`Scenario::mapping`] fills in `TABLE`, `SCHEMA` and the PostgreSQL URL
/// the tests use.
macro_rules! pg_mapping {
    // The source's URL as a placeholder the test fills in (another
    // database, a URL it builds), then `[source]` options and the rest.
    (url = $url:literal, $source:literal, $rest:literal) => {
        concat!(
            "version = 1\n[source]\nurl = \"",
            $url,
            "\"\n",
            $source,
            "\n[target]\ntable = \"TABLE\"\ncreate = true\n",
            "pk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n",
            $rest
        )
    };
    ($source:literal, $rest:literal) => {
        concat!(
            "version = 1\n[source]\nurl = \"postgres://root@127.0.0.1:5432/test\"\n",
            $source,
            "\n[target]\ntable = \"TABLE\"\ncreate = true\n",
            "pk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n",
            $rest
        )
    };
    // Without source options, line for line as a mapping written out whole
    // (tests check the line numbers errors name).
    ($rest:literal) => {
        concat!(
            "version = 1\n[source]\nurl = \"postgres://root@127.0.0.1:5432/test\"\n",
            "[target]\ntable = \"TABLE\"\ncreate = true\n",
            "pk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n",
            $rest
        )
    };
}
pub(crate) use pg_mapping;

/// A mapping of `SCHEMA.items (id, name, …)` to items keyed `{name}` /
/// `ITEM#{id}`: the scenario's table, created on a run.
pub const ITEMS_MAPPING: &str = pg_mapping!(
    r#"
[[entity]]
name = "item"
from = "SCHEMA.items"
pk = "{name}"
sk = "ITEM#{id}"
"#
);

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

/// The number `field` of a JSON report (or of one of its objects).
pub fn count(report: &serde_json::Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {report}"))
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

/// A MySQL/MariaDB replica server id unique to this test process and call:
/// two binary log readers with one id disconnect each other, and the tests
/// follow the one server side by side.
pub fn replica_server_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (3_000_000 + (std::process::id() % 100_000) * 16 + n % 16).to_string()
}
