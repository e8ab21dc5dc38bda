//! Test support for sql2ddb, speaking DynamoDB's JSON protocol over HTTP:
//!
//! - [`FaultProxy`] sits between sql2ddb and a DynamoDB-compatible server and
//!   injects what real DynamoDB does and emulators never do: throttling
//!   errors (400 and 429), 5xx, request timeouts, expired tokens, unprocessed
//!   items and keys (re-encoded as the service may spell them), slow
//!   answers, delays, dropped connections, on any operation. It counts what
//!   it did and the write units that went through, per second.
//! - [`NullSink`] accepts every `BatchWriteItem` and keeps nothing, to measure
//!   sql2ddb's own ceiling; for `sql2ddb update` it also answers `Scan` from a
//!   [`SyntheticTable`] and counts each `UpdateItem` and `DeleteItem`.
//!
//! - [`bench_input`] holds what the queue-consumer benchmark drivers share.
//! - [`sdk_load`] sends prebuilt items through the bare SDK: the benchmark's
//!   yardstick; [`sdk`] is that bare SDK for tests that look at a table
//!   directly.
//! - [`support`] is what the workspace's tests share: unique names,
//!   database URLs, servers of their own, reading a table back.
//!
//! Both bind to 127.0.0.1 and stop when dropped. The `sql2ddb-testkit`
//! binary runs either as a process.

#![warn(missing_docs)]

pub mod bench_input;
pub mod capacity;
pub mod fault;
mod hold;
pub mod proxy;
mod reencode;
pub mod sdk;
pub mod sdk_load;
pub mod sink;
pub mod support;
pub mod synthetic;
mod upstream;
mod wire;

pub use fault::{FaultConfig, FaultConfigError, FaultKind, DEFAULT_SLOW_FOR, EVERY_OPERATION};
pub use proxy::{FaultProxy, ProxyStats};
pub use sink::{NullSink, SinkStats};
pub use synthetic::SyntheticTable;

/// Why a proxy or sink could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// The fault configuration is invalid.
    #[error(transparent)]
    Config(#[from] FaultConfigError),
    /// The upstream URL is not an `http://host:port` URL.
    #[error("upstream {0:?} is not an http:// URL")]
    Upstream(String),
    /// The port could not be bound.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(std::io::Error),
    /// The key schema cannot key synthetic items.
    #[error(transparent)]
    Keys(#[from] crate::synthetic::KeySchemaError),
}
