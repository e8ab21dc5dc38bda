//! A place in the binary log, as snapshots, checkpoints and messages write
//! it: `file:position`, and on MariaDB the GTID position at the same place.

use super::gtid::Gtids;
use crate::SourceError;

/// A place in the binary log: the end of a transaction, where reading
/// goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinlogPosition {
    /// The binary log file (`mysql-bin.000042`).
    pub file: String,
    /// The byte offset within it.
    pub pos: u64,
    /// The GTID position at the same place, which any server of the
    /// replication group understands: MariaDB's last GTID per domain
    /// (`0-1-1042`), or MySQL's GTID set (`3e11fa47-…:1-1042`).
    pub gtid: Option<String>,
}

impl BinlogPosition {
    /// Parses `file:position`, as snapshots and checkpoints write it.
    pub fn parse(text: &str) -> Result<Self, SourceError> {
        let bad = || {
            SourceError::config(format!(
                "binary log position {text:?}: expected FILE:POSITION (mysql-bin.000042:1234)"
            ))
        };
        let (file, pos) = text.trim().rsplit_once(':').ok_or_else(bad)?;
        let pos = pos.parse().map_err(|_| bad())?;
        if file.is_empty() {
            return Err(bad());
        }
        Ok(BinlogPosition {
            file: file.to_string(),
            pos,
            gtid: None,
        })
    }

    /// The position for people: `file:position`, and its GTID position
    /// when known.
    pub fn describe(&self) -> String {
        match &self.gtid {
            Some(g) => format!("{self} (GTID {g})"),
            None => self.to_string(),
        }
    }

    /// The position as a checkpoint file holds it: `file:position` on the
    /// first line, then `gtid DOMAIN-SERVER-SEQUENCE,…` when known.
    pub fn checkpoint_text(&self) -> String {
        match &self.gtid {
            Some(g) => format!("{self}\ngtid {g}\n"),
            None => format!("{self}\n"),
        }
    }

    /// Reads what [`BinlogPosition::checkpoint_text`] wrote (a lone
    /// `file:position` too).
    pub fn parse_checkpoint(text: &str) -> Result<Self, SourceError> {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let mut position = Self::parse(lines.next().unwrap_or_default())?;
        for line in lines {
            match line.strip_prefix("gtid ") {
                Some(g) => {
                    Gtids::parse(g)?;
                    position.gtid = Some(g.trim().to_string());
                }
                None => {
                    return Err(SourceError::config(format!(
                        "binary log checkpoint: unexpected line {line:?} (expected `gtid DOMAIN-SERVER-SEQUENCE,…`)"
                    )))
                }
            }
        }
        Ok(position)
    }

    /// A number that orders positions as the log does: the file's
    /// sequence number above, the offset below (a file is at most 4 GB).
    pub fn ordinal(&self) -> u64 {
        let seq: u64 = self
            .file
            .rsplit('.')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        (seq << 32) | (self.pos & 0xffff_ffff)
    }
}

impl std::fmt::Display for BinlogPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse_print_and_order_as_the_log_does() {
        let p = BinlogPosition::parse("mysql-bin.000002:120").unwrap();
        assert_eq!(p.to_string(), "mysql-bin.000002:120");
        let later_file = BinlogPosition::parse("mysql-bin.000003:4").unwrap();
        assert!(later_file.ordinal() > p.ordinal());
        assert!(BinlogPosition::parse("mysql-bin.000002").is_err());
        assert!(BinlogPosition::parse(":5").is_err());
    }

    #[test]
    fn checkpoints_hold_the_gtid_position_on_a_line_of_its_own() {
        let mut p = BinlogPosition::parse("mysql-bin.000002:120").unwrap();
        assert_eq!(p.checkpoint_text(), "mysql-bin.000002:120\n");
        assert_eq!(p.describe(), "mysql-bin.000002:120");
        p.gtid = Some("0-1-9".into());
        assert_eq!(p.checkpoint_text(), "mysql-bin.000002:120\ngtid 0-1-9\n");
        assert_eq!(p.describe(), "mysql-bin.000002:120 (GTID 0-1-9)");
        assert_eq!(
            BinlogPosition::parse_checkpoint(&p.checkpoint_text()).unwrap(),
            p
        );
        assert!(BinlogPosition::parse_checkpoint("b.000001:4\ngtid 0-x-1\n").is_err());
    }
}
