//! A run's `FOLLOW` record: where its follow of the source's changes stands,
//! so `status` on any machine can show it. One record per run, rewritten in
//! place (its key is fixed), the engine's JSON in one attribute.

use sql2ddb_core::RunId;

use super::store::{pk, s};
use super::ProgressStore;
use crate::error::DynamoError;
use crate::retry::retried;

/// The sort key of a run's follow record.
const FOLLOW: &str = "FOLLOW";

impl ProgressStore {
    /// Writes run `run`'s follow record (`json`, the engine's), replacing
    /// the one before.
    pub async fn record_follow(&self, run: &RunId, json: &str) -> Result<(), DynamoError> {
        self.put(run, FOLLOW.into(), vec![("follow", s(json))])
            .await
    }

    /// Run `run`'s follow record as written (one strongly consistent
    /// `GetItem`); `None` when the run was never followed with this table.
    pub async fn follow_record(&self, run: &RunId) -> Result<Option<String>, DynamoError> {
        let req = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", s(FOLLOW))
            .consistent_read(true);
        let out = retried(&self.retry, "GetItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("GetItem", &self.table))?;
        Ok(out
            .item
            .and_then(|item| item.get("follow").and_then(|v| v.as_s().ok()).cloned()))
    }
}
