//! A DynamoDB-compatible server for a test, and reading a table back whole.

use std::ops::ControlFlow;

use sql2ddb_core::Item;
use sql2ddb_dynamo::{connect, scan_segment, Dynamo as Handle, Endpoint, LocalDynamo, ScanSegment};

use super::env_var;

/// A DynamoDB-compatible server: dynoxide in this process (stopped when
/// dropped), or the one `SQL2DDB_TEST_DYNAMODB_URL` names (tests use table
/// names of their own, so they can share it).
pub struct Dynamo {
    /// Its `http://host:port` endpoint.
    pub url: String,
    /// A bare SDK client of it, for looking at a table directly.
    pub client: crate::sdk::Client,
    /// sql2ddb's handle on it (region `us-east-1`), for sql2ddb's own calls.
    pub handle: Handle,
    /// The server in this process; `None` for an external one.
    local: Option<LocalDynamo>,
}

impl Dynamo {
    /// Connects to `SQL2DDB_TEST_DYNAMODB_URL` if it is set, else starts a
    /// server with an empty in-memory database.
    pub async fn start() -> Dynamo {
        match env_var("SQL2DDB_TEST_DYNAMODB_URL") {
            Some(url) => Dynamo::with_url(url, None).await,
            None => Dynamo::in_process().await,
        }
    }

    /// Starts a server with an empty in-memory database in this process,
    /// whatever the environment says: for tests whose table names are not
    /// their own.
    pub async fn in_process() -> Dynamo {
        let local = LocalDynamo::start(None)
            .await
            .unwrap_or_else(|e| panic!("an in-process DynamoDB server: {e}"));
        Dynamo::with_url(local.url().to_string(), Some(local)).await
    }

    async fn with_url(url: String, local: Option<LocalDynamo>) -> Dynamo {
        let handle = connect(&Endpoint::Url(url.clone()), Some("us-east-1"))
            .await
            .unwrap_or_else(|e| panic!("a client of {url}: {e}"));
        Dynamo {
            client: crate::sdk::client(&url),
            url,
            handle,
            local,
        }
    }

    /// Stops a server in this process and waits until it has finished its
    /// requests; an external server is left as it is.
    pub async fn stop(mut self) {
        if let Some(local) = self.local.take() {
            local.stop().await;
        }
    }

    /// Every item of `table`, in scan order.
    pub async fn scan_all(&self, table: &str) -> Vec<Item> {
        scan_all(&self.handle, table).await
    }
}

/// Every item of `table`, in scan order, read page by page through the
/// client (which may point at a proxy).
pub async fn scan_all(client: &Handle, table: &str) -> Vec<Item> {
    let mut all = Vec::new();
    let whole = ScanSegment {
        table,
        segment: 0,
        total: 1,
        limiter: None,
        retry: sql2ddb_dynamo::RetryPolicy::default(),
    };
    scan_segment(client, whole, |page| {
        all.extend(page);
        ControlFlow::Continue(())
    })
    .await
    .unwrap_or_else(|e| panic!("scan of {table}: {e}"));
    all
}
