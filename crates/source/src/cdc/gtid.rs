//! Global transaction ids: where a follower stands in a way every server of
//! a replication group understands, unlike a `file:position`, which only
//! means something on the server that wrote the file.
//!
//! MariaDB: a GTID is `domain-server-sequence`; a position is the last GTID
//! of each replication domain (`0-1-1042,1-7-55`), as `@@gtid_binlog_pos`
//! and `@slave_connect_state` write it. Every transaction in the binary
//! log starts with a GTID event (type 162) that carries its sequence
//! number and domain; the server id is the event header's.
//!
//! MySQL (`gtid_mode = ON`): a GTID is `source_uuid[:tag]:number`; a
//! position is the set of every transaction applied
//! (`3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7`), as `@@gtid_executed`
//! writes it and `COM_BINLOG_DUMP_GTID` takes it ([`MysqlGtids`]).

use std::collections::BTreeMap;
use std::str::FromStr;

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

/// A MySQL GTID set: for each source (its UUID, with MySQL 8.4's tag),
/// the intervals of transaction numbers it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlGtids {
    /// `uuid` or `uuid:tag` (lowercase UUID) → sorted, disjoint, inclusive
    /// intervals that do not touch.
    sets: BTreeMap<String, Vec<(u64, u64)>>,
}

impl MysqlGtids {
    /// Parses a GTID set as MySQL writes it: `UUID[:TAG]:INTERVAL[:INTERVAL…]`
    /// per source, separated by commas (and the newlines
    /// `@@gtid_executed` puts after them); an interval is `N` or `N-M`.
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        let bad = |part: &str, why: &str| {
            SourceError::config(format!("GTID set {text:?}: {part:?} {why}"))
        };
        let mut set = MysqlGtids::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let mut fields = part.split(':');
            let uuid = fields.next().unwrap_or_default().to_ascii_lowercase();
            let hex = uuid.chars().filter(|c| c.is_ascii_hexdigit()).count();
            let dashes: Vec<usize> = uuid.match_indices('-').map(|(i, _)| i).collect();
            if uuid.len() != 36 || hex != 32 || dashes != [8, 13, 18, 23] {
                return Err(bad(part, "does not start with a source UUID"));
            }
            let mut source = uuid;
            let mut intervals = Vec::new();
            for (i, field) in fields.enumerate() {
                let starts_tag = field.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
                if i == 0 && starts_tag {
                    source = format!("{source}:{field}");
                    continue;
                }
                let (a, b) = field.split_once('-').unwrap_or((field, field));
                match (a.parse::<u64>(), b.parse::<u64>()) {
                    (Ok(a), Ok(b)) if 0 < a && a <= b => intervals.push((a, b)),
                    _ => return Err(bad(part, "has an interval that is not N or N-M")),
                }
            }
            if intervals.is_empty() {
                return Err(bad(part, "has no transactions"));
            }
            for (a, b) in intervals {
                set.insert(&source, a, b);
            }
        }
        Ok(set)
    }

    /// Adds transaction `number` of `source` (`uuid` or `uuid:tag`).
    pub fn add(&mut self, source: &str, number: u64) {
        self.insert(source, number, number);
    }

    fn insert(&mut self, source: &str, a: u64, b: u64) {
        let list = self.sets.entry(source.to_string()).or_default();
        list.push((a, b));
        list.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(list.len());
        for &(a, b) in list.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *list = merged;
    }

    /// Whether the set holds no transaction.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// The set as `COM_BINLOG_DUMP_GTID` takes it.
    pub(super) fn sids(&self) -> Result<Vec<mysql_async::Sid<'static>>, SourceError> {
        self.to_string()
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                mysql_async::Sid::from_str(p)
                    .map_err(|e| SourceError::config(format!("GTID set {p:?}: {e}")))
            })
            .collect()
    }
}

impl std::fmt::Display for MysqlGtids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (source, intervals)) in self.sets.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(source)?;
            for (a, b) in intervals {
                match a == b {
                    true => write!(f, ":{a}")?,
                    false => write!(f, ":{a}-{b}")?,
                }
            }
        }
        Ok(())
    }
}

/// The source of a MySQL GTID event as a [`MysqlGtids`] names it: the UUID
/// of its 16 bytes, and its tag.
pub(super) fn mysql_source(sid: [u8; 16], tag: Option<&str>) -> String {
    let hex: String = sid.iter().map(|b| format!("{b:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    match tag {
        Some(t) => format!("{uuid}:{t}"),
        None => uuid,
    }
}

/// A GTID position of either server: what the follower keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gtids {
    /// MariaDB's last GTID per domain.
    Maria(MariaGtids),
    /// MySQL's set of every transaction applied.
    Mysql(MysqlGtids),
}

impl Gtids {
    /// Parses either form (a MySQL set has a UUID and colons, a MariaDB
    /// position neither).
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        match text.contains(':') {
            true => Ok(Gtids::Mysql(MysqlGtids::parse(text)?)),
            false => Ok(Gtids::Maria(MariaGtids::parse(text)?)),
        }
    }

    /// Whether no transaction is in it.
    pub fn is_empty(&self) -> bool {
        match self {
            Gtids::Maria(g) => g.is_empty(),
            Gtids::Mysql(g) => g.is_empty(),
        }
    }
}

impl std::fmt::Display for Gtids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gtids::Maria(g) => g.fmt(f),
            Gtids::Mysql(g) => g.fmt(f),
        }
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

    const U1: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    const U2: &str = "00000000-0000-0000-0000-000000000002";

    #[test]
    fn mysql_sets_parse_print_and_grow_as_mysql_writes_them() {
        let text = format!("{},\n{U2}:1-3:5", U1.to_uppercase() + ":1-5:7");
        let mut set = MysqlGtids::parse(&text).unwrap();
        assert_eq!(set.to_string(), format!("{U2}:1-3:5,{U1}:1-5:7"));
        // A transaction fills the hole it falls in, or extends its interval.
        set.add(U1, 6);
        set.add(U2, 4);
        set.add(U2, 9);
        assert_eq!(set.to_string(), format!("{U2}:1-5:9,{U1}:1-7"));
        // MySQL 8.4's tagged GTIDs are a source of their own.
        set.add(&format!("{U1}:blue"), 1);
        let tagged = MysqlGtids::parse(&set.to_string()).unwrap();
        assert_eq!(tagged, set);
        assert!(tagged.to_string().contains(&format!("{U1}:blue:1")));
        assert!(MysqlGtids::parse("").unwrap().is_empty());
        for bad in [
            U1.to_string(),
            format!("{U1}:0"),
            format!("{U1}:5-3"),
            "xyz:1".into(),
            format!("{U1}:1-x"),
        ] {
            assert!(MysqlGtids::parse(&bad).is_err(), "{bad}");
        }
        // The request's form says the same.
        let sids: Vec<String> = set.sids().unwrap().iter().map(|s| s.to_string()).collect();
        assert_eq!(sids.join(","), set.to_string());
    }

    #[test]
    fn mysql_gtid_event_sources_are_named_by_their_uuid_and_tag() {
        let mut sid = [0u8; 16];
        sid[15] = 2;
        assert_eq!(mysql_source(sid, None), U2);
        assert_eq!(mysql_source(sid, Some("blue")), format!("{U2}:blue"));
    }

    #[test]
    fn either_servers_position_is_told_apart_by_its_form() {
        assert!(matches!(Gtids::parse("0-1-5").unwrap(), Gtids::Maria(_)));
        assert!(matches!(
            Gtids::parse(&format!("{U1}:1-5")).unwrap(),
            Gtids::Mysql(_)
        ));
        assert!(Gtids::parse("0-1").is_err());
    }
}
