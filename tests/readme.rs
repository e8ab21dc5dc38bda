//! The README's local walk-through, run as written: the fenced block after
//! its `local walk-through` marker is read from README.md itself (so the
//! two cannot drift), and each of its lines runs in a shell, in an empty
//! directory, against the example shop loaded into a PostgreSQL schema of
//! the test's own, with the built binary first on `PATH`. Every command
//! must exit 0, and `verify --deep` must find nothing that differs.

use std::path::Path;

use crate::common::*;

/// The comment the walk-through's block follows in README.md.
const MARKER: &str = "<!-- local walk-through:";

/// The lines of the first ```sh block after [`MARKER`] in `readme`.
fn walk_through(readme: &str) -> Vec<String> {
    let after = readme
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("README.md has no {MARKER:?} comment"))
        .1;
    let block = after
        .split_once("```sh\n")
        .expect("a ```sh block after the marker")
        .1;
    let block = block.split_once("```").expect("the block's end").0;
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// docker/postgres-init/shop.sql (the example shop) in the schema `{schema}`.
fn shop_sql() -> String {
    let sql = std::fs::read_to_string(root().join("docker/postgres-init/shop.sql")).unwrap();
    let body = sql
        .replace("CREATE DATABASE shop;", "")
        .replace("\\connect shop", "");
    format!("SET search_path TO {{schema}};\n{body}")
}

/// A PostgreSQL URL whose current schema is `schema`: the reader's
/// database, as `init` sees it (its current schema's tables).
fn url_in(schema: &str) -> String {
    let sep = if pg_url().contains('?') { '&' } else { '?' };
    format!("{}{sep}options=-c%20search_path%3D{schema}", pg_url())
}

/// Runs one line of the walk-through in `dir` with `sh`, the binary's
/// directory first on `PATH` and `DATABASE_URL` set to `url`.
async fn shell(dir: &Path, line: &str, url: &str) -> Run {
    let bin = Path::new(env!("CARGO_BIN_EXE_sql2ddb")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = tokio::process::Command::new("sh")
        .args(["-c", line])
        .current_dir(dir)
        .env("PATH", path)
        .env("DATABASE_URL", url)
        // Nothing of the machine's AWS set-up: the walk-through needs none.
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_REGION")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("SQL2DDB_PROGRESS_TABLE")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn the_readme_local_walk_through_runs_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = walk_through(&readme);
    let schema = PgSchema::filled("readme", &shop_sql()).await;
    let url = url_in(&schema.name);
    let dir = tempfile::tempdir().unwrap();
    let mut commands = Vec::new();
    for line in &lines {
        // The reader's own URL: the test's schema stands in for it.
        if let Some(rest) = line.strip_prefix("export ") {
            assert!(rest.starts_with("DATABASE_URL="), "{line}");
            continue;
        }
        assert!(
            line.starts_with("sql2ddb "),
            "not a sql2ddb command: {line}"
        );
        let out = shell(dir.path(), line, &url).await;
        assert_eq!(
            out.code, 0,
            "{line}\nstdout:\n{}\nstderr:\n{}",
            out.stdout, out.stderr
        );
        commands.push((line.clone(), out));
    }
    let names: Vec<&str> = commands
        .iter()
        .map(|(l, _)| l.split_whitespace().nth(1).unwrap())
        .collect();
    for step in ["init", "check", "plan", "run", "verify"] {
        assert!(names.contains(&step), "no {step} in {lines:?}");
    }
    let (line, verify) = commands.last().unwrap();
    assert!(line.contains("--deep"), "the walk-through ends on {line}");
    assert!(
        verify.stdout.contains("verified: every item is exactly"),
        "{}{}",
        verify.stdout,
        verify.stderr
    );
    // The table holds the whole shop: 500 customers, 50 products, 2,000
    // orders (their lines embedded), as `run` reported them.
    let (_, run) = commands
        .iter()
        .find(|(l, _)| l.split_whitespace().nth(1) == Some("run"))
        .unwrap();
    assert!(run.stdout.contains("2,550"), "{}", run.stdout);
}

#[test]
fn the_walk_through_is_found_and_starts_with_init() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = walk_through(&readme);
    assert!(lines[0].starts_with("export DATABASE_URL="), "{lines:?}");
    assert!(lines[1].starts_with("sql2ddb init "), "{lines:?}");
}
