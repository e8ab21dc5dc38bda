//! The built binary as a person runs it: to completion ([`sql2ddb`]) or as a
//! child process that goes on while the test looks, interrupts or kills it
//! ([`Proc`]).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// Gives up on a condition that never comes (generous: nothing here measures speed).
pub const PATIENCE: Duration = Duration::from_secs(240);

/// Exit code of a job that failed for a reason of its own (rows not
/// written, a run that cannot be resumed as asked).
pub const EXIT_FAILED: i32 = 1;
/// EX_UNAVAILABLE: the source, DynamoDB or SQS cannot be reached, or refused.
pub const EX_UNAVAILABLE: i32 = 69;
/// EX_IOERR: a file or directory cannot be read or written.
pub const EX_IOERR: i32 = 74;
/// EX_TEMPFAIL: try again later (throttled past the retries, time up).
pub const EX_TEMPFAIL: i32 = 75;
/// EX_CONFIG: the mapping is invalid or does not fit, or the settings clash.
pub const EX_CONFIG: i32 = 78;

/// What the binary did.
pub struct Run {
    /// The exit code (-1 when killed by a signal).
    pub code: i32,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Run {
    /// The `--json` report.
    pub fn report(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// An entity's figures from the report.
    pub fn entity(&self, name: &str) -> serde_json::Value {
        self.report()["entities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no entity {name} in the report"))
            .clone()
    }
}

/// The environment variables through which the AWS SDK finds credentials
/// or an endpoint: a test that decides where a process's credentials come
/// from removes them all first.
pub const AWS_CREDENTIAL_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
];

/// The binary, to run in `dir` with `args`, with none of the variables that
/// would point it elsewhere than the test says; for tests that wait on it
/// without a runtime.
pub fn blocking_command(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sql2ddb"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("SHOP_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("SQL2DDB_SQS_ENDPOINT")
        .env_remove("SQL2DDB_PROGRESS_TABLE");
    cmd
}

/// [`blocking_command`] as a child of the test's runtime, killed if the
/// test drops it.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::from(blocking_command(dir, args));
    cmd.kill_on_drop(true);
    cmd
}

/// Runs the built binary in `dir` with `args` to its end.
pub async fn sql2ddb(dir: &Path, args: &[&str]) -> Run {
    let out = command(dir, args).output().await.unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A child process of the binary, its output collected as it comes.
pub struct Proc {
    /// The process.
    pub child: Child,
    /// Its stdout so far.
    pub stdout: Arc<Mutex<String>>,
    /// Its stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

fn collect(mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let into = text.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

impl Proc {
    /// Starts the binary in `dir` with `args`.
    pub fn spawn(dir: &Path, args: &[&str]) -> Proc {
        let mut child = command(dir, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = collect(child.stdout.take().unwrap());
        let stderr = collect(child.stderr.take().unwrap());
        Proc {
            child,
            stdout,
            stderr,
        }
    }

    /// The run id a `run` prints first (`run <id>`).
    pub async fn run_id(&self) -> sql2ddb_engine::RunId {
        let start = Instant::now();
        loop {
            let text = self.stderr.lock().unwrap().clone();
            // Whole lines only: a read may have brought half of the line,
            // `run ` without its id yet.
            let whole = text.rfind('\n').map_or("", |end| &text[..end]);
            if let Some(line) = whole.lines().find(|l| l.starts_with("run ")) {
                let id = line[4..].split(':').next().unwrap().trim();
                return id.parse().unwrap_or_else(|e| panic!("{e}"));
            }
            assert!(start.elapsed() < PATIENCE, "no run id printed:\n{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the end and returns what it did.
    pub async fn wait(mut self) -> Run {
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "process still running after {PATIENCE:?}:\n{}",
                    self.stderr.lock().unwrap()
                )
            })
            .unwrap();
        // The readers see the end of the pipes just after the exit.
        tokio::time::sleep(Duration::from_millis(100)).await;
        Run {
            code: status.code().unwrap_or(-1),
            stdout: self.stdout.lock().unwrap().clone(),
            stderr: self.stderr.lock().unwrap().clone(),
        }
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, as a scheduler stopping the process would.
    pub fn terminate(&self) {
        self.signal("-TERM");
    }

    /// SIGINT, as Ctrl-C would.
    pub fn interrupt(&self) {
        self.signal("-INT");
    }

    /// SIGKILL, as a crash would.
    pub async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// Waits for each process in turn.
pub async fn wait_all(procs: Vec<Proc>) -> Vec<Run> {
    let mut runs = Vec::new();
    for p in procs {
        runs.push(p.wait().await);
    }
    runs
}
