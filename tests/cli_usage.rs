//! The command line itself: a usage error has an exit code of its own (never
//! 2, which means "finished with rejects"), numeric options are checked
//! against their documented ranges before anything runs, and `RUST_LOG`
//! turns logging on as it does for other Rust tools.

use std::process::{Command, Output};

use sql2ddb_mapping::{MAX_CONCURRENCY, MAX_READ_PARALLELISM, MAX_WCU};

use crate::common::root;

/// EX_USAGE: what the binary exits with when its command line is wrong.
const USAGE: i32 = 64;

/// Runs the binary from the workspace root with neither log variable set,
/// then `env` on top.
fn sql2ddb(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sql2ddb"));
    cmd.args(args)
        .current_dir(root())
        .env_remove("SQL2DDB_LOG")
        .env_remove("RUST_LOG")
        .env_remove("SHOP_DATABASE_URL")
        .env_remove("SQL2DDB_SQS_ENDPOINT")
        .env_remove("SQL2DDB_PROGRESS_TABLE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nothing_lost_11_usage_error_has_its_own_exit_code() {
    // A mapping that exists and is valid, so only the command line is wrong.
    let mapping = "mappings/shop.toml";
    let wrong: [&[&str]; 7] = [
        &["run", mapping, "--bogus-flag"],
        &["--bogus-flag"],
        &["run", mapping, "--max-wcu", "0"],
        &["run"],
        &["worker", mapping],
        &["no-such-command"],
        &[],
    ];
    for args in wrong {
        let out = sql2ddb(args, &[]);
        assert_eq!(
            out.status.code(),
            Some(USAGE),
            "{args:?} is a usage error, not a finished run:\n{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("error"), "{args:?}: {}", stderr(&out));
    }

    let asked: [&[&str]; 5] = [
        &["--help"],
        &["run", "--help"],
        &["worker", "-h"],
        &["help", "verify"],
        &["--version"],
    ];
    for args in asked {
        let out = sql2ddb(args, &[]);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!stdout(&out).is_empty(), "{args:?} prints on stdout");
    }

    // The code is documented where people look for it.
    let help = stdout(&sql2ddb(&["run", "--help"], &[]));
    assert!(help.contains("64  usage error"), "{help}");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.contains("| 64 | usage error"),
        "README.md exit codes"
    );
}

/// One option at one value: the command must stop as a usage error that
/// names the option and the range.
fn assert_refused(args: &[&str], option: &str, range: &str) {
    let out = sql2ddb(args, &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(USAGE), "{args:?} accepted:\n{err}");
    assert!(
        err.contains(option),
        "{args:?}: the error names {option}: {err}"
    );
    assert!(
        err.contains(range),
        "{args:?}: the error gives {range}: {err}"
    );
}

#[test]
// Long on purpose: a table of options and bounds, checked in turn.
fn nothing_lost_12_numeric_options_validated_against_ranges() {
    let mapping = "mappings/shop.toml";
    let queue = "http://127.0.0.1:9/queue/never-used";
    let over = |max: u64| (max + 1).to_string();
    let bounded: [(&str, u64); 3] = [
        ("--concurrency", MAX_CONCURRENCY as u64),
        ("--read-parallelism", u64::from(MAX_READ_PARALLELISM)),
        ("--max-wcu", MAX_WCU),
    ];
    for (option, max) in bounded {
        let range = format!("1..={max}");
        for value in ["0".to_string(), over(max)] {
            assert_refused(&["run", mapping, option, &value], option, &range);
        }
    }
    for option in ["--page-size", "--source-connections"] {
        assert_refused(&["run", mapping, option, "0"], option, "at least 1");
    }
    assert_refused(
        &["run", mapping, "--queue", queue, "--max-queued", "0"],
        "--max-queued",
        "at least 1",
    );

    // The worker takes the same writer options, checked the same way.
    let worker = ["worker", mapping, "--queue", queue];
    for (option, max) in [
        ("--concurrency", MAX_CONCURRENCY as u64),
        ("--max-wcu", MAX_WCU),
        ("--poll", 20),
    ] {
        let range = format!("1..={max}");
        for value in ["0".to_string(), over(max)] {
            let args: Vec<&str> = worker.iter().copied().chain([option, &value]).collect();
            assert_refused(&args, option, &range);
        }
    }

    for command in ["status", "verify"] {
        for option in ["--interval", "--timeout"] {
            assert_refused(
                &[command, mapping, "--run", "r", "--watch", option, "0"],
                option,
                "at least 1",
            );
        }
    }
    for (option, max) in [
        ("--visibility-timeout", 43_200u64),
        ("--max-receive-count", 1_000),
    ] {
        let range = format!("1..={max}");
        for value in ["0".to_string(), over(max)] {
            assert_refused(&["queue", "create", "q", option, &value], option, &range);
        }
    }

    // The bounds themselves are accepted: the check stops at the mapping,
    // which this run points at a file that does not exist (exit 1, not 64).
    let max_concurrency = MAX_CONCURRENCY.to_string();
    let max_parallelism = MAX_READ_PARALLELISM.to_string();
    let out = sql2ddb(
        &[
            "run",
            "no-such-mapping.toml",
            "--concurrency",
            &max_concurrency,
            "--read-parallelism",
            &max_parallelism,
            "--max-wcu",
            "1",
            "--page-size",
            "1",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no-such-mapping.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn nothing_lost_13_rust_log_is_honoured() {
    let check = ["check", "mappings/shop.toml"];
    let line = "mapping checked";

    let quiet = sql2ddb(&check, &[]);
    assert_eq!(quiet.status.code(), Some(0), "{}", stderr(&quiet));
    assert!(!stderr(&quiet).contains("DEBUG"), "{}", stderr(&quiet));

    let debug = sql2ddb(&check, &[("RUST_LOG", "debug")]);
    assert_eq!(debug.status.code(), Some(0), "{}", stderr(&debug));
    let err = stderr(&debug);
    assert!(
        err.lines().any(|l| l.contains("DEBUG") && l.contains(line)),
        "RUST_LOG=debug shows debug lines on stderr:\n{err}"
    );
    assert!(!stdout(&debug).contains("DEBUG"), "logs stay off stdout");

    // SQL2DDB_LOG works alone, and wins when both are set.
    let own = sql2ddb(&check, &[("SQL2DDB_LOG", "debug")]);
    assert!(stderr(&own).contains(line), "{}", stderr(&own));
    let both = sql2ddb(&check, &[("SQL2DDB_LOG", "warn"), ("RUST_LOG", "debug")]);
    assert!(!stderr(&both).contains("DEBUG"), "{}", stderr(&both));

    // A filter that does not parse is reported, not ignored in silence.
    let bad = sql2ddb(&check, &[("RUST_LOG", "==bad")]);
    assert!(
        stderr(&bad).contains("RUST_LOG") && stderr(&bad).contains("not a log filter"),
        "{}",
        stderr(&bad)
    );

    // At run start: where it reads and writes, the password redacted.
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().display().to_string();
    let secret = "pw-never-printed";
    let source = format!("postgres://root:{secret}@127.0.0.1:5432/test");
    let run = sql2ddb(
        &[
            "run",
            "mappings/shop.toml",
            "--dry-run",
            "--quiet",
            "--source",
            &source,
            "--runs-dir",
            &runs,
        ],
        &[("RUST_LOG", "sql2ddb=debug")],
    );
    let err = stderr(&run);
    let start = err
        .lines()
        .find(|l| l.contains("DEBUG") && l.contains("starting run"))
        .unwrap_or_else(|| panic!("no run-start debug line:\n{err}"));
    assert!(
        start.contains("postgres://root:***@127.0.0.1:5432/test"),
        "{start}"
    );
    assert!(start.contains("endpoint=local"), "{start}");
    assert!(!err.contains(secret) && !stdout(&run).contains(secret));
}
