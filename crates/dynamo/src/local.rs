//! `endpoint = "local"`: an embedded DynamoDB-compatible server (dynoxide) in
//! this process, on a loopback port, with its data in a file. The client talks
//! to it over HTTP exactly as to AWS: no special code path.

use std::path::{Path, PathBuf};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::DynamoError;

/// A running embedded endpoint; stops when [`LocalDynamo::stop`] is called or it is dropped.
pub struct LocalDynamo {
    url: String,
    path: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), String>>>,
}

impl LocalDynamo {
    /// Starts a server on 127.0.0.1 (a free port) keeping its data in `path`
    /// (`None`: in memory).
    pub async fn start(path: Option<&Path>) -> Result<LocalDynamo, DynamoError> {
        let db = match path {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| DynamoError::Local(format!("{}: {e}", dir.display())))?;
                }
                dynoxide::Database::new(&p.to_string_lossy())
            }
            None => dynoxide::Database::memory(),
        }
        .map_err(|e| DynamoError::Local(e.to_string()))?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| DynamoError::Local(format!("cannot bind 127.0.0.1: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| DynamoError::Local(e.to_string()))?;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(dynoxide::server::serve_with_shutdown(listener, db, async {
            let _ = rx.await;
        }));
        Ok(LocalDynamo {
            url: format!("http://{addr}"),
            path: path.map(Path::to_path_buf).unwrap_or_default(),
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    /// The endpoint URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The data file (empty for an in-memory server).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the server and waits until it has finished its requests.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LocalDynamo {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
