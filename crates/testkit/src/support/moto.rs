//! moto's server (SQS, S3, SNS, SSM, Lambda on one port) as a child process
//! on a free loopback port, stopped when dropped. `scripts/test.sh` installs
//! moto; nothing is installed here.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::env_var;

/// How long moto may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How many free ports are tried (another test may take a port between
/// the moment it is found free and the moment moto binds it).
const PORT_ATTEMPTS: usize = 5;

/// A running `moto_server` of the test's own, or the external server the
/// environment names for one service.
pub struct Moto {
    /// `None` for an external server, which is not ours to stop.
    child: Option<Child>,
    url: String,
}

impl Moto {
    /// A moto server of the test's own, for any service it emulates.
    pub fn start() -> Moto {
        for _ in 0..PORT_ATTEMPTS {
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
            let mut server = Moto {
                child: Some(child),
                url: format!("http://127.0.0.1:{port}"),
            };
            if server.wait_ready(port) {
                return server;
            }
        }
        panic!("moto_server did not start on any of {PORT_ATTEMPTS} ports");
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

    /// Whether moto answers on `port`; `false` if it exited (the port was
    /// taken); panics if it neither answers nor exits in time.
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

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
