//! The finisher handler fed with DynamoDB Streams events of a progress
//! table: bursts and duplicates of a run's records announce its completion
//! once, only once the sums add up, with one Query per burst.

mod support;

use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event;
use sql2ddb_dynamo::progress::{BatchRecord, EntityMeta, ProgressStore, RunMeta, SegmentBounds};
use sql2ddb_engine::serverless::Finisher;
use sql2ddb_engine::{AwsContext, RunId};
use sql2ddb_lambda::finisher::FinisherHandler;
use sql2ddb_testkit::{FaultConfig, FaultProxy};
use support::*;

/// Counts the Query calls that pass the proxy (each one "delayed" by 0 ms).
fn count_queries() -> FaultConfig {
    FaultConfig {
        delay: 1.0,
        delay_ms: (0, 0),
        operations: vec!["Query".into()],
        ..FaultConfig::default()
    }
}

/// A stream record of the progress table's item `(RUN#run, sk)`, as Lambda
/// delivers it (new image).
fn record(run: &str, sk: &str, seq: usize) -> serde_json::Value {
    serde_json::json!({
        "eventID": format!("{seq}"),
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": 1700000000,
            "Keys": { "PK": { "S": format!("RUN#{run}") }, "SK": { "S": sk } },
            "NewImage": { "PK": { "S": format!("RUN#{run}") }, "SK": { "S": sk } },
            "SequenceNumber": format!("{seq}00"),
            "SizeBytes": 60,
            "StreamViewType": "NEW_IMAGE"
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/progress/stream/2024"
    })
}

fn stream_event(records: Vec<serde_json::Value>) -> Event {
    serde_json::from_value(serde_json::json!({ "Records": records })).unwrap()
}

fn batch(_run: &str, page: u64) -> BatchRecord {
    BatchRecord {
        entity: "item".into(),
        segment: 0,
        page,
        part: 0,
        parts: 1,
        rows: 10,
        items: 10,
        rejected: 0,
        failed: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bursts_and_duplicates_announce_a_complete_run_once() {
    let dynamo = Dynamo::start().await;
    let proxy = FaultProxy::start(&dynamo.url, count_queries())
        .await
        .unwrap();
    let moto = Moto::start();
    let table = unique("lambda_finisher");
    let store = ProgressStore::new(dynamo.handle.clone(), table.clone());
    store.ensure().await.unwrap();

    // The topic, and a queue subscribed to it to see what was announced.
    let aws = aws_config(moto.url()).await;
    let sns = aws_sdk_sns::Client::new(&aws);
    let topic = sns
        .create_topic()
        .name(unique("done"))
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let sqs = sqs(moto.url()).await;
    let inbox = sqs
        .create_queue()
        .queue_name(unique("inbox"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let inbox_arn = sqs
        .get_queue_attributes()
        .queue_url(&inbox)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(inbox_arn)
        .send()
        .await
        .unwrap();

    let handler = FinisherHandler {
        finisher: Finisher::connect(&context().await, Some(&proxy.url()), &table).unwrap(),
        topic: Some((sns.clone(), topic.clone())),
    };
    let run: RunId = unique("run").parse().unwrap();
    let meta = RunMeta {
        mapping: "shop.toml".into(),
        source: "postgres://127.0.0.1/test".into(),
        table: "shop".into(),
        entities: vec![EntityMeta {
            name: "item".into(),
            segments: 1,
            bounds: vec![SegmentBounds {
                after: None,
                until: None,
            }],
        }],
        started: "2024-05-01T10:00:00Z".into(),
        queue: None,
        snapshots: Vec::new(),
    };
    store.record_run(&run, &meta).await.unwrap();
    store.record_batch(&run, &batch(&run, 0)).await.unwrap();
    store.record_batch(&run, &batch(&run, 1)).await.unwrap();
    store.finish_segment(&run, "item", 0, 30, 3).await.unwrap();
    let sk = |page: u64| batch(&run, page).sort_key();

    // Two of three pages recorded: a burst, duplicates included, announces nothing.
    let burst = vec![
        record(&run, &sk(0), 1),
        record(&run, &sk(1), 2),
        record(&run, &sk(1), 3),
        record(&run, "TOTAL#item#00000", 4),
        record(&run, "RUN", 5),
    ];
    let queries = proxy.stats().delayed;
    let out = handler
        .handle(event(stream_event(burst), Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(out.checked, vec![run.clone()]);
    assert!(
        out.completed.is_empty() && out.announced.is_empty(),
        "{out:?}"
    );
    assert_eq!(
        proxy.stats().delayed - queries,
        1,
        "one Query for the burst"
    );

    // The last page lands: two concurrent invocations with duplicates, one announcement.
    store.record_batch(&run, &batch(&run, 2)).await.unwrap();
    let burst = || {
        let records = (0..6).map(|i| record(&run, &sk(2), 10 + i)).collect();
        stream_event(records)
    };
    let (a, b) = tokio::join!(
        handler.handle(event(burst(), Duration::from_secs(60))),
        handler.handle(event(burst(), Duration::from_secs(60))),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.completed.len() + b.completed.len(), 1, "{a:?} {b:?}");
    assert_eq!(a.announced.len() + b.announced.len(), 1, "{a:?} {b:?}");

    // Later records of the done run: no Query, no announcement.
    let queries = proxy.stats().delayed;
    let out = handler
        .handle(event(burst(), Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(out.completed.is_empty() && out.announced.is_empty());
    assert_eq!(proxy.stats().delayed, queries, "a done run costs no Query");

    // Exactly one message reached the topic, naming the run and its counts.
    let mut notices = Vec::new();
    loop {
        let got = receive(&sqs, &inbox, 1).await;
        if got.is_empty() {
            break;
        }
        notices.extend(got);
    }
    assert_eq!(notices.len(), 1, "{notices:?}");
    let body = notices[0].body.clone().unwrap();
    assert!(body.contains(run.as_str()), "{body}");
    assert!(
        body.contains("\\\"rows\\\":30") || body.contains("\"rows\":30"),
        "{body}"
    );
    let done = done_record(&dynamo, &table, &run).await.unwrap();
    assert_eq!(done["rows"].as_n().unwrap(), "30");
    assert_eq!(done["announced"].as_bool().unwrap(), &true);
}

#[tokio::test]
async fn an_incomplete_run_is_never_announced() {
    let dynamo = Dynamo::start().await;
    let table = unique("lambda_finisher_inc");
    let store = ProgressStore::new(dynamo.handle.clone(), table.clone());
    store.ensure().await.unwrap();
    let handler = FinisherHandler {
        finisher: Finisher::connect(&context().await, Some(&dynamo.url), &table).unwrap(),
        topic: None,
    };
    let run: RunId = unique("run").parse().unwrap();
    // Batches recorded but the segment not finished: the rows read are unknown.
    store.record_batch(&run, &batch(&run, 0)).await.unwrap();
    let sk = batch(&run, 0).sort_key();
    for _ in 0..3 {
        let out = handler
            .handle(event(
                stream_event(vec![record(&run, &sk, 1), record(&run, &sk, 2)]),
                Duration::from_secs(60),
            ))
            .await
            .unwrap();
        assert!(out.completed.is_empty(), "{out:?}");
    }
    assert!(done_record(&dynamo, &table, &run).await.is_none());
}

/// The run's `DONE` record in the progress table, as the table holds it.
async fn done_record(
    dynamo: &Dynamo,
    table: &str,
    run: &str,
) -> Option<std::collections::HashMap<String, sql2ddb_testkit::sdk::types::AttributeValue>> {
    use sql2ddb_testkit::sdk::types::AttributeValue;
    dynamo
        .client
        .get_item()
        .table_name(table)
        .key("PK", AttributeValue::S(format!("RUN#{run}")))
        .key("SK", AttributeValue::S("DONE".into()))
        .send()
        .await
        .unwrap()
        .item
}

/// The AWS context of a test process: emulators, signed for us-east-1.
async fn context() -> AwsContext {
    AwsContext::load(Some("us-east-1"), false).await
}
