//! The command line itself: a usage error has an exit code of its own (never
//! 2, which means "finished with rejects"), numeric options are checked
//! against their documented ranges before anything runs, and `RUST_LOG`
//! turns logging on as it does for other Rust tools.

use std::process::{Command, Output};

use sql2ddb_mapping::{MAX_CONCURRENCY, MAX_READ_PARALLELISM, MAX_WCU};

use crate::common::{
    blocking_command, root, AWS_CREDENTIAL_VARS, EXIT_FAILED, EX_CONFIG, EX_IOERR, EX_UNAVAILABLE,
};

/// EX_USAGE: what the binary exits with when its command line is wrong.
const USAGE: i32 = 64;

/// Runs the binary from the workspace root with neither log variable set,
/// then `env` on top.
fn sql2ddb(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = blocking_command(&root(), args);
    cmd.env_remove("SQL2DDB_LOG").env_remove("RUST_LOG");
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
    // which this run points at a file that does not exist (EX_IOERR, not 64).
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
    assert_eq!(out.status.code(), Some(EX_IOERR), "{}", stderr(&out));
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

#[test]
fn completions_and_man_pages_come_from_the_commands() {
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = sql2ddb(&["completions", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for word in ["sql2ddb", "verify", "--progress-table"] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    let out = sql2ddb(&["completions", "tcsh"], &[]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));

    // `sql2ddb completions bash | head -1`: the reader is gone before the
    // script is written. That ends quietly, as it does for `man`.
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut cmd = blocking_command(&root(), args);
        let out = cmd.stdout(writer).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }

    let page = stdout(&sql2ddb(&["man"], &[]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH sql2ddb 1"),
        "{page}"
    );
    assert!(page.contains("verify"), "the page lists the commands");

    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let out = sql2ddb(&["man", "--dir", pages.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for name in [
        "sql2ddb",
        "sql2ddb-run",
        "sql2ddb-verify",
        "sql2ddb-queue-create",
    ] {
        let text = std::fs::read_to_string(pages.join(format!("{name}.1")))
            .unwrap_or_else(|e| panic!("{name}.1: {e}"));
        assert!(text.contains(&format!(".TH {name} 1")), "{name}: {text}");
    }
    let run = std::fs::read_to_string(pages.join("sql2ddb-run.1")).unwrap();
    assert!(run.contains("progress\\-table"), "run's options: {run}");

    // A directory that cannot be made, under a regular file: EX_IOERR.
    let under = pages.join("sql2ddb.1").join("man1");
    let out = sql2ddb(&["man", "--dir", under.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(EX_IOERR), "{}", stderr(&out));
    assert!(stderr(&out).contains("man1"), "{}", stderr(&out));
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = sql2ddb(&["--version"], &[]);
    let text = stdout(&out);
    let version = env!("CARGO_PKG_VERSION");
    let commit = text
        .trim()
        .strip_prefix(&format!("sql2ddb {version} (commit "))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{text}"));
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) => assert_eq!(commit, head, "{text}"),
        None => assert_eq!(commit, "unknown", "{text}"),
    }
}

#[test]
fn a_table_name_init_cannot_use_is_a_usage_error() {
    let args = [
        "init",
        "--source",
        "sqlite://examples/shop.db",
        "--single-table",
    ];
    let out = sql2ddb(&[&args[..], &["my table"]].concat(), &[]);
    assert_eq!(out.status.code(), Some(USAGE), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("not a DynamoDB table name"), "{err}");
    assert!(err.contains("\"my-table\""), "a name that works: {err}");
    assert!(stdout(&out).is_empty(), "no mapping printed");

    let out = sql2ddb(&[&args[..], &["my-table"]].concat(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("table = \"my-table\""),
        "{}",
        stdout(&out)
    );
}

#[test]
fn check_needs_no_environment_and_goes_on_to_other_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = |entity_pk: &str| {
        let path = dir.path().join(format!("m{}.toml", entity_pk.len()));
        std::fs::write(
            &path,
            format!(
                "version = 1\n[source]\nurl = \"${{SQL2DDB_TEST_NEVER_SET}}\"\n[target]\n\
                 table = \"shop\"\npk = {{ name = \"PK\", type = \"S\" }}\n\
                 [[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"{entity_pk}\"\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let note = "environment variable SQL2DDB_TEST_NEVER_SET is not set";

    let out = sql2ddb(&["check", &mapping("ORDER#{id}")], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains(": ok"), "{}", stdout(&out));
    assert!(stderr(&out).contains(note), "{}", stderr(&out));
    assert!(stderr(&out).contains(":3:8:"), "where: {}", stderr(&out));

    // An error further down is found, and the variable still noted.
    let out = sql2ddb(&["check", &mapping("ORDER#{id")], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(":10:"), "the template's line: {err}");
    assert!(err.contains(note), "{err}");

    // A default is a default, not an unset variable.
    let path = dir.path().join("default.toml");
    let text = std::fs::read_to_string(mapping("ORDER#{id}"))
        .unwrap()
        .replace("NEVER_SET}", "NEVER_SET:-sqlite://examples/shop.db}");
    std::fs::write(&path, text).unwrap();
    let out = sql2ddb(&["check", path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not set"), "{}", stderr(&out));
}

#[test]
fn a_raw_delimiter_in_a_url_password_is_named_with_its_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().display().to_string();
    for (password, encoded) in [("sEcr3t?x", "%3F"), ("sEcr3t#x", "%23")] {
        let url = format!("postgres://root:{password}@127.0.0.1:5432/test");
        let out = sql2ddb(
            &[
                "run",
                "mappings/shop.toml",
                "--dry-run",
                "--quiet",
                "--source",
                &url,
                "--runs-dir",
                &runs,
            ],
            &[],
        );
        assert_eq!(out.status.code(), Some(EX_CONFIG), "{}", stderr(&out));
        let err = stderr(&out);
        let raw = &password[6..7];
        assert!(
            err.contains(&format!("raw `{raw}`")) && err.contains("percent-encode"),
            "{err}"
        );
        assert!(err.contains(encoded), "{err}");
        assert!(!err.contains("sEcr3t") && !stdout(&out).contains("sEcr3t"));
    }
}

#[test]
fn export_into_a_directory_whose_data_is_a_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::write(out_dir.join("data"), "not a folder").unwrap();
    let runs = dir.path().join("runs");
    let out = sql2ddb(
        &[
            "export",
            "mappings/shop.toml",
            "--out",
            out_dir.to_str().unwrap(),
            "--runs-dir",
            runs.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(EX_CONFIG), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("is a file, not a directory"), "{err}");
    assert!(err.contains("another directory"), "what to do: {err}");
    assert!(!err.contains("os error"), "{err}");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("data")).unwrap(),
        "not a folder",
        "the file is left alone"
    );
}

#[test]
// Long on purpose: two runs of the demo, then what verify says of each.
fn the_report_is_on_stdout_and_verify_reads_a_local_run() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().display().to_string();
    let base = ["--runs-dir", runs.as_str(), "--quiet"];

    // Without --json the report is on stdout (`> report.txt` keeps it).
    let plain = sql2ddb(&[&["run", "mappings/shop.toml"][..], &base].concat(), &[]);
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let text = stdout(&plain);
    assert!(
        text.contains("total") && text.contains("report: "),
        "{text}"
    );
    assert!(!stderr(&plain).contains("report: "), "{}", stderr(&plain));
    let untracked = text
        .lines()
        .find_map(|l| l.strip_prefix("run ")?.split_whitespace().next())
        .unwrap()
        .to_string();

    // With --json stdout is the JSON alone; nothing rejected, no rejects file.
    let progress = "shop-progress";
    let json = sql2ddb(
        &[
            &[
                "run",
                "mappings/shop.toml",
                "--json",
                "--progress-table",
                progress,
            ][..],
            &base,
        ]
        .concat(),
        &[],
    );
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert!(
        report["rejects_file"].is_null(),
        "{}",
        report["rejects_file"]
    );
    assert!(stderr(&json).contains("report: "), "{}", stderr(&json));
    let tracked = report["run_id"].as_str().unwrap();

    // `--endpoint local` reads the data the run left in its directory.
    let verify = |run: &str, more: &[&str]| {
        let args = [
            &["verify", "mappings/shop.toml", "--run", run][..],
            &["--endpoint", "local", "--runs-dir", runs.as_str()],
            more,
        ]
        .concat();
        sql2ddb(&args, &[])
    };
    let ok = verify(tracked, &["--progress-table", progress]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // The verdict is the report: on stdout, not among the logs.
    assert!(stdout(&ok).contains("verified: every row is written"));
    assert!(!stderr(&ok).contains("verified"), "{}", stderr(&ok));

    // A run without a progress table: said in words, with what to do.
    let none = verify(&untracked, &[]);
    assert_eq!(none.status.code(), Some(EX_CONFIG), "{}", stderr(&none));
    let err = stderr(&none);
    assert!(
        err.contains("does not exist") && err.contains("--progress-table"),
        "{err}"
    );
    assert!(err.contains("--deep"), "the other way to verify: {err}");
    assert!(!err.contains("ResourceNotFoundException"), "{err}");
    assert!(!err.contains("give --endpoint"), "{err}");

    // No such run in the runs directory: its `local` data is not there.
    let unknown = verify("no-such-run", &[]);
    assert_eq!(
        unknown.status.code(),
        Some(EX_CONFIG),
        "{}",
        stderr(&unknown)
    );
    assert!(
        stderr(&unknown).contains("no-such-run"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
// One scenario per kind, in turn: the table of kind → code, through the binary.
fn the_exit_code_says_the_kind_of_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let runs = runs.to_str().unwrap();
    let run = |mapping: &str, more: &[&str]| {
        let args = [&["run", mapping, "--quiet", "--runs-dir", runs][..], more].concat();
        sql2ddb(&args, &[])
    };
    let expect = |out: &Output, code: i32, says: &str| {
        let err = stderr(out);
        assert_eq!(out.status.code(), Some(code), "{says}:\n{err}");
        assert!(err.contains(says), "{says}:\n{err}");
    };
    let shop = "mappings/shop.toml";

    // A mapping that is not valid: EX_CONFIG, and nothing is read.
    let text = std::fs::read_to_string(root().join(shop)).unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        text.replace("CUSTOMER#{customer_id}", "CUSTOMER#{customer_id"),
    )
    .unwrap();
    let out = run(bad.to_str().unwrap(), &[]);
    expect(&out, EX_CONFIG, "bad.toml:");

    // A query the source refuses as written (a misspelt FROM): EX_CONFIG
    // too, naming the entity; retrying would not help.
    let product = "name = \"product\"\nfrom = \"products\"\n";
    assert!(text.contains(product), "the shop's product entity moved");
    let query = dir.path().join("query.toml");
    std::fs::write(
        &query,
        text.replace(
            product,
            "name = \"product\"\nquery = \"SELECT * FORM products\"\nkey = [\"sku\"]\n",
        ),
    )
    .unwrap();
    let out = run(query.to_str().unwrap(), &[]);
    expect(&out, EX_CONFIG, "entity product");
    assert!(stderr(&out).contains("syntax error"), "{}", stderr(&out));

    // A source that cannot be reached (nothing listens on port 1): EX_UNAVAILABLE.
    let source = ["--source", "postgres://root@127.0.0.1:1/test"];
    expect(&run(shop, &source), EX_UNAVAILABLE, "cannot connect to");

    // A DynamoDB endpoint that cannot be reached: EX_UNAVAILABLE as well.
    let endpoint = ["--endpoint", "http://127.0.0.1:1"];
    expect(
        &run(shop, &endpoint),
        EX_UNAVAILABLE,
        "DescribeTable on shop failed",
    );

    // A runs directory that cannot be made, under a regular file: EX_IOERR.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let under = file.join("runs");
    let out = sql2ddb(
        &[
            "run",
            shop,
            "--quiet",
            "--runs-dir",
            under.to_str().unwrap(),
        ],
        &[],
    );
    expect(&out, EX_IOERR, &under.display().to_string());

    // A run that cannot be resumed as asked, a failure of the job itself: 1.
    let out = run(shop, &["--resume", "no-such-run"]);
    expect(&out, EXIT_FAILED, "run no-such-run cannot be resumed");
}

#[test]
fn check_knows_update_job_files() {
    // The bundled job: valid, and said to be a job, with what it does.
    let out = sql2ddb(&["check", "examples/cancel-stale-orders.toml"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ok (update job \"cancel-stale-orders\")"),
        "{text}"
    );
    assert!(text.contains("update: SET #st = :cancelled"), "{text}");
    // A job with an error is named by file, line and column, exit 1.
    let dir = tempfile::tempdir().unwrap();
    let job = std::fs::read_to_string(root().join("examples/cancel-stale-orders.toml"))
        .unwrap()
        .replace("set = ", "sett = ");
    assert!(job.contains("sett = "), "the example changed: {job}");
    let path = dir.path().join("job.toml");
    std::fs::write(&path, job).unwrap();
    let out = sql2ddb(&["check", path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("job.toml:") && err.contains("sett"), "{err}");
}

#[test]
fn no_aws_credentials_is_said_in_one_line_before_the_source_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // A table on AWS itself (a region, no endpoint), a source nobody
    // listens on: the credentials are asked first.
    let mapping = dir.path().join("m.toml");
    std::fs::write(
        &mapping,
        "version = 1\n[source]\nurl = \"postgres://root@127.0.0.1:1/test\"\n[target]\ntable = \"orders\"\nregion = \"eu-west-1\"\npk = { name = \"PK\", type = \"S\" }\n[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A#{id}\"\n",
    )
    .unwrap();
    let mut cmd = blocking_command(dir.path(), &["run", mapping.to_str().unwrap()]);
    for var in AWS_CREDENTIAL_VARS {
        cmd.env_remove(var);
    }
    let none = dir.path().join("no-such-file");
    cmd.env("HOME", dir.path())
        .env("AWS_CONFIG_FILE", &none)
        .env("AWS_SHARED_CREDENTIALS_FILE", &none)
        .env("AWS_EC2_METADATA_DISABLED", "true");
    let out = cmd.output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(78), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(line.contains("no AWS credentials found"), "{err}");
    assert!(line.contains("--endpoint"), "{err}");
    assert!(
        !err.contains("127.0.0.1:1"),
        "the source is not read first: {err}"
    );
}
