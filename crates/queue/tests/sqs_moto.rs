//! The SQS queue against a real SQS-compatible server (moto), one server per
//! test. Queues stay shallow and messages carry many items each: moto slows
//! down as a queue fills, and nothing here measures speed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sql2ddb_core::{AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, WorkBatch};
use sql2ddb_queue::{
    connect, create_queue, delete_queue, depths, redrive, Message, QueueUrls, Received, SqsQueue,
    VisibilityExtender, WorkQueue, MAX_MESSAGE_BYTES,
};
use sql2ddb_testkit::support::Moto;

/// Gives up on a condition that never comes.
const PATIENCE: Duration = Duration::from_secs(60);

fn item(i: u64, blob: usize) -> EncodedItem {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let noise: Vec<u8> = (0..blob)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut item = BTreeMap::new();
    item.insert("PK".to_string(), AttrValue::S(format!("ORDER#{i}")));
    item.insert("SK".to_string(), AttrValue::S("ORDER".into()));
    item.insert("total".to_string(), AttrValue::N(format!("{i}.25")));
    item.insert("blob".to_string(), AttrValue::B(noise));
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    EncodedItem::new(
        &item,
        &keys,
        serde_json::json!({ "order_id": i }),
        blob + 40,
    )
}

fn batch(page: u64, items: Vec<EncodedItem>) -> WorkBatch {
    WorkBatch {
        run_id: "run-1".parse().unwrap(),
        entity: "order".into(),
        segment: 1,
        page,
        part: BatchPart::WHOLE,
        pointers: Vec::new(),
        rows_read: items.len() as u64 + 1,
        items,
    }
}

/// The migration page a received message holds.
fn migration(r: &Received) -> WorkBatch {
    match &r.message {
        Message::Migration(b) => b.clone(),
        other => panic!("expected a migration page, got {other:?}"),
    }
}

struct Fixture {
    _moto: Moto,
    client: aws_sdk_sqs::Client,
    urls: QueueUrls,
    queue: Arc<SqsQueue>,
}

impl Fixture {
    async fn new(name: &str, visibility: Duration, max_receive_count: u32) -> Fixture {
        let moto = Moto::sqs();
        let client = connect(Some(moto.url()), Some("us-east-1"), None)
            .await
            .unwrap();
        let name = format!("{name}-{}", std::process::id());
        let urls = create_queue(&client, &name, visibility, max_receive_count)
            .await
            .unwrap();
        let queue = Arc::new(SqsQueue::open(client.clone(), &urls.queue).await.unwrap());
        Fixture {
            _moto: moto,
            client,
            urls,
            queue,
        }
    }

    /// Receives until `n` batches came (or fails after [`PATIENCE`]).
    async fn receive_all(&self, n: usize) -> Vec<Received> {
        let start = Instant::now();
        let mut got = Vec::new();
        while got.len() < n {
            assert!(
                start.elapsed() < PATIENCE,
                "only {} of {n} batches came",
                got.len()
            );
            got.extend(self.receive().await);
        }
        got
    }

    /// One receive of up to 10 messages, waiting up to a second.
    async fn receive(&self) -> Vec<Received> {
        self.queue
            .receive(10, Duration::from_secs(1))
            .await
            .unwrap()
    }

    async fn clean_up(self) {
        delete_queue(&self.client, &self.urls.queue).await.unwrap();
        delete_queue(&self.client, &self.urls.dead_letter)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn packed_batches_are_sent_received_counted_and_acked_once() {
    let f = Fixture::new("packed", Duration::from_secs(30), 5).await;
    assert_eq!(f.queue.visibility_timeout(), Duration::from_secs(30));
    assert_eq!(f.queue.dead_letter_url(), Some(f.urls.dead_letter.as_str()));
    assert_eq!(f.queue.max_message_bytes(), MAX_MESSAGE_BYTES);

    // 12 pages of 100 items: 12 messages, two SendMessageBatch calls.
    let sent: Vec<WorkBatch> = (0..12)
        .map(|page| {
            batch(
                page,
                (page * 100..page * 100 + 100)
                    .map(|i| item(i, 16))
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        f.queue
            .send(sent.iter().cloned().map(Message::from).collect())
            .await
            .unwrap(),
        12
    );

    let first = f.receive_all(1).await;
    let depth = f.queue.depth().await.unwrap();
    assert_eq!(depth.visible + depth.in_flight, 12);
    assert_eq!(depth.in_flight, first.len() as u64);
    assert_eq!(depth.dead_letter, Some(0));

    let mut got = first;
    got.extend(f.receive_all(12 - got.len()).await);
    let mut batches: Vec<WorkBatch> = got.iter().map(migration).collect();
    batches.sort_by_key(|b| b.page);
    assert_eq!(batches, sent);
    assert!(got.iter().all(|r| r.receive_count == 1));

    for r in &got {
        f.queue.ack(&r.handle).await.unwrap();
    }
    let depth = depths(&f.client, &f.urls).await.unwrap();
    assert_eq!(
        (depth.visible, depth.in_flight, depth.dead_letter),
        (0, 0, Some(0))
    );
    assert!(f.receive().await.is_empty());
    f.clean_up().await;
}

#[tokio::test]
async fn a_page_too_large_for_one_message_arrives_whole_in_parts() {
    let f = Fixture::new("parts", Duration::from_secs(30), 5).await;
    // 60 items of 20 KB that do not compress: well over 1 MiB encoded.
    let items: Vec<EncodedItem> = (0..60).map(|i| item(i, 20_000)).collect();
    let messages = f
        .queue
        .send(vec![batch(4, items.clone()).into()])
        .await
        .unwrap();
    assert!(messages >= 2, "sent as {messages} message(s)");

    let mut parts: Vec<WorkBatch> = f
        .receive_all(messages)
        .await
        .into_iter()
        .map(|r| migration(&r))
        .collect();
    parts.sort_by_key(|b| b.part.index);
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(
            p.part,
            BatchPart {
                index: i as u32,
                count: messages as u32
            }
        );
        assert_eq!((p.segment, p.page), (1, 4));
    }
    let joined: Vec<EncodedItem> = parts.iter().flat_map(|p| p.items.clone()).collect();
    assert_eq!(joined, items);
    assert_eq!(parts.iter().map(|p| p.rows_read).sum::<u64>(), 61);
    f.clean_up().await;
}

#[tokio::test]
async fn extending_keeps_a_message_invisible_past_its_timeout() {
    let f = Fixture::new("extend", Duration::from_secs(2), 5).await;
    f.queue
        .send(vec![batch(0, vec![item(1, 8)]).into()])
        .await
        .unwrap();
    let held = f.receive_all(1).await.remove(0);

    // Held three times the queue's 2 s timeout while extended to 4 s every 2 s.
    let extender =
        VisibilityExtender::start(f.queue.clone(), held.handle.clone(), Duration::from_secs(4));
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        let other = f.receive().await;
        assert!(other.is_empty(), "an extended message was delivered again");
    }
    extender.stop().await;
    f.queue.ack(&held.handle).await.unwrap();
    let depth = f.queue.depth().await.unwrap();
    assert_eq!((depth.visible, depth.in_flight), (0, 0));
    f.clean_up().await;
}

#[tokio::test]
async fn a_released_message_is_visible_again_at_once() {
    // Two minutes of visibility: only the release can bring it back within the test.
    let f = Fixture::new("release", Duration::from_secs(120), 5).await;
    let sent = batch(7, vec![item(1, 8), item(2, 8)]);
    f.queue.send(vec![sent.clone().into()]).await.unwrap();
    let held = f.receive_all(1).await.remove(0);
    assert!(f.receive().await.is_empty());

    f.queue.release(&held.handle).await.unwrap();
    let again = f.receive_all(1).await.remove(0);
    assert_eq!(migration(&again), sent);
    assert_eq!(again.receive_count, 2);
    f.queue.ack(&again.handle).await.unwrap();
    f.clean_up().await;
}

#[tokio::test]
async fn a_message_never_acked_is_dead_lettered_then_redriven() {
    let f = Fixture::new("dlq", Duration::from_secs(1), 2).await;
    let sent = batch(3, (0..50).map(|i| item(i, 8)).collect());
    f.queue.send(vec![sent.clone().into()]).await.unwrap();

    // Receive and drop it, as a crashing worker would, until SQS gives up on it.
    let start = Instant::now();
    let mut deliveries = Vec::new();
    loop {
        assert!(start.elapsed() < PATIENCE, "never dead-lettered");
        for r in f.receive().await {
            deliveries.push(r.receive_count);
        }
        if f.queue.depth().await.unwrap().dead_letter == Some(1) {
            break;
        }
    }
    assert_eq!(
        deliveries,
        [1, 2],
        "delivered maxReceiveCount times, then dead-lettered"
    );
    let depth = f.queue.depth().await.unwrap();
    assert_eq!((depth.visible, depth.in_flight), (0, 0));

    assert_eq!(
        redrive(&f.client, &f.urls.dead_letter, &f.urls.queue)
            .await
            .unwrap(),
        1
    );
    assert_eq!(f.queue.depth().await.unwrap().dead_letter, Some(0));
    let back = f.receive_all(1).await.remove(0);
    assert_eq!(migration(&back), sent);
    assert_eq!(back.receive_count, 1);
    f.queue.ack(&back.handle).await.unwrap();
    assert_eq!(
        redrive(&f.client, &f.urls.dead_letter, &f.urls.queue)
            .await
            .unwrap(),
        0
    );
    f.clean_up().await;
}

#[tokio::test]
async fn a_foreign_message_is_never_handed_out_and_ends_in_the_dead_letter_queue() {
    let f = Fixture::new("foreign", Duration::from_secs(1), 1).await;
    f.client
        .send_message()
        .queue_url(&f.urls.queue)
        .message_body("not a work batch")
        .send()
        .await
        .unwrap();
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < PATIENCE, "never dead-lettered");
        let got = f.queue.receive(10, Duration::from_secs(1)).await.unwrap();
        assert!(got.is_empty(), "a foreign body was decoded as a batch");
        if f.queue.depth().await.unwrap().dead_letter == Some(1) {
            break;
        }
    }
    f.clean_up().await;
}

#[tokio::test]
async fn a_message_of_a_retired_format_is_never_handed_out_and_ends_in_the_dead_letter_queue() {
    let f = Fixture::new("retired", Duration::from_secs(1), 1).await;
    // A format-3 body (format 4's payload in deflate), as a development
    // build before 0.1.0 sent it, beside one of this release.
    const FORMAT_3: &str = "A1XOvQrCMBQF4N2nKMc1iKloIbNOgkodaynFXkrAJpKmWAl5MzdfzKTi4Hbvx7k/DmZQlWwgYDgYSFlpn6HTpiEToKe2CwiRMtzrliCyWJggDlI1NEIsGa56iCHuGYx+9JWhuplmpKWuhyiKTcZWnBUO57D9mG93+ZzDl8x9T00/cF+WfuZw2sftf0EGpS39+P1KLkjGyFbb+hb9EJyni/US3n8A";
    assert!(matches!(
        sql2ddb_queue::codec::decode(FORMAT_3),
        Err(sql2ddb_queue::CodecError::Retired { found: 3 })
    ));
    f.client
        .send_message()
        .queue_url(&f.urls.queue)
        .message_body(FORMAT_3)
        .send()
        .await
        .unwrap();
    let sent = batch(1, vec![item(1, 10)]);
    assert_eq!(f.queue.send(vec![sent.clone().into()]).await.unwrap(), 1);
    let start = Instant::now();
    let mut current = Vec::new();
    loop {
        assert!(start.elapsed() < PATIENCE, "never dead-lettered");
        for got in f.queue.receive(10, Duration::from_secs(1)).await.unwrap() {
            assert_eq!(
                migration(&got),
                sent,
                "a retired body was decoded as a batch"
            );
            f.queue.ack(&got.handle).await.unwrap();
            current.push(migration(&got));
        }
        if f.queue.depth().await.unwrap().dead_letter == Some(1) && !current.is_empty() {
            break;
        }
    }
    assert_eq!(current, [sent]);
    f.clean_up().await;
}
