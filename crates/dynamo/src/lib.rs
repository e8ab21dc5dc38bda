//! Everything of sql2ddb that calls DynamoDB: the client, the batch writer,
//! table admin, and the embedded local endpoint.
//!
//! Every request goes through the SDK's client, held by a [`Dynamo`] made
//! from the process's AWS context (no other crate names a DynamoDB SDK type); the
//! batch writer's body is the items' own text ([`calls`]).
//!
//! Retries have one owner per call: the SDK's own retries are switched off
//! and every call is retried by `sql2ddb-aws`'s retry engine
//! ([`sql2ddb_aws::Retrier`]), with the same capped exponential backoff and
//! full jitter, so attempts never multiply: whole calls, and the part of a
//! call that came back unprocessed (`UnprocessedKeys`, a table's emptying).
//! [`writer::BatchWriter`]'s chunks keep an account per item (each its own
//! budget, refused items resent among fresh ones), with the engine's
//! backoff, jitter and sleep. Every failed call is classified once, from its error code and
//! HTTP status, as a [`Failure`]: throttled, transient, a fault of the
//! table, or a refused request.

#![warn(missing_docs)]

pub mod admin;
#[cfg(feature = "bare-sdk")]
pub mod bare;
pub mod body;
pub mod calls;
pub mod client;
pub mod concurrency;
mod convert;
pub mod delete;
pub mod empty;
pub mod error;
pub mod failure;
pub mod limiter;
pub mod local;
pub mod pacer;
pub mod pointer;
pub mod progress;
pub mod read;
mod retry;
mod spread;
pub mod unprocessed;
pub mod update;
pub mod writer;

pub use admin::{ensure_table, ensure_table_spec, Billing, GsiSpec, Projection, TableSpec};
pub use calls::{BatchCalls, TableWriter};
pub use client::{connect, Dynamo, Endpoint};
pub use concurrency::{AdaptiveConcurrency, ConcurrencySnapshot, Permit};
pub use delete::delete_item;
pub use empty::{count_items, empty_table, Emptying, ItemCount};
pub use error::{DynamoError, ErrorKind};
pub use failure::Failure;
pub use limiter::{CapacitySnapshot, WriteCapacityLimiter};
pub use local::LocalDynamo;
pub use pacer::{Pacer, PacerSnapshot};
pub use pointer::{read_pointer, write_pointer, PointerOutcome};
pub use read::{batch_get, scan_segment, ScanSegment, MAX_BATCH_GET_KEYS};
pub use writer::{
    BatchWriteApi, BatchWriter, CallError, RetryPolicy, WriteOutcome, RESENDS_PER_CALL,
};
