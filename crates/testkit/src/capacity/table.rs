//! The table's own limit on writes: provisioned write units with burst
//! credit, or an on-demand table's warm throughput, which doubles when the
//! traffic stays near it.

use super::bucket::TokenBucket;
use super::config::TableCapacity;

/// Why a write was refused, which decides the error DynamoDB answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The item's partition is over its limit:
    /// `ProvisionedThroughputExceededException`.
    Partition,
    /// A provisioned table is over its write units:
    /// `ProvisionedThroughputExceededException`.
    ProvisionedTable,
    /// An on-demand table is over its warm throughput: `ThrottlingException`.
    OnDemandTable,
}

/// The table-level bucket of writes.
#[derive(Debug, Clone)]
pub(crate) struct TableBucket {
    bucket: TokenBucket,
    warm: Option<Warm>,
}

/// An on-demand table's warm throughput and how long traffic stayed near it.
#[derive(Debug, Clone)]
struct Warm {
    max: f64,
    double_after: f64,
    near: f64,
    /// The model second being counted, and the units consumed in it.
    second: i64,
    consumed: f64,
    /// Since when every whole second consumed at least `near` × the warm
    /// throughput.
    sustained_since: Option<f64>,
    doublings: u32,
}

impl TableBucket {
    /// The table's bucket at model time 0; `burst_secs` of unused capacity
    /// may be banked on a provisioned table (0: none beyond one second).
    pub(crate) fn new(table: &TableCapacity, burst_secs: f64) -> TableBucket {
        match *table {
            TableCapacity::Provisioned { wcu, .. } => {
                let rate = wcu as f64;
                TableBucket {
                    bucket: TokenBucket::new(rate, rate * burst_secs.max(1.0), rate, 0.0),
                    warm: None,
                }
            }
            TableCapacity::OnDemand {
                warm_wcu,
                max_wcu,
                double_after_secs,
                near,
            } => {
                let rate = warm_wcu as f64;
                TableBucket {
                    bucket: TokenBucket::new(rate, rate, rate, 0.0),
                    warm: Some(Warm {
                        max: max_wcu as f64,
                        double_after: double_after_secs,
                        near,
                        second: 0,
                        consumed: 0.0,
                        sustained_since: None,
                        doublings: 0,
                    }),
                }
            }
        }
    }

    /// The refusal when this bucket refuses.
    pub(crate) fn refusal(&self) -> Refusal {
        match self.warm {
            Some(_) => Refusal::OnDemandTable,
            None => Refusal::ProvisionedTable,
        }
    }

    /// The table's write units per second at `now`.
    pub(crate) fn rate(&mut self, now: f64) -> f64 {
        self.advance(now);
        self.bucket.rate()
    }

    /// How many times the warm throughput doubled so far.
    pub(crate) fn doublings(&self) -> u32 {
        self.warm.as_ref().map_or(0, |w| w.doublings)
    }

    pub(crate) fn allows(&mut self, now: f64, units: f64) -> bool {
        self.advance(now);
        self.bucket.allows(now, units)
    }

    pub(crate) fn take(&mut self, now: f64, units: f64) {
        self.advance(now);
        self.bucket.take(now, units);
        if let Some(warm) = &mut self.warm {
            warm.consumed += units;
        }
    }

    /// Closes the whole seconds before `now`: each one that consumed near
    /// the warm throughput extends the sustained stretch, any other ends
    /// it; a stretch as long as `double_after` doubles the throughput.
    fn advance(&mut self, now: f64) {
        let Some(warm) = &mut self.warm else {
            return;
        };
        let current = now.floor() as i64;
        while warm.second < current {
            let rate = self.bucket.rate();
            let start = warm.second as f64;
            if warm.consumed >= warm.near * rate {
                let since = *warm.sustained_since.get_or_insert(start);
                if start + 1.0 - since >= warm.double_after && rate < warm.max {
                    self.bucket
                        .set_rate((rate * 2.0).min(warm.max), start + 1.0);
                    warm.sustained_since = None;
                    warm.doublings += 1;
                }
            } else {
                warm.sustained_since = None;
            }
            warm.consumed = 0.0;
            // Idle seconds end any stretch: skip them at once.
            warm.second = if warm.second + 1 < current {
                warm.sustained_since = None;
                current
            } else {
                warm.second + 1
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_demand(warm: u64, double_after_secs: f64) -> TableBucket {
        TableBucket::new(
            &TableCapacity::OnDemand {
                warm_wcu: warm,
                max_wcu: 400,
                double_after_secs,
                near: 0.9,
            },
            0.0,
        )
    }

    /// Takes one unit at a time at `now` until refused.
    fn drain(t: &mut TableBucket, now: f64) -> u32 {
        let mut n = 0;
        while t.allows(now, 1.0) {
            t.take(now, 1.0);
            n += 1;
        }
        n
    }

    #[test]
    fn provisioned_write_units_with_and_without_burst_credit() {
        let table = TableCapacity::Provisioned {
            wcu: 100,
            rcu: None,
        };
        let mut none = TableBucket::new(&table, 0.0);
        assert_eq!(none.refusal(), Refusal::ProvisionedTable);
        assert_eq!(drain(&mut none, 0.0), 100);
        assert_eq!(drain(&mut none, 0.25), 25);
        assert_eq!(drain(&mut none, 60.0), 100);
        let mut burst = TableBucket::new(&table, 300.0);
        assert_eq!(drain(&mut burst, 0.0), 100);
        assert_eq!(drain(&mut burst, 60.0), 6000);
    }

    #[test]
    fn warm_throughput_doubles_after_sustained_traffic_near_it() {
        // 100 WCU/s warm, doubling after 3 s at 90% or more.
        let mut t = on_demand(100, 3.0);
        assert_eq!(t.refusal(), Refusal::OnDemandTable);
        for second in 0..3 {
            assert_eq!(drain(&mut t, second as f64), 100, "second {second}");
            assert_eq!(t.rate(second as f64 + 0.5), 100.0);
        }
        // Three full seconds: 200 from second 3 on.
        assert_eq!(t.rate(3.0), 200.0);
        assert_eq!(t.doublings(), 1);
        assert_eq!(drain(&mut t, 4.0), 200);
    }

    #[test]
    fn traffic_below_the_threshold_or_a_pause_restarts_the_stretch() {
        let mut t = on_demand(100, 3.0);
        drain(&mut t, 0.0);
        drain(&mut t, 1.0);
        // 89 units in second 2: below 90%.
        for _ in 0..89 {
            t.take(2.0, 1.0);
        }
        drain(&mut t, 3.0);
        drain(&mut t, 4.0);
        assert_eq!(t.rate(5.0), 100.0, "seconds 3 and 4 are only two");
        drain(&mut t, 5.0);
        assert_eq!(t.rate(6.0), 200.0);
        // Doubles up to the table's maximum, never past it.
        for s in 6..40 {
            drain(&mut t, s as f64);
        }
        assert_eq!(t.rate(40.0), 400.0);
        assert_eq!(t.doublings(), 2);
        // A pause of idle seconds ends a stretch.
        let mut p = on_demand(100, 3.0);
        drain(&mut p, 0.0);
        drain(&mut p, 1.0);
        drain(&mut p, 5.0);
        assert_eq!(p.rate(6.0), 100.0);
    }
}
