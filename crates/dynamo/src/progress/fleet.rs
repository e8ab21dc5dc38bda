//! A run's fleet: the workers that write its batches, each with a
//! `FLEET#<member>` record in the run's partition, rewritten every beat.
//! A worker reads every member's record at each beat, so the workers of a
//! run share its write-capacity cap (each takes its share of the members
//! alive) and learn of each other's throttling, through the table the
//! fleet already has. Nothing here is counted as progress.

use aws_sdk_dynamodb::types::AttributeValue;
use sql2ddb_core::RunId;

use super::store::{n, pk};
use super::ProgressStore;
use crate::error::DynamoError;
use crate::retry::retried;

/// The sort keys of fleet records begin with this.
const FLEET: &str = "FLEET#";

/// One member's latest beat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetBeat {
    /// The member's name (unique per process).
    pub member: String,
    /// When it beat, in milliseconds since the Unix epoch (its own clock).
    pub at_ms: u64,
    /// The last time the table throttled it, in the same milliseconds; 0:
    /// never.
    pub throttled_ms: u64,
}

impl ProgressStore {
    /// Writes `beat` (replacing the member's last) into run `run`'s fleet
    /// and returns every member's latest beat, this one included (a
    /// strongly consistent query of the fleet's records).
    pub async fn fleet_beat(
        &self,
        run: &RunId,
        beat: &FleetBeat,
    ) -> Result<Vec<FleetBeat>, DynamoError> {
        self.put(
            run,
            format!("{FLEET}{}", beat.member),
            vec![
                ("at_ms", n(beat.at_ms)),
                ("throttled_ms", n(beat.throttled_ms)),
            ],
        )
        .await?;
        let mut beats = Vec::new();
        self.each_record(run, Some(FLEET), |item| {
            let number = |name: &str| {
                item.get(name)
                    .and_then(|v| v.as_n().ok())
                    .and_then(|v| v.parse::<u64>().ok())
            };
            let member = item
                .get("SK")
                .and_then(|v| v.as_s().ok())
                .and_then(|sk| sk.strip_prefix(FLEET));
            // A record this release cannot read is another's: skipped.
            if let (Some(member), Some(at_ms)) = (member, number("at_ms")) {
                beats.push(FleetBeat {
                    member: member.to_string(),
                    at_ms,
                    throttled_ms: number("throttled_ms").unwrap_or(0),
                });
            }
            Ok(())
        })
        .await?;
        Ok(beats)
    }

    /// Removes `member` from run `run`'s fleet (a worker leaving), so the
    /// others take its share at their next beat.
    pub async fn fleet_leave(&self, run: &RunId, member: &str) -> Result<(), DynamoError> {
        let req = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", AttributeValue::S(format!("{FLEET}{member}")));
        retried(&self.retry, "DeleteItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("DeleteItem", &self.table))?;
        Ok(())
    }
}
