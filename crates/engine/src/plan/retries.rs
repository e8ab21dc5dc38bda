//! `plan --capacity`'s estimate of the items the pacer refuses and sends
//! again (`crates/dynamo/src/pacer.rs`): an estimate from the pacer's rules,
//! calibrated on the capacity bench (docs/performance.md), never a measure.
//!
//! - **At a limit.** The pacer lets refusals reach about [`CUT_SHARE`] of
//!   the last second's units before it cuts the table's rate, so about that
//!   share of the items written while the table, or their partition, is at
//!   its limit are refused once. None when the run's rate (the table's, or
//!   a write-capacity cap below it) keeps the table and every partition
//!   under their limits.
//! - **Paced keys.** A partition key seen with more than one item in the
//!   sample (an item collection, a hot key) is paced on its own: once its
//!   items were refused, or from its first item at the rate the keys paced
//!   before it settled at. About [`FIRST_REFUSALS_PER_KEY`] items of each
//!   are refused (the first keys' before they are paced, a later key's
//!   while its rate finds its partition's share), and [`OVER_SECOND_SHARE`]
//!   of its units beyond a partition's first second while its rate,
//!   starting at [`KEY_START_RATE`] or the settled rate, is cut to what
//!   its partition admits and probes upwards again.

use serde::Serialize;
use sql2ddb_core::capacity::CapacityLimits;
use sql2ddb_core::shown::{count, thousands};
use sql2ddb_dynamo::pacer::{CUT_SHARE, KEY_START_RATE};

/// Items of a partition key refused before the pacer paces it on its own:
/// about those of the first partial answer that refused it (calibrated on
/// the bench's collections: 5–7 items a key over `run`'s uniform share).
pub const FIRST_REFUSALS_PER_KEY: f64 = 5.0;

/// The share of a paced key's units beyond a partition's first second that
/// is refused while its rate is cut to its partition's and grows back
/// (calibrated on the bench's skewed set: about 73 items of each key of
/// 1,000 units, with partitions of 250 WCU/s).
pub const OVER_SECOND_SHARE: f64 = 0.1;

/// The items the pacer is predicted to refuse and send again.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RetryEstimate {
    /// Items refused and sent again, in all.
    pub items: u64,
    /// Of them, refused at the table's or a partition's limit before the
    /// pacer cut the rate: [`CUT_SHARE`] of the items written at a limit.
    pub at_limit: u64,
    /// Of them, refused of the partition keys paced on their own.
    pub paced_keys: u64,
    /// The partition keys paced on their own (seen with more than one item
    /// in the sample, in a partition at its limit).
    pub keys: u64,
    /// What the estimate is made of.
    pub basis: String,
}

/// One partition key's load, as the sample saw it (scaled to the rows).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct KeyLoad {
    /// Its partition.
    pub partition: usize,
    /// The table's write units of its items.
    pub units: f64,
    /// Its items.
    pub items: f64,
    /// Its items in the sample.
    pub sampled: u64,
}

/// One partition's load: the table's write units and the items.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct PartitionLoad {
    /// The table's write units of its items.
    pub units: f64,
    /// Its items.
    pub items: f64,
}

/// The estimate for a load of `write_units` in all (indexes included) over
/// `partitions`, with `keys`, at `limits` and the run's cap.
pub(super) fn estimate<'a>(
    limits: &CapacityLimits,
    cap: Option<u64>,
    write_units: f64,
    partitions: &[PartitionLoad],
    keys: impl IntoIterator<Item = &'a KeyLoad>,
) -> RetryEstimate {
    let table = limits.table_wcu as f64;
    let partition = limits.partition_wcu as f64;
    let rate = cap.map_or(table, |c| (c as f64).min(table));
    let table_at_limit = rate >= table;
    // A partition's share of the run's rate, against its own.
    let at_limit = |p: usize| {
        table_at_limit
            || partitions
                .get(p)
                .is_some_and(|l| rate * l.units / write_units.max(1.0) >= partition)
    };
    let items_at_limit: f64 = (0..partitions.len())
        .filter(|&p| at_limit(p))
        .map(|p| partitions[p].items)
        .sum();
    let (mut keys_paced, mut key_items) = (0u64, 0.0);
    for k in keys {
        if k.sampled < 2 || !at_limit(k.partition) {
            continue;
        }
        let items_per_unit = k.items / k.units.max(1.0);
        let over = (k.units - partition).max(0.0) * OVER_SECOND_SHARE * items_per_unit;
        key_items += (FIRST_REFUSALS_PER_KEY + over).min(k.items);
        keys_paced += 1;
    }
    let at_limit = (items_at_limit * CUT_SHARE).round() as u64;
    let paced_keys = key_items.round() as u64;
    let at = match cap {
        Some(c) if (c as f64) < table => format!("max_wcu {c} WCU/s"),
        _ => format!("the table's {} WCU/s", limits.table_wcu),
    };
    let basis = match items_at_limit > 0.0 {
        false => format!(
            "none: at {at} the table ({} WCU/s) and every partition ({} WCU/s each) stay under their limits",
            limits.table_wcu, limits.partition_wcu
        ),
        true => format!(
            "an estimate from the pacer's rules at {at}: {:.0}% of the {} items written at a limit (the refusals it lets through before it cuts the rate), and for {} with more than one item in the sample, {FIRST_REFUSALS_PER_KEY:.0} each before the key is paced and {:.0}% of its units beyond a partition's first second ({} WCU; its pace starts at {KEY_START_RATE:.0}); calibrated on the capacity bench (docs/performance.md: 922-1,581 items of 20,000 by one process)",
            CUT_SHARE * 100.0,
            thousands(items_at_limit.round() as u64),
            count(keys_paced, "partition key", "partition keys"),
            OVER_SECOND_SHARE * 100.0,
            limits.partition_wcu,
        ),
    };
    RetryEstimate {
        items: at_limit + paced_keys,
        at_limit,
        paced_keys,
        keys: keys_paced,
        basis,
    }
}
