//! `sql2ddb-testkit proxy …` / `sql2ddb-testkit null-sink …` /
//! `sql2ddb-testkit dynamodb …`: the fault proxy, the null sink and an
//! in-memory DynamoDB-compatible server (dynoxide) as processes. Each prints
//! its URL on the first line of stdout and runs until SIGINT or SIGTERM; the
//! proxy and the sink then print their counts as JSON. `sdk-load`, `load`
//! and `scan` are the benchmark's one-shot loads and reads; `capacity-ideal`
//! is the ideal time of an export's items under a capacity model.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use sql2ddb_core::KeyAttr;
use sql2ddb_testkit::capacity::{self, CapacityConfig, TableSchema};
use sql2ddb_testkit::{sdk_load, FaultConfig, FaultProxy, NullSink};

mod scan;

#[derive(Parser)]
#[command(
    name = "sql2ddb-testkit",
    version,
    about = "Fault-injecting DynamoDB proxy, null sink and in-memory DynamoDB server, for testing sql2ddb"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Forward to a DynamoDB-compatible server, injecting faults.
    Proxy(Box<ProxyArgs>),
    /// Accept every BatchWriteItem and keep nothing.
    NullSink {
        /// Port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Key schema of every table, partition key first: `PK:S,SK:S`.
        #[arg(long)]
        keys: String,
        /// Items each table holds for a Scan (synthetic, about 250 bytes,
        /// S or N keys); every UpdateItem and DeleteItem is accepted.
        #[arg(long, default_value_t = 0)]
        scan_items: u64,
    },
    /// Serve an empty in-memory DynamoDB-compatible database (dynoxide).
    Dynamodb {
        /// Port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Send the items of an export (`--compression none`) through the bare
    /// SDK, prebuilt before the clock starts; print the figures as JSON.
    SdkLoad {
        /// The DynamoDB-compatible endpoint (`http://127.0.0.1:PORT`).
        #[arg(long)]
        endpoint: String,
        /// The table to write to.
        #[arg(long)]
        table: String,
        /// The export's data directory (`OUT/data`).
        #[arg(long)]
        items: std::path::PathBuf,
        /// Calls in flight.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// The SDK's own retries of a failed call: off (one attempt), or
        /// its standard or adaptive retry mode with their defaults.
        #[arg(long, value_enum, default_value_t = RetryMode::Off)]
        retry_mode: RetryMode,
    },
    /// The ideal time of writing an export's items (`--compression none`)
    /// under a capacity model whose `partition_key` is set; print it as JSON.
    CapacityIdeal {
        /// The capacity model (TOML).
        #[arg(long)]
        capacity: std::path::PathBuf,
        /// The export's data directory (`OUT/data`).
        #[arg(long)]
        items: std::path::PathBuf,
    },
    /// Write the synthetic items a `null-sink --scan-items N` scans into a
    /// table (created when missing); print the figures as JSON.
    Load {
        /// The DynamoDB-compatible endpoint (`http://127.0.0.1:PORT`).
        #[arg(long)]
        endpoint: String,
        /// The table to write to.
        #[arg(long)]
        table: String,
        /// Key schema, partition key first: `PK:S,SK:S`.
        #[arg(long)]
        keys: String,
        /// How many items.
        #[arg(long)]
        items: u64,
        /// Calls in flight.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
    },
    /// Scan a table in parallel segments and count its items (nothing
    /// else); print the count as JSON.
    Scan {
        /// The DynamoDB-compatible endpoint (`http://127.0.0.1:PORT`).
        #[arg(long)]
        endpoint: String,
        /// The table.
        #[arg(long)]
        table: String,
        /// Segments of the parallel Scan.
        #[arg(long, default_value_t = 4)]
        segments: u32,
    },
}

/// The SDK's retry modes.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RetryMode {
    /// One attempt per call.
    Off,
    /// The SDK's standard mode: 3 attempts, exponential backoff with jitter.
    Standard,
    /// The SDK's adaptive mode: standard, and a client-side rate limit
    /// that backs off on throttling.
    Adaptive,
}

#[derive(clap::Args)]
struct ProxyArgs {
    /// The server to forward to (`http://127.0.0.1:8000`).
    #[arg(long)]
    upstream: String,
    /// Port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seed of the fault draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Fault this share of the calls, spread evenly over six fault kinds
    /// (both throttles, 500, 503, unprocessed, dropped), and delay as many;
    /// the per-kind rates below override their part.
    #[arg(long, conflicts_with = "every_fault_rate")]
    fault_rate: Option<f64>,
    /// Everything at once: fault this share of the calls of every operation,
    /// spread evenly over all nine fault kinds, delay as many, re-encode the
    /// unprocessed items and expire each credential's first token; at most
    /// --slow-limit (default 2) slow answers. The options below override
    /// their part.
    #[arg(long)]
    every_fault_rate: Option<f64>,
    /// Rate of ProvisionedThroughputExceededException answers.
    #[arg(long)]
    provisioned_rate: Option<f64>,
    /// Rate of ThrottlingException answers.
    #[arg(long)]
    throttle_rate: Option<f64>,
    /// Rate of HTTP 500 answers.
    #[arg(long)]
    error_500_rate: Option<f64>,
    /// Rate of HTTP 503 answers.
    #[arg(long)]
    error_503_rate: Option<f64>,
    /// Rate of BatchWriteItem calls answered with part of their items unprocessed.
    #[arg(long)]
    unprocessed_rate: Option<f64>,
    /// Rate of connections closed without an answer.
    #[arg(long)]
    drop_rate: Option<f64>,
    /// Rate of HTTP 429 TooManyRequestsException answers.
    #[arg(long)]
    too_many_requests_rate: Option<f64>,
    /// Rate of HTTP 408 RequestTimeoutException answers.
    #[arg(long)]
    request_timeout_rate: Option<f64>,
    /// Rate of slow answers: the call is forwarded, its answer held for
    /// --slow-secs.
    #[arg(long)]
    slow_rate: Option<f64>,
    /// How long a slow answer is held, in seconds (default 35: past the
    /// 30 s sql2ddb gives one attempt).
    #[arg(long)]
    slow_secs: Option<f64>,
    /// Hold at most this many answers slow.
    #[arg(long)]
    slow_limit: Option<u64>,
    /// Answer unprocessed items and keys re-encoded: attributes and set
    /// elements in another order, numbers in another spelling of their
    /// value, a character of a string as a \u escape.
    #[arg(long)]
    reencode: bool,
    /// Answer every BatchWriteItem item the proxy sees for the first time
    /// as unprocessed.
    #[arg(long)]
    first_sight_unprocessed: bool,
    /// Answer ExpiredTokenException to the first call of each access key id.
    #[arg(long)]
    expired_token: bool,
    /// Rate of delayed calls.
    #[arg(long)]
    delay_rate: Option<f64>,
    /// Delay range in milliseconds: `MIN-MAX`.
    #[arg(long, default_value = "5-50")]
    delay_ms: String,
    /// Throttle every call for this many seconds after starting.
    #[arg(long)]
    throttle_all_secs: Option<f64>,
    /// Operations the faults apply to, comma-separated; `*` for every
    /// operation (the default with --every-fault-rate, else BatchWriteItem).
    #[arg(long)]
    operations: Option<String>,
    /// A capacity model of the tables (TOML): the write calls are admitted
    /// by it and throttled as DynamoDB throttles; the faults apply to the
    /// other calls.
    #[arg(long)]
    capacity: Option<std::path::PathBuf>,
    /// Model seconds per real second, over the file's `time_scale`.
    #[arg(long, requires = "capacity")]
    time_scale: Option<f64>,
}

impl ProxyArgs {
    fn config(&self) -> anyhow::Result<FaultConfig> {
        let mut c = match (self.fault_rate, self.every_fault_rate) {
            (Some(rate), _) => FaultConfig::mix(rate, self.seed),
            (None, Some(rate)) => {
                FaultConfig::every_fault(rate, self.seed, self.slow_limit.unwrap_or(2))
            }
            (None, None) => FaultConfig {
                seed: self.seed,
                ..FaultConfig::default()
            },
        };
        let overrides = [
            (
                self.provisioned_rate,
                &mut c.provisioned_throughput_exceeded,
            ),
            (self.throttle_rate, &mut c.throttling),
            (self.error_500_rate, &mut c.internal_error),
            (self.error_503_rate, &mut c.service_unavailable),
            (self.unprocessed_rate, &mut c.unprocessed),
            (self.drop_rate, &mut c.dropped_connection),
            (self.delay_rate, &mut c.delay),
            (self.too_many_requests_rate, &mut c.too_many_requests),
            (self.request_timeout_rate, &mut c.request_timeout),
            (self.slow_rate, &mut c.slow),
        ];
        for (given, field) in overrides {
            if let Some(rate) = given {
                *field = rate;
            }
        }
        let Some((lo, hi)) = self.delay_ms.split_once('-') else {
            bail!("--delay-ms must be MIN-MAX, got {:?}", self.delay_ms);
        };
        c.delay_ms = (
            lo.trim().parse().context("--delay-ms minimum")?,
            hi.trim().parse().context("--delay-ms maximum")?,
        );
        if let Some(secs) = self.throttle_all_secs {
            c.throttle_all_for =
                Some(Duration::try_from_secs_f64(secs).context("--throttle-all-secs")?);
        }
        if let Some(secs) = self.slow_secs {
            c.slow_for = Duration::try_from_secs_f64(secs).context("--slow-secs")?;
        }
        if self.slow_limit.is_some() {
            c.slow_limit = self.slow_limit;
        }
        c.reencode |= self.reencode;
        c.first_sight_unprocessed |= self.first_sight_unprocessed;
        c.expired_token |= self.expired_token;
        if let Some(operations) = &self.operations {
            c.operations = operations
                .split(',')
                .map(|o| o.trim().to_string())
                .filter(|o| !o.is_empty())
                .collect();
        }
        Ok(c)
    }
}

/// The capacity model of a TOML file.
fn capacity_config(path: &std::path::Path) -> anyhow::Result<CapacityConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    CapacityConfig::from_toml(&text).with_context(|| path.display().to_string())
}

impl ProxyArgs {
    fn capacity(&self) -> anyhow::Result<Option<CapacityConfig>> {
        let Some(path) = &self.capacity else {
            return Ok(None);
        };
        let mut config = capacity_config(path)?;
        if let Some(scale) = self.time_scale {
            config.time_scale = scale;
        }
        config.validate()?;
        Ok(Some(config))
    }
}

/// The ideal time of the items of the export files under `dir`.
fn capacity_ideal(capacity: &std::path::Path, dir: &std::path::Path) -> anyhow::Result<String> {
    let config = capacity_config(capacity)?;
    let Some(partition_key) = config.partition_key.clone() else {
        bail!("{}: capacity-ideal needs partition_key", capacity.display());
    };
    let schema = TableSchema {
        partition_key,
        sort_key: None,
        indexes: config.gsi.clone().unwrap_or_default(),
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut items = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        for line in text.lines().filter(|l| !l.is_empty()) {
            let mut line: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}: not an export line", file.display()))?;
            items.push(line["Item"].take());
        }
    }
    Ok(serde_json::to_string(&capacity::ideal(
        &config, &schema, &items,
    ))?)
}

fn parse_keys(spec: &str) -> anyhow::Result<Vec<KeyAttr>> {
    let keys: Vec<KeyAttr> = spec
        .split(',')
        .map(|k| {
            let (name, kind) = k
                .split_once(':')
                .with_context(|| format!("key {k:?} must be NAME:TYPE"))?;
            match kind.parse() {
                Ok(kind) if !name.is_empty() => Ok(KeyAttr {
                    name: name.to_string(),
                    kind,
                }),
                _ => bail!("key {k:?} must be NAME:S, NAME:N or NAME:B"),
            }
        })
        .collect::<anyhow::Result<_>>()?;
    if keys.len() > 2 {
        bail!(
            "at most two key attributes (partition, sort), got {}",
            keys.len()
        );
    }
    Ok(keys)
}

/// Resolves on SIGINT or SIGTERM.
async fn stopped() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

fn announce(url: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{url}")?;
    out.flush()?;
    Ok(())
}

/// Serves dynoxide in memory on 127.0.0.1:`port` until SIGINT or SIGTERM.
async fn serve_dynamodb(port: u16) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot bind 127.0.0.1:{port}"))?;
    let url = format!("http://{}", listener.local_addr()?);
    let db = dynoxide::Database::memory().map_err(|e| anyhow::anyhow!("dynoxide: {e}"))?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
        let _ = rx.await;
    }));
    announce(&url)?;
    stopped().await?;
    let _ = tx.send(());
    // A stuck connection must not keep the process alive after a stop signal.
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    Ok(())
}

/// `client` with the SDK's own retries in `mode` (it is built with them off).
fn with_retry_mode(
    client: sql2ddb_testkit::sdk::Client,
    mode: RetryMode,
) -> sql2ddb_testkit::sdk::Client {
    use sql2ddb_testkit::sdk::config::retry::RetryConfig;
    let retry = match mode {
        RetryMode::Off => return client,
        RetryMode::Standard => RetryConfig::standard(),
        RetryMode::Adaptive => RetryConfig::adaptive(),
    };
    sql2ddb_testkit::sdk::Client::from_conf(
        client.config().to_builder().retry_config(retry).build(),
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let stats = match cli.command {
        Command::Proxy(args) => {
            let capacity = args.capacity()?;
            let proxy = FaultProxy::start_on(args.port, &args.upstream, args.config()?).await?;
            if capacity.is_some() {
                proxy.set_capacity(capacity)?;
            }
            announce(&proxy.url())?;
            stopped().await?;
            let mut stats = serde_json::to_value(proxy.stats())?;
            if let Some(capacity) = proxy.capacity_stats() {
                stats["capacity"] = serde_json::to_value(capacity)?;
            }
            serde_json::to_string_pretty(&stats)?
        }
        Command::NullSink {
            port,
            keys,
            scan_items,
        } => {
            let sink = NullSink::start_scannable(port, parse_keys(&keys)?, scan_items).await?;
            announce(&sink.url())?;
            stopped().await?;
            serde_json::to_string_pretty(&sink.stats())?
        }
        Command::Dynamodb { port } => return serve_dynamodb(port).await,
        Command::CapacityIdeal { capacity, items } => capacity_ideal(&capacity, &items)?,
        Command::SdkLoad {
            endpoint,
            table,
            items,
            concurrency,
            retry_mode,
        } => {
            let batches = sdk_load::batches(sdk_load::read_items(&items)?);
            let client = sql2ddb_testkit::sdk::client(&endpoint);
            let client = with_retry_mode(client, retry_mode);
            serde_json::to_string(&sdk_load::send(&client, &table, batches, concurrency).await?)?
        }
        Command::Load {
            endpoint,
            table,
            keys,
            items,
            concurrency,
        } => {
            let keys = parse_keys(&keys)?;
            let client = sql2ddb_testkit::sdk::client(&endpoint);
            let endpoint = sql2ddb_dynamo::Endpoint::Url(endpoint);
            let dynamo = sql2ddb_dynamo::connect(&endpoint, Some("us-east-1")).await?;
            let stats =
                sdk_load::load_synthetic(&client, &dynamo, &table, keys, items, concurrency)
                    .await?;
            serde_json::to_string(&stats)?
        }
        Command::Scan {
            endpoint,
            table,
            segments,
        } => {
            let endpoint = sql2ddb_dynamo::Endpoint::Url(endpoint);
            let client = sql2ddb_dynamo::connect(&endpoint, Some("us-east-1")).await?;
            let items = scan::scan(&client, &table, segments).await?;
            serde_json::json!({ "items": items }).to_string()
        }
    };
    println!("{stats}");
    Ok(())
}
