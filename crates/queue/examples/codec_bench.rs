//! The queue message codec's CPU per item, for `scripts/bench.sh --only
//! codec`: pages of 500 items shaped like the bench's orders (8 attributes,
//! about 270 bytes by DynamoDB's rules, a source key each) encoded and
//! decoded as a migration's pages ([`codec::FORMAT_VERSION`]: a head line,
//! then the items' text, in zstd) and, for the same keys, as an update job's
//! pages ([`codec::UPDATE_FORMAT_VERSION`]: the batch as JSON in deflate,
//! each item its key), in turns, in one process, so both see the same host.
//! Prints the figures as JSON.
//!
//! codec_bench [--items 200000] [--rounds 3]

// The allocator of the binaries that decode messages (`sql2ddb worker`, the Lambda).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;

use sql2ddb_core::{
    AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, UpdateChange, UpdatePage, WorkBatch,
};
use sql2ddb_queue::codec;
use sql2ddb_testkit::bench_input::cpu_seconds;

const PAGE: usize = 500;

fn arg(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    Some(args.get(i + 1)?.parse().expect("a number"))
}

/// Item `i`, shaped like a row of the bench's `orders` table.
fn item(i: usize, keys: &[KeyAttr]) -> EncodedItem {
    let mut item = BTreeMap::new();
    let s = |v: String| AttrValue::S(v);
    item.insert("PK".to_string(), s(format!("CUSTOMER#{}", i % 50_000)));
    item.insert("SK".to_string(), s(format!("ORDER#{i:010}")));
    item.insert("order_id".to_string(), AttrValue::N(i.to_string()));
    item.insert(
        "customer_id".to_string(),
        AttrValue::N((i % 50_000).to_string()),
    );
    item.insert(
        "status".to_string(),
        s(["new", "paid", "shipped"][i % 3].into()),
    );
    item.insert(
        "total".to_string(),
        AttrValue::N(format!("{}.{:02}", i % 997, i % 100)),
    );
    item.insert(
        "created_at".to_string(),
        s(format!(
            "2024-05-{:02}T{:02}:{:02}:00Z",
            1 + i % 28,
            i % 24,
            i % 60
        )),
    );
    item.insert(
        "note".to_string(),
        s(format!(
            "order {i} for customer {}: deliver to the back door",
            i % 50_000
        )),
    );
    let size = sql2ddb_core::limits::item_size(&item);
    EncodedItem::new(&item, keys, serde_json::json!({ "order_id": i }), size)
}

/// The update page of the same keys as `page`, as `sql2ddb update` queues
/// them: each item its key attributes, the change once per page.
fn update_page(page: &WorkBatch, keys: &[KeyAttr]) -> UpdatePage {
    let items = page
        .items
        .iter()
        .map(|m| {
            let key: BTreeMap<String, AttrValue> = keys
                .iter()
                .zip(&m.key)
                .map(|(k, v)| (k.name.clone(), v.clone()))
                .collect();
            let source_key = serde_json::json!({
                "PK": m.key[0].to_dynamo_json(),
                "SK": m.key[1].to_dynamo_json(),
            });
            EncodedItem::new(&key, keys, source_key, m.size)
        })
        .collect();
    UpdatePage {
        run_id: page.run_id.clone(),
        entity: page.entity.clone(),
        segment: page.segment,
        page: page.page,
        part: page.part,
        rows_read: page.rows_read,
        keys: items,
        change: UpdateChange {
            table: "bench".into(),
            keys: keys.to_vec(),
            update: Some("SET #s = :s".into()),
            condition: "attribute_exists(#k)".into(),
            names: [("#s", "status"), ("#k", "PK")]
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .into(),
            values: [(":s".to_string(), AttrValue::S("archived".into()))].into(),
            own_mark: None,
        },
    }
}

/// CPU µs per item of `f` over `items` items.
fn per_item(items: usize, f: impl FnOnce()) -> f64 {
    let before = cpu_seconds();
    f();
    (cpu_seconds() - before) * 1e6 / items as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = arg(&args, "--items").unwrap_or(200_000);
    let rounds = arg(&args, "--rounds").unwrap_or(3);
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let all: Vec<EncodedItem> = (0..n).map(|i| item(i, &keys)).collect();
    let pages: Vec<WorkBatch> = all
        .chunks(PAGE)
        .enumerate()
        .map(|(i, chunk)| WorkBatch {
            run_id: "bench-codec".parse().unwrap(),
            entity: "order".into(),
            segment: 0,
            page: i as u64,
            part: BatchPart::WHOLE,
            rows_read: chunk.len() as u64,
            items: chunk.to_vec(),
            pointers: Vec::new(),
        })
        .collect();
    let updates: Vec<UpdatePage> = pages.iter().map(|p| update_page(p, &keys)).collect();
    let (mut enc_new, mut dec_new, mut enc_update, mut dec_update) =
        (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let (mut bytes_new, mut bytes_update) = (0, 0);
    for _ in 0..rounds {
        let mut new = Vec::new();
        enc_new = enc_new.min(per_item(n, || {
            new = pages.iter().map(codec::encode).collect()
        }));
        let mut update = Vec::new();
        enc_update = enc_update.min(per_item(n, || {
            update = updates.iter().map(codec::encode_update).collect()
        }));
        bytes_new = new.iter().map(String::len).sum::<usize>();
        bytes_update = update.iter().map(String::len).sum::<usize>();
        let check = |bodies: &[String]| {
            let mut items = 0;
            for body in bodies {
                items += codec::decode(body)
                    .expect("the bench's own bodies decode")
                    .items()
                    .len();
            }
            assert_eq!(items, n);
        };
        dec_new = dec_new.min(per_item(n, || check(&new)));
        dec_update = dec_update.min(per_item(n, || check(&update)));
        // Each format reads back to the batch it was made of.
        assert_eq!(codec::decode(&new[0]).unwrap(), pages[0].clone().into());
        assert_eq!(
            codec::decode(&update[0]).unwrap(),
            updates[0].clone().into()
        );
    }
    let item_bytes: usize = all.iter().map(|m| m.item.get().len()).sum::<usize>() / n;
    println!(
        "{}",
        serde_json::json!({
            "items": n,
            "item_text_bytes": item_bytes,
            "format": codec::FORMAT_VERSION,
            "decode_us_per_item": dec_new,
            "encode_us_per_item": enc_new,
            "body_bytes_per_item": bytes_new as f64 / n as f64,
            "update_format": codec::UPDATE_FORMAT_VERSION,
            "update_decode_us_per_item": dec_update,
            "update_encode_us_per_item": enc_update,
            "update_body_bytes_per_item": bytes_update as f64 / n as f64,
        })
    );
}
