//! The id of a run: a name the run's directory, its progress records, its
//! replication slot and its queue messages are all found by.

use std::fmt;
use std::str::FromStr;

/// Most characters in a run id (the PostgreSQL slot named after it keeps
/// 63, so longer ids share a slot name's prefix: see the engine's
/// `slot_name`).
pub const MAX_RUN_ID_LEN: usize = 128;

/// A run's id, checked once when it is made or read: 1 to
/// [`MAX_RUN_ID_LEN`] ASCII letters, digits, `-`, `_` and `.`, not
/// starting with `.` (it names a directory under the runs directory, so it
/// can never climb out of it). New runs are named by the time they start and
/// a random suffix (`20240501T100000Z-3f9a1c`); a user may name one.
///
/// In JSON it is its text; read from JSON, it is checked as it is read, so
/// a file or a message with a bad id is refused where it is read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct RunId(String);

/// Why a text is not a run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a run id: {why}")]
pub struct BadRunId {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl RunId {
    /// `text` as a run id, if it is one.
    pub fn parse(text: &str) -> Result<RunId, BadRunId> {
        match why_not(text) {
            None => Ok(RunId(text.to_string())),
            Some(why) => Err(BadRunId {
                text: text.to_string(),
                why,
            }),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What keeps `text` from being a run id, if anything does.
fn why_not(text: &str) -> Option<&'static str> {
    if text.is_empty() {
        return Some("it is empty");
    }
    if text.len() > MAX_RUN_ID_LEN {
        return Some("it is longer than 128 characters");
    }
    if text.starts_with('.') {
        return Some("it starts with a dot");
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-_.".contains(&b);
    if !text.bytes().all(allowed) {
        return Some("only ASCII letters, digits, '-', '_' and '.' are allowed");
    }
    None
}

impl TryFrom<String> for RunId {
    type Error = BadRunId;

    /// `text` as a run id, kept as it is, if it is one.
    fn try_from(text: String) -> Result<RunId, BadRunId> {
        match why_not(&text) {
            None => Ok(RunId(text)),
            Some(why) => Err(BadRunId { text, why }),
        }
    }
}

impl serde::Serialize for RunId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = BadRunId;

    fn from_str(text: &str) -> Result<RunId, BadRunId> {
        RunId::parse(text)
    }
}

impl std::ops::Deref for RunId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::path::Path> for RunId {
    fn as_ref(&self) -> &std::path::Path {
        self.0.as_ref()
    }
}

impl std::borrow::Borrow<str> for RunId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for RunId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RunId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl From<RunId> for String {
    fn from(id: RunId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_runs_id_and_a_users_name_are_run_ids() {
        for text in ["20240501T100000Z-3f9a1c", "visits-1", "R1", "a.b_c"] {
            let id: RunId = text.parse().unwrap();
            assert_eq!(id.to_string(), text);
            assert_eq!(id, text);
        }
    }

    #[test]
    fn a_text_that_could_name_another_directory_is_refused() {
        for text in [
            "",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(RunId::parse(text).is_err(), "{text:?}");
        }
        let err = RunId::parse("../up").unwrap_err();
        assert!(
            err.to_string().contains("\"../up\" is not a run id"),
            "{err}"
        );
    }

    #[test]
    fn it_is_its_text_in_json_and_checked_when_read() {
        let id = RunId::parse("R1").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"R1\"");
        let back: RunId = serde_json::from_str("\"R1\"").unwrap();
        assert_eq!(back, id);
        let err = serde_json::from_str::<RunId>("\"a/b\"").unwrap_err();
        assert!(err.to_string().contains("\"a/b\" is not a run id"), "{err}");
        #[derive(Debug, serde::Deserialize)]
        struct Record {
            #[allow(dead_code)]
            run_id: RunId,
        }
        let err = serde_json::from_str::<Record>(r#"{"run_id":"../up"}"#).unwrap_err();
        assert!(
            err.to_string().contains("\"../up\" is not a run id"),
            "{err}"
        );
    }
}
