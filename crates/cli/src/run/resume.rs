//! How a run that ended before its end goes on: the `sql2ddb run` command
//! to paste (resume from its checkpoints, or run again), with every option
//! that decides where it reads and writes and no secret, its words quoted
//! as the shell reads them back.

use sql2ddb_core::redact_secrets;
use sql2ddb_engine::{RunReport, RunStatus};

use std::path::Path;

use super::{RunArgs, DEFAULT_SHUTDOWN_GRACE};
use crate::load_choice::SnapshotArg;
use crate::run_ref::DEFAULT_RUNS_DIR;

/// What to run to go on with a run that ended before its end: interrupted,
/// throttled past its retry budget, or failed on an error once it was
/// reading.
pub(crate) fn how_to_continue(args: &RunArgs, report: &RunReport) -> Option<String> {
    let throttled;
    let (state, fixed) = match report.status {
        RunStatus::Interrupted => ("interrupted", ""),
        RunStatus::Throttled => {
            throttled = format!(
                "throttled: table {} kept refusing writes past the retry budget; no row is at fault. {} row(s) read are not written yet (pending)",
                report.table,
                crate::table::thousands(report.totals.pending)
            );
            (
                throttled.as_str(),
                "later (or with more capacity, or a larger --retry-budget), ",
            )
        }
        RunStatus::Failed if report.error.is_some() && report.totals.pages > 0 => {
            ("failed", "once the cause is fixed, ")
        }
        _ => return None,
    };
    let resume = report.progress_table.is_some();
    let (command, note) = continue_command(args, report, resume);
    Some(match resume {
        true => format!("{state}: {fixed}continue where it stopped with\n  {command}{note}"),
        false => format!(
            "{state}: this run kept no progress table, so it cannot be resumed; {fixed}running it again\n  {command}{note}\nrewrites the same items with the same values (nothing is duplicated). To make the next run resumable, pass --progress-table."
        ),
    })
}

/// The `sql2ddb run` command that goes on with this run (`resume`: from its
/// checkpoints; else from the start), with every option that decides where
/// it reads and writes — source, endpoint, region, runs directory, progress
/// table, queue — and those that set its pace, so that pasted as printed it
/// does what this one did. Secrets are not printed: a URL's password is
/// masked, and the note (a line of its own, or empty) says to put it back.
fn continue_command(args: &RunArgs, report: &RunReport, resume: bool) -> (String, String) {
    let mut command = Words {
        words: vec![
            "sql2ddb".to_string(),
            "run".to_string(),
            shell_word(&args.mapping.display().to_string()),
        ],
        masked: Vec::new(),
    };
    where_options(&mut command, args, report, resume);
    pace_options(&mut command, args);
    if args.dry_run && !resume {
        command.flag("--dry-run");
    }
    let note = match command.masked.is_empty() {
        true => String::new(),
        false => format!(
            "\n(passwords are not printed: put them back in {} where it shows ***)",
            command.masked.join(", ")
        ),
    };
    (command.words.join(" "), note)
}

/// A command line being written, and the options whose passwords it masked.
struct Words {
    words: Vec<String>,
    masked: Vec<&'static str>,
}

impl Words {
    /// `name value`, the value quoted for the shell.
    fn option(&mut self, name: &str, value: &str) {
        self.words.push(name.to_string());
        self.words.push(shell_word(value));
    }

    /// `name url`, the URL's password masked.
    fn url(&mut self, name: &'static str, value: &str) {
        let shown = redact_secrets(value);
        if shown != value {
            self.masked.push(name);
        }
        self.option(name, &shown);
    }

    /// A flag, or an option whose value needs no quoting.
    fn flag(&mut self, word: &str) {
        self.words.push(word.to_string());
    }
}

/// The options that decide what the run reads and where it writes.
fn where_options(command: &mut Words, args: &RunArgs, report: &RunReport, resume: bool) {
    if resume {
        command.option("--resume", &report.run_id);
        if let Some(table) = &report.progress_table {
            command.option("--progress-table", table);
        }
    }
    if let Some(source) = &args.source {
        command.url("--source", source);
    }
    if let Some(endpoint) = &args.endpoint {
        command.url("--endpoint", endpoint);
    }
    if let Some(region) = &args.region {
        command.option("--region", region);
    }
    if args.runs_dir != Path::new(DEFAULT_RUNS_DIR) {
        command.option("--runs-dir", &args.runs_dir.display().to_string());
    }
    if let Some(queue) = report.queue.as_ref().or(args.distributed.queue.as_ref()) {
        command.url("--queue", queue);
    }
    if let Some(sqs) = &args.distributed.sqs_endpoint {
        command.url("--sqs-endpoint", sqs);
    }
    if !resume {
        match &args.only_rejects {
            Some(file) => command.option("--only-rejects", &file.display().to_string()),
            // The table holds this run's items now: a run again writes over them.
            None if !args.dry_run => command.option("--if-not-empty", "append"),
            None => {}
        }
    }
}

/// The options that set the run's pace and how it reads, when not the
/// defaults.
fn pace_options(command: &mut Words, args: &RunArgs) {
    let numbers = [
        ("--max-queued", args.distributed.max_queued),
        ("--concurrency", args.concurrency.map(|c| c as u64)),
        ("--max-wcu", args.max_wcu),
        ("--page-size", args.page_size.map(|p| p as u64)),
        ("--read-parallelism", args.read_parallelism.map(u64::from)),
        (
            "--source-connections",
            Some(u64::from(args.source_connections))
                .filter(|c| *c != u64::from(sql2ddb_engine::run::DEFAULT_SOURCE_CONNECTIONS)),
        ),
        (
            "--shutdown-grace",
            Some(args.shutdown_grace).filter(|g| *g != DEFAULT_SHUTDOWN_GRACE),
        ),
    ];
    for (name, value) in numbers {
        if let Some(v) = value {
            command.option(name, &v.to_string());
        }
    }
    if args.fixed_concurrency {
        command.flag("--fixed-concurrency");
    }
    if let Some(budget) = args.budget.retry_budget {
        command.flag("--retry-budget");
        command.flag(&sql2ddb_core::duration_text(budget));
    }
    if matches!(args.snapshot, SnapshotArg::None) {
        command.flag("--snapshot");
        command.flag("none");
    }
}

/// `word` as a POSIX shell reads it back: as is when it holds nothing the
/// shell would interpret, else quoted (shlex's quoting; a word with a NUL,
/// which no argument can hold, in single quotes).
pub(crate) fn shell_word(word: &str) -> String {
    match shlex::try_quote(word) {
        Ok(quoted) => quoted.into_owned(),
        Err(_) => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sql2ddb_engine::{EntityReport, SnapshotReport, WriterReport};

    use super::*;

    fn args(line: &[&str]) -> RunArgs {
        let mut argv = vec!["sql2ddb", "run", "m.toml"];
        argv.extend_from_slice(line);
        match crate::Cli::try_parse_from(argv).expect("parses").command {
            crate::Command::Run(args) => args,
            _ => unreachable!("a run"),
        }
    }

    fn report(status: RunStatus, progress_table: Option<&str>, pages: u64) -> RunReport {
        RunReport {
            run_id: sql2ddb_engine::RunId::parse("R1").unwrap(),
            mapping: "shop.toml".into(),
            status,
            source: String::new(),
            table: "t".into(),
            endpoint: String::new(),
            local_data_file: None,
            table_created: false,
            queue: None,
            progress_table: progress_table.map(str::to_string),
            run_dir: String::new(),
            rejects_file: None,
            entities: Vec::new(),
            totals: EntityReport {
                pages,
                ..EntityReport::default()
            },
            writer: WriterReport::default(),
            pointers: Vec::new(),
            rejects_by_reason: Vec::new(),
            timeline: Default::default(),
            warnings: Vec::new(),
            table_emptied: None,
            error: (status == RunStatus::Failed).then(|| "DynamoDB: gone".to_string()),
            cause: None,
            snapshot: SnapshotReport::default(),
        }
    }

    #[test]
    fn the_resume_command_keeps_where_the_run_reads_and_writes_and_no_password() {
        let args = args(&[
            "--source",
            "postgres://app:s3cret@db.internal/shop",
            "--endpoint",
            "http://127.0.0.1:8000",
            "--region",
            "eu-west-1",
            "--runs-dir",
            "my runs",
            "--progress-table",
            "p",
            "--queue",
            "https://sqs.eu-west-1.amazonaws.com/1/q",
            "--sqs-endpoint",
            "http://127.0.0.1:4566",
            "--max-wcu",
            "100",
            "--snapshot",
            "none",
            "--fixed-concurrency",
            "--shutdown-grace",
            "5",
            "--json",
        ]);
        let hint = how_to_continue(&args, &report(RunStatus::Interrupted, Some("p"), 3))
            .expect("an interrupted run says how to continue");
        assert!(!hint.contains("s3cret"), "{hint}");
        for part in [
            "sql2ddb run m.toml --resume R1 --progress-table p",
            "--source 'postgres://app:***@db.internal/shop'",
            "--endpoint http://127.0.0.1:8000",
            "--region eu-west-1",
            "--runs-dir 'my runs'",
            "--queue https://sqs.eu-west-1.amazonaws.com/1/q",
            "--sqs-endpoint http://127.0.0.1:4566",
            "--max-wcu 100",
            "--shutdown-grace 5",
            "--fixed-concurrency",
            "--snapshot none",
            "put them back in --source",
        ] {
            assert!(hint.contains(part), "{part}:\n{hint}");
        }
        assert!(!hint.contains("--json"), "{hint}");
    }

    #[test]
    fn a_run_failed_while_writing_says_how_to_continue_and_one_that_never_read_does_not() {
        let args = args(&["--endpoint", "http://127.0.0.1:8000"]);
        let failed = how_to_continue(&args, &report(RunStatus::Failed, Some("p"), 3))
            .expect("a run that failed while writing can be continued");
        assert!(
            failed.contains("once the cause is fixed")
                && failed
                    .contains("--resume R1 --progress-table p --endpoint http://127.0.0.1:8000"),
            "{failed}"
        );
        let untracked = how_to_continue(&args, &report(RunStatus::Failed, None, 3)).unwrap();
        assert!(
            untracked.contains("cannot be resumed")
                && untracked.contains("sql2ddb run m.toml --endpoint http://127.0.0.1:8000"),
            "{untracked}"
        );
        assert_eq!(
            how_to_continue(&args, &report(RunStatus::Failed, Some("p"), 0)),
            None
        );
        assert_eq!(
            how_to_continue(&args, &report(RunStatus::Ok, Some("p"), 3)),
            None
        );
    }

    #[test]
    fn a_throttled_run_says_no_row_is_at_fault_and_resumes_with_its_budget() {
        let args = args(&["--progress-table", "p", "--retry-budget", "90s"]);
        let mut r = report(RunStatus::Throttled, Some("p"), 3);
        r.totals.pending = 1200;
        let hint = how_to_continue(&args, &r).expect("a throttled run can be continued");
        for part in [
            "throttled: table t kept refusing writes past the retry budget",
            "no row is at fault",
            "1,200 row(s) read are not written yet (pending)",
            "sql2ddb run m.toml --resume R1 --progress-table p",
            "--retry-budget 1m30s",
        ] {
            assert!(hint.contains(part), "{part}:\n{hint}");
        }
        assert_eq!(crate::failure::run_status_code(RunStatus::Throttled), 75);
    }

    #[test]
    fn words_are_quoted_only_when_the_shell_would_read_them_otherwise() {
        assert_eq!(shell_word("runs/2024-05"), "runs/2024-05");
        for word in [
            "my runs",
            "it's",
            "$HOME",
            "",
            "a\"b\\c",
            "x;rm -rf /",
            "`cmd`",
        ] {
            let quoted = shell_word(word);
            assert_ne!(quoted, word, "{word:?} must be quoted");
            // The shell reads the quoted word back as the word itself.
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![word.to_string()]),
                "{quoted}"
            );
        }
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {}", shell_word("it's $HOME `x`"))])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's $HOME `x`");
    }
}
