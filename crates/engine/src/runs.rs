//! The runs a runs directory holds, newest first: what `sql2ddb runs`
//! lists, and what `--run latest` (or no `--run` where one is needed)
//! stands for. A run is a directory named by its id, whose id begins with
//! the moment it started (`20240501T100000Z-3f2a1c`); its `report.json`,
//! once written, says how it ended, which mapping it ran and where.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::EngineError;
use crate::ids::RunId;

/// What `--run` takes for the newest run.
pub const LATEST: &str = "latest";

/// One run of a runs directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunEntry {
    /// The run id (the directory's name).
    pub run_id: RunId,
    /// When it started, from its id (`2024-05-01T10:00:00Z`).
    pub started: Option<String>,
    /// How it ended (`ok`, `rejects`, `failed`, `interrupted`…); none while
    /// it runs, or when it stopped without writing its report (a kill).
    pub status: Option<String>,
    /// The mapping file it was given, as given.
    pub mapping: Option<String>,
    /// Its DynamoDB table.
    pub table: Option<String>,
    /// Its DynamoDB endpoint (`aws` for AWS's).
    pub endpoint: Option<String>,
    /// Its progress table, when it kept one.
    pub progress_table: Option<String>,
}

/// Every run of `runs_dir`, newest first; with `mapping`, only the runs of
/// that mapping file (the same file, however its path is written). A
/// missing directory holds no run.
pub fn list_runs(runs_dir: &Path, mapping: Option<&Path>) -> Result<Vec<RunEntry>, EngineError> {
    let dir = match std::fs::read_dir(runs_dir) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(EngineError::io(runs_dir, e)),
    };
    let wanted = mapping.map(same_file_key);
    let mut runs = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| EngineError::io(runs_dir, e))?;
        let name = entry.file_name().into_string().ok();
        let Some(run_id) = name.and_then(|n| RunId::try_from(n).ok()) else {
            continue; // not a run id
        };
        let Some(started) = started_of(&run_id) else {
            continue; // not a run's directory
        };
        if !entry.path().is_dir() {
            continue;
        }
        let run = read_entry(&entry.path(), run_id, Some(started));
        let of_mapping = match (&wanted, &run.mapping) {
            (None, _) => true,
            (Some(w), Some(m)) => *w == same_file_key(Path::new(m)),
            (Some(_), None) => false,
        };
        if of_mapping {
            runs.push(run);
        }
    }
    // Ids begin with their start time: the newest sorts last.
    runs.sort_by(|a, b| b.run_id.cmp(&a.run_id));
    Ok(runs)
}

/// The newest run of `runs_dir` (of `mapping`, when given); an error that
/// says where it looked when there is none.
pub fn latest_run(runs_dir: &Path, mapping: Option<&Path>) -> Result<RunEntry, EngineError> {
    list_runs(runs_dir, mapping)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            let of = match mapping {
                Some(m) => format!(" of {}", m.display()),
                None => String::new(),
            };
            EngineError::Config(format!(
                "no run{of} in {}: give the run id with --run (`sql2ddb runs --runs-dir DIR` lists runs), or --runs-dir where the runs are",
                runs_dir.display()
            ))
        })
}

/// `run` as given, with `latest` (or nothing) resolved to the newest run
/// of `mapping` in `runs_dir`.
pub fn resolve_run(
    run: Option<&str>,
    runs_dir: &Path,
    mapping: Option<&Path>,
) -> Result<RunId, EngineError> {
    match run {
        Some(id) if id != LATEST => Ok(RunId::parse(id)?),
        _ => Ok(latest_run(runs_dir, mapping)?.run_id),
    }
}

/// What run `run_id` of `runs_dir` recorded in its report (nothing while
/// the run goes on, or after a kill).
pub fn recorded(runs_dir: &Path, run_id: &RunId) -> RunEntry {
    let started = started_of(run_id);
    read_entry(&runs_dir.join(run_id), run_id.clone(), started)
}

/// The start time an id begins with, or `None` for a name that is no
/// run id.
fn started_of(run_id: &str) -> Option<String> {
    let stamp = run_id.get(..16)?;
    let t = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ").ok()?;
    Some(sql2ddb_core::shown::time(t.and_utc()))
}

fn read_entry(dir: &Path, run_id: RunId, started: Option<String>) -> RunEntry {
    let report: serde_json::Value = std::fs::read_to_string(dir.join("report.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let text = |field: &str| report[field].as_str().map(str::to_string);
    RunEntry {
        run_id,
        started,
        status: text("status"),
        mapping: text("mapping"),
        table: text("table"),
        endpoint: text("endpoint"),
        progress_table: text("progress_table"),
    }
}

/// A path as the file it names: canonical when the file exists, else as
/// written.
fn same_file_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(root: &Path, id: &str, report: Option<serde_json::Value>) {
        let dir = root.join(id);
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(r) = report {
            std::fs::write(dir.join("report.json"), r.to_string()).unwrap();
        }
    }

    #[test]
    fn runs_are_listed_newest_first_and_filtered_by_their_mapping() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a.toml");
        let b = root.path().join("b.toml");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let report = |m: &Path, status: &str| serde_json::json!({"status": status, "mapping": m.display().to_string(), "table": "t"});
        run_dir(
            root.path(),
            "20240501T100000Z-aaaaaa",
            Some(report(&a, "ok")),
        );
        run_dir(
            root.path(),
            "20240502T100000Z-bbbbbb",
            Some(report(&b, "failed")),
        );
        run_dir(
            root.path(),
            "20240503T100000Z-cccccc",
            Some(report(&a, "rejects")),
        );
        // Killed before its report: listed, of no known mapping.
        run_dir(root.path(), "20240504T100000Z-dddddd", None);
        // Not runs.
        std::fs::create_dir_all(root.path().join("notes")).unwrap();
        std::fs::write(root.path().join("20240505T100000Z-eeeeee"), "").unwrap();
        run_dir(root.path(), "20240507T100000Z-not a run", None);

        let all = list_runs(root.path(), None).unwrap();
        let ids: Vec<&str> = all.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "20240504T100000Z-dddddd",
                "20240503T100000Z-cccccc",
                "20240502T100000Z-bbbbbb",
                "20240501T100000Z-aaaaaa"
            ]
        );
        assert_eq!(all[0].status, None);
        assert_eq!(all[1].status.as_deref(), Some("rejects"));
        assert_eq!(all[1].started.as_deref(), Some("2024-05-03T10:00:00Z"));

        // The same file written another way is the same mapping.
        let other_spelling = root.path().join(".").join("a.toml");
        let of_a = list_runs(root.path(), Some(&other_spelling)).unwrap();
        let ids: Vec<&str> = of_a.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["20240503T100000Z-cccccc", "20240501T100000Z-aaaaaa"]);
        assert_eq!(
            resolve_run(Some(LATEST), root.path(), Some(&b)).unwrap(),
            "20240502T100000Z-bbbbbb"
        );
        assert_eq!(
            resolve_run(None, root.path(), Some(&a)).unwrap(),
            "20240503T100000Z-cccccc"
        );
        assert_eq!(resolve_run(Some("x"), root.path(), None).unwrap(), "x");

        // One run's record, as status and verify read its progress table.
        run_dir(
            root.path(),
            "20240506T100000Z-ffffff",
            Some(serde_json::json!({"status": "ok", "progress_table": "t-progress"})),
        );
        let one = recorded(root.path(), &"20240506T100000Z-ffffff".parse().unwrap());
        assert_eq!(one.progress_table.as_deref(), Some("t-progress"));
        assert_eq!(one.started.as_deref(), Some("2024-05-06T10:00:00Z"));
        assert_eq!(
            recorded(root.path(), &"20240504T100000Z-dddddd".parse().unwrap()).progress_table,
            None
        );
    }

    #[test]
    fn no_run_says_where_it_looked() {
        let root = tempfile::tempdir().unwrap();
        assert!(list_runs(&root.path().join("none"), None)
            .unwrap()
            .is_empty());
        let e = latest_run(root.path(), Some(Path::new("shop.toml"))).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("no run of shop.toml in"), "{text}");
        assert!(text.contains("--run"), "{text}");
    }
}
