//! The three ways to load a mapping's items, side by side: our own writes
//! (`BatchWriteItem`, on-demand or provisioned), DynamoDB's import from S3
//! (a new table only) and its bulk put items (an existing table only).
//! Each cost and time is given where its price or rate is published and
//! known to the price table, and said "not published" (or "not in the price
//! table") where it is not: never a guess.

use sql2ddb_core::shown::{bytes, thousands};
use sql2ddb_mapping::{Billing, Plan};

use super::prices::Prices;
use super::report::{Cost, Duration, LoadPath, Totals};

/// The paths for `mapping`'s items: `cap` is the run's write-capacity cap
/// (resolved once), `planned` the write units per second the plan judged
/// the run at, `time` the times already worked out.
pub(super) fn load_paths(
    mapping: &Plan,
    cap: Option<u64>,
    totals: &Totals,
    prices: &Prices,
    cost: &Cost,
    time: &[Duration],
    planned: f64,
) -> Vec<LoadPath> {
    let first = time.first();
    let on_demand = LoadPath {
        path: "writes (on demand)".into(),
        table: "new or existing",
        cost_usd: Some(cost.writes_usd),
        cost_basis: format!(
            "{} write request units at ${}/million ({})",
            thousands(totals.write_units + totals.index_write_units),
            prices.write_per_million,
            prices.taken
        ),
        seconds: first.map(|d| d.seconds),
        time_basis: first.map_or("no rate".into(), |d| format!("at {}", d.at)),
    };
    // A provisioned table is paid by the hour for its capacity, used or not.
    let (capacity, from) = match mapping.target.billing {
        Billing::Provisioned { write, .. } => (write as f64, "the mapping's billing"),
        Billing::OnDemand => (planned, "the planned rate"),
    };
    let provisioned_seconds = (capacity > 0.0).then(|| totals.write_units as f64 / capacity);
    let provisioned = LoadPath {
        path: "writes (provisioned)".into(),
        table: "new or existing",
        cost_usd: match (prices.provisioned_wcu_hour, provisioned_seconds) {
            (Some(price), Some(s)) => Some(capacity * (s / 3600.0).ceil().max(1.0) * price),
            _ => None,
        },
        cost_basis: match prices.provisioned_wcu_hour {
            Some(price) => format!("{capacity:.0} WCU for the hours it takes at ${price}/WCU-hour"),
            None => "no provisioned price in the price table: give --price-wcu-hour".into(),
        },
        seconds: provisioned_seconds,
        time_basis: format!("{capacity:.0} WCU/s ({from})"),
    };
    let import = LoadPath {
        path: "import from S3".into(),
        table: "new only",
        cost_usd: Some(cost.import_from_s3_usd),
        cost_basis: format!(
            "{} of DynamoDB JSON at ${}/GB ({}); no write units",
            bytes(totals.import_bytes),
            prices.import_per_gb,
            prices.taken
        ),
        seconds: None,
        time_basis: "not published (no import rate is published)".into(),
    };
    let bulk = LoadPath {
        path: "bulk put items".into(),
        table: "existing only",
        cost_usd: None,
        cost_basis: "not published (no bulk put items price was found in the published sources)"
            .into(),
        seconds: cap.map(|c| totals.write_units as f64 / c as f64),
        time_basis: match cap {
            Some(c) => format!(
                "at least, at --max-write-request-units {c} (max_wcu); its own rate is not published"
            ),
            None => "not published (no bulk put items rate is published; set max_wcu to cap it)".into(),
        },
    };
    vec![on_demand, provisioned, import, bulk]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &str) -> Plan {
        let text = format!(
            "version = 1\n[source]\nurl = \"sqlite://x.db\"\n[target]\ntable = \"tbl\"\npk = {{ name = \"PK\", type = \"S\" }}\n{extra}\n[[entity]]\nname = \"e\"\nfrom = \"e\"\npk = \"E#{{id}}\"\n"
        );
        Plan::parse(&text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    fn totals() -> Totals {
        Totals {
            write_units: 7_200_000,
            import_bytes: 1 << 30,
            ..Totals::default()
        }
    }

    fn cost() -> Cost {
        Cost {
            writes_usd: 4.5,
            storage_month_usd: 0.0,
            import_from_s3_usd: 0.15,
        }
    }

    fn time() -> Vec<Duration> {
        vec![Duration {
            at: "a new on-demand table (4,000 WRU/s)".into(),
            seconds: 1800.0,
            fleet_seconds: None,
        }]
    }

    #[test]
    fn each_path_has_a_published_figure_or_says_it_has_none() {
        let prices = Prices::lookup(None, None, None).unwrap();
        let paths = load_paths(
            &plan(""),
            None,
            &totals(),
            &prices,
            &cost(),
            &time(),
            1000.0,
        );
        let names: Vec<&str> = paths.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "writes (on demand)",
                "writes (provisioned)",
                "import from S3",
                "bulk put items"
            ]
        );
        assert_eq!(paths[0].cost_usd, Some(4.5));
        assert_eq!(paths[0].seconds, Some(1800.0));
        assert!(paths[0].cost_basis.contains(&prices.taken));
        // Provisioned: the time from the planned rate; no price, said so.
        assert_eq!(paths[1].seconds, Some(7200.0));
        assert_eq!(paths[1].cost_usd, None);
        assert!(paths[1].cost_basis.contains("--price-wcu-hour"));
        assert_eq!(paths[2].table, "new only");
        assert_eq!(paths[2].cost_usd, Some(0.15));
        assert_eq!(paths[2].seconds, None);
        assert!(paths[2].time_basis.starts_with("not published"));
        assert_eq!(paths[3].table, "existing only");
        assert_eq!(paths[3].cost_usd, None);
        assert!(paths[3].cost_basis.starts_with("not published"));
        assert!(paths[3].time_basis.starts_with("not published"));
    }

    #[test]
    fn the_mapping_s_capacity_and_cap_and_an_overridden_price_are_used() {
        let mut prices = Prices::lookup(None, None, None).unwrap();
        prices.provisioned_wcu_hour = Some(0.001);
        let mapping = plan("billing = { read = 5, write = 2000 }\n[writer]\nmax_wcu = 4000");
        let paths = load_paths(
            &mapping,
            mapping.writer.max_wcu,
            &totals(),
            &prices,
            &cost(),
            &time(),
            1000.0,
        );
        // 7.2 M units at 2,000 WCU/s: one hour, 2,000 WCU-hours.
        assert_eq!(paths[1].seconds, Some(3600.0));
        assert_eq!(paths[1].cost_usd, Some(2.0));
        assert!(paths[1].time_basis.contains("the mapping's billing"));
        assert_eq!(paths[3].seconds, Some(1800.0));
        assert!(paths[3]
            .time_basis
            .contains("--max-write-request-units 4000"));
    }
}
