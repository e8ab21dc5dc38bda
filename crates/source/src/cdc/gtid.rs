//! MariaDB's global transaction ids: where a follower stands in a way every
//! server of a replication group understands, unlike a `file:position`,
//! which only means something on the server that wrote the file.
//!
//! A MariaDB GTID is `domain-server-sequence`; a position is the last GTID
//! of each replication domain (`0-1-1042,1-7-55`), as `@@gtid_binlog_pos`
//! and `@slave_connect_state` write it. Every transaction in the binary
//! log starts with a GTID event (type 162) that carries its sequence
//! number and domain; the server id is the event header's.

use std::collections::BTreeMap;

use crate::SourceError;

/// The binary log event type of MariaDB's GTID event.
pub(super) const MARIADB_GTID_EVENT: u8 = 162;

/// The GTID event's flag for a transaction of one statement that commits by
/// itself (DDL), with no `XID` or `COMMIT` after it.
const FL_STANDALONE: u8 = 1;

/// A MariaDB GTID position: the last transaction of each domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MariaGtids {
    /// domain → (server id, sequence number).
    last: BTreeMap<u32, (u32, u64)>,
}

impl MariaGtids {
    /// Parses `domain-server-sequence` GTIDs separated by commas; an empty
    /// text is the position before any transaction.
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        let bad = |part: &str| {
            SourceError::config(format!(
                "GTID position {text:?}: {part:?} is not DOMAIN-SERVER-SEQUENCE (0-1-1042)"
            ))
        };
        let mut last = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split('-');
            let (Some(d), Some(s), Some(n), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(bad(part));
            };
            let (d, s, n) = match (d.parse(), s.parse(), n.parse()) {
                (Ok(d), Ok(s), Ok(n)) => (d, s, n),
                _ => return Err(bad(part)),
            };
            if last.insert(d, (s, n)).is_some() {
                return Err(SourceError::config(format!(
                    "GTID position {text:?} names domain {d} twice"
                )));
            }
        }
        Ok(MariaGtids { last })
    }

    /// Records a transaction: it is now its domain's last.
    pub fn record(&mut self, domain: u32, server: u32, sequence: u64) {
        self.last.insert(domain, (server, sequence));
    }

    /// Whether no transaction is known (a server that never logged one).
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }
}

impl std::fmt::Display for MariaGtids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (d, (s, n))) in self.last.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}-{s}-{n}")?;
        }
        Ok(())
    }
}

/// What a MariaDB GTID event says of its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GtidEvent {
    pub(super) sequence: u64,
    pub(super) domain: u32,
    /// A single statement that commits by itself (DDL).
    pub(super) standalone: bool,
}

/// Decodes a GTID event's body (after the common header, without the
/// checksum): sequence number (8 bytes), domain (4), flags (1), then
/// fields this reader does not need.
pub(super) fn gtid_event(data: &[u8]) -> Option<GtidEvent> {
    let sequence = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
    let flags = *data.get(12)?;
    Some(GtidEvent {
        sequence,
        domain,
        standalone: flags & FL_STANDALONE != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_print_and_move_per_domain() {
        let mut p = MariaGtids::parse("1-7-55, 0-1-1042").unwrap();
        assert_eq!(p.to_string(), "0-1-1042,1-7-55");
        p.record(0, 2, 1043);
        p.record(3, 2, 1);
        assert_eq!(p.to_string(), "0-2-1043,1-7-55,3-2-1");
        let empty = MariaGtids::parse("").unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.to_string(), "");
        for bad in ["0-1", "0-1-x", "a-1-2", "0-1-2-3", "0-1-2,0-1-3"] {
            assert!(MariaGtids::parse(bad).is_err(), "{bad}");
        }
        // A MySQL GTID set is not a MariaDB position.
        assert!(MariaGtids::parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5").is_err());
    }

    #[test]
    fn gtid_events_give_sequence_domain_and_whether_they_stand_alone() {
        let mut body = Vec::new();
        body.extend_from_slice(&1042u64.to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes());
        body.push(FL_STANDALONE | 8);
        body.extend_from_slice(&[0; 6]);
        assert_eq!(
            gtid_event(&body),
            Some(GtidEvent {
                sequence: 1042,
                domain: 3,
                standalone: true
            })
        );
        body[12] = 2;
        assert!(!gtid_event(&body).unwrap().standalone);
        assert_eq!(gtid_event(&body[..12]), None);
    }
}
