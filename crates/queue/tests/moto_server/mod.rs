//! moto's SQS server as a child process on a free loopback port, one per test,
//! stopped when dropped. `scripts/test.sh` installs moto; nothing is
//! installed here.
#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long moto may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `moto_server`.
pub struct MotoServer {
    child: Child,
    url: String,
}

impl MotoServer {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> MotoServer {
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
                child,
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
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
