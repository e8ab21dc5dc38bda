//! The message body of a queued [`WorkBatch`]: a format version byte, then the
//! batch compressed (zstd or raw deflate, by format), the whole
//! base64-encoded so it is valid SQS text. Size limits are computed here,
//! never left to the service: a batch whose body would exceed the limit is
//! split by items into parts that each fit, never dropped.
//!
//! The formats, by their first byte:
//!
//! - [`FORMAT_VERSION`] (4), a migration batch: the batch without its items'
//!   text as one line of JSON (each item as `[text length, size, key values,
//!   source key]`), a newline, then the items' DynamoDB JSON one after
//!   another, compressed as one zstd frame that states its size. A worker
//!   cuts the items out by their lengths instead of parsing them; each is
//!   checked to be one closed JSON object ([`ItemJson::from_object_text`]),
//!   so none can reach outside its place in a request body. zstd (level
//!   1), not deflate: on the codec bench's orders a reader compresses a
//!   page in about 60% of deflate's CPU, into bodies about 45% smaller
//!   (so a worker holds and receives less), and a worker decodes it in
//!   about 90% of the time (decompressing takes about as many
//!   instructions as inflating, a little more or less by the items, but
//!   fewer cycles).
//! - [`DEFLATE_FORMAT_VERSION`] (3), the same payload in raw deflate, as
//!   releases before format 4 wrote it: still read, never written.
//! - [`UPDATE_FORMAT_VERSION`] (2), a page of an update job (a batch with
//!   [`WorkBatch::update`]): the batch as JSON, in raw deflate. A release
//!   that knows only migration batches refuses it instead of writing its
//!   keys as items.
//! - [`LEGACY_FORMAT_VERSION`] (1), a migration batch as JSON in raw
//!   deflate, as releases before format 3 wrote it: still read, never
//!   written.
//!
//! A worker reads every format up to its own; a body of a newer one is
//! refused ([`CodecError::Version`]) and stays in the queue, so workers are
//! upgraded before (or with) the readers that feed them.

use std::io::Write;

use base64::Engine;
use flate2::write::DeflateEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};
use serde::Serialize;
use sql2ddb_core::{
    AttrValue, BatchPart, BatchPointer, EncodedItem, ItemJson, SourceKey, WorkBatch,
};

use crate::head::{self, HeadIn, ItemHeadIn};

/// The largest message body SQS accepts (1 MiB), which is also the largest
/// total of the bodies in one `SendMessageBatch` call.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The largest batch JSON a body may inflate to; a guard against corrupt or
/// hostile bodies, far above anything the reader produces.
pub const MAX_DECODED_BYTES: u64 = 256 * 1024 * 1024;

/// The body format of a migration batch (the first byte before base64):
/// a head line of JSON, then the items' text, in zstd.
pub const FORMAT_VERSION: u8 = 4;

/// The migration batch format before [`FORMAT_VERSION`]: the same payload in
/// raw deflate. Read, never written.
pub const DEFLATE_FORMAT_VERSION: u8 = 3;

/// The body format of an update job's batch.
pub const UPDATE_FORMAT_VERSION: u8 = 2;

/// The migration batch format of earlier releases (the batch as JSON): read,
/// never written.
pub const LEGACY_FORMAT_VERSION: u8 = 1;

/// The deflate level of the update batches written. Level 2 of zlib-rs
/// costs about half of the default level's (6) instructions per item for
/// about 9% more bytes, and inflating either costs the same.
const DEFLATE_LEVEL: Compression = Compression::new(2);

/// The zstd level of the migration batches written: see [`ZSTD_LEVEL`]'s
/// figures in docs/performance.md (the codec scenario).
const ZSTD_LEVEL: i32 = 1;

/// Room kept while choosing where to split, for the part numbers that are
/// only settled once every cut is known (they change a few bytes at most).
const PART_SLACK: usize = 64;

/// Why a body could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The body is not base64 (not a message of ours).
    #[error("message body is not base64: {0}")]
    NotBase64(String),
    /// The body was written by a newer (or unknown) format.
    #[error("message format version {found} is not understood by this release (it reads versions {LEGACY_FORMAT_VERSION} to {FORMAT_VERSION})")]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The compressed payload is damaged or too large.
    #[error("message payload is damaged: {0}")]
    Corrupt(String),
    /// The payload is not a work batch (or a part of it is not what the
    /// format says).
    #[error("message payload is not a work batch: {0}")]
    Json(String),
    /// A single item is too large for one message even alone.
    #[error("an item of {entity} (source key {source_key}) does not fit a queue message of {max} bytes even alone ({bytes} bytes encoded)")]
    ItemTooLarge {
        /// Entity name.
        entity: String,
        /// The source row's key.
        source_key: String,
        /// Encoded size of a message holding only that item.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A batch that is already one part of a split page does not fit.
    #[error("part {part} of page {page} of {entity} segment {segment} does not fit a queue message of {max} bytes and cannot be split again")]
    PartTooLarge {
        /// Entity name.
        entity: String,
        /// Segment.
        segment: u32,
        /// Page.
        page: u64,
        /// Part index.
        part: u32,
        /// The limit.
        max: usize,
    },
}

/// The head line of a format-3 payload: the batch without its items' text,
/// as it is written (borrowed from the batch).
#[derive(Serialize)]
struct HeadOut<'a> {
    run_id: &'a str,
    entity: &'a str,
    segment: u32,
    page: u64,
    part: BatchPart,
    rows_read: u64,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pointers: &'a [BatchPointer],
    items: Vec<ItemHeadOut<'a>>,
}

/// An item in the head line: `[text length, size, key values, source key]`.
#[derive(Serialize)]
struct ItemHeadOut<'a>(usize, usize, &'a [AttrValue], &'a SourceKey);

/// Encodes one batch as one body, whatever its size.
pub fn encode(batch: &WorkBatch) -> String {
    let bytes = match batch.update {
        Some(_) => {
            let payload = serde_json::to_vec(batch).expect("a work batch always serialises");
            deflated(UPDATE_FORMAT_VERSION, &payload)
        }
        None => {
            let payload = text_payload(batch);
            let mut bytes = Vec::with_capacity(1 + zstd::zstd_safe::compress_bound(payload.len()));
            bytes.push(FORMAT_VERSION);
            ZSTD.with_borrow_mut(|z| {
                let compressor = z.compressor.get_or_insert_with(|| {
                    zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("a zstd context")
                });
                // After the version byte.
                let mut after = std::io::Cursor::new(&mut bytes);
                after.set_position(1);
                compressor
                    .compress_to_buffer(&payload, &mut after)
                    .expect("the buffer has zstd's bound of room");
            });
            bytes
        }
    };
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// A migration batch as a body of [`DEFLATE_FORMAT_VERSION`], as releases
/// before format 4 wrote it (deflate level 2): for tests and benchmarks that
/// compare the two. Every worker of this release reads it.
pub fn encode_deflate_format(batch: &WorkBatch) -> String {
    let bytes = deflated(DEFLATE_FORMAT_VERSION, &text_payload(batch));
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// `version`, then `payload` in raw deflate. The payload is whole before it
/// is deflated: one write, not one per token.
fn deflated(version: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + payload.len() / 3);
    bytes.push(version);
    let mut encoder = DeflateEncoder::new(&mut bytes, DEFLATE_LEVEL);
    encoder
        .write_all(payload)
        .expect("writing to memory cannot fail");
    encoder.finish().expect("writing to memory cannot fail");
    bytes
}

/// Each thread's zstd contexts, made once: a context is hundreds of
/// kilobytes, more than a page's text.
#[derive(Default)]
struct ZstdContexts {
    compressor: Option<zstd::bulk::Compressor<'static>>,
    decompressor: Option<zstd::bulk::Decompressor<'static>>,
}

thread_local! {
    static ZSTD: std::cell::RefCell<ZstdContexts> = Default::default();
}

/// A format-4 (and 3) payload: the head line, a newline, the items' text.
pub(crate) fn text_payload(batch: &WorkBatch) -> Vec<u8> {
    let head = HeadOut {
        run_id: &batch.run_id,
        entity: &batch.entity,
        segment: batch.segment,
        page: batch.page,
        part: batch.part,
        rows_read: batch.rows_read,
        pointers: &batch.pointers,
        items: batch
            .items
            .iter()
            .map(|m| ItemHeadOut(m.item.get().len(), m.size, &m.key, &m.source_key))
            .collect(),
    };
    let text: usize = batch.items.iter().map(|m| m.item.get().len()).sum();
    let mut out = Vec::with_capacity(text + 64 * batch.items.len() + 256);
    // Compact JSON has no raw newline: the first one ends the head.
    serde_json::to_writer(&mut out, &head).expect("a work batch always serialises");
    out.push(b'\n');
    for m in &batch.items {
        out.extend_from_slice(m.item.get().as_bytes());
    }
    out
}

/// Reads a body back into its batch.
pub fn decode(body: &str) -> Result<WorkBatch, CodecError> {
    let bytes = from_base64(body.trim())?;
    let Some((&version, compressed)) = bytes.split_first() else {
        return Err(CodecError::Corrupt("empty body".into()));
    };
    if !(LEGACY_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(CodecError::Version { found: version });
    }
    if version == FORMAT_VERSION {
        return read_text_payload(&unzstd(compressed)?);
    }
    let payload = inflate(compressed)?;
    if version == DEFLATE_FORMAT_VERSION {
        return read_text_payload(&payload);
    }
    let batch: WorkBatch =
        serde_json::from_slice(&payload).map_err(|e| CodecError::Json(e.to_string()))?;
    if batch.update.is_some() != (version == UPDATE_FORMAT_VERSION) {
        return Err(CodecError::Json(format!(
            "a format {version} body must {}carry an update",
            if version == LEGACY_FORMAT_VERSION {
                "not "
            } else {
                ""
            }
        )));
    }
    Ok(batch)
}

/// Decodes a body's base64 with SIMD (`base64-simd`, the SDK's own); text
/// it refuses is read by the `base64` crate, which takes it or says why not.
fn from_base64(text: &str) -> Result<Vec<u8>, CodecError> {
    base64_simd::STANDARD.decode_to_vec(text).or_else(|_| {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| CodecError::NotBase64(e.to_string()))
    })
}

/// Decompresses one zstd frame, which states its size (at most
/// [`MAX_DECODED_BYTES`]), into a buffer of exactly that size. A frame cut
/// short, or holding more or less than it states, is refused.
fn unzstd(compressed: &[u8]) -> Result<Vec<u8>, CodecError> {
    let corrupt =
        |why: String| CodecError::Corrupt(format!("the zstd frame is cut short or damaged: {why}"));
    let size = match zstd::zstd_safe::get_frame_content_size(compressed) {
        Ok(Some(size)) => size,
        Ok(None) => return Err(corrupt("it does not state its size".into())),
        Err(_) => return Err(corrupt("no frame header".into())),
    };
    if size > MAX_DECODED_BYTES {
        return Err(CodecError::Corrupt(format!(
            "decompresses past {MAX_DECODED_BYTES} bytes ({size})"
        )));
    }
    let mut out = Vec::with_capacity(size as usize);
    ZSTD.with_borrow_mut(|z| {
        let decompressor = match &mut z.decompressor {
            Some(d) => d,
            slot => {
                slot.insert(zstd::bulk::Decompressor::new().map_err(|e| corrupt(e.to_string()))?)
            }
        };
        decompressor
            .decompress_to_buffer(compressed, &mut out)
            .map_err(|e| corrupt(e.to_string()))
    })?;
    if out.len() as u64 != size {
        return Err(corrupt(format!(
            "it holds {} bytes, not the {size} it states",
            out.len()
        )));
    }
    Ok(out)
}

/// Inflates a raw deflate stream, at most [`MAX_DECODED_BYTES`] of it,
/// straight into a buffer's spare room (`read_to_end` zeroes that room
/// before every read). The stream must end: a cut body is refused.
fn inflate(compressed: &[u8]) -> Result<Vec<u8>, CodecError> {
    const MAX: usize = MAX_DECODED_BYTES as usize;
    let corrupt = CodecError::Corrupt;
    // Items' JSON deflates to about an eighth at the level bodies are
    // written with: sized for that, the buffer is rarely grown.
    let mut out = Vec::with_capacity((compressed.len() * 8).clamp(1024, MAX));
    let mut inflater = Decompress::new(false);
    loop {
        let read = inflater.total_in() as usize;
        let status = inflater
            .decompress_vec(&compressed[read..], &mut out, FlushDecompress::Finish)
            .map_err(|e| corrupt(e.to_string()))?;
        if status == Status::StreamEnd {
            return Ok(out);
        }
        if out.len() < out.capacity() {
            // Room left to write into, and still no end: the input ran out.
            return Err(corrupt("the deflate stream is cut short".into()));
        }
        if out.len() >= MAX {
            return Err(corrupt(format!("inflates past {MAX_DECODED_BYTES} bytes")));
        }
        out.reserve_exact(out.len().min(MAX - out.len()));
    }
}

/// Reads a format-4 (or 3) payload: the head line, then each item cut out of the
/// text by its length and checked to be one closed JSON object.
fn read_text_payload(payload: &[u8]) -> Result<WorkBatch, CodecError> {
    let end = memchr::memchr(b'\n', payload).ok_or_else(|| {
        CodecError::Json("a migration batch body has no end to its head line".into())
    })?;
    let line = &payload[..end];
    // By hand as written; serde reads (or refuses, with its reason) the rest.
    let head = match head::read(line) {
        Some(head) => head,
        None => {
            serde_json::from_slice::<HeadIn>(line).map_err(|e| CodecError::Json(e.to_string()))?
        }
    };
    let text = std::str::from_utf8(&payload[end + 1..])
        .map_err(|e| CodecError::Json(format!("the items' text is not UTF-8: {e}")))?;
    let lengths = head
        .items
        .iter()
        .try_fold(0usize, |sum, item| sum.checked_add(item.0));
    if lengths != Some(text.len()) {
        return Err(CodecError::Json(format!(
            "the items' lengths in the head do not add up to the {} bytes of text after it",
            text.len()
        )));
    }
    let mut at = 0;
    let mut items = Vec::with_capacity(head.items.len());
    for (i, ItemHeadIn(len, size, key, source_key)) in head.items.into_iter().enumerate() {
        let item = text
            .get(at..at + len)
            .ok_or_else(|| format!("it does not end on a character ({len} bytes at {at})"))
            .and_then(ItemJson::from_object_text)
            .map_err(|e| CodecError::Json(format!("item {i} (source key {source_key}): {e}")))?;
        at += len;
        items.push(EncodedItem {
            item,
            key,
            source_key,
            size,
        });
    }
    Ok(WorkBatch {
        run_id: head.run_id,
        entity: head.entity,
        segment: head.segment,
        page: head.page,
        part: head.part,
        rows_read: head.rows_read,
        items,
        pointers: head.pointers,
        update: None,
    })
}

/// Encodes a batch as one body if it fits `max_bytes`, else as several parts,
/// each a batch of consecutive items of the page with its own
/// [`BatchPart`], in order. Cuts fall on multiples of 25 items (one
/// `BatchWriteItem`) unless 25 items alone do not fit. Rows rejected while mapping are carried by
/// part 0, so the parts' `rows_read` add up to the page's.
pub fn encode_split(batch: &WorkBatch, max_bytes: usize) -> Result<Vec<String>, CodecError> {
    let whole = encode(batch);
    if whole.len() <= max_bytes {
        return Ok(vec![whole]);
    }
    if batch.part != BatchPart::WHOLE {
        return Err(CodecError::PartTooLarge {
            entity: batch.entity.clone(),
            segment: batch.segment,
            page: batch.page,
            part: batch.part.index,
            max: max_bytes,
        });
    }
    let template = WorkBatch {
        items: Vec::new(),
        ..batch.clone()
    };
    let budget = max_bytes.saturating_sub(PART_SLACK);
    let ranges = plan_parts(&template, batch, budget)?;
    let count = u32::try_from(ranges.len()).expect("fewer parts than items");
    let rejected_at_read = batch.rows_read.saturating_sub(batch.items.len() as u64);
    let mut bodies = Vec::with_capacity(ranges.len());
    for (index, (start, end)) in ranges.into_iter().enumerate() {
        let part = WorkBatch {
            part: BatchPart {
                index: index as u32,
                count,
            },
            rows_read: (end - start) as u64 + if index == 0 { rejected_at_read } else { 0 },
            items: batch.items[start..end].to_vec(),
            ..template.clone()
        };
        let body = encode(&part);
        if body.len() > max_bytes {
            // PART_SLACK covers the digits of the final part numbers; reaching
            // this means it was not enough, so refuse rather than send.
            return Err(CodecError::PartTooLarge {
                entity: batch.entity.clone(),
                segment: batch.segment,
                page: batch.page,
                part: index as u32,
                max: max_bytes,
            });
        }
        bodies.push(body);
    }
    Ok(bodies)
}

/// Chooses the parts: consecutive item ranges whose bodies fit `budget`, each
/// as long as possible while ending on a multiple of 25 items (the last
/// excepted); a range shorter than 25 only when 25 items do not fit.
fn plan_parts(
    template: &WorkBatch,
    batch: &WorkBatch,
    budget: usize,
) -> Result<Vec<(usize, usize)>, CodecError> {
    const CHUNK: usize = 25;
    let n = batch.items.len();
    let encoded_len = |start: usize, end: usize| {
        // Widest part numbers and row count, so a trial is never smaller than the real part.
        encode(&WorkBatch {
            part: BatchPart {
                index: u32::MAX,
                count: u32::MAX,
            },
            rows_read: u64::MAX,
            items: batch.items[start..end].to_vec(),
            ..template.clone()
        })
        .len()
    };
    let fits = |start: usize, end: usize| encoded_len(start, end) <= budget;
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < n {
        let first = ((start / CHUNK + 1) * CHUNK).min(n);
        let end_of = |chunks: usize| (first + (chunks - 1) * CHUNK).min(n);
        let max_chunks = 1 + (n - first).div_ceil(CHUNK);
        let end = if fits(start, first) {
            // Largest number of chunks that fits: double, then bisect.
            let (mut lo, mut hi) = (1, 2);
            while hi <= max_chunks && fits(start, end_of(hi)) {
                lo = hi;
                hi *= 2;
            }
            let mut hi = hi.min(max_chunks + 1);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if fits(start, end_of(mid)) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            end_of(lo)
        } else {
            // Not even up to the next multiple of 25: the most items that fit.
            let (mut lo, mut hi) = (start, first);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if fits(start, mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            if lo == start {
                return Err(CodecError::ItemTooLarge {
                    entity: batch.entity.clone(),
                    source_key: batch.items[start].source_key.to_string(),
                    bytes: encoded_len(start, start + 1),
                    max: budget + PART_SLACK,
                });
            }
            lo
        };
        ranges.push((start, end));
        start = end;
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Read;

    use flate2::read::DeflateDecoder;

    use sql2ddb_core::{AttrValue, EncodedItem, KeyAttr, KeyType};

    use super::*;

    /// Bytes that do not compress, so sizes are predictable.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn item(i: u64, blob: usize) -> EncodedItem {
        let mut item = BTreeMap::new();
        item.insert("PK".to_string(), AttrValue::S(format!("ORDER#{i}")));
        item.insert("n".to_string(), AttrValue::N(format!("{i}.5")));
        item.insert("blob".to_string(), AttrValue::B(noise(i, blob)));
        EncodedItem::new(
            &item,
            &[KeyAttr::new("PK", KeyType::S)],
            serde_json::json!({ "id": i }),
            blob + 20,
        )
    }

    fn batch(items: Vec<EncodedItem>, rows_read: u64) -> WorkBatch {
        WorkBatch {
            run_id: "run-1".into(),
            entity: "order".into(),
            segment: 2,
            page: 9,
            part: BatchPart::WHOLE,
            pointers: Vec::new(),
            update: None,
            rows_read,
            items,
        }
    }

    #[test]
    fn a_batch_round_trips_compressed() {
        // Repetitive items compress well: 500 items in a few kilobytes.
        let items: Vec<_> = (0..500).map(|i| item(i, 0)).collect();
        let b = batch(items, 503);
        let body = encode(&b);
        assert!(body.len() < 20_000, "{} bytes", body.len());
        assert_eq!(decode(&body).unwrap(), b);
        assert_eq!(encode_split(&b, MAX_MESSAGE_BYTES).unwrap(), vec![body]);
    }

    #[test]
    fn a_batch_over_the_limit_is_split_into_ordered_parts_that_each_fit() {
        // 60 items of 20 KB noise: ~1.6 MB of base64, more than one 1 MiB message.
        let items: Vec<_> = (0..60).map(|i| item(i, 20_000)).collect();
        let b = batch(items.clone(), 67);
        let bodies = encode_split(&b, MAX_MESSAGE_BYTES).unwrap();
        assert!(bodies.len() >= 2, "{} parts", bodies.len());
        let parts: Vec<WorkBatch> = bodies.iter().map(|body| decode(body).unwrap()).collect();
        for (i, (body, part)) in bodies.iter().zip(&parts).enumerate() {
            assert!(body.len() <= MAX_MESSAGE_BYTES, "part {i}: {}", body.len());
            assert_eq!(
                part.part,
                BatchPart {
                    index: i as u32,
                    count: bodies.len() as u32
                }
            );
            assert_eq!(
                (part.entity.as_str(), part.segment, part.page),
                ("order", 2, 9)
            );
            if i + 1 < parts.len() {
                assert_eq!(part.items.len() % 25, 0, "cut on a multiple of 25");
            }
        }
        // Every item once, in order; rejected rows on part 0 only.
        let joined: Vec<EncodedItem> = parts.iter().flat_map(|p| p.items.clone()).collect();
        assert_eq!(joined, items);
        assert_eq!(parts.iter().map(|p| p.rows_read).sum::<u64>(), 67);
        assert_eq!(parts[0].rows_read, parts[0].items.len() as u64 + 7);
        // ~27 KB per item: 25 fit a message, 50 do not, so the first cut is at 25.
        assert_eq!(parts[0].items.len(), 25);
        // Splitting is deterministic: a re-read page gets the same parts.
        assert_eq!(encode_split(&b, MAX_MESSAGE_BYTES).unwrap(), bodies);
    }

    #[test]
    fn a_batch_exactly_at_the_limit_is_not_split_and_one_byte_less_splits() {
        let b = batch((0..10).map(|i| item(i, 3_000)).collect(), 10);
        let len = encode(&b).len();
        assert_eq!(encode_split(&b, len).unwrap().len(), 1);
        let parts = encode_split(&b, len - 1).unwrap();
        assert!(parts.len() >= 2);
        assert!(parts.iter().all(|p| p.len() < len));
    }

    #[test]
    fn an_item_too_large_for_any_message_is_an_error_not_a_drop() {
        let b = batch(vec![item(1, 10), item(2, 900_000)], 2);
        let err = encode_split(&b, 256 * 1024).unwrap_err();
        assert!(
            matches!(&err, CodecError::ItemTooLarge { source_key, .. } if source_key == r#"{"id":2}"#),
            "{err}"
        );
    }

    /// A body as releases before format 3 wrote it: the batch as JSON.
    fn legacy_body(batch: &WorkBatch) -> String {
        let mut bytes = vec![LEGACY_FORMAT_VERSION];
        let mut enc = DeflateEncoder::new(&mut bytes, Compression::default());
        serde_json::to_writer(&mut enc, batch).unwrap();
        enc.finish().unwrap();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A body of the current format holding `payload` as it is.
    fn text_body(payload: &[u8]) -> String {
        let mut bytes = vec![FORMAT_VERSION];
        bytes.extend(zstd::bulk::compress(payload, 3).unwrap());
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A format-3 body of `payload`, deflated as releases before format 4
    /// wrote them.
    fn deflate_text_body(payload: &[u8]) -> String {
        let mut bytes = vec![DEFLATE_FORMAT_VERSION];
        let mut enc = DeflateEncoder::new(&mut bytes, Compression::new(2));
        enc.write_all(payload).unwrap();
        enc.finish().unwrap();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// The payload of a body, whatever its format.
    fn payload(body: &str) -> Vec<u8> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        if bytes[0] == FORMAT_VERSION {
            return zstd::stream::decode_all(&bytes[1..]).unwrap();
        }
        let mut out = Vec::new();
        DeflateDecoder::new(&bytes[1..])
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// Items with text that needs escaping, non-ASCII text, a document and
    /// a sort key, with pointers on the page.
    fn varied_batch() -> WorkBatch {
        use sql2ddb_core::PointerUpdate;
        let keys = [
            KeyAttr::new("PK", KeyType::S),
            KeyAttr::new("SK", KeyType::N),
        ];
        let items: Vec<EncodedItem> = (0..30)
            .map(|i| {
                let mut item = BTreeMap::new();
                item.insert(
                    "PK".to_string(),
                    AttrValue::S(format!("ORDER#{i}\n\"}}]ü€")),
                );
                item.insert("SK".to_string(), AttrValue::N(format!("{i}")));
                item.insert(
                    "doc".to_string(),
                    AttrValue::M(
                        [(
                            "l".to_string(),
                            AttrValue::L(vec![AttrValue::Null, AttrValue::Bool(true)]),
                        )]
                        .into(),
                    ),
                );
                EncodedItem::new(
                    &item,
                    &keys,
                    serde_json::json!({ "id": i, "name": "ü\n" }),
                    40 + i,
                )
            })
            .collect();
        let pointer = BatchPointer {
            update: PointerUpdate {
                name: "LAST_ORDER".into(),
                pk: AttrValue::S("LAST_ORDER".into()),
                sk: Some(AttrValue::N("0".into())),
                attribute: "v".into(),
                value: AttrValue::N("29".into()),
                is_max: true,
                attributes: Default::default(),
            },
            item_key: items[29].key.clone(),
        };
        WorkBatch {
            pointers: vec![pointer],
            part: BatchPart { index: 1, count: 3 },
            ..batch(items, 31)
        }
    }

    #[test]
    fn a_migration_batch_travels_as_a_head_line_then_its_items_text() {
        let b = varied_batch();
        let body = encode(&b);
        let payload = payload(&body);
        let end = payload.iter().position(|&c| c == b'\n').unwrap();
        // After the head, the items' text exactly as it was written, joined.
        let texts: String = b.items.iter().map(|m| m.item.get()).collect();
        assert_eq!(&payload[end + 1..], texts.as_bytes());
        let head: serde_json::Value = serde_json::from_slice(&payload[..end]).unwrap();
        assert_eq!(head["items"][0][0], b.items[0].item.get().len());
        assert_eq!(head["items"][0][1], 40);
        assert_eq!(
            head["items"][0][3],
            serde_json::json!({"id": 0, "name": "ü\n"})
        );
        assert_eq!(decode(&body).unwrap(), b);
        // Split pages are made of the same format.
        let whole = WorkBatch {
            part: BatchPart::WHOLE,
            ..b.clone()
        };
        let parts = encode_split(&whole, encode(&whole).len() - 1).unwrap();
        assert!(parts.len() > 1, "{} parts", parts.len());
        let joined: Vec<EncodedItem> = parts
            .iter()
            .flat_map(|p| decode(p).unwrap().items)
            .collect();
        assert_eq!(joined, b.items);
    }

    #[test]
    fn a_body_of_an_earlier_release_is_still_read() {
        let b = varied_batch();
        assert_eq!(decode(&legacy_body(&b)).unwrap(), b);
        // Format 3: the same payload as now, deflated.
        let body = encode(&b);
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(&body)
                .unwrap()[0],
            4
        );
        let format_3 = deflate_text_body(&payload(&body));
        assert_eq!(decode(&format_3).unwrap(), b);
        assert_eq!(format_3, encode_deflate_format(&b));
        let mut update = batch(vec![], 0);
        update.update = Some(sql2ddb_core::UpdateChange {
            table: "shop".into(),
            keys: vec![KeyAttr::new("PK", KeyType::S)],
            update: None,
            condition: "attribute_exists(#k)".into(),
            names: [("#k".to_string(), "PK".to_string())].into(),
            values: Default::default(),
            own_mark: None,
        });
        // Format 1 never carried an update.
        assert!(matches!(
            decode(&legacy_body(&update)),
            Err(CodecError::Json(_))
        ));
    }

    #[test]
    fn a_body_that_inflates_far_past_its_size_is_read_whole() {
        // Text that deflates to under a hundredth: the buffer, sized for a
        // tenth, grows several times while it is inflated.
        let mut map = BTreeMap::new();
        map.insert("PK".to_string(), AttrValue::S("ORDER#1".into()));
        map.insert("pad".to_string(), AttrValue::S(" ".repeat(300_000)));
        let keys = [KeyAttr::new("PK", KeyType::S)];
        let m = EncodedItem::new(&map, &keys, serde_json::json!({ "id": 1 }), 300_012);
        let b = batch(vec![m.clone(), m], 2);
        let body = encode(&b);
        assert!(body.len() * 50 < 600_000, "{} bytes", body.len());
        assert_eq!(decode(&body).unwrap(), b);
    }

    #[test]
    fn a_body_cut_short_is_refused_not_read_in_part() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let bytes = b64.decode(encode(&varied_batch())).unwrap();
        for keep in [2, bytes.len() / 2, bytes.len() - 1] {
            let cut = b64.encode(&bytes[..keep]);
            assert!(
                matches!(decode(&cut), Err(CodecError::Corrupt(ref why)) if why.contains("cut short")),
                "{keep} of {} bytes: {:?}",
                bytes.len(),
                decode(&cut)
            );
        }
    }

    #[test]
    fn a_body_deflated_by_another_encoder_is_read() {
        // Deflated by zlib (Python's, level 9), as bodies of earlier releases
        // were by miniz_oxide: a worker reads whatever a standard raw
        // deflate stream holds, so readers and workers of releases with
        // different deflate libraries share a queue.
        const BODY: &str = "A1XOvQrCMBQF4N2nKMc1iKloIbNOgkodaynFXkrAJpKmWAl5MzdfzKTi4Hbvx7k/DmZQlWwgYDgYSFlpn6HTpiEToKe2CwiRMtzrliCyWJggDlI1NEIsGa56iCHuGYx+9JWhuplmpKWuhyiKTcZWnBUO57D9mG93+ZzDl8x9T00/cF+WfuZw2sftf0EGpS39+P1KLkjGyFbb+hb9EJyni/US3n8A";
        let b = decode(BODY).unwrap();
        assert_eq!(
            (b.run_id.as_str(), b.entity.as_str(), b.segment, b.page),
            ("r1", "order", 2, 7)
        );
        assert_eq!((b.part, b.rows_read), (BatchPart::WHOLE, 2));
        assert_eq!(b.items.len(), 1);
        let item = &b.items[0];
        assert_eq!(
            item.item.get(),
            r#"{"PK":{"S":"ORDER#1"},"note":{"S":"ü \" x"},"total":{"N":"12.50"}}"#
        );
        assert_eq!(item.key, vec![AttrValue::S("ORDER#1".into())]);
        assert_eq!(item.source_key.get(), r#"{"order_id":1}"#);
        assert_eq!(item.size, 31);
    }

    #[test]
    fn a_format_3_body_whose_items_do_not_fit_their_head_is_refused() {
        let b = varied_batch();
        let good = payload(&encode(&b));
        let end = good.iter().position(|&c| c == b'\n').unwrap();
        let (head, texts) = (&good[..end], &good[end + 1..]);
        let refused = |payload: Vec<u8>, why: &str| match decode(&text_body(&payload)) {
            Err(CodecError::Json(e)) => assert!(e.contains(why), "{e}"),
            other => panic!("expected a refusal for {why}, got {other:?}"),
        };
        // One byte more or less text than the head's lengths.
        refused([head, b"\n", texts, b" "].concat(), "do not add up");
        refused(
            [head, b"\n", &texts[..texts.len() - 1]].concat(),
            "do not add up",
        );
        // An item whose text reaches into the next one's: the lengths add
        // up, but item 0 no longer closes where its length says.
        let mut head_json: serde_json::Value = serde_json::from_slice(head).unwrap();
        let first = head_json["items"][0][0].as_u64().unwrap();
        head_json["items"][0][0] = (first + 1).into();
        head_json["items"][1][0] = (head_json["items"][1][0].as_u64().unwrap() - 1).into();
        let shifted = serde_json::to_vec(&head_json).unwrap();
        refused([&shifted[..], b"\n", texts].concat(), "item 0 (source key");
        // A length that ends inside a character.
        let mut head_json: serde_json::Value = serde_json::from_slice(head).unwrap();
        let pk_end = b.items[0].item.get().find('ü').unwrap() + 1;
        head_json["items"] =
            serde_json::json!([[pk_end, 1, [], null], [texts.len() - pk_end, 1, [], null]]);
        let cut = serde_json::to_vec(&head_json).unwrap();
        refused(
            [&cut[..], b"\n", texts].concat(),
            "does not end on a character",
        );
        // Text that would splice another request into the body.
        let hostile = br#"{"PK":{"S":"x"}}}]},"other":[{"PutRequest":{"Item":{"PK":{"S":"y"}}}}"#;
        let head_json = serde_json::json!({
            "run_id": "r", "entity": "order", "segment": 0, "page": 0,
            "part": {"index": 0, "count": 1}, "rows_read": 1,
            "items": [[hostile.len(), 20, [{"S": "x"}], null]],
        });
        let hostile_head = serde_json::to_vec(&head_json).unwrap();
        refused(
            [&hostile_head[..], b"\n", &hostile[..]].concat(),
            "goes on after its object",
        );
        // Not UTF-8; no head line; a field this release does not know.
        refused(
            [head, b"\n", &[0xff][..], &texts[1..]].concat(),
            "not UTF-8",
        );
        refused(head.to_vec(), "no end to its head line");
        let mut with_update: serde_json::Value = serde_json::from_slice(head).unwrap();
        with_update["update"] = serde_json::json!({"table": "shop"});
        let unknown = serde_json::to_vec(&with_update).unwrap();
        refused(
            [&unknown[..], b"\n", texts].concat(),
            "unknown field `update`",
        );
    }

    #[test]
    fn an_update_batch_travels_in_its_own_format_and_round_trips() {
        use sql2ddb_core::{KeyAttr, KeyType, UpdateChange};
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut b = batch((0..3).map(|i| item(i, 0)).collect(), 3);
        assert_eq!(b64.decode(encode(&b)).unwrap()[0], FORMAT_VERSION);
        b.update = Some(UpdateChange {
            table: "shop".into(),
            keys: vec![KeyAttr::new("PK", KeyType::S)],
            update: Some("ADD visits :one".into()),
            condition: "attribute_exists(#k)".into(),
            names: [("#k".to_string(), "PK".to_string())].into(),
            values: [(":one".to_string(), AttrValue::N("1".into()))].into(),
            own_mark: Some(("sql2ddb_run".into(), "run-1".into())),
        });
        let body = encode(&b);
        // A release reading only format 1 stops at this byte: it never takes
        // the keys for items to write.
        assert_eq!(b64.decode(&body).unwrap()[0], UPDATE_FORMAT_VERSION);
        assert_eq!(decode(&body).unwrap(), b);
        // A body whose version and content disagree is refused.
        let mut bytes = b64.decode(&body).unwrap();
        bytes[0] = DEFLATE_FORMAT_VERSION;
        assert!(matches!(
            decode(&b64.encode(&bytes)),
            Err(CodecError::Json(_))
        ));
    }

    #[test]
    fn foreign_or_damaged_bodies_are_refused_with_a_reason() {
        assert!(matches!(
            decode("hello world"),
            Err(CodecError::NotBase64(_))
        ));
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(
            decode(&b64(&[9, 1, 2])),
            Err(CodecError::Version { found: 9 })
        );
        assert!(matches!(
            decode(&b64(&[FORMAT_VERSION, 0xff, 0xfe])),
            Err(CodecError::Corrupt(_))
        ));
        assert!(matches!(decode(""), Err(CodecError::Corrupt(_))));
        assert!(matches!(
            decode(&text_body(br#"{"hello": 1}"#)),
            Err(CodecError::Json(_))
        ));
        let mut not_a_batch = vec![DEFLATE_FORMAT_VERSION];
        let mut enc = DeflateEncoder::new(&mut not_a_batch, Compression::default());
        enc.write_all(br#"{"hello": 1}"#).unwrap();
        enc.finish().unwrap();
        assert!(matches!(
            decode(&b64(&not_a_batch)),
            Err(CodecError::Json(_))
        ));
        // A zstd frame that does not state its size (a streaming encoder's)
        // is not one of ours.
        let mut unsized_frame = vec![FORMAT_VERSION];
        let mut enc = zstd::stream::Encoder::new(&mut unsized_frame, 1).unwrap();
        enc.write_all(b"x\n").unwrap();
        enc.finish().unwrap();
        assert!(
            matches!(decode(&b64(&unsized_frame)), Err(CodecError::Corrupt(ref why)) if why.contains("state its size")),
            "{:?}",
            decode(&b64(&unsized_frame))
        );
    }
}
