//! The `pgoutput` decoder on generated messages: a valid message decodes
//! to exactly what was encoded, whatever the fields it skips hold; a
//! message cut short anywhere, or followed by stray bytes, is an error; and
//! arbitrary bytes after a message tag never panic, and are accepted only
//! when every byte was needed (no value read from what is not there).

use proptest::prelude::*;
use sql2ddb_source::cdc::{decode, Message, RelationInfo, TupleValue};

/// The tags whose messages are decoded (anything else is `Other`).
const TAGS: &[u8] = b"BCRIUDTM";

/// Encodes `m` as protocol 1 sends it; `skipped` fills the fields the
/// decoder does not keep (transaction id, flags, options, an old tuple's
/// kind, a logical message's LSN).
fn encode(m: &Message, skipped: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let b = skipped.to_be_bytes();
    match m {
        Message::Begin {
            final_lsn,
            timestamp,
        } => {
            out.push(b'B');
            out.extend(final_lsn.to_be_bytes());
            out.extend(timestamp.to_be_bytes());
            out.extend(&b[..4]);
        }
        Message::Commit {
            commit_lsn,
            end_lsn,
            timestamp,
        } => {
            out.push(b'C');
            out.push(b[0]);
            out.extend(commit_lsn.to_be_bytes());
            out.extend(end_lsn.to_be_bytes());
            out.extend(timestamp.to_be_bytes());
        }
        Message::Relation(r) => {
            out.push(b'R');
            out.extend(r.oid.to_be_bytes());
            cstring(&mut out, &r.schema);
            cstring(&mut out, &r.name);
            out.push(r.replica_identity);
            out.extend((r.columns.len() as i16).to_be_bytes());
            for (i, (name, (ty, modifier))) in r.columns.iter().zip(&r.types).enumerate() {
                out.push(b[i % 8] & 1);
                cstring(&mut out, name);
                out.extend(ty.to_be_bytes());
                out.extend(modifier.to_be_bytes());
            }
        }
        Message::Insert { oid, new } => {
            out.push(b'I');
            out.extend(oid.to_be_bytes());
            out.push(b'N');
            tuple(&mut out, new);
        }
        Message::Update { oid, old, new } => {
            out.push(b'U');
            out.extend(oid.to_be_bytes());
            if let Some(old) = old {
                out.push(old_kind(skipped));
                tuple(&mut out, old);
            }
            out.push(b'N');
            tuple(&mut out, new);
        }
        Message::Delete { oid, old } => {
            out.push(b'D');
            out.extend(oid.to_be_bytes());
            out.push(old_kind(skipped));
            tuple(&mut out, old);
        }
        Message::Truncate { oids } => {
            out.push(b'T');
            out.extend((oids.len() as i32).to_be_bytes());
            out.push(b[1] & 3);
            for oid in oids {
                out.extend(oid.to_be_bytes());
            }
        }
        Message::Logical {
            transactional,
            prefix,
            content,
        } => {
            out.push(b'M');
            out.push(u8::from(*transactional));
            out.extend(skipped.to_be_bytes());
            cstring(&mut out, prefix);
            out.extend((content.len() as i32).to_be_bytes());
            out.extend(content);
        }
        Message::Other(tag) => out.push(*tag),
    }
    out
}

/// `K` (identity columns) or `O` (the whole row): both decode the same.
fn old_kind(skipped: u64) -> u8 {
    match skipped % 2 {
        0 => b'K',
        _ => b'O',
    }
}

fn cstring(out: &mut Vec<u8>, s: &str) {
    out.extend(s.as_bytes());
    out.push(0);
}

fn tuple(out: &mut Vec<u8>, values: &[TupleValue]) {
    out.extend((values.len() as i16).to_be_bytes());
    for v in values {
        match v {
            TupleValue::Null => out.push(b'n'),
            TupleValue::Unchanged => out.push(b'u'),
            TupleValue::Text(t) => {
                out.push(b't');
                out.extend((t.len() as i32).to_be_bytes());
                out.extend(t.as_bytes());
            }
            TupleValue::Value(v) => panic!("pgoutput never sends a decoded value: {v:?}"),
        }
    }
}

/// A name as the server sends it: any text without a NUL.
fn name() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,12}"
}

fn values() -> impl Strategy<Value = Vec<TupleValue>> {
    prop::collection::vec(
        prop_oneof![
            Just(TupleValue::Null),
            Just(TupleValue::Unchanged),
            any::<String>().prop_map(TupleValue::Text),
        ],
        0..6,
    )
}

fn relation() -> impl Strategy<Value = Message> {
    (
        any::<u32>(),
        name(),
        name(),
        prop::sample::select(b"dfin".to_vec()),
        prop::collection::vec((name(), any::<u32>(), any::<i32>()), 0..6),
    )
        .prop_map(|(oid, schema, name, replica_identity, cols)| {
            Message::Relation(RelationInfo {
                oid,
                schema,
                name,
                replica_identity,
                columns: cols.iter().map(|c| c.0.clone()).collect(),
                types: cols.iter().map(|c| (c.1, c.2)).collect(),
            })
        })
}

/// Every message the decoder keeps, with any values in its fields.
fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u64>(), any::<i64>()).prop_map(|(final_lsn, timestamp)| Message::Begin {
            final_lsn,
            timestamp
        }),
        (any::<u64>(), any::<u64>(), any::<i64>()).prop_map(|(commit_lsn, end_lsn, timestamp)| {
            Message::Commit {
                commit_lsn,
                end_lsn,
                timestamp,
            }
        }),
        relation(),
        (any::<u32>(), values()).prop_map(|(oid, new)| Message::Insert { oid, new }),
        (any::<u32>(), prop::option::of(values()), values())
            .prop_map(|(oid, old, new)| Message::Update { oid, old, new }),
        (any::<u32>(), values()).prop_map(|(oid, old)| Message::Delete { oid, old }),
        prop::collection::vec(any::<u32>(), 0..5).prop_map(|oids| Message::Truncate { oids }),
        (
            any::<bool>(),
            name(),
            prop::collection::vec(any::<u8>(), 0..20)
        )
            .prop_map(|(transactional, prefix, content)| Message::Logical {
                transactional,
                prefix,
                content
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_valid_message_decodes_to_what_was_encoded(m in message(), skipped in any::<u64>()) {
        let bytes = encode(&m, skipped);
        prop_assert_eq!(decode(&bytes).unwrap(), m);
    }

    #[test]
    fn every_cut_of_a_valid_message_is_an_error(m in message(), skipped in any::<u64>()) {
        let bytes = encode(&m, skipped);
        for cut in 0..bytes.len() {
            prop_assert!(decode(&bytes[..cut]).is_err(), "{:?} cut at {}", m, cut);
        }
    }

    #[test]
    fn bytes_after_a_valid_message_are_an_error(
        m in message(),
        skipped in any::<u64>(),
        stray in prop::collection::vec(any::<u8>(), 1..8),
    ) {
        let mut bytes = encode(&m, skipped);
        bytes.extend(stray);
        prop_assert!(decode(&bytes).is_err(), "{:?}", m);
    }

    /// Arbitrary bytes after a known tag: an error, or a message that
    /// needed every one of them (one byte less does not decode).
    #[test]
    fn random_bytes_after_a_tag_are_an_error_or_used_whole(
        tag in prop::sample::select(TAGS.to_vec()),
        rest in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = vec![tag];
        bytes.extend(rest);
        if decode(&bytes).is_ok() {
            prop_assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }

    /// A valid message with one byte after its tag changed: never a panic;
    /// when it still decodes, it uses every byte.
    #[test]
    fn a_changed_byte_is_an_error_or_used_whole(
        m in message(),
        skipped in any::<u64>(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = encode(&m, skipped);
        let i = 1 + at.index(bytes.len() - 1);
        bytes[i] = byte;
        if decode(&bytes).is_ok() {
            prop_assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }
}

#[test]
fn negative_counts_and_lengths_are_errors() {
    let mut insert = vec![b'I', 0, 0, 0, 1, b'N'];
    insert.extend((-1i16).to_be_bytes());
    assert!(decode(&insert).is_err(), "a negative column count");
    let mut value = vec![b'I', 0, 0, 0, 1, b'N', 0, 1, b't'];
    value.extend((-1i32).to_be_bytes());
    assert!(decode(&value).is_err(), "a negative value length");
    let mut truncate = vec![b'T'];
    truncate.extend((-2i32).to_be_bytes());
    truncate.push(0);
    assert!(decode(&truncate).is_err(), "a negative relation count");
}
