//! `plan --workers N`: what a fleet of `sql2ddb worker` processes changes in
//! the predicted time. The workers of one run share one write-capacity cap
//! (each runs at the cap over the workers alive, set at every beat) and one
//! table, so the time the cap or the table allows does not shrink with
//! them; the fleet adds its join, once: each worker beats into the run's
//! progress table before its first batch, waiting at most
//! 5 s for it (`JOIN_WAIT` in the fleet module).

use serde::Serialize;
use sql2ddb_core::shown::thousands;

/// The fleet a plan is made for.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetPlan {
    /// Processes writing the run (`--workers`; one: `run` alone).
    pub workers: u32,
    /// The write-capacity cap they share (`--max-wcu`, the mapping's
    /// `max_wcu`), write units per second.
    pub cap_wcu: Option<u64>,
    /// Each worker's share of the cap: the cap over the workers.
    pub share_wcu: Option<f64>,
    /// The most the fleet's join adds to the time, once (none for one
    /// process).
    pub join_seconds: f64,
    /// What bounds the fleet's rate, and what the times add for it.
    pub basis: String,
}

impl FleetPlan {
    /// The fleet of `workers` processes sharing `cap`.
    pub fn new(workers: u32, cap: Option<u64>) -> FleetPlan {
        let workers = workers.max(1);
        let share = cap.map(|c| c as f64 / f64::from(workers));
        let join = match workers {
            1 => 0.0,
            _ => crate::fleet::JOIN_WAIT.as_secs_f64(),
        };
        let bound = match (cap, share) {
            (Some(c), Some(s)) if workers > 1 => format!(
                "{workers} workers share max_wcu {} WCU/s: {} WCU/s each (the cap over the workers alive, set at each 1 s beat); together no faster than the cap or the table",
                thousands(c),
                shown_rate(s)
            ),
            (Some(c), _) => format!("one process at max_wcu {} WCU/s", thousands(c)),
            (None, _) if workers > 1 => format!(
                "{workers} workers and no max_wcu: each asks what the table admits, and the table's rate bounds them together"
            ),
            (None, _) => "one process and no max_wcu: it writes at what the table admits".into(),
        };
        let basis = match workers {
            1 => bound,
            _ => format!(
                "{bound}; the times add at most {join:.0} s, once, for the join (each worker's first beat into the run's progress table); each process's own throughput (calls in flight x 25 items a call) is not modelled"
            ),
        };
        FleetPlan {
            workers,
            cap_wcu: cap,
            share_wcu: share,
            join_seconds: join,
            basis,
        }
    }

    /// The fleet's time of a time of `seconds`: the same rate, shared,
    /// and the join; `None` for one process.
    pub(super) fn fleet_seconds(&self, seconds: f64) -> Option<f64> {
        (self.workers > 1).then_some(seconds + self.join_seconds)
    }
}

/// A rate, whole when it is.
fn shown_rate(wcu: f64) -> String {
    match wcu.fract() == 0.0 {
        true => thousands(wcu as u64),
        false => format!("{wcu:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_share_the_cap_and_the_fleet_adds_its_join_once() {
        let one = FleetPlan::new(1, Some(4000));
        assert_eq!(one.share_wcu, Some(4000.0));
        assert_eq!(one.join_seconds, 0.0);
        let four = FleetPlan::new(4, Some(4000));
        assert_eq!(four.share_wcu, Some(1000.0));
        assert_eq!(four.join_seconds, 5.0);
        assert!(
            four.basis
                .contains("4 workers share max_wcu 4,000 WCU/s: 1,000 WCU/s each"),
            "{}",
            four.basis
        );
        let three = FleetPlan::new(3, Some(1000));
        assert!(three.basis.contains("333.3 WCU/s each"), "{}", three.basis);
        assert_eq!(one.fleet_seconds(100.0), None);
        // The cap bounds the fleet as it bounds one process: only the join.
        assert_eq!(four.fleet_seconds(100.0), Some(105.0));
    }

    #[test]
    fn without_a_cap_the_table_bounds_the_workers_together() {
        let four = FleetPlan::new(4, None);
        assert_eq!(four.share_wcu, None);
        assert_eq!(four.join_seconds, 5.0);
        assert!(
            four.basis.contains("each asks what the table admits")
                && four.basis.contains("the table's rate bounds them together"),
            "{}",
            four.basis
        );
    }
}
