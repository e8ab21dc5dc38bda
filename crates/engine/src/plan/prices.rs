//! The price table `plan` costs a migration with: region-keyed, dated,
//! shipped in the binary (`prices.toml`), each price overridable.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// The table as shipped.
const PRICES: &str = include_str!("prices.toml");

#[derive(Deserialize)]
struct Table {
    taken: String,
    default_region: String,
    regions: BTreeMap<String, RegionPrices>,
}

#[derive(Deserialize, Clone, Copy)]
struct RegionPrices {
    write_per_million: f64,
    storage_gb_month: f64,
    import_per_gb: f64,
}

/// The prices a plan uses, and where they come from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Prices {
    /// The region the prices are for.
    pub region: String,
    /// US dollars per million on-demand write request units.
    pub write_per_million: f64,
    /// US dollars per GB-month of Standard storage.
    pub storage_gb_month: f64,
    /// US dollars per GB of uncompressed source data imported from S3.
    pub import_per_gb: f64,
    /// US dollars per provisioned write capacity unit-hour: not in the
    /// table (it was not re-read from the pricing page on the table's
    /// date); only `--price-wcu-hour` sets it.
    pub provisioned_wcu_hour: Option<f64>,
    /// When the table's prices were taken.
    pub taken: String,
    /// How the prices were chosen: the table's region, a fallback, overrides.
    pub note: String,
}

impl Prices {
    /// The prices of `region` (default: the table's default region; a region
    /// not in the table falls back to it, and the note says so), with
    /// `--price-wru` / `--price-gb` applied.
    pub fn lookup(
        region: Option<&str>,
        price_wru: Option<f64>,
        price_gb: Option<f64>,
    ) -> Result<Prices, EngineError> {
        let table: Table = toml::from_str(PRICES)
            .map_err(|e| EngineError::Config(format!("the built-in price table: {e}")))?;
        for (what, v) in [("--price-wru", price_wru), ("--price-gb", price_gb)] {
            if v.is_some_and(|v| !v.is_finite() || v < 0.0) {
                return Err(EngineError::Config(format!(
                    "{what} must be a price of zero or more"
                )));
            }
        }
        let asked = region.unwrap_or(&table.default_region);
        let (region, mut note, p) = match table.regions.get(asked) {
            Some(p) => (
                asked.to_string(),
                format!("{asked} on-demand prices of {}", table.taken),
                *p,
            ),
            None => {
                let p = table
                    .regions
                    .get(&table.default_region)
                    .copied()
                    .ok_or_else(|| {
                        EngineError::Config("the built-in price table has no default region".into())
                    })?;
                (
                    table.default_region.clone(),
                    format!(
                        "no prices for region {asked} in the table; {} on-demand prices of {} used",
                        table.default_region, table.taken
                    ),
                    p,
                )
            }
        };
        if price_wru.is_some() || price_gb.is_some() {
            note.push_str("; overridden on the command line");
        }
        Ok(Prices {
            region,
            write_per_million: price_wru.unwrap_or(p.write_per_million),
            storage_gb_month: price_gb.unwrap_or(p.storage_gb_month),
            import_per_gb: p.import_per_gb,
            provisioned_wcu_hour: None,
            taken: table.taken,
            note,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_overrides_apply() {
        let p = Prices::lookup(None, None, None).unwrap();
        assert_eq!(p.region, "us-east-1");
        assert!(p.write_per_million > 0.0 && p.storage_gb_month > 0.0);
        let o = Prices::lookup(Some("us-west-2"), Some(1.25), Some(0.5)).unwrap();
        assert_eq!((o.write_per_million, o.storage_gb_month), (1.25, 0.5));
        assert!(o.note.contains("overridden"));
        let f = Prices::lookup(Some("xx-nowhere-1"), None, None).unwrap();
        assert_eq!(f.region, "us-east-1");
        assert!(f.note.contains("xx-nowhere-1"));
        assert!(Prices::lookup(None, Some(-1.0), None).is_err());
    }
}
