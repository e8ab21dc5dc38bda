//! `sql2ddb check`: a mapping (or an update job file) validated without a
//! connection; with `--source`, also bound against the live source as
//! `run` binds it; with `--follow`, also checked as `run --follow` checks it.

use std::path::{Path, PathBuf};

use crate::outcome::{exit, Ended};
use crate::{env, fail, failure, load};

/// The exit codes of `sql2ddb check`, for its --help.
pub const EXIT_CODES: &str = "\
Exit codes:
  0   valid (with --source: and it fits the source; with --follow: and it
      can be followed)
  1   invalid; with --source: it does not fit the source (every problem
      listed, each with its file:line:col)
  2   valid, with warnings of possible silent overwrites (keys that leave
      out the unique key, entities whose keys can collide); with --source
      also of rows it would reject (a text column in a number key)
  64  usage error: unknown option, missing argument
  69  with --source or --follow: the source could not be reached, or refused
  78  with --source or --follow: the source URL is not set or not valid;
      with --follow: the mapping cannot be followed (every reason listed)";

/// Arguments of `sql2ddb check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// The mapping spec (TOML), or an update job file.
    pub mapping: PathBuf,
    /// Also connect to the source (URL, else the mapping's) and bind every
    /// entity against its live schema as `run` does before reading: tables
    /// and columns exist, key templates cannot collapse rows, the key is
    /// unique and non-NULL; every problem listed at once, nothing written.
    #[arg(long, value_name = "URL", num_args = 0..=1, default_missing_value = "")]
    pub source: Option<String>,
    /// Also connect to the source and list every reason `run --follow`
    /// would refuse to follow this mapping (server settings, privileges,
    /// keys, replica identity, entities), at once; nothing is created.
    #[arg(long)]
    pub follow: bool,
}

/// Runs `sql2ddb check`: the checks without a connection, then those
/// `--source` and `--follow` ask for, while the mapping is still valid.
pub fn check(args: CheckArgs) -> u8 {
    let path = &args.mapping;
    let offline = check_file(path);
    if offline == failure::EXIT_FAILURE {
        return offline;
    }
    // `--source` alone means the mapping's URL.
    let url = args.source.as_deref().filter(|u| !u.is_empty());
    let mut code = offline;
    if args.source.is_some() && is_job(path) {
        eprintln!("note: --source does not apply to an update job file: the job reads its table, not a source");
    } else if args.source.is_some() {
        match exit(crate::block_on(check_source(path, url))) {
            2 => code = 2,
            0 => {}
            failed => return failed,
        }
    }
    if args.follow {
        let followed = exit(crate::block_on(check_follow(path, url)));
        if followed != 0 {
            return followed;
        }
    }
    code
}

/// Whether the file at `path` is an update job file (its check makes no
/// connection: the job reads a table, not a source).
fn is_job(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| sql2ddb_mapping::UpdateJob::is_job_file(&t))
}

/// `check --source`: every entity bound against the live source; every
/// problem a run would refuse before reading, at once.
async fn check_source(path: &Path, source: Option<&str>) -> Ended {
    let plan = load(path, source)?;
    let found = sql2ddb_engine::check_source(&plan, &plan.source.url).await?;
    for w in &found.warnings {
        eprintln!("warning: {w}");
    }
    if found.problems.is_empty() {
        println!(
            "{}: fits its source: {} {} bound to the source's columns, keys proven unique (nothing written)",
            path.display(),
            found.bound,
            plural(found.bound, "entity", "entities")
        );
        // Valid, with warnings, as without --source.
        return Ok(match found.warnings.is_empty() {
            true => 0,
            false => 2,
        });
    }
    let n = found.problems.len();
    let list: String = found
        .problems
        .iter()
        .map(|p| format!("\n  - {p}"))
        .collect();
    Ok(fail(&format!(
        "{} does not fit its source: {n} {}, each of which `run` would refuse before reading; nothing was written:{list}",
        path.display(),
        plural(n, "problem", "problems")
    )))
}

/// `one` or `many`, as `n` asks.
fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    match n {
        1 => one,
        _ => many,
    }
}

/// `check` of an update job file (one with an `[update]` table): parsed
/// and validated as `update` does before it reads anything.
fn check_job(text: &str, path: &Path) -> u8 {
    use sql2ddb_mapping::{JobAction, UpdateJob};
    match UpdateJob::parse(text, path, &env) {
        Ok(job) => {
            println!("{}: ok (update job {:?})", path.display(), job.name);
            println!("  table {}", job.target.table);
            let action = match &job.action {
                JobAction::Update { expression, .. } => format!("update: {expression}"),
                JobAction::Delete => "delete the matching items".to_string(),
            };
            println!("  {action}");
            if let Some(filter) = &job.filter {
                println!("  where {filter}");
            }
            0
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// The checks that need no connection: a mapping's (or a job file's).
fn check_file(path: &Path) -> u8 {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", path.display())),
    };
    if sql2ddb_mapping::UpdateJob::is_job_file(&text) {
        return check_job(&text, path);
    }
    match sql2ddb_engine::check(&text, path, &env) {
        Ok(summary) => {
            tracing::debug!(
                mapping = %path.display(),
                table = %summary.table,
                entities = summary.entities.len(),
                warnings = summary.warnings.len(),
                "mapping checked"
            );
            println!("{}: ok", path.display());
            println!(
                "  table {} keyed by {}",
                summary.table,
                summary.keys.join(", ")
            );
            for e in summary.entities {
                println!("  entity {e}");
            }
            for w in &summary.warnings {
                eprintln!("warning: {w}");
            }
            unset_notes(&summary.unset);
            if summary.warnings.is_empty() {
                0
            } else {
                2
            }
        }
        Err(failure) => {
            let code = fail(&failure.error.to_string());
            unset_notes(&failure.unset);
            code
        }
    }
}

/// `check --follow`, once the mapping is valid: every reason it cannot be
/// followed, as `run --follow` would refuse it, before anything exists.
async fn check_follow(path: &Path, source: Option<&str>) -> Ended {
    let plan = load(path, source)?;
    sql2ddb_engine::follow::check_followable(&plan, &plan.source.url).await?;
    println!(
        "{}: can be followed (run it with `sql2ddb run {} --follow`)",
        path.display(),
        path.display()
    );
    Ok(0)
}

/// `check` needs no environment variable; the jobs that connect do.
fn unset_notes(unset: &[String]) {
    for u in unset {
        eprintln!("note: {u}; check goes on without it, but run, plan, export and verify need it");
    }
}
