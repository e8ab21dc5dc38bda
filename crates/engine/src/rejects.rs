//! The rejects file: one JSON object per line, enough to fix and replay a row.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sql2ddb_core::Reject;

use crate::error::EngineError;

/// Appends rejects to `rejects.jsonl`; created on the first reject only.
pub struct RejectsFile {
    path: PathBuf,
    file: Mutex<Option<std::io::BufWriter<std::fs::File>>>,
}

impl RejectsFile {
    /// A rejects file at `path` (not created yet).
    pub fn new(path: impl AsRef<Path>) -> Self {
        RejectsFile {
            path: path.as_ref().to_path_buf(),
            file: Mutex::new(None),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends rejects.
    pub fn write(&self, rejects: &[Reject]) -> Result<(), EngineError> {
        if rejects.is_empty() {
            return Ok(());
        }
        let mut guard = self.file.lock().expect("rejects lock");
        if guard.is_none() {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(|e| EngineError::io(&self.path, e))?;
            *guard = Some(std::io::BufWriter::new(f));
        }
        let w = guard.as_mut().expect("opened above");
        for r in rejects {
            let line = serde_json::to_string(r).expect("a reject serialises");
            writeln!(w, "{line}").map_err(|e| EngineError::io(&self.path, e))?;
        }
        Ok(())
    }

    /// Flushes what was written.
    pub fn flush(&self) -> Result<(), EngineError> {
        if let Some(w) = self.file.lock().expect("rejects lock").as_mut() {
            w.flush().map_err(|e| EngineError::io(&self.path, e))?;
        }
        Ok(())
    }
}
