//! Pages cut into messages: a batch whose body would exceed SQS's message
//! size is split by items into parts that each fit, never dropped. The
//! limit is computed here, never left to the service; the cuts fall on
//! whole `BatchWriteItem` calls (25 items) wherever those fit, so a part is
//! written in full calls.

use sql2ddb_core::BatchPart;

use crate::codec::{encode_message, CodecError};
use crate::message::Message;

/// The largest message body SQS accepts (1 MiB), which is also the largest
/// total of the bodies in one `SendMessageBatch` call.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// Room kept while choosing where to split, for the part numbers that are
/// only settled once every cut is known (they change a few bytes at most).
const PART_SLACK: usize = 64;

/// Encodes a message as one body if it fits `max_bytes`, else as several
/// parts, each a message of consecutive items of the page with its own
/// [`BatchPart`], in order. Cuts fall on multiples of 25 items (one
/// `BatchWriteItem`) unless 25 items alone do not fit. Rows rejected while
/// mapping are carried by part 0, so the parts' `rows_read` add up to the page's.
pub fn encode_split(message: &Message, max_bytes: usize) -> Result<Vec<String>, CodecError> {
    let whole = encode_message(message);
    if whole.len() <= max_bytes {
        return Ok(vec![whole]);
    }
    if message.part() != BatchPart::WHOLE {
        return Err(too_large(message, message.part().index, max_bytes));
    }
    let budget = max_bytes.saturating_sub(PART_SLACK);
    let ranges = plan_parts(message, budget)?;
    let count = u32::try_from(ranges.len()).expect("fewer parts than items");
    let rejected_at_read = message
        .rows_read()
        .saturating_sub(message.items().len() as u64);
    let mut bodies = Vec::with_capacity(ranges.len());
    for (index, (start, end)) in ranges.into_iter().enumerate() {
        let part = BatchPart {
            index: index as u32,
            count,
        };
        let rows = (end - start) as u64 + if index == 0 { rejected_at_read } else { 0 };
        let body = encode_message(&message.cut(start, end, part, rows));
        if body.len() > max_bytes {
            // PART_SLACK covers the digits of the final part numbers; reaching
            // this means it was not enough, so refuse rather than send.
            return Err(too_large(message, index as u32, max_bytes));
        }
        bodies.push(body);
    }
    Ok(bodies)
}

/// A part of `message`'s page that does not fit and cannot be split again.
fn too_large(message: &Message, part: u32, max: usize) -> CodecError {
    CodecError::PartTooLarge {
        entity: message.entity().to_string(),
        segment: message.segment(),
        page: message.page(),
        part,
        max,
    }
}

/// Chooses the parts: consecutive item ranges whose bodies fit `budget`, each
/// as long as possible while ending on a multiple of 25 items (the last
/// excepted); a range shorter than 25 only when 25 items do not fit.
fn plan_parts(message: &Message, budget: usize) -> Result<Vec<(usize, usize)>, CodecError> {
    const CHUNK: usize = 25;
    let n = message.items().len();
    // Widest part numbers and row count, so a trial is never smaller than the real part.
    let widest = BatchPart {
        index: u32::MAX,
        count: u32::MAX,
    };
    let encoded_len =
        |start: usize, end: usize| encode_message(&message.cut(start, end, widest, u64::MAX)).len();
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
                    entity: message.entity().to_string(),
                    source_key: message.items()[start].source_key.to_string(),
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
    use super::*;
    use crate::codec::decode;
    use crate::codec::tests::{batch, item, migration};
    use sql2ddb_core::{EncodedItem, WorkBatch};

    #[test]
    fn a_batch_over_the_limit_is_split_into_ordered_parts_that_each_fit() {
        // 60 items of 20 KB noise: ~1.6 MB of base64, more than one 1 MiB message.
        let items: Vec<_> = (0..60).map(|i| item(i, 20_000)).collect();
        let b = batch(items.clone(), 67).into();
        let bodies = encode_split(&b, MAX_MESSAGE_BYTES).unwrap();
        assert!(bodies.len() >= 2, "{} parts", bodies.len());
        let parts: Vec<WorkBatch> = bodies
            .iter()
            .map(|body| migration(decode(body).unwrap()))
            .collect();
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
        let b: Message = batch((0..10).map(|i| item(i, 3_000)).collect(), 10).into();
        let len = encode_message(&b).len();
        assert_eq!(encode_split(&b, len).unwrap().len(), 1);
        let parts = encode_split(&b, len - 1).unwrap();
        assert!(parts.len() >= 2);
        assert!(parts.iter().all(|p| p.len() < len));
    }

    #[test]
    fn an_item_too_large_for_any_message_is_an_error_not_a_drop() {
        let b = batch(vec![item(1, 10), item(2, 900_000)], 2).into();
        let err = encode_split(&b, 256 * 1024).unwrap_err();
        assert!(
            matches!(&err, CodecError::ItemTooLarge { source_key, .. } if source_key == r#"{"id":2}"#),
            "{err}"
        );
    }
}
