//! moto's server (SQS, S3, SNS, SSM, Lambda on one port) as a child
//! process on a loopback port the system chooses, stopped when dropped.
//! `scripts/test.sh` installs moto; nothing is installed here.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::env_var;

/// How long moto may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `moto_server` of the test's own, or the external server the
/// environment names for one service.
pub struct Moto {
    /// `None` for an external server, which is not ours to stop.
    child: Option<Child>,
    url: String,
}

impl Moto {
    /// A moto server of the test's own, for any service it emulates.
    ///
    /// It binds a port the system chooses (`-p 0`) and says which on its
    /// log: a port picked free beforehand could be taken by another test's
    /// server in between, and this one would then answer through that one,
    /// which goes away when its own test ends.
    pub fn start() -> Moto {
        let mut child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run moto_server ({e}); scripts/test.sh installs it (pip install 'moto[server]')")
            });
        let stderr = child.stderr.take().expect("moto's log is piped");
        let (tx, rx) = mpsc::channel();
        // Reads the log to its end (every request is logged: a pipe left
        // full would stop the server), after sending the bound URL.
        std::thread::spawn(move || {
            let mut said = Vec::new();
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.is_none() {
                    continue;
                }
                match line.split("Running on ").nth(1) {
                    Some(url) => {
                        if let Some(tx) = tx.take() {
                            let _ = tx.send(Ok(url.trim().to_string()));
                        }
                    }
                    None => said.push(line),
                }
            }
            if let Some(tx) = tx {
                let _ = tx.send(Err(said.join("\n")));
            }
        });
        let mut server = Moto {
            child: Some(child),
            url: String::new(),
        };
        match rx.recv_timeout(START_TIMEOUT) {
            Ok(Ok(url)) => server.url = url,
            Ok(Err(log)) => panic!("moto_server exited before it listened:\n{log}"),
            Err(_) => panic!("moto_server did not listen within {START_TIMEOUT:?}"),
        }
        server
    }

    /// SQS: the server `SQL2DDB_TEST_SQS_URL` names if it is set (tests name
    /// their queues uniquely, so they can share it), else [`Moto::start`].
    pub fn sqs() -> Moto {
        Self::external("SQL2DDB_TEST_SQS_URL").unwrap_or_else(Moto::start)
    }

    /// S3: the server `SQL2DDB_TEST_S3_URL` names if it is set, else
    /// [`Moto::start`] (never the SQS server of `SQL2DDB_TEST_SQS_URL`,
    /// which may have no S3).
    pub fn s3() -> Moto {
        Self::external("SQL2DDB_TEST_S3_URL").unwrap_or_else(Moto::start)
    }

    fn external(var: &str) -> Option<Moto> {
        env_var(var).map(|url| Moto { child: None, url })
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
