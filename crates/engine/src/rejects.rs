//! The rejects file: one JSON object per line, enough to fix and replay a row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use sql2ddb_core::Reject;
use tokio::io::{AsyncWriteExt, BufWriter};

use crate::error::EngineError;

/// Distinct reasons counted; rows of further reasons count under
/// [`OTHER_REASONS`].
pub const MAX_REASONS: usize = 50;
/// The reason rows past [`MAX_REASONS`] distinct reasons are counted under.
pub const OTHER_REASONS: &str = "(other reasons)";

/// Rows rejected for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectCount {
    /// Entity name.
    pub entity: String,
    /// The column at fault, when one is.
    pub column: Option<String>,
    /// The reason, with the quoted values in it shown as `"…"` so that
    /// rows refused for the same cause count together.
    pub reason: String,
    /// Rows.
    pub rows: u64,
}

type ReasonKey = (String, Option<String>, String);

/// Appends rejects to `rejects.jsonl`; created on the first reject only.
/// The file is tokio's: its writes run on the blocking pool, never on the
/// runtime's threads that read and write the data.
pub struct RejectsFile {
    path: PathBuf,
    file: tokio::sync::Mutex<Option<BufWriter<tokio::fs::File>>>,
    reasons: Mutex<BTreeMap<ReasonKey, u64>>,
}

impl RejectsFile {
    /// A rejects file at `path` (not created yet).
    pub fn new(path: impl AsRef<Path>) -> Self {
        RejectsFile {
            path: path.as_ref().to_path_buf(),
            file: tokio::sync::Mutex::new(None),
            reasons: Mutex::new(BTreeMap::new()),
        }
    }

    /// The rows written to this file so far, by entity, column and reason,
    /// most rows first.
    pub fn reasons(&self) -> Vec<RejectCount> {
        let reasons = self.reasons.lock().expect("reasons lock");
        let mut out: Vec<RejectCount> = reasons
            .iter()
            .map(|((entity, column, reason), rows)| RejectCount {
                entity: entity.clone(),
                column: column.clone(),
                reason: reason.clone(),
                rows: *rows,
            })
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(r.rows));
        out
    }

    fn count(&self, rejects: &[Reject]) {
        let mut reasons = self.reasons.lock().expect("reasons lock");
        for r in rejects {
            let mut key = (r.entity.clone(), r.column.clone(), mask_values(&r.reason));
            if !reasons.contains_key(&key) && reasons.len() >= MAX_REASONS {
                key = (r.entity.clone(), None, OTHER_REASONS.to_string());
            }
            *reasons.entry(key).or_default() += 1;
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends rejects.
    pub async fn write(&self, rejects: &[Reject]) -> Result<(), EngineError> {
        if rejects.is_empty() {
            return Ok(());
        }
        self.count(rejects);
        let mut lines = Vec::with_capacity(rejects.len() * 128);
        for r in rejects {
            serde_json::to_writer(&mut lines, r).expect("a reject serialises");
            lines.push(b'\n');
        }
        let io = |e| EngineError::io(&self.path, e);
        let mut guard = self.file.lock().await;
        if guard.is_none() {
            let f = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .await
                .map_err(io)?;
            *guard = Some(BufWriter::new(f));
        }
        let w = guard.as_mut().expect("opened above");
        w.write_all(&lines).await.map_err(io)
    }

    /// Flushes what was written.
    pub async fn flush(&self) -> Result<(), EngineError> {
        if let Some(w) = self.file.lock().await.as_mut() {
            w.flush()
                .await
                .map_err(|e| EngineError::io(&self.path, e))?;
        }
        Ok(())
    }
}

/// `reason` with each double-quoted value (as `{:?}` prints it, escapes
/// included) shown as `"…"`.
fn mask_values(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut chars = reason.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            out.push(c);
            continue;
        }
        out.push_str("\"…\"");
        let mut escaped = false;
        for c in chars.by_ref() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => break,
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reject(entity: &str, column: &str, reason: &str) -> Reject {
        Reject {
            entity: entity.into(),
            key: serde_json::json!({"id": 1}),
            column: Some(column.into()),
            reason: reason.into(),
            row: serde_json::json!({}),
        }
    }

    #[tokio::test]
    async fn rows_refused_for_one_cause_count_together_whatever_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let file = RejectsFile::new(dir.path().join("rejects.jsonl"));
        file.write(&[
            reject("orders", "total", r#"text "12a" is not a number"#),
            reject("orders", "total", r#"text "x\"y" is not a number"#),
            reject("orders", "placed", r#"text "soon" is not a timestamp"#),
        ])
        .await
        .unwrap();
        let reasons = file.reasons();
        assert_eq!(reasons.len(), 2);
        assert_eq!(reasons[0].reason, r#"text "…" is not a number"#);
        assert_eq!(
            (reasons[0].column.as_deref(), reasons[0].rows),
            (Some("total"), 2)
        );
        assert_eq!(reasons[1].rows, 1);
    }

    #[tokio::test]
    async fn reasons_past_the_cap_count_as_other_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let file = RejectsFile::new(dir.path().join("rejects.jsonl"));
        let many: Vec<Reject> = (0..MAX_REASONS + 5)
            .map(|i| reject("e", &format!("c{i}"), "bad"))
            .collect();
        file.write(&many).await.unwrap();
        let reasons = file.reasons();
        assert_eq!(reasons.len(), MAX_REASONS + 1);
        assert_eq!(reasons[0].reason, OTHER_REASONS);
        assert_eq!(reasons[0].rows, 5);
        let total: u64 = reasons.iter().map(|r| r.rows).sum();
        assert_eq!(total, many.len() as u64);
    }

    #[tokio::test]
    async fn every_reject_is_one_line_of_the_file_once_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rejects.jsonl");
        let file = RejectsFile::new(&path);
        file.write(&[]).await.unwrap();
        assert!(!path.exists(), "created on the first reject only");
        file.write(&[reject("a", "x", "bad")]).await.unwrap();
        file.write(&[reject("b", "y", "worse"), reject("c", "z", "worst")])
            .await
            .unwrap();
        file.flush().await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let entities: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["entity"].to_string())
            .collect();
        assert_eq!(entities, [r#""a""#, r#""b""#, r#""c""#]);
    }
}
