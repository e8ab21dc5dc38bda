//! `sql2ddb-testkit scan`: a bare parallel Scan of a table, every item
//! converted from the SDK's form and counted, nothing else — the yardstick
//! the benchmark holds `sql2ddb verify --deep`'s table side against.

use std::ops::ControlFlow;

use sql2ddb_dynamo::{scan_segment, Dynamo, RetryPolicy, ScanSegment};

/// Scans `table` in `segments` parallel segments; returns the items read.
pub async fn scan(client: &Dynamo, table: &str, segments: u32) -> anyhow::Result<u64> {
    let total = segments.clamp(1, 1_000_000) as i32;
    let mut tasks = tokio::task::JoinSet::new();
    for segment in 0..total {
        let (client, table) = (client.clone(), table.to_string());
        tasks.spawn(async move {
            let mut items = 0u64;
            let at = ScanSegment {
                table: &table,
                segment,
                total,
                limiter: None,
                retry: RetryPolicy::default(),
            };
            scan_segment(&client, at, |page| {
                items += page.len() as u64;
                ControlFlow::Continue(())
            })
            .await?;
            anyhow::Ok(items)
        });
    }
    let mut items = 0;
    while let Some(joined) = tasks.join_next().await {
        items += joined??;
    }
    Ok(items)
}
