//! The export's item files: each item becomes one `{"Item": {…}}` line of
//! DynamoDB JSON, appended to one of a few open files chosen by a hash of its
//! partition key (key-sorted input is a slow case for an import), each file
//! compressed as it grows and closed once it holds its share of items.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use sha2::{Digest, Sha256};
use sql2ddb_core::{AttrValue, EncodedItem, Item, PointerUpdate, WorkBatch};

use super::compression::Compression;
use super::existing::FileNames;
use super::output::{Destination, FileOut};
use super::pointer_set::{Items, PointerSet};
use crate::error::EngineError;
use crate::outcome::BatchOutcome;
use crate::progress::{EntityProgress, RunProgress};

/// Pointer items turned into lines at once, at the end of an export.
const POINTER_ITEMS_AT_ONCE: usize = 1_000;

/// Most files open at once (each holds a compressor and, for S3, one part).
pub const MAX_OPEN_FILES: usize = 8;

/// Rows that justify one more open file, below the files' bound.
pub const ROWS_PER_SLOT: u64 = 250_000;

/// The default bound of a file: about 1 GB of uncompressed lines.
pub const DEFAULT_FILE_BYTES: u64 = 1 << 30;

/// One finished data file, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// Path under the destination (`data/part-03-00001.json.gz`).
    pub name: String,
    /// Items (lines) in the file.
    pub items: u64,
    /// Bytes of the lines before compression.
    pub uncompressed_bytes: u64,
    /// Bytes of the file.
    pub compressed_bytes: u64,
    /// SHA-256 of the file's bytes, in hex.
    pub sha256: String,
}

/// Items writes go to instead of DynamoDB (`sql2ddb export`); the run's
/// sink hands it every batch.
pub struct ItemFiles {
    dest: Arc<Destination>,
    compression: Compression,
    /// Most items per file, when given.
    max_items: Option<u64>,
    /// Most uncompressed bytes per file.
    max_bytes: u64,
    /// The table's partition key attribute, then its sort key.
    keys: Vec<String>,
    progress: Arc<RunProgress>,
    buckets: OnceLock<Vec<tokio::sync::Mutex<Bucket>>>,
    /// The furthest update of each pointer, by item key then pointer name
    /// (in sorted runs on disk past a bound).
    pointers: Mutex<PointerSet>,
    /// Pointer items written, by pointer name (once the files are finished).
    summary: Mutex<BTreeMap<String, u64>>,
    /// Where pointer updates go instead of the data files (bulk put items
    /// into an existing table, whose pointers may already be further along:
    /// they are written afterwards by `sql2ddb pointers`, conditionally).
    pointer_file: Option<String>,
    finished: Mutex<Vec<FileEntry>>,
    /// The names its files take.
    names: FileNames,
}

impl std::fmt::Debug for ItemFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemFiles")
            .field("out", &self.dest.describe())
            .field("compression", &self.compression)
            .finish()
    }
}

/// A file slot: the items whose key hashes to it, in files of its own.
struct Bucket {
    index: usize,
    /// Files this slot has opened so far.
    opened: u32,
    open: Option<OpenFile>,
}

struct OpenFile {
    name: String,
    encoder: Encoder,
    out: FileOut,
    items: u64,
    uncompressed: u64,
    compressed: u64,
    sha: Sha256,
}

impl ItemFiles {
    /// Item files into `dest`; `keys` are the table's key attribute names
    /// (partition key first); `progress` gives the rows to expect, to size
    /// the number of open files.
    pub fn new(
        dest: Arc<Destination>,
        compression: Compression,
        items_per_file: Option<u64>,
        keys: Vec<String>,
        progress: Arc<RunProgress>,
    ) -> ItemFiles {
        ItemFiles {
            dest,
            compression,
            max_items: items_per_file.filter(|n| *n > 0),
            max_bytes: DEFAULT_FILE_BYTES,
            keys,
            progress,
            buckets: OnceLock::new(),
            pointers: Mutex::default(),
            summary: Mutex::default(),
            pointer_file: None,
            finished: Mutex::default(),
            names: FileNames::default(),
        }
    }

    /// The same files, named by `names` (with the run id, beside an
    /// earlier export's).
    pub fn with_names(mut self, names: FileNames) -> ItemFiles {
        self.names = names;
        self
    }

    /// The same files, keeping at most `limit` pointer items in memory.
    #[cfg(test)]
    pub(super) fn with_pointers_in_memory(self, limit: usize) -> ItemFiles {
        *self.pointers.lock().expect("pointers lock") = PointerSet::with_limit(limit);
        self
    }

    /// The same files, with the pointer updates in the file `name` beside
    /// `data/` instead of pointer items in the data files
    /// ([`super::pointer_file`]).
    pub fn with_pointer_file(mut self, name: String) -> ItemFiles {
        self.pointer_file = Some(name);
        self
    }

    /// Writes a batch's items into the files and keeps its pointer updates
    /// (each pointer's furthest value becomes an item at the end).
    pub async fn write_batch(&self, batch: WorkBatch) -> Result<BatchOutcome, EngineError> {
        let outcome = BatchOutcome {
            written: batch.items.len() as u64,
            bytes: batch.items.iter().map(|m| m.size as u64).sum(),
            ..BatchOutcome::default()
        };
        self.keep_pointers(batch.pointers.into_iter().map(|p| p.update))?;
        let items: Vec<(Option<&AttrValue>, &str)> = batch
            .items
            .iter()
            .map(|m| (m.key.first(), m.item.get()))
            .collect();
        self.write_items(&batch.items, &items).await?;
        Ok(outcome)
    }

    /// Writes the pointer items, closes every open file, and returns every
    /// file written, by name.
    pub async fn finish(&self) -> Result<Vec<FileEntry>, EngineError> {
        let mut items = self.take_pointers()?;
        match &self.pointer_file {
            Some(name) => self.write_pointer_file(name, &mut items).await?,
            None => self.write_pointer_items(&mut items).await?,
        }
        for bucket in self.buckets.get().into_iter().flatten() {
            let mut b = bucket.lock().await;
            if let Some(file) = b.open.take() {
                let entry = file.finish().await?;
                self.finished.lock().expect("files lock").push(entry);
            }
        }
        let mut files = self.finished.lock().expect("files lock").clone();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// Gives up the export (failed or interrupted): open files are removed
    /// or their uploads aborted, finished ones deleted, so nothing is left
    /// for an import to read and the destination can be used again.
    pub async fn abort(&self) {
        for bucket in self.buckets.get().into_iter().flatten() {
            if let Some(file) = bucket.lock().await.open.take() {
                file.out.abort().await;
            }
        }
        let finished = std::mem::take(&mut *self.finished.lock().expect("files lock"));
        for f in finished {
            self.dest.remove(&f.name).await;
        }
        if let Some(name) = &self.pointer_file {
            self.dest.remove(name).await;
        }
    }

    /// How many pointer items each pointer has, by pointer name (once the
    /// files are finished).
    pub fn pointer_summary(&self) -> BTreeMap<String, u64> {
        self.summary.lock().expect("summary lock").clone()
    }

    pub(super) fn keep_pointers(
        &self,
        updates: impl Iterator<Item = PointerUpdate>,
    ) -> Result<(), EngineError> {
        let mut set = self.pointers.lock().expect("pointers lock");
        for u in updates {
            set.keep(u)
                .map_err(|e| EngineError::io(std::env::temp_dir(), e))?;
        }
        Ok(())
    }

    /// The pointer items kept so far, to be read in key order.
    fn take_pointers(&self) -> Result<Items, EngineError> {
        let set = std::mem::take(&mut *self.pointers.lock().expect("pointers lock"));
        set.into_items()
            .map_err(|e| EngineError::io(std::env::temp_dir(), e))
    }

    /// Up to `most` more pointer items as the conditional updates leave
    /// them in the table (the key, the compared values and the other
    /// attributes), each with the updates it is made of; counted in the
    /// summary.
    pub(super) fn pointer_items_from(
        &self,
        items: &mut Items,
        most: usize,
    ) -> Result<Vec<(Item, Vec<PointerUpdate>)>, EngineError> {
        let mut out = Vec::new();
        let mut summary = self.summary.lock().expect("summary lock");
        while out.len() < most {
            let next = items
                .next_item()
                .map_err(|e| EngineError::io(std::env::temp_dir(), e))?;
            let Some(((pk, sk), updates)) = next else {
                break;
            };
            let mut item = Item::new();
            for u in &updates {
                *summary.entry(u.name.clone()).or_insert(0) += 1;
                item.extend(u.attributes.clone());
                item.insert(u.attribute.clone(), u.value.clone());
            }
            item.insert(self.keys[0].clone(), pk);
            if let (Some(name), Some(sk)) = (self.keys.get(1), sk) {
                item.insert(name.clone(), sk);
            }
            out.push((item, updates));
        }
        Ok(out)
    }

    /// Every pointer item kept (see [`ItemFiles::pointer_items_from`]).
    #[cfg(test)]
    pub(super) fn pointer_items(&self) -> Vec<(Item, Vec<PointerUpdate>)> {
        let mut items = self.take_pointers().unwrap();
        self.pointer_items_from(&mut items, usize::MAX).unwrap()
    }

    /// The pointer items, as lines of the data files (import from S3: the
    /// table is new, so each pointer's furthest value is its value).
    async fn write_pointer_items(&self, items: &mut Items) -> Result<(), EngineError> {
        loop {
            let pointer_items = self.pointer_items_from(items, POINTER_ITEMS_AT_ONCE)?;
            if pointer_items.is_empty() {
                return Ok(());
            }
            let lines = pointer_items
                .iter()
                .map(|(item, _)| {
                    let text = serde_json::to_string(item).expect("an item serialises");
                    (item.get(&self.keys[0]), encode_line(&text))
                })
                .collect();
            self.write_lines(&[], lines).await?;
        }
    }

    /// The pointer updates, one line per pointer item, in the file `name`
    /// beside `data/` ([`super::pointer_file`]).
    async fn write_pointer_file(&self, name: &str, items: &mut Items) -> Result<(), EngineError> {
        let mut out = self.dest.create_beside(name).await?;
        loop {
            let pointer_items = self.pointer_items_from(items, POINTER_ITEMS_AT_ONCE)?;
            if pointer_items.is_empty() {
                break;
            }
            let mut bytes = Vec::new();
            for (_, updates) in &pointer_items {
                bytes.extend(super::pointer_file::line(updates));
            }
            if let Err(e) = out.write(&bytes).await {
                out.abort().await;
                return Err(e);
            }
        }
        out.finish().await
    }

    /// Spreads `items` (partition key, item text) over the file slots by
    /// partition key and appends each slot's lines. `sized` (the batch's
    /// items with their sizes) sizes the slots on the first call.
    async fn write_items(
        &self,
        sized: &[EncodedItem],
        items: &[(Option<&AttrValue>, &str)],
    ) -> Result<(), EngineError> {
        let lines = items
            .iter()
            .map(|(pk, text)| (*pk, encode_line(text)))
            .collect();
        self.write_lines(sized, lines).await
    }

    /// As [`ItemFiles::write_items`], the lines made already.
    async fn write_lines(
        &self,
        sized: &[EncodedItem],
        items: Vec<(Option<&AttrValue>, Vec<u8>)>,
    ) -> Result<(), EngineError> {
        if items.is_empty() {
            return Ok(());
        }
        let buckets = self.buckets.get_or_init(|| {
            (0..self.slots(sized))
                .map(|index| {
                    tokio::sync::Mutex::new(Bucket {
                        index,
                        opened: 0,
                        open: None,
                    })
                })
                .collect()
        });
        let mut lines: Vec<Vec<Vec<u8>>> = vec![Vec::new(); buckets.len()];
        for (pk, line) in items {
            let slot = match pk {
                Some(pk) => (key_hash(pk) % buckets.len() as u64) as usize,
                None => 0,
            };
            lines[slot].push(line);
        }
        for (slot, lines) in lines.into_iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            let mut bucket = buckets[slot].lock().await;
            self.append(&mut bucket, lines).await?;
        }
        Ok(())
    }

    /// How many files to keep open: enough for the expected rows to fill
    /// each about once, and one per [`ROWS_PER_SLOT`] rows even when one
    /// file would hold them all (an import reads files in parallel, and
    /// the slots compress in parallel); at most [`MAX_OPEN_FILES`].
    fn slots(&self, sample: &[EncodedItem]) -> usize {
        let rows: u64 = self
            .progress
            .entities()
            .iter()
            .map(|e| EntityProgress::get(&e.total))
            .sum();
        let per_file = self.max_items.unwrap_or_else(|| {
            // DynamoDB JSON spells out every type: about twice the item's size.
            let bytes: u64 = sample.iter().map(|m| 2 * m.size as u64 + 16).sum();
            let average = (bytes / sample.len().max(1) as u64).max(1);
            (self.max_bytes / average).max(1)
        });
        rows.div_ceil(per_file)
            .max(rows.div_ceil(ROWS_PER_SLOT))
            .clamp(1, MAX_OPEN_FILES as u64) as usize
    }

    async fn append(&self, bucket: &mut Bucket, lines: Vec<Vec<u8>>) -> Result<(), EngineError> {
        let mut lines = lines.into_iter().peekable();
        while let Some(first) = lines.next() {
            self.roll(bucket, first.len() as u64).await?;
            let file = bucket.open.as_mut().expect("an open file");
            // The lines that go to this file: the first always, then as
            // long as it is not full.
            let (mut items, mut bytes) = (file.items + 1, file.uncompressed + first.len() as u64);
            let mut part = vec![first];
            while let Some(line) = lines.next_if(|l| !self.full(items, bytes, l.len() as u64)) {
                items += 1;
                bytes += line.len() as u64;
                part.push(line);
            }
            file.compress(part).await?;
        }
        Ok(())
    }

    /// Whether a file holding `items` items of `bytes` uncompressed bytes
    /// is full for a line of `len` bytes.
    fn full(&self, items: u64, bytes: u64, len: u64) -> bool {
        self.max_items.is_some_and(|n| items >= n) || (items > 0 && bytes + len > self.max_bytes)
    }

    /// Makes the bucket's open file one that takes a line of `len` bytes:
    /// a full one is finished, a new one opened.
    async fn roll(&self, bucket: &mut Bucket, len: u64) -> Result<(), EngineError> {
        if bucket
            .open
            .as_ref()
            .is_some_and(|f| self.full(f.items, f.uncompressed, len))
        {
            let file = bucket.open.take().expect("an open file");
            let entry = file.finish().await?;
            self.finished.lock().expect("files lock").push(entry);
        }
        if bucket.open.is_none() {
            bucket.opened += 1;
            let name = self
                .names
                .data(bucket.index, bucket.opened, self.compression.extension());
            let out = self.dest.create(&name).await?;
            let encoder =
                Encoder::new(self.compression).map_err(|e| EngineError::io(out.location(), e))?;
            bucket.open = Some(OpenFile {
                name: format!("{}/{name}", super::output::DATA_DIR),
                encoder,
                out,
                items: 0,
                uncompressed: 0,
                compressed: 0,
                sha: Sha256::new(),
            });
        }
        Ok(())
    }
}

impl OpenFile {
    async fn emit(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.sha.update(bytes);
        self.compressed += bytes.len() as u64;
        self.out.write(bytes).await
    }

    /// Compresses `lines` into the file, on the blocking pool: compression
    /// is CPU work that would hold a runtime thread the readers and the
    /// other files need.
    async fn compress(&mut self, lines: Vec<Vec<u8>>) -> Result<(), EngineError> {
        let mut encoder = std::mem::replace(&mut self.encoder, Encoder::Plain(Vec::new()));
        let (encoder, compressed) = tokio::task::spawn_blocking(move || {
            let written = lines.iter().try_for_each(|l| encoder.write(l));
            let bytes = encoder.take();
            (encoder, written.map(|()| (lines, bytes)))
        })
        .await
        .expect("compression does not panic");
        self.encoder = encoder;
        let (lines, bytes) = compressed.map_err(|e| EngineError::io(self.out.location(), e))?;
        self.items += lines.len() as u64;
        self.uncompressed += lines.iter().map(|l| l.len() as u64).sum::<u64>();
        self.emit(&bytes).await
    }

    async fn finish(mut self) -> Result<FileEntry, EngineError> {
        let encoder = std::mem::replace(&mut self.encoder, Encoder::Plain(Vec::new()));
        let tail = tokio::task::spawn_blocking(move || encoder.finish())
            .await
            .expect("compression does not panic")
            .map_err(|e| EngineError::io(self.out.location(), e))?;
        self.emit(&tail).await?;
        let sha256 = self
            .sha
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.out.finish().await?;
        Ok(FileEntry {
            name: self.name,
            items: self.items,
            uncompressed_bytes: self.uncompressed,
            compressed_bytes: self.compressed,
            sha256,
        })
    }
}

/// One item as an import line: `{"Item":{…}}` and a newline, the item's
/// DynamoDB JSON exactly as the writer sends it (numbers as text, binary as
/// base64).
pub fn encode_line(item: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(item.len() + 10);
    out.extend_from_slice(br#"{"Item":"#);
    out.extend_from_slice(item.as_bytes());
    out.extend_from_slice(b"}\n");
    out
}

/// A stable hash of a key value (FNV-1a over its type and bytes): the same
/// key lands in the same file slot on every export.
fn key_hash(value: &AttrValue) -> u64 {
    let bytes: &[u8] = match value {
        AttrValue::S(s) | AttrValue::N(s) => s.as_bytes(),
        AttrValue::B(b) => b,
        _ => &[],
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in value.type_name().as_bytes().iter().chain(bytes) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A file's compressor, writing into memory that is drained after each
/// batch of lines.
enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Plain(Vec<u8>),
}

/// zstd's level: its default, fast and close to gzip's ratio.
const ZSTD_LEVEL: i32 = 3;

impl Encoder {
    fn new(c: Compression) -> std::io::Result<Encoder> {
        Ok(match c {
            // A low level: the import bills uncompressed bytes, so a higher
            // level buys only transfer, at a large cost in CPU. Level 2, not
            // 1: zlib-rs's level 1 trades a third more bytes for little CPU.
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(2),
            )),
            Compression::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?)
            }
            Compression::None => Encoder::Plain(Vec::new()),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(bytes),
            Encoder::Zstd(e) => e.write_all(bytes),
            Encoder::Plain(v) => {
                v.extend_from_slice(bytes);
                Ok(())
            }
        }
    }

    /// The output produced so far.
    fn take(&mut self) -> Vec<u8> {
        match self {
            Encoder::Gzip(e) => std::mem::take(e.get_mut()),
            Encoder::Zstd(e) => std::mem::take(e.get_mut()),
            Encoder::Plain(v) => std::mem::take(v),
        }
    }

    /// Ends the stream and returns its last bytes.
    fn finish(self) -> std::io::Result<Vec<u8>> {
        match self {
            Encoder::Gzip(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
            Encoder::Plain(v) => Ok(v),
        }
    }
}
