//! Decoding PostgreSQL's `pgoutput` logical replication messages (protocol
//! version 1), as `pg_logical_slot_peek_binary_changes` returns them: one
//! message per row of its result.
//!
//! Only what following a table needs is kept: transaction boundaries, the
//! shape of each relation, and the tuples of inserts, updates, deletes and
//! truncates. Values arrive in text form (protocol 1 never sends binary).

use crate::SourceError;

/// One value of a replicated tuple.
#[derive(Debug, Clone, PartialEq)]
pub enum TupleValue {
    /// SQL NULL.
    Null,
    /// A TOASTed value the change did not touch: the message does not carry it.
    Unchanged,
    /// The value in PostgreSQL's text form.
    Text(String),
    /// The value already decoded as the full load decodes its column (the
    /// binary log's values: MySQL/MariaDB).
    Value(sql2ddb_core::SqlValue),
}

/// A relation as a `Relation` message describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationInfo {
    /// The relation's OID, which the change messages name it by.
    pub oid: u32,
    /// Its schema.
    pub schema: String,
    /// Its name.
    pub name: String,
    /// `REPLICA IDENTITY`: `d` default (primary key), `f` full, `i` index, `n` nothing.
    pub replica_identity: u8,
    /// Column names in the order tuples carry them.
    pub columns: Vec<String>,
    /// Each column's type: its OID and modifier (`varchar(3)` is OID 1043
    /// with modifier 7), in the same order.
    pub types: Vec<(u32, i32)>,
}

/// One decoded `pgoutput` message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A transaction starts; `final_lsn` is its commit record's position.
    Begin {
        /// The commit record's LSN.
        final_lsn: u64,
        /// Commit time, microseconds since 2000-01-01 UTC.
        timestamp: i64,
    },
    /// A transaction ends.
    Commit {
        /// The commit record's LSN.
        commit_lsn: u64,
        /// The end of the commit record: the slot may be advanced to it.
        end_lsn: u64,
        /// Commit time, microseconds since 2000-01-01 UTC.
        timestamp: i64,
    },
    /// The shape of a relation, sent before its first change.
    Relation(RelationInfo),
    /// A row inserted.
    Insert {
        /// The relation's OID.
        oid: u32,
        /// The new row.
        new: Vec<TupleValue>,
    },
    /// A row updated.
    Update {
        /// The relation's OID.
        oid: u32,
        /// The old row: its replica identity columns (`K`, only when they
        /// changed) or, with `REPLICA IDENTITY FULL`, every column (`O`).
        old: Option<Vec<TupleValue>>,
        /// The new row.
        new: Vec<TupleValue>,
    },
    /// A row deleted.
    Delete {
        /// The relation's OID.
        oid: u32,
        /// The old row (identity columns, or every column with FULL).
        old: Vec<TupleValue>,
    },
    /// Relations truncated.
    Truncate {
        /// Their OIDs.
        oids: Vec<u32>,
    },
    /// A message written with `pg_logical_emit_message` (sent with the
    /// option `messages`, PostgreSQL 14 and later).
    Logical {
        /// Whether it was written within a transaction (and is sent
        /// between its `Begin` and `Commit`).
        transactional: bool,
        /// Its prefix.
        prefix: String,
        /// Its content.
        content: Vec<u8>,
    },
    /// Anything else (`Origin`, `Type`): not needed.
    Other(u8),
}

/// A cursor over one message's bytes.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SourceError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(malformed(format!(
                "{n} bytes wanted at offset {} of a {}-byte message",
                self.at,
                self.buf.len()
            )));
        };
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, SourceError> {
        Ok(self.take(1)?[0])
    }
    fn i16(&mut self) -> Result<i16, SourceError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, SourceError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u32(&mut self) -> Result<u32, SourceError> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> Result<i64, SourceError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, SourceError> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// A count or length, which a well-formed message never sends negative.
    fn len(&mut self, n: i64, what: &str) -> Result<usize, SourceError> {
        usize::try_from(n).map_err(|_| malformed(format!("a negative {what} ({n})")))
    }
    /// A NUL-terminated string.
    fn string(&mut self) -> Result<String, SourceError> {
        let rest = &self.buf[self.at..];
        let Some(nul) = rest.iter().position(|&b| b == 0) else {
            return Err(malformed("a string without its terminating NUL"));
        };
        let s = String::from_utf8_lossy(&rest[..nul]).into_owned();
        self.at += nul + 1;
        Ok(s)
    }
    fn tuple(&mut self) -> Result<Vec<TupleValue>, SourceError> {
        let n = self.i16()?;
        let n = self.len(n.into(), "column count")?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            values.push(match self.u8()? {
                b'n' => TupleValue::Null,
                b'u' => TupleValue::Unchanged,
                b't' => {
                    let len = self.i32()?;
                    let len = self.len(len.into(), "value length")?;
                    let bytes = self.take(len)?;
                    TupleValue::Text(
                        String::from_utf8(bytes.to_vec()).map_err(|e| {
                            malformed(format!("a text value that is not UTF-8: {e}"))
                        })?,
                    )
                }
                other => {
                    return Err(malformed(format!(
                        "tuple value kind {:?} (protocol 1 sends only n, u, t)",
                        other as char
                    )))
                }
            });
        }
        Ok(values)
    }
}

fn malformed(why: impl std::fmt::Display) -> SourceError {
    SourceError::config(format!("malformed pgoutput message: {why}"))
}

/// Decodes one `pgoutput` message: a message cut short, with a negative
/// count or length, or with bytes after its last field is an error (never
/// a value read from what is not there).
pub fn decode(buf: &[u8]) -> Result<Message, SourceError> {
    let mut r = Reader { buf, at: 0 };
    let message = message(&mut r)?;
    if !matches!(message, Message::Other(_)) && r.at != buf.len() {
        return Err(malformed(format!(
            "{} bytes after the end of a {}-byte message",
            buf.len() - r.at,
            r.at
        )));
    }
    Ok(message)
}

/// The message `r` holds, its fields read in protocol 1's order.
fn message(r: &mut Reader<'_>) -> Result<Message, SourceError> {
    let tag = r.u8()?;
    Ok(match tag {
        b'B' => {
            let final_lsn = r.u64()?;
            let timestamp = r.i64()?;
            let _xid = r.u32()?;
            Message::Begin {
                final_lsn,
                timestamp,
            }
        }
        b'C' => {
            let _flags = r.u8()?;
            let commit_lsn = r.u64()?;
            let end_lsn = r.u64()?;
            let timestamp = r.i64()?;
            Message::Commit {
                commit_lsn,
                end_lsn,
                timestamp,
            }
        }
        b'R' => Message::Relation(relation(r)?),
        b'I' => {
            let oid = r.u32()?;
            expect(r, b'N')?;
            Message::Insert {
                oid,
                new: r.tuple()?,
            }
        }
        b'U' => update(r)?,
        b'D' => {
            let oid = r.u32()?;
            let kind = r.u8()?;
            if kind != b'K' && kind != b'O' {
                return Err(malformed(format!(
                    "delete without its old tuple (found {:?})",
                    kind as char
                )));
            }
            Message::Delete {
                oid,
                old: r.tuple()?,
            }
        }
        b'T' => {
            let n = r.i32()?;
            let n = r.len(n.into(), "relation count")?;
            let _options = r.u8()?;
            let oids = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
            Message::Truncate { oids }
        }
        b'M' => logical(r)?,
        other => Message::Other(other),
    })
}

/// A `Relation` message after its tag.
fn relation(r: &mut Reader<'_>) -> Result<RelationInfo, SourceError> {
    let oid = r.u32()?;
    let schema = r.string()?;
    let name = r.string()?;
    let replica_identity = r.u8()?;
    let n = r.i16()?;
    let n = r.len(n.into(), "column count")?;
    let mut columns = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    for _ in 0..n {
        let _flags = r.u8()?;
        columns.push(r.string()?);
        types.push((r.u32()?, r.i32()?));
    }
    Ok(RelationInfo {
        oid,
        schema,
        name,
        replica_identity,
        columns,
        types,
    })
}

/// An `Update` message after its tag: the old tuple only when sent.
fn update(r: &mut Reader<'_>) -> Result<Message, SourceError> {
    let oid = r.u32()?;
    let mut old = None;
    let mut kind = r.u8()?;
    if kind == b'K' || kind == b'O' {
        old = Some(r.tuple()?);
        kind = r.u8()?;
    }
    if kind != b'N' {
        return Err(malformed(format!(
            "update without its new tuple (found {:?})",
            kind as char
        )));
    }
    Ok(Message::Update {
        oid,
        old,
        new: r.tuple()?,
    })
}

/// A logical decoding message after its tag.
fn logical(r: &mut Reader<'_>) -> Result<Message, SourceError> {
    // Protocol 1 never streams, so no transaction id comes first.
    let transactional = r.u8()? & 1 == 1;
    let _lsn = r.u64()?;
    let prefix = r.string()?;
    let len = r.i32()?;
    let len = r.len(len.into(), "content length")?;
    let content = r.take(len)?.to_vec();
    Ok(Message::Logical {
        transactional,
        prefix,
        content,
    })
}

fn expect(r: &mut Reader<'_>, want: u8) -> Result<(), SourceError> {
    let got = r.u8()?;
    if got != want {
        return Err(malformed(format!(
            "expected {:?}, found {:?}",
            want as char, got as char
        )));
    }
    Ok(())
}

/// An LSN as PostgreSQL writes it (`16/B374D848`).
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF)
}

/// Parses an LSN written as PostgreSQL writes it.
pub fn parse_lsn(text: &str) -> Result<u64, SourceError> {
    let bad = || SourceError::config(format!("{text:?} is not a WAL position (like 16/B374D848)"));
    let (hi, lo) = text.trim().split_once('/').ok_or_else(bad)?;
    let hi = u64::from_str_radix(hi, 16).map_err(|_| bad())?;
    let lo = u64::from_str_radix(lo, 16).map_err(|_| bad())?;
    if hi > u32::MAX as u64 || lo > u32::MAX as u64 {
        return Err(bad());
    }
    Ok(hi << 32 | lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as i16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => out.push(b'n'),
                Some(t) => {
                    out.push(b't');
                    out.extend((t.len() as i32).to_be_bytes());
                    out.extend(t.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn decodes_a_relation_and_its_changes() {
        let mut rel = vec![b'R'];
        rel.extend(16384u32.to_be_bytes());
        rel.extend(b"public\0orders\0");
        rel.push(b'd');
        rel.extend(2i16.to_be_bytes());
        for (flag, name, ty) in [(1u8, "id", 23u32), (0, "note", 25)] {
            rel.push(flag);
            rel.extend(name.as_bytes());
            rel.push(0);
            rel.extend(ty.to_be_bytes());
            rel.extend((-1i32).to_be_bytes());
        }
        let Message::Relation(info) = decode(&rel).unwrap() else {
            panic!("not a relation")
        };
        assert_eq!(info.columns, ["id", "note"]);
        assert_eq!(info.types, [(23, -1), (25, -1)]);
        assert_eq!(
            (info.schema.as_str(), info.name.as_str()),
            ("public", "orders")
        );

        let mut update = vec![b'U'];
        update.extend(16384u32.to_be_bytes());
        update.push(b'K');
        update.extend(tuple(&[Some("1"), None]));
        update.push(b'N');
        update.extend(tuple(&[Some("2"), Some("it's")]));
        assert_eq!(
            decode(&update).unwrap(),
            Message::Update {
                oid: 16384,
                old: Some(vec![TupleValue::Text("1".into()), TupleValue::Null]),
                new: vec![
                    TupleValue::Text("2".into()),
                    TupleValue::Text("it's".into())
                ],
            }
        );

        let mut commit = vec![b'C', 0];
        commit.extend(0x1_0000_0010u64.to_be_bytes());
        commit.extend(0x1_0000_0040u64.to_be_bytes());
        commit.extend(5i64.to_be_bytes());
        assert_eq!(
            decode(&commit).unwrap(),
            Message::Commit {
                commit_lsn: 0x1_0000_0010,
                end_lsn: 0x1_0000_0040,
                timestamp: 5
            }
        );
    }

    #[test]
    fn decodes_a_logical_message() {
        let mut m = vec![b'M', 1];
        m.extend(0x10u64.to_be_bytes());
        m.extend(b"sql2ddb\0");
        m.extend(3i32.to_be_bytes());
        m.extend(b"abc");
        assert_eq!(
            decode(&m).unwrap(),
            Message::Logical {
                transactional: true,
                prefix: "sql2ddb".into(),
                content: b"abc".to_vec()
            }
        );
        assert!(decode(&m[..m.len() - 1]).is_err());
    }

    #[test]
    fn a_cut_message_is_an_error_not_a_panic() {
        let mut insert = vec![b'I'];
        insert.extend(1u32.to_be_bytes());
        insert.push(b'N');
        insert.extend(tuple(&[Some("12345")]));
        for cut in 1..insert.len() {
            assert!(decode(&insert[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn lsns_round_trip() {
        assert_eq!(parse_lsn("16/B374D848").unwrap(), 0x16_B374_D848);
        assert_eq!(format_lsn(0x16_B374_D848), "16/B374D848");
        assert!(parse_lsn("nope").is_err());
    }
}
