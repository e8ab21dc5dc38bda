//! A run's `DONE` record: written once, by the first check that finds every
//! row accounted for, and marked once its announcement went out.

use aws_sdk_dynamodb::types::AttributeValue;
use sql2ddb_core::RunId;

use super::store::{n, pk, s};
use super::ProgressStore;
use crate::error::DynamoError;
use crate::retry::retried;

/// The sort key of a run's completion record.
const DONE: &str = "DONE";

/// What a run's `DONE` record counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoneCounts {
    /// Rows read from the source.
    pub rows: u64,
    /// Items written.
    pub written: u64,
    /// Rows rejected.
    pub rejected: u64,
    /// Rows not written within their retry budget.
    pub failed: u64,
    /// When the record was written (RFC 3339).
    pub done_at: String,
}

/// Whether a run's `DONE` record exists, and whether its announcement went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DoneState {
    /// No `DONE` record.
    Absent,
    /// The record exists; `announced` says whether it was marked announced.
    Present {
        /// Whether the announcement was confirmed sent.
        announced: bool,
    },
}

impl ProgressStore {
    /// Run `run`'s `DONE` record's state (one strongly consistent `GetItem`).
    pub async fn done_state(&self, run: &RunId) -> Result<DoneState, DynamoError> {
        Ok(match self.done_item(run).await? {
            None => DoneState::Absent,
            Some(item) => DoneState::Present {
                announced: item
                    .get("announced")
                    .and_then(|v| v.as_bool().ok())
                    .copied()
                    .unwrap_or(false),
            },
        })
    }

    async fn done_item(
        &self,
        run: &RunId,
    ) -> Result<Option<std::collections::HashMap<String, AttributeValue>>, DynamoError> {
        let req = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", s(DONE))
            .consistent_read(true);
        let out = retried(&self.retry, "GetItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("GetItem", &self.table))?;
        Ok(out.item)
    }

    /// Writes run `run`'s `DONE` record unless one exists; returns whether
    /// this call wrote it. A check's own write whose first answer was lost
    /// is told from another check's by `token`, unique to the caller, so
    /// exactly one caller ever gets `true`.
    pub async fn record_done(
        &self,
        run: &RunId,
        counts: &DoneCounts,
        token: &str,
    ) -> Result<bool, DynamoError> {
        let req = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("PK", pk(run))
            .item("SK", s(DONE))
            .item("rows", n(counts.rows))
            .item("written", n(counts.written))
            .item("rejected", n(counts.rejected))
            .item("failed", n(counts.failed))
            .item("done_at", s(&counts.done_at))
            .item("announced", AttributeValue::Bool(false))
            .item("writer", s(token))
            .condition_expression("attribute_not_exists(SK)");
        match retried(&self.retry, "PutItem", || req.clone().send()).await {
            Ok(_) => Ok(true),
            Err(e)
                if e.error
                    .as_service_error()
                    .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
            {
                let item = self.done_item(run).await?;
                Ok(item
                    .as_ref()
                    .and_then(|i| i.get("writer"))
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|w| w == token))
            }
            Err(e) => Err(e.into_error("PutItem", &self.table)),
        }
    }

    /// Marks run `run`'s `DONE` record announced.
    pub async fn mark_announced(&self, run: &RunId) -> Result<(), DynamoError> {
        let req = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("PK", pk(run))
            .key("SK", s(DONE))
            .update_expression("SET announced = :t")
            .condition_expression("attribute_exists(SK)")
            .expression_attribute_values(":t", AttributeValue::Bool(true));
        retried(&self.retry, "UpdateItem", || req.clone().send())
            .await
            .map_err(|e| e.into_error("UpdateItem", &self.table))?;
        Ok(())
    }
}
