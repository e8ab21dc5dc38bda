//! `sql2ddb runs`: the runs of a runs directory, newest first, and which
//! run `--run latest` (or no `--run`) means for `status` and `verify`.

use std::path::{Path, PathBuf};

use sql2ddb_engine::runs::{list_runs, resolve_run, RunEntry};
use sql2ddb_engine::{EngineError, RunId};

use crate::outcome::Ended;

pub const EXIT_CODES: &str = "\
Exit codes:
  0   the runs are listed (none is no error)
  64  usage error
  74  the runs directory could not be read";

/// Arguments of `sql2ddb runs`.
#[derive(clap::Args)]
pub struct RunsArgs {
    /// Only the runs of this mapping file.
    pub mapping: Option<PathBuf>,
    /// Where run directories are.
    #[arg(long, value_name = "DIR", default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
    /// The runs as one JSON array on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `sql2ddb runs`: the list on stdout.
pub fn runs(args: RunsArgs) -> Ended {
    let runs = list_runs(&args.runs_dir, args.mapping.as_deref())?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&runs).expect("runs serialise")
        );
        return Ok(0);
    }
    if runs.is_empty() {
        let of = match &args.mapping {
            Some(m) => format!(" of {}", m.display()),
            None => String::new(),
        };
        println!("no run{of} in {}", args.runs_dir.display());
        return Ok(0);
    }
    print!("{}", table(&runs));
    Ok(0)
}

/// The runs as aligned columns, a header first.
fn table(runs: &[RunEntry]) -> String {
    let dash = || "-".to_string();
    let rows: Vec<[String; 5]> =
        std::iter::once(["run", "started", "status", "table", "mapping"].map(str::to_string))
            .chain(runs.iter().map(|r| {
                [
                    r.run_id.to_string(),
                    r.started.clone().unwrap_or_else(dash),
                    r.status.clone().unwrap_or_else(|| "no report".into()),
                    r.table.clone().unwrap_or_else(dash),
                    r.mapping.clone().unwrap_or_else(dash),
                ]
            }))
            .collect();
    let widths: Vec<usize> = (0..5)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The run `--run` names: `latest`, or none, is the newest run of
/// `mapping` in `runs_dir`, said on stderr.
pub(crate) fn chosen_run(
    run: Option<&str>,
    runs_dir: &Path,
    mapping: Option<&Path>,
) -> Result<RunId, EngineError> {
    let id = resolve_run(run, runs_dir, mapping)?;
    if run != Some(id.as_str()) {
        eprintln!("run {id} (the newest in {})", runs_dir.display());
    }
    Ok(id)
}
