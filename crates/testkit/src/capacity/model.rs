//! One table's capacity: a write and a read bucket per partition, and the
//! table's own buckets, on the model's clock.

use serde::Serialize;

use super::bucket::TokenBucket;
use super::config::{CapacityConfig, TableCapacity};
use super::table::{Refusal, TableBucket};

/// The buckets of one partition.
#[derive(Debug, Clone)]
struct Partition {
    write: TokenBucket,
    read: TokenBucket,
}

/// What one table's model admitted and refused, and what it consumed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableUsage {
    /// Write requests admitted.
    pub admitted_writes: u64,
    /// Write requests refused (returned unprocessed or answered with an error).
    pub refused_writes: u64,
    /// Of those, refused by their partition's bucket.
    pub refused_by_partition: u64,
    /// Of those, refused by the table's bucket.
    pub refused_by_table: u64,
    /// Write units consumed, the table's and its indexes'.
    pub write_units: u64,
    /// Of those, the indexes'.
    pub index_write_units: u64,
    /// Write units consumed per partition (the table's own).
    pub partition_write_units: Vec<u64>,
    /// Write requests refused per partition (by its bucket or the table's).
    pub partition_refused_writes: Vec<u64>,
    /// Read units consumed, in half units (an eventually consistent read
    /// of 4 KB is one half unit).
    pub read_half_units: u64,
    /// Reads refused.
    pub refused_reads: u64,
    /// How many times an on-demand table's warm throughput doubled.
    pub warm_doublings: u32,
}

/// One write request of a call: its partition key's hash, the units its
/// partition is charged (the table's own write) and the units the table is
/// charged (with its indexes').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteDemand {
    /// [`super::key_hash`] of the partition key value.
    pub key_hash: u64,
    /// The table's own write units.
    pub units: u64,
    /// Those and the indexes' write units.
    pub total_units: u64,
}

/// The capacity of one table on the model's clock (seconds, passed in).
#[derive(Debug, Clone)]
pub struct TableModel {
    partitions: Vec<Partition>,
    limits: sql2ddb_core::capacity::CapacityLimits,
    table: TableBucket,
    table_read: Option<TokenBucket>,
    usage: TableUsage,
}

impl TableModel {
    /// A table as `config` describes it, at model time 0. Every bucket
    /// starts with one second of its rate; burst credit is earned.
    pub fn new(config: &CapacityConfig) -> TableModel {
        let banked = config.banked_secs();
        let bucket = |rate: u64| {
            let rate = rate as f64;
            TokenBucket::new(rate, rate * banked, rate, 0.0)
        };
        let partitions = (0..config.partitions)
            .map(|_| Partition {
                write: bucket(config.partition_wcu),
                read: bucket(config.partition_rcu),
            })
            .collect();
        let table_read = match config.table {
            TableCapacity::Provisioned { rcu: Some(rcu), .. } => Some(bucket(rcu)),
            _ => None,
        };
        TableModel {
            table: TableBucket::new(&config.table, if config.burst { banked } else { 0.0 }),
            table_read,
            usage: TableUsage {
                partition_write_units: vec![0; config.partitions as usize],
                partition_refused_writes: vec![0; config.partitions as usize],
                ..TableUsage::default()
            },
            partitions,
            limits: config.limits(),
        }
    }

    /// The partition of a partition key value's hash (the rule the ideal
    /// time and `plan --capacity` use).
    pub fn partition_of(&self, key_hash: u64) -> usize {
        self.limits.partition_of(key_hash)
    }

    /// Admits the write requests of one call at model time `now`, in order:
    /// each one while its partition and the table have the units; once a
    /// partition (or the table) refuses, it refuses the rest of the call's
    /// requests for it. Returns what it refused, request by request.
    pub fn admit_writes(&mut self, now: f64, demands: &[WriteDemand]) -> Vec<Option<Refusal>> {
        let mut refused_partitions: Vec<usize> = Vec::new();
        let mut table_refused = false;
        let mut out = Vec::with_capacity(demands.len());
        for demand in demands {
            let p = self.partition_of(demand.key_hash);
            let refusal = if table_refused {
                Some(self.table.refusal())
            } else if refused_partitions.contains(&p) {
                Some(Refusal::Partition)
            } else if !self.partitions[p].write.allows(now, demand.units as f64) {
                refused_partitions.push(p);
                Some(Refusal::Partition)
            } else if !self.table.allows(now, demand.total_units as f64) {
                table_refused = true;
                Some(self.table.refusal())
            } else {
                None
            };
            match refusal {
                None => {
                    self.partitions[p].write.take(now, demand.units as f64);
                    self.table.take(now, demand.total_units as f64);
                    let u = &mut self.usage;
                    u.admitted_writes += 1;
                    u.write_units += demand.total_units;
                    u.index_write_units += demand.total_units - demand.units;
                    u.partition_write_units[p] += demand.units;
                }
                Some(r) => {
                    let u = &mut self.usage;
                    u.refused_writes += 1;
                    u.partition_refused_writes[p] += 1;
                    match r {
                        Refusal::Partition => u.refused_by_partition += 1,
                        _ => u.refused_by_table += 1,
                    }
                }
            }
            out.push(refusal);
        }
        out
    }

    /// Admits a read of `half_units` half read units from the partition of
    /// `key_hash` at `now` (a read of no partition, a Scan page: pass
    /// `None` and the table's read bucket alone decides).
    pub fn admit_read(
        &mut self,
        now: f64,
        key_hash: Option<u64>,
        half_units: u64,
    ) -> Result<(), Refusal> {
        let units = half_units as f64 / 2.0;
        let p = key_hash.map(|h| self.partition_of(h));
        if let Some(p) = p {
            if !self.partitions[p].read.allows(now, units) {
                self.usage.refused_reads += 1;
                return Err(Refusal::Partition);
            }
        }
        if let Some(table) = &mut self.table_read {
            if !table.allows(now, units) {
                self.usage.refused_reads += 1;
                return Err(Refusal::ProvisionedTable);
            }
            table.take(now, units);
        }
        if let Some(p) = p {
            self.partitions[p].read.take(now, units);
        }
        self.usage.read_half_units += half_units;
        Ok(())
    }

    /// The table's write units per second at `now` (the warm throughput
    /// of an on-demand table).
    pub fn table_rate(&mut self, now: f64) -> f64 {
        self.table.rate(now)
    }

    /// What it admitted, refused and consumed so far.
    pub fn usage(&self) -> TableUsage {
        TableUsage {
            warm_doublings: self.table.doublings(),
            ..self.usage.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-unit write whose key hash is `hash` (partition `hash % N`).
    fn one_unit(hash: u64) -> WriteDemand {
        WriteDemand {
            key_hash: hash,
            units: 1,
            total_units: 1,
        }
    }

    fn no_burst(wcu: u64, partitions: u32, partition_wcu: u64) -> TableModel {
        TableModel::new(&CapacityConfig {
            burst: false,
            ..CapacityConfig::provisioned(wcu, partitions, partition_wcu)
        })
    }

    /// Offers `per_partition` one-unit writes to every partition in turn
    /// (round robin, as uniform keys arrive) at `now`; admitted per partition.
    fn offer(model: &mut TableModel, now: f64, partitions: u64, per_partition: u64) -> Vec<u64> {
        let demands: Vec<WriteDemand> = (0..per_partition * partitions).map(one_unit).collect();
        let mut admitted = vec![0; partitions as usize];
        for chunk in demands.chunks(25) {
            for (d, r) in chunk.iter().zip(model.admit_writes(now, chunk)) {
                if r.is_none() {
                    admitted[(d.key_hash % partitions) as usize] += 1;
                }
            }
        }
        admitted
    }

    #[test]
    fn eight_partitions_of_250_without_burst_admit_their_rate() {
        let mut m = no_burst(2000, 8, 250);
        // t = 0: one second of each partition's rate; the table's 2,000 too.
        assert_eq!(offer(&mut m, 0.0, 8, 400), vec![250; 8]);
        // t = 0.5 s: half a second more each.
        assert_eq!(offer(&mut m, 0.5, 8, 400), vec![125; 8]);
        assert_eq!(offer(&mut m, 1.0, 8, 400), vec![125; 8]);
        // Idle until t = 10: never more than one second banked.
        assert_eq!(offer(&mut m, 10.0, 8, 400), vec![250; 8]);
        let usage = m.usage();
        assert_eq!(usage.admitted_writes, 750 * 8);
        assert_eq!(usage.write_units, 6000);
        assert_eq!(usage.partition_write_units, vec![750; 8]);
        assert_eq!(usage.refused_by_table, 0);
    }

    #[test]
    fn one_hot_partition_gets_its_own_rate_only() {
        let mut m = no_burst(2000, 8, 250);
        // Every write to partition 3 (hashes 3, 11, 19, …).
        let hot: Vec<WriteDemand> = (0..1000).map(|n| one_unit(3 + 8 * n)).collect();
        let admitted = |m: &mut TableModel, now| {
            m.admit_writes(now, &hot)
                .iter()
                .filter(|r| r.is_none())
                .count()
        };
        assert_eq!(admitted(&mut m, 0.0), 250);
        assert_eq!(admitted(&mut m, 0.5), 125);
        assert_eq!(admitted(&mut m, 1.0), 125);
        assert_eq!(admitted(&mut m, 2.0), 250);
        let usage = m.usage();
        assert_eq!(usage.partition_write_units[3], 750);
        assert_eq!(usage.refused_by_partition, 4000 - 750);
        assert_eq!(usage.partition_refused_writes[3], 4000 - 750);
        assert_eq!(
            usage.partition_refused_writes.iter().sum::<u64>(),
            4000 - 750
        );
    }

    #[test]
    fn the_table_limits_below_the_partitions_sum() {
        // 8 partitions of 1,000 but a table of 2,000.
        let mut m = no_burst(2000, 8, 1000);
        let at0 = offer(&mut m, 0.0, 8, 1000);
        assert_eq!(at0.iter().sum::<u64>(), 2000);
        let at1 = offer(&mut m, 1.0, 8, 1000);
        assert_eq!(at1.iter().sum::<u64>(), 2000);
        assert!(m.usage().refused_by_table > 0);
    }

    #[test]
    fn within_a_call_a_refused_partition_refuses_the_rest_of_its_items() {
        let mut m = no_burst(100, 2, 2);
        let calls: Vec<WriteDemand> = [0, 1, 0, 0, 1, 0]
            .iter()
            .map(|&h| WriteDemand {
                key_hash: h,
                units: 1,
                total_units: 1,
            })
            .collect();
        let big = WriteDemand {
            key_hash: 0,
            units: 3,
            total_units: 3,
        };
        // Partition 0's bucket of 2 is full: it lets a 3-unit item through.
        let r = m.admit_writes(0.0, &[big]);
        assert_eq!(r, vec![None]);
        // Partition 0 now owes 1; partition 1 has 2.
        let r = m.admit_writes(0.0, &calls);
        use Refusal::Partition as P;
        assert_eq!(r, vec![Some(P), None, Some(P), Some(P), None, Some(P)]);
    }

    #[test]
    fn burst_credit_lets_a_partition_spend_what_it_saved() {
        let mut m = TableModel::new(&CapacityConfig::provisioned(1000, 2, 100));
        // Idle for 10 s: partition 0 has 100 + 1,000 banked; the table
        // (1,000 with 300 s of credit) 11,000.
        let hot: Vec<WriteDemand> = (0..5000).map(|n| one_unit(2 * n)).collect();
        let admitted = m
            .admit_writes(10.0, &hot)
            .iter()
            .filter(|r| r.is_none())
            .count();
        assert_eq!(admitted, 1100);
    }

    #[test]
    fn indexes_cost_the_table_not_the_partition() {
        let mut m = no_burst(10, 1, 10);
        let d = WriteDemand {
            key_hash: 0,
            units: 1,
            total_units: 3,
        };
        let r = m.admit_writes(0.0, &[d; 5]);
        // The table's 10 units: three writes of 3 and the fourth refused.
        assert_eq!(r.iter().filter(|r| r.is_none()).count(), 3);
        assert_eq!(r[3], Some(Refusal::ProvisionedTable));
        assert_eq!(m.usage().index_write_units, 6);
        assert_eq!(m.usage().partition_write_units, vec![3]);
    }

    #[test]
    fn reads_have_their_own_buckets() {
        let mut m = TableModel::new(&CapacityConfig {
            partition_rcu: 3,
            burst: false,
            ..CapacityConfig::provisioned(10, 2, 10)
        });
        // 3 units a second per partition: six half units.
        let reads = (0..10)
            .filter(|_| m.admit_read(0.0, Some(0), 1).is_ok())
            .count();
        assert_eq!(reads, 6);
        assert_eq!(m.admit_read(0.0, Some(1), 6), Ok(()));
        assert_eq!(m.admit_read(0.0, Some(1), 1), Err(Refusal::Partition));
        // Writes are not affected.
        assert_eq!(m.admit_writes(0.0, &[one_unit(0)]), vec![None]);
        assert_eq!(m.usage().read_half_units, 12);
    }
}
