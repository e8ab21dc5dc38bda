//! The message body of a queued [`Message`]: a format version byte, then the
//! page compressed (zstd or raw deflate, by format), the whole
//! base64-encoded so it is valid SQS text. A batch whose body would exceed
//! a message is split into parts by [`crate::parts`].
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
//! - [`UPDATE_FORMAT_VERSION`] (2), a page of an update job
//!   ([`Message::Update`]): the [`UpdatePage`] as JSON, in raw deflate. A release
//!   that knows only migration batches refuses it instead of writing its
//!   keys as items.
//!
//! Formats 1 and 3 (a migration batch as JSON, then format 4's payload in
//! deflate) were written only by development builds before 0.1.0: a body of
//! either is refused ([`CodecError::Retired`]), as a body of a newer format
//! is ([`CodecError::Version`]); either stays in the queue for the
//! dead-letter queue. Workers are upgraded before (or with) the readers that
//! feed them.

use std::io::Write;

use base64::Engine;
use flate2::write::DeflateEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};
use serde::Serialize;
use sql2ddb_core::{
    AttrValue, BatchPart, BatchPointer, EncodedItem, ItemJson, RunId, SourceKey, UpdatePage,
    WorkBatch,
};

use crate::head::{self, HeadIn, ItemHeadIn};
use crate::message::Message;

/// The largest batch JSON a body may inflate to; a guard against corrupt or
/// hostile bodies, far above anything the reader produces.
pub const MAX_DECODED_BYTES: u64 = 256 * 1024 * 1024;

/// The body format of a migration batch (the first byte before base64):
/// a head line of JSON, then the items' text, in zstd.
pub const FORMAT_VERSION: u8 = 4;

/// The body format of an update job's batch.
pub const UPDATE_FORMAT_VERSION: u8 = 2;

/// Formats written only by development builds before 0.1.0, no longer read:
/// 1 (a migration batch as JSON, in deflate) and 3 (format 4's payload in
/// deflate).
pub const RETIRED_FORMAT_VERSIONS: [u8; 2] = [1, 3];

/// The deflate level of the update batches written. Level 2 of zlib-rs
/// costs about half of the default level's (6) instructions per item for
/// about 9% more bytes, and inflating either costs the same.
const DEFLATE_LEVEL: Compression = Compression::new(2);

/// The zstd level of the migration batches written: see [`ZSTD_LEVEL`]'s
/// figures in docs/performance.md (the codec scenario).
const ZSTD_LEVEL: i32 = 1;

/// Why a body could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The body is not base64 (not a message of ours).
    #[error("message body is not base64: {0}")]
    NotBase64(String),
    /// The body was written by a newer (or unknown) format.
    #[error("message format version {found} is not understood by this release (it reads formats {UPDATE_FORMAT_VERSION} and {FORMAT_VERSION}): a newer release wrote it; upgrade the workers to the release of the reader that sends to this queue")]
    Version {
        /// The version byte found.
        found: u8,
    },
    /// The body is of a format only development builds before 0.1.0 wrote
    /// ([`RETIRED_FORMAT_VERSIONS`]).
    #[error("message format version {found} was written by a development build before 0.1.0 and is no longer read (this release reads formats {UPDATE_FORMAT_VERSION} and {FORMAT_VERSION}): finish that run with workers of the build that started it, or run the mapping again with this release (items are overwritten with the same values)")]
    Retired {
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

/// The head line of a format-4 payload: the batch without its items' text,
/// as it is written (borrowed from the batch).
#[derive(Serialize)]
struct HeadOut<'a> {
    run_id: &'a RunId,
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

/// Encodes one message as one body, whatever its size.
pub fn encode_message(message: &Message) -> String {
    match message {
        Message::Migration(batch) => encode(batch),
        Message::Update(page) => encode_update(page),
    }
}

/// Encodes a page of an update job as one body (format
/// [`UPDATE_FORMAT_VERSION`]), whatever its size.
pub fn encode_update(page: &UpdatePage) -> String {
    let payload = serde_json::to_vec(page).expect("an update page always serialises");
    base64_simd::STANDARD.encode_to_string(deflated(UPDATE_FORMAT_VERSION, &payload))
}

/// Encodes a page of a migration as one body (format [`FORMAT_VERSION`]),
/// whatever its size.
pub fn encode(batch: &WorkBatch) -> String {
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

/// A format-4 payload: the head line, a newline, the items' text.
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

/// Reads a body back into its message.
pub fn decode(body: &str) -> Result<Message, CodecError> {
    let bytes = from_base64(body.trim())?;
    let Some((&version, compressed)) = bytes.split_first() else {
        return Err(CodecError::Corrupt("empty body".into()));
    };
    match version {
        FORMAT_VERSION => read_text_payload(&unzstd(compressed)?).map(Message::Migration),
        UPDATE_FORMAT_VERSION => serde_json::from_slice::<UpdatePage>(&inflate(compressed)?)
            .map(Message::Update)
            .map_err(|e| CodecError::Json(e.to_string())),
        v if RETIRED_FORMAT_VERSIONS.contains(&v) => Err(CodecError::Retired { found: v }),
        found => Err(CodecError::Version { found }),
    }
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

/// Reads a format-4 payload: the head line, then each item cut out of the
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
            .and_then(|t| ItemJson::from_object_text(t).map_err(String::from))
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
    })
}

#[cfg(test)]
pub(crate) mod tests;
