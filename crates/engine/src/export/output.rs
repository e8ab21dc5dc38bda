//! Where an export's files go: a local directory, or an S3 prefix written
//! with multipart uploads as the files grow (one part buffered per open
//! file, so memory stays bounded whatever the export's size).
//!
//! Data files go under `data/`, the manifest and the table-creation
//! parameters beside that folder: an import from S3 reads every object under
//! its key prefix, so `data/` must hold nothing but items.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use sql2ddb_aws::{ConfigOptions, SdkRetry};

use crate::error::EngineError;

/// Bytes buffered per open S3 file before a part is uploaded (S3 wants at
/// least 5 MiB for every part but the last).
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// The folder, under the destination, that holds the data files.
pub const DATA_DIR: &str = "data";

/// Attempts of one S3 call (the SDK's standard retry owns them).
const S3_ATTEMPTS: u32 = 5;

/// Where the S3 client connects, besides AWS's defaults.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// A custom S3 endpoint (an S3-compatible server); else
    /// `AWS_ENDPOINT_URL_S3`, else AWS. Custom endpoints use path-style
    /// addressing.
    pub endpoint: Option<String>,
    /// The region; else the environment's (see `sql2ddb_aws::load`).
    pub region: Option<String>,
}

/// An S3 bucket and key prefix, with its client.
#[derive(Clone)]
pub struct S3Place {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// The key prefix without a trailing `/`; may be empty.
    prefix: String,
}

/// The destination of an export.
pub enum Destination {
    /// A local directory.
    Dir(PathBuf),
    /// An S3 bucket and prefix.
    S3(S3Place),
}

impl Destination {
    /// Opens `out` (`s3://bucket/prefix` or a directory) and makes sure its
    /// `data/` folder holds no earlier export: an import would read both.
    pub async fn open(out: &str, s3: &S3Options) -> Result<Destination, EngineError> {
        let Some(rest) = out.strip_prefix("s3://") else {
            let dir = PathBuf::from(out);
            let data = dir.join(DATA_DIR);
            std::fs::create_dir_all(&data).map_err(|e| EngineError::io(&data, e))?;
            let mut entries = std::fs::read_dir(&data).map_err(|e| EngineError::io(&data, e))?;
            if entries.next().is_some() {
                return Err(EngineError::Config(format!(
                    "{} already holds files: an import reads every file there, so export into an empty directory",
                    data.display()
                )));
            }
            return Ok(Destination::Dir(dir));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(EngineError::Config(format!(
                "--out {out}: name a bucket (s3://BUCKET/PREFIX)"
            )));
        }
        let place = S3Place {
            client: s3_client(s3).await?,
            bucket: bucket.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
        };
        place.ensure_empty().await?;
        Ok(Destination::S3(place))
    }

    /// The destination as the user named it (`s3://bucket/prefix` or the directory).
    pub fn describe(&self) -> String {
        match self {
            Destination::Dir(d) => d.display().to_string(),
            Destination::S3(p) => format!("s3://{}/{}", p.bucket, p.prefix),
        }
    }

    /// The S3 bucket and the data files' key prefix, when the files are in S3.
    pub fn s3_source(&self) -> Option<(String, String)> {
        match self {
            Destination::Dir(_) => None,
            Destination::S3(p) => Some((p.bucket.clone(), p.key(&format!("{DATA_DIR}/")))),
        }
    }

    /// Starts data file `name` (under `data/`).
    pub async fn create(&self, name: &str) -> Result<FileOut, EngineError> {
        let relative = format!("{DATA_DIR}/{name}");
        match self {
            Destination::Dir(dir) => {
                let path = dir.join(&relative);
                let file = std::fs::File::create(&path).map_err(|e| EngineError::io(&path, e))?;
                Ok(FileOut::Local {
                    file: std::io::BufWriter::new(file),
                    path,
                })
            }
            Destination::S3(place) => {
                let key = place.key(&relative);
                let started = place
                    .client
                    .create_multipart_upload()
                    .bucket(&place.bucket)
                    .key(&key)
                    .send()
                    .await
                    .map_err(|e| place.error(&key, sql2ddb_aws::sdk_message(&e)))?;
                let upload_id = started
                    .upload_id()
                    .ok_or_else(|| place.error(&key, "the upload has no id".into()))?
                    .to_string();
                Ok(FileOut::S3(Upload {
                    place: place.clone(),
                    key,
                    upload_id,
                    part: Vec::with_capacity(PART_SIZE),
                    uploaded: 0,
                    parts: Vec::new(),
                }))
            }
        }
    }

    /// Removes `name` (a data file, `data/…`), as far as it can: a failed
    /// export leaves no file behind that an import would read.
    pub async fn remove(&self, name: &str) {
        match self {
            Destination::Dir(dir) => {
                let _ = std::fs::remove_file(dir.join(name));
            }
            Destination::S3(place) => {
                let key = place.key(name);
                let deleted = place
                    .client
                    .delete_object()
                    .bucket(&place.bucket)
                    .key(&key)
                    .send()
                    .await;
                if let Err(e) = deleted {
                    tracing::warn!(%key, error = %sql2ddb_aws::sdk_message(&e), "could not delete a file of a failed export");
                }
            }
        }
    }

    /// Writes `name` beside the `data/` folder in one piece (the manifest,
    /// the table-creation parameters).
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<String, EngineError> {
        match self {
            Destination::Dir(dir) => {
                let path = dir.join(name);
                std::fs::write(&path, bytes).map_err(|e| EngineError::io(&path, e))?;
                Ok(path.display().to_string())
            }
            Destination::S3(place) => {
                let key = place.key(name);
                place
                    .client
                    .put_object()
                    .bucket(&place.bucket)
                    .key(&key)
                    .body(ByteStream::from(bytes))
                    .send()
                    .await
                    .map_err(|e| place.error(&key, sql2ddb_aws::sdk_message(&e)))?;
                Ok(format!("s3://{}/{key}", place.bucket))
            }
        }
    }
}

/// The S3 client: the shared AWS configuration, the SDK's standard retry,
/// path-style addressing for a custom endpoint (S3-compatible servers rarely
/// serve bucket subdomains), checksums only where S3 requires them.
async fn s3_client(opts: &S3Options) -> Result<aws_sdk_s3::Client, EngineError> {
    let endpoint = opts.endpoint.clone().or_else(|| {
        std::env::var("AWS_ENDPOINT_URL_S3")
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    let config = sql2ddb_aws::load(ConfigOptions {
        endpoint: endpoint.as_deref(),
        region: opts.region.as_deref(),
        region_hint: None,
        retry: SdkRetry::Standard {
            max_attempts: S3_ATTEMPTS,
        },
        connect_timeout: Duration::from_secs(10),
        attempt_timeout: Duration::from_secs(300),
    })
    .await
    .map_err(|_| {
        EngineError::Config("no AWS region for S3: set AWS_REGION or pass --region".into())
    })?;
    let s3 = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(endpoint.is_some())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .build();
    Ok(aws_sdk_s3::Client::from_conf(s3))
}

impl S3Place {
    fn key(&self, name: &str) -> String {
        match self.prefix.as_str() {
            "" => name.to_string(),
            p => format!("{p}/{name}"),
        }
    }

    fn error(&self, key: &str, message: String) -> EngineError {
        EngineError::io(
            format!("s3://{}/{key}", self.bucket),
            std::io::Error::other(sql2ddb_core::redact_secrets(&message)),
        )
    }

    async fn ensure_empty(&self) -> Result<(), EngineError> {
        let data = self.key(&format!("{DATA_DIR}/"));
        let listed = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&data)
            .max_keys(1)
            .send()
            .await
            .map_err(|e| self.error(&data, sql2ddb_aws::sdk_message(&e)))?;
        if listed.key_count().unwrap_or(0) > 0 || !listed.contents().is_empty() {
            return Err(EngineError::Config(format!(
                "s3://{}/{data} already holds objects: an import reads every object there, so export to an empty prefix",
                self.bucket
            )));
        }
        Ok(())
    }
}

/// One data file being written.
pub enum FileOut {
    /// A local file.
    Local {
        /// Its path.
        path: PathBuf,
        /// The open file.
        file: std::io::BufWriter<std::fs::File>,
    },
    /// An S3 multipart upload.
    S3(Upload),
}

/// An S3 multipart upload in progress.
pub struct Upload {
    place: S3Place,
    key: String,
    upload_id: String,
    /// Bytes not uploaded yet (less than [`PART_SIZE`] between writes).
    part: Vec<u8>,
    /// Bytes uploaded so far.
    uploaded: u64,
    parts: Vec<CompletedPart>,
}

impl FileOut {
    /// Appends compressed bytes; in S3, uploads a part once [`PART_SIZE`]
    /// bytes are buffered.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        match self {
            FileOut::Local { path, file } => file
                .write_all(bytes)
                .map_err(|e| EngineError::io(path.as_path(), e)),
            FileOut::S3(u) => {
                u.part.extend_from_slice(bytes);
                if u.part.len() >= PART_SIZE {
                    u.upload_part().await?;
                }
                Ok(())
            }
        }
    }

    /// Completes the file: flushed to disk, or its last part uploaded and
    /// the upload completed.
    pub async fn finish(self) -> Result<(), EngineError> {
        match self {
            FileOut::Local { path, mut file } => {
                file.flush().map_err(|e| EngineError::io(&path, e))?;
                file.get_ref()
                    .sync_all()
                    .map_err(|e| EngineError::io(&path, e))
            }
            FileOut::S3(mut u) => {
                if !u.part.is_empty() || u.parts.is_empty() {
                    u.upload_part().await?;
                }
                u.complete().await
            }
        }
    }

    /// Gives the file up: a local file is removed, an upload aborted (S3
    /// keeps no parts to bill).
    pub async fn abort(self) {
        match self {
            FileOut::Local { path, file } => {
                drop(file);
                let _ = std::fs::remove_file(&path);
            }
            FileOut::S3(u) => {
                let p = &u.place;
                if let Err(e) = p
                    .client
                    .abort_multipart_upload()
                    .bucket(&p.bucket)
                    .key(&u.key)
                    .upload_id(&u.upload_id)
                    .send()
                    .await
                {
                    tracing::warn!(key = %u.key, error = %sql2ddb_aws::sdk_message(&e), "could not abort an unfinished upload");
                }
            }
        }
    }

    /// Where the file is, for messages.
    pub fn location(&self) -> String {
        match self {
            FileOut::Local { path, .. } => path.display().to_string(),
            FileOut::S3(u) => format!("s3://{}/{}", u.place.bucket, u.key),
        }
    }
}

impl Upload {
    /// Completes the upload. An answer of 200 whose body the SDK cannot
    /// read (some S3-compatible servers name its root element differently)
    /// counts only once the object is there with every byte uploaded.
    async fn complete(self) -> Result<(), EngineError> {
        let p = &self.place;
        let done = p
            .client
            .complete_multipart_upload()
            .bucket(&p.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(self.parts))
                    .build(),
            )
            .send()
            .await;
        let err = match done {
            Ok(_) => return Ok(()),
            Err(e) => e,
        };
        let unreadable_success = matches!(&err, SdkError::ServiceError(s)
            if s.raw().status().as_u16() == 200 && s.err().code().is_none());
        if unreadable_success {
            let head = p
                .client
                .head_object()
                .bucket(&p.bucket)
                .key(&self.key)
                .send()
                .await;
            if let Ok(h) = head {
                if h.content_length() == Some(self.uploaded as i64) {
                    return Ok(());
                }
            }
        }
        Err(p.error(&self.key, sql2ddb_aws::sdk_message(&err)))
    }

    async fn upload_part(&mut self) -> Result<(), EngineError> {
        let number = self.parts.len() as i32 + 1;
        let body = std::mem::replace(&mut self.part, Vec::with_capacity(PART_SIZE));
        let out_len = body.len() as u64;
        let p = &self.place;
        let out = p
            .client
            .upload_part()
            .bucket(&p.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .part_number(number)
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(|e| p.error(&self.key, sql2ddb_aws::sdk_message(&e)))?;
        self.uploaded += out_len;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .build(),
        );
        Ok(())
    }
}
