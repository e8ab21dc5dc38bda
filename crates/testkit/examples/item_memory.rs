//! Memory per item in flight, for `scripts/bench.sh --only memory`: the
//! heap bytes the first `--count` items of an export (`sql2ddb export
//! --compression none`) take in each form a run holds them in, counted by
//! a global allocator that keeps the bytes in use. An item in flight is an
//! [`EncodedItem`] (its DynamoDB JSON, key values, size and source key);
//! before it was serialised once, it was a [`MappedItem`] (an attribute map
//! of strings), which is measured beside it. Prints the figures as JSON.
//!
//! item_memory --items DIR [--count 100000]

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use sql2ddb_core::{item_size, EncodedItem, KeyAttr, KeyType, MappedItem};
use sql2ddb_testkit::bench_input::{arg, read_first_items};

/// The system allocator, keeping count of the bytes in use.
struct Counting;

static IN_USE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        IN_USE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        IN_USE.fetch_add(new_size, Ordering::Relaxed);
        IN_USE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes per item that `make` holds once it has built its vector.
fn bytes_per_item<T>(n: usize, make: impl FnOnce() -> Vec<T>) -> (f64, Vec<T>) {
    let before = IN_USE.load(Ordering::Relaxed);
    let built = make();
    let after = IN_USE.load(Ordering::Relaxed);
    (after.saturating_sub(before) as f64 / n.max(1) as f64, built)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = arg(&args, "--items").expect("--items DIR");
    let count: usize = arg(&args, "--count").map_or(100_000, |c| c.parse().expect("--count N"));
    let items = read_first_items(Path::new(&dir), count);
    let n = items.len();
    assert!(n > 0, "no items in {dir}");
    // The benchmark's table, and the source key a row of its orders has.
    let keys = [
        KeyAttr::new("PK", KeyType::S),
        KeyAttr::new("SK", KeyType::S),
    ];
    let source_key = |i: usize| serde_json::json!({ "order_id": i as u64 + 1 });
    let size: f64 = items.iter().map(item_size).sum::<usize>() as f64 / n as f64;

    let (mapped_bytes, mapped) = bytes_per_item(n, || {
        items
            .iter()
            .enumerate()
            .map(|(i, item)| MappedItem {
                item: item.clone(),
                source_key: source_key(i),
                size: item_size(item),
            })
            .collect::<Vec<_>>()
    });
    let (encoded_bytes, encoded) = bytes_per_item(n, || {
        mapped
            .iter()
            .map(|m| EncodedItem::new(&m.item, &keys, m.source_key.clone(), m.size))
            .collect::<Vec<_>>()
    });
    assert_eq!(encoded[0].decode().unwrap(), items[0]);
    println!(
        "{}",
        serde_json::json!({
            "items": n,
            "item_bytes": (size * 10.0).round() / 10.0,
            "mapped_bytes": (mapped_bytes * 10.0).round() / 10.0,
            "encoded_bytes": (encoded_bytes * 10.0).round() / 10.0,
            "encoded_overhead": ((encoded_bytes - size) * 10.0).round() / 10.0,
        })
    );
}
