//! The writer's one call, `BatchWriteItem`, through the SDK's DynamoDB
//! client, with the items' own text as its body.
//!
//! Everything about the request but its body is the SDK's: credentials
//! (the default chain and its identity cache), the endpoint (the client's
//! rules: region, FIPS, dual-stack, account-based endpoints, or the custom
//! URL), signing, the HTTP client, timeouts, clock-skew correction, the user
//! agent and invocation id. The body is the items' text as each was
//! serialised once, when its row was mapped ([`crate::body`]): the SDK's
//! serialiser writes an empty request, and an interceptor of the call puts
//! our body in its place before the request is signed, so the signature
//! covers what is sent. The SDK's retries are off: the writer owns them.
//!
//! The items DynamoDB leaves unprocessed are found again among ours by their
//! primary key ([`crate::unprocessed`]).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::types::WriteRequest;
use aws_sdk_dynamodb::Client;
use aws_smithy_types::body::SdkBody;
use sql2ddb_core::{EncodedItem, KeyAttr};

use crate::body::batch_put_body;
use crate::convert::item_from_sdk;
use crate::failure::Failure;
use crate::unprocessed::{match_by_key, Returned};
use crate::writer::{BatchWriteApi, BatchWriter, CallError};

/// The writer of a table as a process uses it: [`BatchWriter`] over the
/// SDK's client, made by [`crate::Dynamo::table_writer`].
pub type TableWriter = BatchWriter<BatchCalls>;

/// `BatchWriteItem` calls through one SDK client. Cheap to clone; clones
/// share the client (its connections and cached credentials).
#[derive(Clone, Debug)]
pub struct BatchCalls {
    client: Client,
}

impl BatchCalls {
    /// Calls through `client` (of a [`crate::Dynamo`], whose retries are off).
    pub(crate) fn new(client: Client) -> BatchCalls {
        BatchCalls { client }
    }

    /// The same calls with another bound on each attempt.
    pub fn with_attempt_timeout(self, timeout: Duration) -> Self {
        let config = self.client.config();
        let timeouts = config
            .timeout_config()
            .map(|t| t.to_builder())
            .unwrap_or_else(TimeoutConfig::builder)
            .operation_attempt_timeout(timeout)
            .build();
        let config = config.to_builder().timeout_config(timeouts).build();
        BatchCalls {
            client: Client::from_conf(config),
        }
    }
}

impl BatchWriteApi for BatchCalls {
    async fn batch_put(
        &self,
        table: &str,
        keys: &[KeyAttr],
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        let body = batch_put_body(table, items);
        let length = body.len().to_string();
        let answer = self
            .client
            .batch_write_item()
            .set_request_items(Some(HashMap::new()))
            .customize()
            .mutate_request(move |request| {
                *request.body_mut() = SdkBody::from(body.clone());
                request
                    .headers_mut()
                    .insert("content-length", length.clone());
            })
            .send()
            .await
            .map_err(|e| CallError {
                failure: Failure::of(&e),
                message: sql2ddb_aws::sdk_message(&e),
            })?;
        let returned: Vec<Returned> = answer
            .unprocessed_items
            .and_then(|mut by_table| by_table.remove(table))
            .unwrap_or_default()
            .iter()
            .map(returned)
            .collect();
        if returned.is_empty() {
            return Ok(Vec::new());
        }
        Ok(match_by_key(items, keys, &returned))
    }
}

/// A request of an answer's `UnprocessedItems`.
fn returned(request: &WriteRequest) -> Returned {
    match request.put_request() {
        Some(put) => Returned::Put(item_from_sdk(put.item())),
        None => Returned::Other,
    }
}
