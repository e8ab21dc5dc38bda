//! The queue message codec's CPU per item, for `scripts/bench.sh --only
//! codec`: pages of 500 items shaped like the bench's orders (8 attributes,
//! about 270 bytes by DynamoDB's rules, a source key each) encoded and
//! decoded in the current format ([`codec::FORMAT_VERSION`]: a head line,
//! then the items' text, in zstd), in the format before it
//! ([`codec::DEFLATE_FORMAT_VERSION`]: the same in deflate) and in the
//! format of the first releases ([`codec::LEGACY_FORMAT_VERSION`]: the batch
//! as JSON), in turns, in one process, so all see the same host. Prints the
//! figures as JSON.
//!
//! codec_bench [--items 200000] [--rounds 3]

// The allocator of the binaries that decode messages (`sql2ddb worker`, the Lambda).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::io::Write;

use base64::Engine;
use flate2::write::DeflateEncoder;
use flate2::Compression;
use sql2ddb_core::{AttrValue, BatchPart, EncodedItem, KeyAttr, KeyType, WorkBatch};
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

/// A body as releases before format 3 wrote it.
fn legacy(batch: &WorkBatch) -> String {
    let mut bytes = vec![codec::LEGACY_FORMAT_VERSION];
    let mut enc = DeflateEncoder::new(&mut bytes, Compression::default());
    enc.write_all(&serde_json::to_vec(batch).unwrap()).unwrap();
    enc.finish().unwrap();
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
            run_id: "bench-codec".into(),
            entity: "order".into(),
            segment: 0,
            page: i as u64,
            part: BatchPart::WHOLE,
            rows_read: chunk.len() as u64,
            items: chunk.to_vec(),
            pointers: Vec::new(),
            update: None,
        })
        .collect();
    let (mut enc_new, mut enc_old, mut dec_new, mut dec_old) =
        (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
    let (mut enc_prev, mut dec_prev) = (f64::MAX, f64::MAX);
    let (mut bytes_new, mut bytes_old, mut bytes_prev) = (0, 0, 0);
    for _ in 0..rounds {
        let mut new = Vec::new();
        enc_new = enc_new.min(per_item(n, || {
            new = pages.iter().map(codec::encode).collect()
        }));
        let mut prev = Vec::new();
        enc_prev = enc_prev.min(per_item(n, || {
            prev = pages.iter().map(codec::encode_deflate_format).collect()
        }));
        let mut old = Vec::new();
        enc_old = enc_old.min(per_item(n, || old = pages.iter().map(legacy).collect()));
        bytes_new = new.iter().map(String::len).sum::<usize>();
        bytes_prev = prev.iter().map(String::len).sum::<usize>();
        bytes_old = old.iter().map(String::len).sum::<usize>();
        let check = |bodies: &[String]| {
            let mut items = 0;
            for body in bodies {
                items += codec::decode(body)
                    .expect("the bench's own bodies decode")
                    .items
                    .len();
            }
            assert_eq!(items, n);
        };
        dec_new = dec_new.min(per_item(n, || check(&new)));
        dec_prev = dec_prev.min(per_item(n, || check(&prev)));
        dec_old = dec_old.min(per_item(n, || check(&old)));
        // The formats read back to the same batches.
        assert_eq!(
            codec::decode(&new[0]).unwrap(),
            codec::decode(&old[0]).unwrap()
        );
        assert_eq!(
            codec::decode(&new[0]).unwrap(),
            codec::decode(&prev[0]).unwrap()
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
            "previous_format": codec::DEFLATE_FORMAT_VERSION,
            "previous_decode_us_per_item": dec_prev,
            "previous_encode_us_per_item": enc_prev,
            "previous_body_bytes_per_item": bytes_prev as f64 / n as f64,
            "legacy_decode_us_per_item": dec_old,
            "legacy_encode_us_per_item": enc_old,
            "legacy_body_bytes_per_item": bytes_old as f64 / n as f64,
        })
    );
}
