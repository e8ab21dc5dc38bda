//! moto's SQS server as a child process on a free loopback port, one per test,
//! stopped when dropped. `scripts/test.sh` installs moto; nothing is
//! installed here. With `SQL2DDB_TEST_SQS_URL` set, that SQS-compatible
//! server is used instead and nothing is started (tests name their queues
//! uniquely, so they can share it).
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long moto may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `moto_server`, or the external server the environment names.
pub struct MotoServer {
    /// `None` for an external server, which is not ours to stop.
    child: Option<Child>,
    url: String,
}

impl MotoServer {
    /// Uses `SQL2DDB_TEST_SQS_URL` if it is set, else starts a server and
    /// waits until it accepts connections.
    pub fn start() -> MotoServer {
        if let Ok(url) = std::env::var("SQL2DDB_TEST_SQS_URL") {
            if !url.trim().is_empty() {
                return MotoServer {
                    child: None,
                    url: url.trim().to_string(),
                };
            }
        }
        // A port freed just now can be taken by another test before moto binds
        // it; moto then exits, and another port is tried.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            let child = Command::new("moto_server")
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot run moto_server ({e}); scripts/test.sh installs it (pip install 'moto[server]')")
                });
            let mut server = MotoServer {
                child: Some(child),
                url: format!("http://127.0.0.1:{port}"),
            };
            if server.wait_ready(port) {
                return server;
            }
        }
        panic!("moto_server did not start on any of 5 ports");
    }

    fn wait_ready(&mut self, port: u16) -> bool {
        let start = Instant::now();
        while start.elapsed() < START_TIMEOUT {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("moto_server did not answer on port {port} within {START_TIMEOUT:?}");
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An S3-compatible server: moto's (started, stopped when dropped), unless
/// `SQL2DDB_TEST_SQS_URL` names another SQS server, which may lack S3: then
/// `SQL2DDB_TEST_S3_URL` (nothing to stop), or `None` when that is unset.
pub fn s3_server() -> Option<(Option<MotoServer>, String)> {
    let sqs = std::env::var("SQL2DDB_TEST_SQS_URL").unwrap_or_default();
    if sqs.trim().is_empty() {
        let moto = MotoServer::start();
        let url = moto.url().to_string();
        return Some((Some(moto), url));
    }
    match std::env::var("SQL2DDB_TEST_S3_URL") {
        Ok(url) if !url.trim().is_empty() => Some((None, url.trim().to_string())),
        _ => None,
    }
}
