//! DynamoDB's capacity as a model: the throttling a real table does and
//! emulators never do.
//!
//! A table is split into partitions; an item's partition is chosen by a
//! hash of its partition key value ([`key_hash`]). Each partition has a
//! token bucket of write units (1,000 a second in DynamoDB) and one of read
//! units (3,000), and banks up to 300 s of unused capacity as burst credit
//! when burst is on. The table has its own bucket: provisioned write units
//! (with the same burst credit), or an on-demand table's warm throughput,
//! which starts at a configured rate and doubles when the traffic stays
//! near it for a while. Writes are metered by DynamoDB's rules: the item's
//! size by its size rules rounded up to 1 KB, and again for each global
//! secondary index the item projects into ([`TableSchema::put_cost`]).
//!
//! The metering, the partition choice and the ideal time are
//! [`sql2ddb_core::capacity`]'s, the rules `sql2ddb plan --capacity`
//! predicts with.
//!
//! Time is the model's: the caller passes model seconds to [`TableModel`],
//! so unit tests run instantly; the proxy ([`crate::FaultProxy`] with a
//! [`CapacityConfig`]) converts real time with the configuration's
//! `time_scale` (model seconds per real second).

mod bucket;
mod config;
mod ideal;
mod model;
mod reads;
mod route;
pub(crate) mod serve;
mod table;

pub use bucket::TokenBucket;
pub use config::{
    CapacityConfig, CapacityConfigError, GsiConfig, Projection, TableCapacity, BURST_SECS,
    ON_DEMAND_DOUBLE_AFTER_SECS, ON_DEMAND_WARM_WCU, PARTITION_RCU, PARTITION_WCU, TABLE_QUOTA_WCU,
};
pub use ideal::{ideal, Ideal};
pub use model::{TableModel, TableUsage, WriteDemand};
pub(crate) use route::intercept;
pub use serve::CapacityStats;
pub use sql2ddb_core::capacity::{key_hash, CapacityLimits, TableSchema, WriteCost};
pub use table::Refusal;
