//! Records the commit the binary is built from, for `sql2ddb --version`.
//! From a tarball (no git, or not a repository) the commit is "unknown";
//! SQL2DDB_BUILD_COMMIT names it when the builder knows it another way.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SQL2DDB_BUILD_COMMIT");
    let commit = std::env::var("SQL2DDB_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SQL2DDB_COMMIT={}", commit.trim());
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn git_commit() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    // Build again when HEAD moves: HEAD itself (a checkout), the branch it
    // points at (a commit) and packed-refs (a gc). Paths as git reports them
    // work from a worktree, where `.git` is a file.
    for file in ["HEAD", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            rerun_if_changed(path);
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(path) = git(&["rev-parse", "--git-path", &branch]) {
            rerun_if_changed(path);
        }
    }
    Some(commit)
}

fn rerun_if_changed(path: String) {
    let path = PathBuf::from(path);
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
