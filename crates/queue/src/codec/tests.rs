//! The codec's tests: every format read back as written, bodies of retired,
//! newer, foreign or damaged formats refused with their reason.

use std::collections::BTreeMap;
use std::io::Read;

use flate2::read::DeflateDecoder;

use sql2ddb_core::{AttrValue, EncodedItem, KeyAttr, KeyType};

use super::*;
use crate::parts::{encode_split, MAX_MESSAGE_BYTES};

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

/// Item `i` with `blob` bytes of noise.
pub(crate) fn item(i: u64, blob: usize) -> EncodedItem {
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

/// A whole page of `items`.
pub(crate) fn batch(items: Vec<EncodedItem>, rows_read: u64) -> WorkBatch {
    WorkBatch {
        run_id: "run-1".parse().unwrap(),
        entity: "order".into(),
        segment: 2,
        page: 9,
        part: BatchPart::WHOLE,
        pointers: Vec::new(),
        rows_read,
        items,
    }
}

/// The migration page a body holds (a test fails on an update page).
pub(crate) fn migration(message: Message) -> WorkBatch {
    match message {
        Message::Migration(batch) => batch,
        other => panic!("expected a migration page, got {other:?}"),
    }
}

#[test]
fn a_batch_round_trips_compressed() {
    // Repetitive items compress well: 500 items in a few kilobytes.
    let items: Vec<_> = (0..500).map(|i| item(i, 0)).collect();
    let b = batch(items, 503);
    let body = encode(&b);
    assert!(body.len() < 20_000, "{} bytes", body.len());
    assert_eq!(migration(decode(&body).unwrap()), b);
    assert_eq!(
        encode_split(&b.clone().into(), MAX_MESSAGE_BYTES).unwrap(),
        vec![body]
    );
}

/// A body as development builds before format 3 wrote it: the batch as JSON.
fn legacy_body(batch: &impl serde::Serialize) -> String {
    let mut bytes = vec![1];
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

/// A format-3 body of `payload`, deflated as development builds before
/// format 4 wrote them.
fn deflate_text_body(payload: &[u8]) -> String {
    let mut bytes = vec![3];
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
            // A NULL the worker removes with the move travels with the page.
            cleared: vec!["note".into()],
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
    assert_eq!(migration(decode(&body).unwrap()), b);
    // Split pages are made of the same format.
    let whole = WorkBatch {
        part: BatchPart::WHOLE,
        ..b.clone()
    };
    let parts = encode_split(&whole.clone().into(), encode(&whole).len() - 1).unwrap();
    assert!(parts.len() > 1, "{} parts", parts.len());
    let joined: Vec<EncodedItem> = parts
        .iter()
        .flat_map(|p| migration(decode(p).unwrap()).items)
        .collect();
    assert_eq!(joined, b.items);
}

/// The update page of [`a_body_deflated_by_another_encoder_is_read`].
fn update_page() -> UpdatePage {
    let keys = [KeyAttr::new("PK", KeyType::S)];
    let mut key = BTreeMap::new();
    key.insert("PK".to_string(), AttrValue::S("ORDER#1 ü \" x".into()));
    let item = EncodedItem::new(&key, &keys, serde_json::json!({"PK": "ORDER#1"}), 31);
    UpdatePage {
        run_id: "r1".parse().unwrap(),
        entity: "order".into(),
        segment: 2,
        page: 7,
        part: BatchPart::WHOLE,
        rows_read: 1,
        keys: vec![item],
        change: sql2ddb_core::UpdateChange {
            table: "shop".into(),
            keys: keys.to_vec(),
            update: Some("ADD visits :one".into()),
            condition: "attribute_exists(#k)".into(),
            names: [("#k".to_string(), "PK".to_string())].into(),
            values: [(":one".to_string(), AttrValue::N("1".into()))].into(),
            own_mark: None,
        },
    }
}

#[test]
fn a_body_of_a_retired_format_is_refused_naming_its_format_and_what_to_do() {
    let b = varied_batch();
    let body = encode(&b);
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&body)
            .unwrap()[0],
        4
    );
    // Format 3: the same payload as now, deflated; format 1: the batch as
    // JSON, with or without an update; and a format-3 body deflated by
    // zlib (Python's, level 9), as a development build's queue held them.
    const FORMAT_3_BY_ZLIB: &str = "A1XOvQrCMBQF4N2nKMc1iKloIbNOgkodaynFXkrAJpKmWAl5MzdfzKTi4Hbvx7k/DmZQlWwgYDgYSFlpn6HTpiEToKe2CwiRMtzrliCyWJggDlI1NEIsGa56iCHuGYx+9JWhuplmpKWuhyiKTcZWnBUO57D9mG93+ZzDl8x9T00/cF+WfuZw2sftf0EGpS39+P1KLkjGyFbb+hb9EJyni/US3n8A";
    let update = UpdatePage {
        keys: Vec::new(),
        rows_read: 0,
        ..update_page()
    };
    for (found, old) in [
        (3, deflate_text_body(&payload(&body))),
        (3, FORMAT_3_BY_ZLIB.to_string()),
        (1, legacy_body(&b)),
        (1, legacy_body(&update)),
    ] {
        let err = decode(&old).unwrap_err();
        assert_eq!(err, CodecError::Retired { found });
        let text = err.to_string();
        for words in [
            format!("format version {found} was written by a development build before 0.1.0"),
            "no longer read (this release reads formats 2 and 4)".to_string(),
            "run the mapping again with this release".to_string(),
        ] {
            assert!(text.contains(&words), "{words:?} not in {text}");
        }
    }
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
    assert_eq!(migration(decode(&body).unwrap()), b);
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
    // An update page deflated by zlib (Python's, level 9), where this
    // release deflates with flate2: a worker reads whatever a standard raw
    // deflate stream holds, so readers and workers built with different
    // deflate libraries share a queue.
    const BODY: &str = "Am1PQU7DMBD8SrS9gJQDgQOSb0jhhASoPQKK3GZVVmnsyF6XlKg/48bHGCdC4oAP9np2ZnZ2opBcIy0ZChWVxE5FT/j50HIAEHnfAyRzXdJg90zmNhcByETiWh7JXJW08ymTqnNJwX/EJrCFZ1WSKPeRzMs0V1n0/JDvDWY8rev79aoqvr+KVypGOkPd8Wlm/9t/Qx6fwo6bmbZ4/dII6iifSHhTZWYaWqucWWq3BxQU3/1A84glkbN9hmECELug3tBfKd3VdXGUKBoL4x1TXtS1ouIdulY1yDYpNzxK1Hix6i5BybYxz111izuCHe0hLeDsg/cRPWTG+QE=";
    let Message::Update(b) = decode(BODY).unwrap() else {
        panic!("an update page's body holds an update page");
    };
    assert_eq!(
        (b.run_id.as_str(), b.entity.as_str(), b.segment, b.page),
        ("r1", "order", 2, 7)
    );
    assert_eq!((b.part, b.rows_read), (BatchPart::WHOLE, 1));
    assert_eq!(b.keys.len(), 1);
    let item = &b.keys[0];
    assert_eq!(item.item.get(), r#"{"PK":{"S":"ORDER#1 ü \" x"}}"#);
    assert_eq!(item.key, vec![AttrValue::S("ORDER#1 ü \" x".into())]);
    assert_eq!(item.source_key.get(), r#"{"PK":"ORDER#1"}"#);
    assert_eq!(item.size, 31);
    assert_eq!(b, update_page());
}

#[test]
fn a_format_4_body_whose_items_do_not_fit_their_head_is_refused() {
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
fn a_body_whose_run_id_is_not_a_run_id_is_refused_naming_it() {
    let refused = |body: String| match decode(&body) {
        Err(e @ CodecError::Json(_)) => e.to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    };
    // A head line written as this release writes one, but for its run id:
    // the reader by hand leaves it to serde, which says what is wrong.
    let good = String::from_utf8(payload(&encode(&batch(vec![item(1, 0)], 1)))).unwrap();
    for (id, why) in [
        ("../up", "it starts with a dot"),
        ("", "it is empty"),
        ("a b", "only ASCII letters"),
    ] {
        let head = format!("{{\"run_id\":{}", serde_json::to_string(id).unwrap());
        let bad = good.replacen("{\"run_id\":\"run-1\"", &head, 1);
        assert_ne!(bad, good);
        let e = refused(text_body(bad.as_bytes()));
        let named = format!(
            "{} is not a run id: {why}",
            serde_json::to_string(id).unwrap()
        );
        assert!(
            e.contains("is not a work batch") && e.contains(&named),
            "{e}"
        );
    }
    // An update page, read by serde alone.
    let mut page = serde_json::to_value(update_page()).unwrap();
    page["run_id"] = "a/b".into();
    let bytes = deflated(UPDATE_FORMAT_VERSION, &serde_json::to_vec(&page).unwrap());
    let e = refused(base64::engine::general_purpose::STANDARD.encode(bytes));
    assert!(e.contains("\"a/b\" is not a run id"), "{e}");
}

#[test]
fn an_update_page_travels_in_its_own_format_and_round_trips() {
    use sql2ddb_core::{KeyAttr, KeyType, UpdateChange};
    let b64 = base64::engine::general_purpose::STANDARD;
    let b = batch((0..3).map(|i| item(i, 0)).collect(), 3);
    assert_eq!(b64.decode(encode(&b)).unwrap()[0], FORMAT_VERSION);
    let page = UpdatePage {
        run_id: b.run_id.clone(),
        entity: b.entity.clone(),
        segment: b.segment,
        page: b.page,
        part: b.part,
        rows_read: b.rows_read,
        keys: b.items.clone(),
        change: UpdateChange {
            table: "shop".into(),
            keys: vec![KeyAttr::new("PK", KeyType::S)],
            update: Some("ADD visits :one".into()),
            condition: "attribute_exists(#k)".into(),
            names: [("#k".to_string(), "PK".to_string())].into(),
            values: [(":one".to_string(), AttrValue::N("1".into()))].into(),
            own_mark: Some(("sql2ddb_run".into(), "run-1".into())),
        },
    };
    let body = encode_update(&page);
    assert_eq!(encode_message(&page.clone().into()), body);
    // A release reading only migration batches stops at this byte: it
    // never takes the keys for items to write.
    assert_eq!(b64.decode(&body).unwrap()[0], UPDATE_FORMAT_VERSION);
    assert_eq!(decode(&body).unwrap(), Message::Update(page));
    // A body whose version and content disagree is refused: a migration
    // batch in the update format.
    let mut bytes = vec![UPDATE_FORMAT_VERSION];
    let mut enc = DeflateEncoder::new(&mut bytes, Compression::default());
    serde_json::to_writer(&mut enc, &b).unwrap();
    enc.finish().unwrap();
    assert!(matches!(
        decode(&b64.encode(&bytes)),
        Err(CodecError::Json(ref why)) if why.contains("missing field `update`")
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
    let newer = decode(&b64(&[5, 1, 2])).unwrap_err().to_string();
    assert!(
        newer.contains("message format version 5 is not understood")
            && newer.contains("upgrade the workers"),
        "{newer}"
    );
    assert_eq!(
        decode(&b64(&[0, 1, 2])),
        Err(CodecError::Version { found: 0 })
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
    let mut not_a_batch = vec![UPDATE_FORMAT_VERSION];
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
