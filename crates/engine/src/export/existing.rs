//! What an export finds where it writes, and the names its files take.
//!
//! An export's own files are its data files (`data/part-….json[.gz|.zst]`)
//! and, beside `data/`, its manifest, its table-creation parameters and
//! (for bulk put) its pointer updates. An
//! earlier export's files are refused unless the options say what to do
//! with them ([`IfNotEmpty`]): `truncate` removes them (those files only,
//! never another), `append` keeps them and names this export's files with
//! its run id, so none is overwritten. Any other file under `data/` is
//! refused whatever the choice: an import reads every file there.

use super::output::{Destination, DATA_DIR};
use crate::error::EngineError;
use crate::ids::RunId;
use crate::if_not_empty::{IfNotEmpty, NotEmpty};

/// The names an export gives its files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileNames {
    /// The run id every name carries, when the export is added beside an
    /// earlier one (`append`); none otherwise.
    stem: Option<RunId>,
}

impl FileNames {
    /// Names that carry `run_id`: `data/part-RUN-….json.gz`, `manifest-RUN.json`.
    pub fn of_run(run_id: &RunId) -> FileNames {
        FileNames {
            stem: Some(run_id.clone()),
        }
    }

    /// The data file `opened` of slot `slot` (under `data/`), with the
    /// compression's `extension`.
    pub fn data(&self, slot: usize, opened: u32, extension: &str) -> String {
        match &self.stem {
            Some(run) => format!("part-{run}-{slot:02}-{opened:05}.json{extension}"),
            None => format!("part-{slot:02}-{opened:05}.json{extension}"),
        }
    }

    /// `file` (`manifest.json`, `table-creation.json`) as this export names it.
    pub fn beside(&self, file: &str) -> String {
        match (&self.stem, file.strip_suffix(".json")) {
            (Some(run), Some(stem)) => format!("{stem}-{run}.json"),
            _ => file.to_string(),
        }
    }
}

/// Whether `name` (relative to the destination, `/`-separated) is a file
/// an export writes.
pub fn is_export_file(name: &str) -> bool {
    let json = |n: &str, stem: &str| {
        n.strip_prefix(stem)
            .and_then(|rest| rest.strip_suffix(".json"))
            .is_some_and(|mid| mid.is_empty() || mid.starts_with('-'))
    };
    match name.strip_prefix(&format!("{DATA_DIR}/")) {
        Some(data) => {
            !data.contains('/')
                && data.starts_with("part-")
                && [".json", ".json.gz", ".json.zst"]
                    .iter()
                    .any(|ext| data.ends_with(ext))
        }
        None => {
            !name.contains('/')
                && ["manifest", "table-creation", "pointers"]
                    .iter()
                    .any(|stem| json(name, stem))
        }
    }
}

impl Destination {
    /// Looks at what the destination holds before anything is written:
    /// refuses a file under `data/` that no export wrote, and an earlier
    /// export's files unless `choice` says what to do with them (removing
    /// them for `truncate`). Returns the names this export's files take.
    pub async fn prepare(
        &self,
        choice: IfNotEmpty,
        run_id: &RunId,
    ) -> Result<FileNames, EngineError> {
        let found = self.files().await?;
        let (own, other): (Vec<String>, Vec<String>) =
            found.into_iter().partition(|n| is_export_file(n));
        if let Some(first) = other
            .iter()
            .find(|n| n.starts_with(&format!("{DATA_DIR}/")))
        {
            let data = self.place(DATA_DIR);
            return Err(EngineError::Config(format!(
                "{data} holds {first}, which no export wrote: an import reads every file there, so move it away or export elsewhere",
            )));
        }
        if own.is_empty() {
            return Ok(FileNames::default());
        }
        match choice {
            IfNotEmpty::Append => Ok(FileNames::of_run(run_id)),
            IfNotEmpty::Truncate => {
                for name in &own {
                    self.remove(name).await;
                }
                let left = self.files().await?;
                if let Some(kept) = left.iter().find(|n| is_export_file(n)) {
                    return Err(EngineError::Config(format!(
                        "{} could not be removed (--if-not-empty truncate): remove it, or export elsewhere",
                        self.place(kept)
                    )));
                }
                Ok(FileNames::default())
            }
            IfNotEmpty::Fail => Err(EngineError::NotEmpty(Box::new(NotEmpty {
                target: self.describe(),
                held: describe_files(&own),
                append: "add this export's files beside them, named with its run id (an import or a bulk put reads every file under data/)",
                truncate: "remove those files first (data/part-*, manifest*.json, table-creation*.json; never another file), then export",
            }))),
        }
    }

    /// Every file of the destination an export could have written or that
    /// an import would read: what `data/` holds, and the files beside it.
    async fn files(&self) -> Result<Vec<String>, EngineError> {
        match self {
            Destination::Dir(dir) => {
                let mut names = Vec::new();
                for (folder, prefix) in [
                    (dir.join(DATA_DIR), format!("{DATA_DIR}/")),
                    (dir.clone(), String::new()),
                ] {
                    let entries = match std::fs::read_dir(&folder) {
                        Ok(e) => e,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(EngineError::io(&folder, e)),
                    };
                    for entry in entries {
                        let entry = entry.map_err(|e| EngineError::io(&folder, e))?;
                        let name = entry.file_name().to_string_lossy().into_owned();
                        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                        // Beside data/, only the files an export writes matter.
                        if (prefix.is_empty() && is_dir)
                            || (prefix.is_empty() && !is_export_file(&name))
                        {
                            continue;
                        }
                        names.push(format!("{prefix}{name}"));
                    }
                }
                Ok(names)
            }
            Destination::S3(place) => {
                let mut names = place
                    .list(&format!("{DATA_DIR}/"))
                    .await
                    .map_err(super::output::s3_error)?;
                for stem in ["manifest", "table-creation"] {
                    let beside = place.list(stem).await.map_err(super::output::s3_error)?;
                    names.extend(beside.into_iter().filter(|n| is_export_file(n)));
                }
                Ok(names)
            }
        }
    }
}

/// `3 export files (data/part-00-00001.json.gz, manifest.json, …)`.
fn describe_files(names: &[String]) -> String {
    let mut shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    if names.len() > shown.len() {
        shown.push("…");
    }
    let noun = match names.len() {
        1 => "export file",
        _ => "export files",
    };
    format!("{} {noun} ({})", names.len(), shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exports_own_files_are_known_by_name_and_no_other() {
        for own in [
            "data/part-00-00001.json.gz",
            "data/part-20240501T100000Z-3f9a1c-03-00002.json.zst",
            "data/part-01-00001.json",
            "manifest.json",
            "manifest-20240501T100000Z-3f9a1c.json",
            "table-creation.json",
        ] {
            assert!(is_export_file(own), "{own}");
        }
        for other in [
            "data/notes.txt",
            "data/part-01.csv",
            "data/sub/part-00-00001.json",
            "README.md",
            "manifests.json",
            "old/manifest.json",
        ] {
            assert!(!is_export_file(other), "{other}");
        }
    }

    #[test]
    fn an_appended_export_names_every_file_with_its_run() {
        let plain = FileNames::default();
        assert_eq!(plain.data(3, 7, ".gz"), "part-03-00007.json.gz");
        assert_eq!(plain.beside("manifest.json"), "manifest.json");
        let run = FileNames::of_run(&"R1".parse().unwrap());
        assert_eq!(run.data(3, 7, ".gz"), "part-R1-03-00007.json.gz");
        assert_eq!(run.beside("manifest.json"), "manifest-R1.json");
        assert_eq!(run.beside("table-creation.json"), "table-creation-R1.json");
        for name in [
            run.beside("manifest.json"),
            format!("data/{}", run.data(0, 1, "")),
        ] {
            assert!(is_export_file(&name), "{name}");
        }
    }
}
