//! Shared by the proxy tests: an in-process DynamoDB-compatible server, a
//! table of the test's own, items of known size, and reading them back.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use sql2ddb_core::{check_item, AttrValue, EncodedItem, Item, KeyAttr};
use sql2ddb_dynamo::{
    connect, ensure_table, BatchCalls, BatchWriter, Dynamo, Endpoint, LocalDynamo, WriteOutcome,
};
use sql2ddb_testkit::sdk::Client;
use sql2ddb_testkit::support::scan_all;
use sql2ddb_testkit::{FaultConfig, FaultProxy};

pub use sql2ddb_testkit::support::unique_name as unique;

/// The tables' keys: `PK` (S), `SK` (S).
pub fn keys() -> Vec<KeyAttr> {
    ["PK", "SK"]
        .into_iter()
        .map(|name| KeyAttr {
            name: name.into(),
            kind: sql2ddb_core::KeyType::S,
        })
        .collect()
}

/// Runs the `sql2ddb-testkit` binary with `args`, which it must refuse
/// (exit nonzero); returns what it said on stderr.
pub fn refused(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sql2ddb-testkit"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{args:?} was accepted: {stderr}");
    stderr
}

/// A fault configuration with every fault off but what `set` turns on.
pub fn only(set: impl FnOnce(&mut FaultConfig)) -> FaultConfig {
    let mut config = FaultConfig::default();
    set(&mut config);
    config
}

/// A server in this process with a table of the test's own (named after
/// `prefix`), and a fault proxy with `faults` in front of it.
pub async fn proxied(prefix: &str, faults: FaultConfig) -> (Upstream, String, FaultProxy) {
    let upstream = Upstream::start().await;
    let table = upstream.table(prefix).await;
    let proxy = FaultProxy::start(upstream.local.url(), faults)
        .await
        .unwrap_or_else(|e| panic!("a fault proxy: {e}"));
    (upstream, table, proxy)
}

/// A server in this process, with a client that talks to it directly.
pub struct Upstream {
    pub local: LocalDynamo,
    /// A bare SDK client, to look at tables directly.
    pub client: Client,
    /// sql2ddb's handle.
    pub dynamo: Dynamo,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let local = LocalDynamo::start(None).await.unwrap();
        let dynamo = client(local.url()).await;
        let client = sql2ddb_testkit::sdk::client(local.url());
        Upstream {
            local,
            client,
            dynamo,
        }
    }

    /// Creates a table of the test's own and returns its name.
    pub async fn table(&self, prefix: &str) -> String {
        let name = unique(prefix);
        ensure_table(&self.dynamo, &name, &keys(), true)
            .await
            .unwrap();
        name
    }

    /// Every item of `table`, by partition key.
    pub async fn scan(&self, table: &str) -> BTreeMap<String, Item> {
        let mut out = BTreeMap::new();
        for item in scan_all(&self.dynamo, table).await {
            let AttrValue::S(pk) = &item["PK"] else {
                panic!("PK is not a string: {item:?}")
            };
            assert!(out.insert(pk.clone(), item).is_none(), "duplicate item");
        }
        out
    }
}

/// sql2ddb's handle of `url` (the server itself or a proxy in front of it).
pub async fn client(url: &str) -> Dynamo {
    connect(&Endpoint::Url(url.to_string()), Some("us-east-1"))
        .await
        .unwrap()
}

/// The batch writer's calls to the endpoint at `url`.
#[allow(dead_code)] // not every test binary writes batches
pub async fn calls(url: &str) -> BatchCalls {
    client(url).await.calls().clone()
}

/// Items `from..to` of a few attribute types; `pad` bytes of padding make
/// their size known (about `pad + 60` bytes).
pub fn items(from: usize, to: usize, pad: usize) -> Vec<EncodedItem> {
    (from..to)
        .map(|i| {
            let mut item = Item::new();
            item.insert("PK".into(), AttrValue::S(format!("U#{i:07}")));
            item.insert("SK".into(), AttrValue::S("PROFILE".into()));
            item.insert("n".into(), AttrValue::N(format!("{}.5", i * 7)));
            item.insert("odd".into(), AttrValue::Bool(i % 2 == 1));
            let mut nested = BTreeMap::new();
            nested.insert(
                "tags".into(),
                AttrValue::SS(vec![format!("t{}", i % 5), "all".into()]),
            );
            item.insert("m".into(), AttrValue::M(nested));
            item.insert("pad".into(), AttrValue::S("x".repeat(pad + i % 7)));
            let size = check_item(&item, &keys()).expect("a valid item");
            EncodedItem::new(&item, &keys(), serde_json::json!({ "id": i }), size)
        })
        .collect()
}

/// What the items are in the table: by partition key.
pub fn by_key(items: &[EncodedItem]) -> BTreeMap<String, Item> {
    items
        .iter()
        .map(|m| {
            let item = m.decode().unwrap();
            match &item["PK"] {
                AttrValue::S(pk) => (pk.clone(), item.clone()),
                other => panic!("PK is not a string: {other:?}"),
            }
        })
        .collect()
}

/// Sets are unordered: compare them sorted.
fn normalized(v: &AttrValue) -> AttrValue {
    match v {
        AttrValue::SS(s) | AttrValue::NS(s) => {
            let mut s = s.clone();
            s.sort();
            if matches!(v, AttrValue::SS(_)) {
                AttrValue::SS(s)
            } else {
                AttrValue::NS(s)
            }
        }
        AttrValue::BS(s) => {
            let mut s = s.clone();
            s.sort();
            AttrValue::BS(s)
        }
        AttrValue::L(l) => AttrValue::L(l.iter().map(normalized).collect()),
        AttrValue::M(m) => {
            AttrValue::M(m.iter().map(|(k, v)| (k.clone(), normalized(v))).collect())
        }
        other => other.clone(),
    }
}

/// Asserts that the table holds exactly `expected`, naming the first
/// missing, extra or different item (a full dump would be unreadable).
pub fn assert_same_items(found: &BTreeMap<String, Item>, expected: &[EncodedItem]) {
    let expected = by_key(expected);
    let missing: Vec<&String> = expected
        .keys()
        .filter(|k| !found.contains_key(*k))
        .collect();
    let extra: Vec<&String> = found
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "{} items missing, first {:?}",
        missing.len(),
        missing[0]
    );
    assert!(
        extra.is_empty(),
        "{} unexpected items, first {:?}",
        extra.len(),
        extra[0]
    );
    for (key, want) in &expected {
        let got = &found[key];
        let want: Item = want
            .iter()
            .map(|(k, v)| (k.clone(), normalized(v)))
            .collect();
        let got: Item = got
            .iter()
            .map(|(k, v)| (k.clone(), normalized(v)))
            .collect();
        assert_eq!(got, want, "item {key} differs");
    }
}

/// Writes `items` in batches of `batch` with `tasks` concurrent tasks calling
/// `write`, and adds up the outcomes.
pub async fn write_all(
    writer: Arc<BatchWriter<BatchCalls>>,
    items: Vec<EncodedItem>,
    batch: usize,
    tasks: usize,
) -> WriteOutcome {
    let batches: Vec<Vec<EncodedItem>> = items.chunks(batch).map(<[_]>::to_vec).collect();
    let queue = Arc::new(std::sync::Mutex::new(batches));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        let (writer, queue) = (writer.clone(), queue.clone());
        set.spawn(async move {
            let mut total = WriteOutcome::default();
            loop {
                let next = queue.lock().unwrap().pop();
                let Some(batch) = next else { break };
                add(&mut total, writer.write(batch).await);
            }
            total
        });
    }
    let mut total = WriteOutcome::default();
    while let Some(joined) = set.join_next().await {
        add(&mut total, joined.unwrap());
    }
    total
}

/// Adds `out` to `total`.
fn add(total: &mut WriteOutcome, out: WriteOutcome) {
    total.written += out.written;
    total.retries += out.retries;
    total.throttled += out.throttled;
    total.write_units += out.write_units;
    total.rejected.extend(out.rejected);
    total.failed.extend(out.failed);
    total.unwritten.extend(out.unwritten);
}

/// The `sql2ddb-testkit` binary started with `args`, with its stdout past the
/// URL it printed first.
pub struct TestkitProcess {
    pub child: tokio::process::Child,
    pub stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
    pub url: String,
}

impl TestkitProcess {
    /// Starts the binary and reads the URL it prints on its first line.
    pub async fn start(args: &[&str]) -> TestkitProcess {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sql2ddb-testkit"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut url = String::new();
        stdout.read_line(&mut url).await.unwrap();
        let url = url.trim().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        TestkitProcess { child, stdout, url }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.id().unwrap().to_string();
        let kill = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(kill.success());
    }
}

/// One DynamoDB call by hand, to read the answer's text as it came:
/// `operation` (`PutItem`) with `body`, with the `Authorization` header of
/// access key id `credential` (the `Credential=` part a proxy reads, no
/// real signature: emulators check only that there is one). Returns the
/// status and the body.
pub async fn post(
    url: &str,
    operation: &str,
    body: &serde_json::Value,
    credential: &str,
) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    let client: hyper_util::client::legacy::Client<_, Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let req = hyper::Request::post(url)
        .header("x-amz-target", format!("DynamoDB_20120810.{operation}"))
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-date", "20240101T000000Z")
        .header(
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential={credential}/20240101/us-east-1/dynamodb/aws4_request, \
                 SignedHeaders=host;x-amz-date, Signature=00"
            ),
        )
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}
