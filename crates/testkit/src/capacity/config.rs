//! The capacity model's parameters, as a small TOML file or built in code.

use serde::Deserialize;
pub use sql2ddb_core::capacity::{
    CapacityLimits, GsiConfig, Projection, BURST_SECS, ON_DEMAND_DOUBLE_AFTER_SECS,
    ON_DEMAND_WARM_WCU, PARTITION_RCU, PARTITION_WCU, TABLE_QUOTA_WCU,
};

/// The model of a table's capacity (see [`crate::capacity`]).
///
/// ```toml
/// time_scale = 10.0        # model seconds per real second
/// partitions = 8
/// partition_wcu = 250
/// burst = false
/// partition_key = "PK"     # else learnt from DescribeTable
///
/// [table]
/// mode = "provisioned"     # or "on-demand" with warm_wcu, max_wcu, …
/// wcu = 2000
///
/// [[gsi]]
/// name = "GSI1"
/// partition_key = "GSI1PK"
/// projection = "ALL"       # or "KEYS_ONLY", or a list of attributes
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityConfig {
    /// Model seconds per real second: at 10, a 60 s test models 600 s, and
    /// every rate is ten times as many units per real second.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Partitions of the table; an item's is chosen by a hash of its
    /// partition key value.
    #[serde(default = "one_partition")]
    pub partitions: u32,
    /// Write units per second of each partition.
    #[serde(default = "partition_wcu")]
    pub partition_wcu: u64,
    /// Read units per second of each partition.
    #[serde(default = "partition_rcu")]
    pub partition_rcu: u64,
    /// Whether unused capacity is banked as burst credit (up to
    /// `burst_secs` of it), for the partitions and a provisioned table.
    #[serde(default = "yes")]
    pub burst: bool,
    /// Seconds of unused capacity banked when `burst` is on.
    #[serde(default = "burst_secs")]
    pub burst_secs: f64,
    /// The partition key's attribute name; `None`: learnt from the table's
    /// `DescribeTable` (or `CreateTable`) answer.
    #[serde(default)]
    pub partition_key: Option<String>,
    /// The table's own limit.
    pub table: TableCapacity,
    /// The global secondary indexes: each one an item projects into costs
    /// its write units again. `None`: learnt from `DescribeTable`.
    #[serde(default)]
    pub gsi: Option<Vec<GsiConfig>>,
}

/// The table's own limit on writes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TableCapacity {
    /// Provisioned write (and read) units per second.
    Provisioned {
        /// Write units per second.
        wcu: u64,
        /// Read units per second; `None`: only the partitions limit reads.
        #[serde(default)]
        rcu: Option<u64>,
    },
    /// On demand: a warm throughput that doubles when traffic stays near it.
    OnDemand {
        /// The warm write throughput at the start, units per second.
        #[serde(default = "warm_wcu")]
        warm_wcu: u64,
        /// It never doubles past this (the table's quota).
        #[serde(default = "max_wcu")]
        max_wcu: u64,
        /// Model seconds the traffic must stay near the warm throughput
        /// for it to double.
        #[serde(default = "double_after")]
        double_after_secs: f64,
        /// "Near": this share of the warm throughput consumed in a second.
        #[serde(default = "near")]
        near: f64,
    },
}

fn one() -> f64 {
    1.0
}
fn one_partition() -> u32 {
    1
}
fn partition_wcu() -> u64 {
    PARTITION_WCU
}
fn partition_rcu() -> u64 {
    PARTITION_RCU
}
fn yes() -> bool {
    true
}
fn burst_secs() -> f64 {
    BURST_SECS
}
fn warm_wcu() -> u64 {
    ON_DEMAND_WARM_WCU
}
fn max_wcu() -> u64 {
    TABLE_QUOTA_WCU
}
fn double_after() -> f64 {
    ON_DEMAND_DOUBLE_AFTER_SECS
}
fn near() -> f64 {
    0.9
}

/// A capacity configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid capacity configuration: {0}")]
pub struct CapacityConfigError(pub(crate) String);

impl CapacityConfig {
    /// A provisioned table of `wcu` write units over `partitions`
    /// partitions of `partition_wcu` each, burst credit on, no time scale.
    pub fn provisioned(wcu: u64, partitions: u32, partition_wcu: u64) -> CapacityConfig {
        CapacityConfig {
            time_scale: 1.0,
            partitions,
            partition_wcu,
            partition_rcu: PARTITION_RCU,
            burst: true,
            burst_secs: BURST_SECS,
            partition_key: None,
            table: TableCapacity::Provisioned { wcu, rcu: None },
            gsi: None,
        }
    }

    /// An on-demand table of `partitions` partitions of DynamoDB's size,
    /// warm at `warm_wcu`, burst credit on, no time scale.
    pub fn on_demand(warm_wcu: u64, partitions: u32) -> CapacityConfig {
        CapacityConfig {
            table: TableCapacity::OnDemand {
                warm_wcu,
                max_wcu: TABLE_QUOTA_WCU,
                double_after_secs: ON_DEMAND_DOUBLE_AFTER_SECS,
                near: near(),
            },
            ..CapacityConfig::provisioned(0, partitions, PARTITION_WCU)
        }
    }

    /// The rates the ideal time is computed from: a provisioned table's
    /// write units or an on-demand table's warm throughput (not doubled),
    /// and the partitions'.
    pub fn limits(&self) -> CapacityLimits {
        CapacityLimits {
            table_wcu: match self.table {
                TableCapacity::Provisioned { wcu, .. } => wcu,
                TableCapacity::OnDemand { warm_wcu, .. } => warm_wcu,
            },
            partitions: self.partitions,
            partition_wcu: self.partition_wcu,
        }
    }

    /// Reads a TOML configuration.
    pub fn from_toml(text: &str) -> Result<CapacityConfig, CapacityConfigError> {
        let config: CapacityConfig =
            toml::from_str(text).map_err(|e| CapacityConfigError(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// Seconds of capacity a bucket banks: `burst_secs` with burst on, else one.
    pub fn banked_secs(&self) -> f64 {
        if self.burst {
            self.burst_secs.max(1.0)
        } else {
            1.0
        }
    }

    /// Checks that every rate is positive and the shares are shares.
    pub fn validate(&self) -> Result<(), CapacityConfigError> {
        let fail = |m: String| Err(CapacityConfigError(m));
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return fail(format!("time_scale = {} must be positive", self.time_scale));
        }
        if self.partitions == 0 || self.partition_wcu == 0 || self.partition_rcu == 0 {
            return fail("partitions, partition_wcu and partition_rcu must be positive".into());
        }
        if self.burst && !(self.burst_secs.is_finite() && self.burst_secs >= 1.0) {
            return fail(format!(
                "burst_secs = {} must be at least 1",
                self.burst_secs
            ));
        }
        match self.table {
            TableCapacity::Provisioned { wcu, rcu } => {
                if wcu == 0 || rcu == Some(0) {
                    return fail("a provisioned table's wcu and rcu must be positive".into());
                }
            }
            TableCapacity::OnDemand {
                warm_wcu,
                max_wcu,
                double_after_secs,
                near,
            } => {
                if warm_wcu == 0 || max_wcu < warm_wcu {
                    return fail(format!(
                        "warm_wcu = {warm_wcu} must be positive and at most max_wcu = {max_wcu}"
                    ));
                }
                if !(double_after_secs.is_finite() && double_after_secs >= 1.0) {
                    return fail("double_after_secs must be at least 1".into());
                }
                if !(near > 0.0 && near <= 1.0) {
                    return fail(format!("near = {near} is not within 0..1"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_file_with_defaults_for_what_it_leaves_out() {
        let c = CapacityConfig::from_toml(
            r#"
            time_scale = 10.0
            partitions = 8
            partition_wcu = 250
            burst = false
            [table]
            mode = "provisioned"
            wcu = 2000
            [[gsi]]
            name = "GSI1"
            partition_key = "GSI1PK"
            projection = ["status"]
            [[gsi]]
            name = "GSI2"
            partition_key = "GSI2PK"
            projection = "KEYS_ONLY"
            "#,
        )
        .unwrap();
        assert_eq!(c.partitions, 8);
        assert_eq!(c.partition_rcu, PARTITION_RCU);
        assert_eq!(c.banked_secs(), 1.0);
        assert_eq!(
            c.table,
            TableCapacity::Provisioned {
                wcu: 2000,
                rcu: None
            }
        );
        let gsi = c.gsi.unwrap();
        assert_eq!(
            gsi[0].projection,
            Projection::Include(vec!["status".into()])
        );
        assert_eq!(gsi[1].projection, Projection::KeysOnly);
        let d = CapacityConfig::from_toml("[table]\nmode = \"on-demand\"\n").unwrap();
        assert_eq!(d.table, CapacityConfig::on_demand(4000, 1).table);
        assert_eq!(d.banked_secs(), 300.0);
    }

    #[test]
    fn bad_values_and_unknown_fields_are_refused() {
        for text in [
            "[table]\nmode = \"provisioned\"\nwcu = 0\n",
            "partitions = 0\n[table]\nmode = \"on-demand\"\n",
            "time_scale = -1.0\n[table]\nmode = \"on-demand\"\n",
            "[table]\nmode = \"on-demand\"\nwarm_wcu = 5000\nmax_wcu = 4000\n",
            "[table]\nmode = \"on-demand\"\nnear = 1.5\n",
            "partitons = 2\n[table]\nmode = \"on-demand\"\n",
            "[table]\nmode = \"reserved\"\n",
        ] {
            assert!(CapacityConfig::from_toml(text).is_err(), "{text}");
        }
    }
}
