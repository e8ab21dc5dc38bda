//! Where an export's files go: a local directory, or an S3 prefix written
//! with multipart uploads as the files grow (one part buffered per open
//! file, so memory stays bounded whatever the export's size).
//!
//! Data files go under `data/`, the manifest and the table-creation
//! parameters beside that folder: an import from S3 reads every object under
//! its key prefix, so `data/` must hold nothing but items.

use std::path::PathBuf;
use tokio::io::AsyncWriteExt;

pub use sql2ddb_s3::S3Options;
use sql2ddb_s3::{S3Error, S3Prefix, Upload};

use crate::error::EngineError;

/// The folder, under the destination, that holds the data files.
pub const DATA_DIR: &str = "data";

/// The destination of an export.
pub enum Destination {
    /// A local directory.
    Dir(PathBuf),
    /// An S3 bucket and prefix.
    S3(S3Prefix),
}

/// An S3 failure as the engine reports it: an I/O error at its `s3://` place.
pub(super) fn s3_error(e: S3Error) -> EngineError {
    match e {
        S3Error::Call { location, message } => {
            EngineError::io(location, std::io::Error::other(message))
        }
        other => EngineError::Config(other.to_string()),
    }
}

impl Destination {
    /// Opens `out` (`s3://bucket/prefix` or a directory), making the
    /// directory's `data/` folder; what it holds already is looked at by
    /// [`Destination::prepare`].
    pub async fn open(out: &str, s3: &S3Options) -> Result<Destination, EngineError> {
        if !out.starts_with("s3://") {
            let dir = PathBuf::from(out);
            let data = dir.join(DATA_DIR);
            for place in [&dir, &data] {
                if place.exists() && !place.is_dir() {
                    return Err(EngineError::Config(format!(
                        "--out {}: {} is a file, not a directory: the data files go in a `{DATA_DIR}/` folder under --out, so move that file away or give --out another directory",
                        dir.display(),
                        place.display()
                    )));
                }
            }
            std::fs::create_dir_all(&data).map_err(|e| EngineError::io(&data, e))?;
            return Ok(Destination::Dir(dir));
        }
        let place = S3Prefix::open(out, s3).await.map_err(|e| match e {
            S3Error::NoBucket { url } => {
                EngineError::Config(format!("--out {url}: name a bucket (s3://BUCKET/PREFIX)"))
            }
            other => s3_error(other),
        })?;
        Ok(Destination::S3(place))
    }

    /// The destination as the user named it (`s3://bucket/prefix` or the directory).
    pub fn describe(&self) -> String {
        match self {
            Destination::Dir(d) => d.display().to_string(),
            Destination::S3(p) => format!("s3://{}/{}", p.bucket(), p.prefix()),
        }
    }

    /// Where `name` (relative to the destination) is, for messages: a path
    /// or an `s3://` URL.
    pub fn place(&self, name: &str) -> String {
        match self {
            Destination::Dir(d) => d.join(name).display().to_string(),
            Destination::S3(p) => p.url(name),
        }
    }

    /// The S3 bucket and the export's key prefix, when the files are in S3.
    pub fn s3_place(&self) -> Option<(String, String)> {
        match self {
            Destination::Dir(_) => None,
            Destination::S3(p) => Some((p.bucket().to_string(), p.prefix().to_string())),
        }
    }

    /// The S3 bucket and the data files' key prefix, when the files are in S3.
    pub fn s3_source(&self) -> Option<(String, String)> {
        match self {
            Destination::Dir(_) => None,
            Destination::S3(p) => Some((p.bucket().to_string(), p.key(&format!("{DATA_DIR}/")))),
        }
    }

    /// Starts data file `name` (under `data/`).
    pub async fn create(&self, name: &str) -> Result<FileOut, EngineError> {
        self.create_at(format!("{DATA_DIR}/{name}")).await
    }

    /// Starts file `name` beside the `data/` folder, written as it grows
    /// (the pointer updates of a bulk put export).
    pub async fn create_beside(&self, name: &str) -> Result<FileOut, EngineError> {
        self.create_at(name.to_string()).await
    }

    async fn create_at(&self, relative: String) -> Result<FileOut, EngineError> {
        match self {
            Destination::Dir(dir) => {
                let path = dir.join(&relative);
                let file = tokio::fs::File::create(&path)
                    .await
                    .map_err(|e| EngineError::io(&path, e))?;
                Ok(FileOut::Local {
                    file: tokio::io::BufWriter::new(file),
                    path,
                })
            }
            Destination::S3(place) => Ok(FileOut::S3(
                place.upload(&relative).await.map_err(s3_error)?,
            )),
        }
    }

    /// Removes `name` (a data file, `data/…`), as far as it can: a failed
    /// export leaves no file behind that an import would read.
    pub async fn remove(&self, name: &str) {
        match self {
            Destination::Dir(dir) => {
                let _ = tokio::fs::remove_file(dir.join(name)).await;
            }
            Destination::S3(place) => place.delete(name).await,
        }
    }

    /// Writes `name` beside the `data/` folder in one piece (the manifest,
    /// the table-creation parameters).
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<String, EngineError> {
        match self {
            Destination::Dir(dir) => {
                let path = dir.join(name);
                tokio::fs::write(&path, bytes)
                    .await
                    .map_err(|e| EngineError::io(&path, e))?;
                Ok(path.display().to_string())
            }
            Destination::S3(place) => place.put(name, bytes).await.map_err(s3_error),
        }
    }
}

/// One data file being written.
pub enum FileOut {
    /// A local file.
    Local {
        /// Its path.
        path: PathBuf,
        /// The open file, tokio's: its writes and its `fsync` run on the
        /// blocking pool.
        file: tokio::io::BufWriter<tokio::fs::File>,
    },
    /// An S3 multipart upload.
    S3(Upload),
}

impl FileOut {
    /// Appends compressed bytes; in S3, uploads a part once
    /// [`sql2ddb_s3::PART_SIZE`] bytes are buffered.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        match self {
            FileOut::Local { path, file } => file
                .write_all(bytes)
                .await
                .map_err(|e| EngineError::io(path.as_path(), e)),
            FileOut::S3(u) => u.write(bytes).await.map_err(s3_error),
        }
    }

    /// Completes the file: flushed to disk, or its last part uploaded and
    /// the upload completed.
    pub async fn finish(self) -> Result<(), EngineError> {
        match self {
            FileOut::Local { path, mut file } => {
                file.flush().await.map_err(|e| EngineError::io(&path, e))?;
                file.get_ref()
                    .sync_all()
                    .await
                    .map_err(|e| EngineError::io(&path, e))
            }
            FileOut::S3(u) => u.finish().await.map_err(s3_error),
        }
    }

    /// Gives the file up: a local file is removed, an upload aborted (S3
    /// keeps no parts to bill).
    pub async fn abort(self) {
        match self {
            FileOut::Local { path, file } => {
                drop(file);
                let _ = tokio::fs::remove_file(&path).await;
            }
            FileOut::S3(u) => u.abort().await,
        }
    }

    /// Where the file is, for messages.
    pub fn location(&self) -> String {
        match self {
            FileOut::Local { path, .. } => path.display().to_string(),
            FileOut::S3(u) => u.url(),
        }
    }
}
