//! Everything of sql2ddb that calls S3: a bucket and key prefix
//! ([`S3Prefix`]), objects put, read ([`read_object`]) and deleted in one
//! piece, and multipart uploads written as they grow ([`Upload`]: one part
//! buffered, so memory stays bounded whatever the object's size).
//!
//! The client takes the shared AWS configuration (`sql2ddb-aws`: region
//! rule, credentials, timeouts) with the SDK's standard retry, path-style
//! addressing for a custom endpoint (S3-compatible servers rarely serve
//! bucket subdomains), and checksums only where S3 requires them.

use std::time::Duration;

use aws_sdk_s3::config::RequestChecksumCalculation;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use sql2ddb_aws::{AwsContext, SdkRetry, ServiceOptions};

/// Bytes buffered per upload before a part is sent (S3 wants at least
/// 5 MiB for every part but the last).
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// Attempts of one S3 call (the SDK's standard retry owns them).
const S3_ATTEMPTS: u32 = 5;

/// Where the S3 client connects, besides AWS's defaults.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// A custom S3 endpoint (an S3-compatible server); else
    /// `AWS_ENDPOINT_URL_S3`, else AWS. Custom endpoints use path-style
    /// addressing.
    pub endpoint: Option<String>,
    /// The region; else the environment's (see `sql2ddb_aws::AwsContext`).
    pub region: Option<String>,
    /// The process's AWS context when it has one already (a Lambda
    /// function's), used as it is; else each client loads one.
    pub aws: Option<AwsContext>,
}

/// A failed S3 call: where, and what S3 or the transport said (secrets
/// masked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum S3Error {
    /// No region: S3 on AWS needs one.
    #[error("no AWS region for S3: set AWS_REGION or pass --region")]
    NoRegion,
    /// An `s3://` URL without a bucket.
    #[error("{url}: name a bucket (s3://BUCKET/PREFIX)")]
    NoBucket {
        /// The URL as given.
        url: String,
    },
    /// A call failed.
    #[error("{location}: {message}")]
    Call {
        /// `s3://bucket/key`.
        location: String,
        /// What was said.
        message: String,
    },
}

/// A bucket and key prefix, with its client.
#[derive(Clone)]
pub struct S3Prefix {
    client: aws_sdk_s3::Client,
    bucket: String,
    /// The key prefix without a trailing `/`; may be empty.
    prefix: String,
}

impl S3Prefix {
    /// Connects for `url` (`s3://bucket/prefix`, the `s3://` already
    /// checked by the caller or not).
    pub async fn open(url: &str, opts: &S3Options) -> Result<S3Prefix, S3Error> {
        let rest = url.strip_prefix("s3://").unwrap_or(url);
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(S3Error::NoBucket {
                url: url.to_string(),
            });
        }
        Ok(S3Prefix {
            client: client(opts).await?,
            bucket: bucket.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
        })
    }

    /// The bucket.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix, without a trailing `/` (may be empty).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of `name` under the prefix.
    pub fn key(&self, name: &str) -> String {
        match self.prefix.as_str() {
            "" => name.to_string(),
            p => format!("{p}/{name}"),
        }
    }

    /// `s3://bucket/key` of `name`.
    pub fn url(&self, name: &str) -> String {
        format!("s3://{}/{}", self.bucket, self.key(name))
    }

    fn error(&self, key: &str, message: String) -> S3Error {
        S3Error::Call {
            location: format!("s3://{}/{key}", self.bucket),
            message: sql2ddb_core::redact_secrets(&message),
        }
    }

    /// Whether any object's key starts with `name` under the prefix.
    pub async fn holds_any(&self, name: &str) -> Result<bool, S3Error> {
        let key = self.key(name);
        let listed = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(&key)
            .max_keys(1)
            .send()
            .await
            .map_err(|e| self.error(&key, sql2ddb_aws::sdk_message(&e)))?;
        Ok(listed.key_count().unwrap_or(0) > 0 || !listed.contents().is_empty())
    }

    /// The names (relative to the prefix) of every object whose key starts
    /// with `name` under the prefix, page after page.
    pub async fn list(&self, name: &str) -> Result<Vec<String>, S3Error> {
        let key = self.key(name);
        let strip = self.key("");
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let listed = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&key)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| self.error(&key, sql2ddb_aws::sdk_message(&e)))?;
            names.extend(listed.contents().iter().filter_map(|o| {
                let k = o.key()?;
                Some(k.strip_prefix(strip.as_str()).unwrap_or(k).to_string())
            }));
            match listed.next_continuation_token() {
                Some(next) if listed.is_truncated() == Some(true) => token = Some(next.to_string()),
                _ => return Ok(names),
            }
        }
    }

    /// Writes object `name` in one piece; returns its URL.
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<String, S3Error> {
        let key = self.key(name);
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| self.error(&key, sql2ddb_aws::sdk_message(&e)))?;
        Ok(self.url(name))
    }

    /// Deletes object `name`, as far as it can (a failure is logged).
    pub async fn delete(&self, name: &str) {
        let key = self.key(name);
        let deleted = self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(&key)
            .send()
            .await;
        if let Err(e) = deleted {
            tracing::warn!(%key, error = %sql2ddb_aws::sdk_message(&e), "could not delete an object");
        }
    }

    /// Starts a multipart upload of object `name`.
    pub async fn upload(&self, name: &str) -> Result<Upload, S3Error> {
        let key = self.key(name);
        let started = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(&key)
            .send()
            .await
            .map_err(|e| self.error(&key, sql2ddb_aws::sdk_message(&e)))?;
        let upload_id = started
            .upload_id()
            .ok_or_else(|| self.error(&key, "the upload has no id".into()))?
            .to_string();
        Ok(Upload {
            place: self.clone(),
            key,
            upload_id,
            part: Vec::with_capacity(PART_SIZE),
            uploaded: 0,
            parts: Vec::new(),
        })
    }
}

/// Reads the object `url` (`s3://bucket/key`) whole. Errors name the URL.
pub async fn read_object(url: &str, opts: &S3Options) -> Result<Vec<u8>, S3Error> {
    let place = S3Prefix::open(url, opts).await?;
    let rest = url.strip_prefix("s3://").unwrap_or(url);
    let key = rest.split_once('/').map_or("", |(_, key)| key);
    if key.is_empty() {
        return Err(S3Error::Call {
            location: url.to_string(),
            message: "name an object: s3://BUCKET/KEY".into(),
        });
    }
    let out = place
        .client
        .get_object()
        .bucket(&place.bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| place.error(key, sql2ddb_aws::sdk_message(&e)))?;
    let body = out
        .body
        .collect()
        .await
        .map_err(|e| place.error(key, format!("reading the object: {e}")))?;
    Ok(body.into_bytes().to_vec())
}

/// The S3 client for `opts`.
async fn client(opts: &S3Options) -> Result<aws_sdk_s3::Client, S3Error> {
    let endpoint = opts.endpoint.clone().or_else(|| {
        std::env::var("AWS_ENDPOINT_URL_S3")
            .ok()
            .filter(|v| !v.trim().is_empty())
    });
    let aws = match &opts.aws {
        Some(aws) => aws.clone(),
        None => AwsContext::load(opts.region.as_deref(), endpoint.is_none()).await,
    };
    let config = aws
        .service(ServiceOptions {
            endpoint: endpoint.as_deref(),
            region_hint: None,
            retry: SdkRetry::Standard {
                max_attempts: S3_ATTEMPTS,
            },
            connect_timeout: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(300),
        })
        .map_err(|_| S3Error::NoRegion)?;
    let s3 = aws_sdk_s3::config::Builder::from(&config)
        .force_path_style(endpoint.is_some())
        .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
        .build();
    Ok(aws_sdk_s3::Client::from_conf(s3))
}

/// A multipart upload in progress.
pub struct Upload {
    place: S3Prefix,
    key: String,
    upload_id: String,
    /// Bytes not uploaded yet (less than [`PART_SIZE`] between writes).
    part: Vec<u8>,
    /// Bytes uploaded so far.
    uploaded: u64,
    parts: Vec<CompletedPart>,
}

impl Upload {
    /// `s3://bucket/key` of the object.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.place.bucket, self.key)
    }

    /// Appends bytes; uploads a part each time [`PART_SIZE`] bytes are
    /// buffered. Every part but the last is exactly [`PART_SIZE`] long,
    /// however the bytes arrive: one write of many megabytes is cut into
    /// several parts, so the memory held and the number of parts depend
    /// on the file's size alone.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<(), S3Error> {
        while !bytes.is_empty() {
            let (now, later) = bytes.split_at((PART_SIZE - self.part.len()).min(bytes.len()));
            self.part.extend_from_slice(now);
            bytes = later;
            if self.part.len() == PART_SIZE {
                self.upload_part().await?;
            }
        }
        Ok(())
    }

    /// Uploads the last part and completes the upload. An answer of 200
    /// whose body the SDK cannot read (some S3-compatible servers name its
    /// root element differently) counts only once the object is there with
    /// every byte uploaded.
    pub async fn finish(mut self) -> Result<(), S3Error> {
        if !self.part.is_empty() || self.parts.is_empty() {
            self.upload_part().await?;
        }
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

    /// Gives the upload up: S3 keeps no parts to bill.
    pub async fn abort(self) {
        let p = &self.place;
        if let Err(e) = p
            .client
            .abort_multipart_upload()
            .bucket(&p.bucket)
            .key(&self.key)
            .upload_id(&self.upload_id)
            .send()
            .await
        {
            tracing::warn!(key = %self.key, error = %sql2ddb_aws::sdk_message(&e), "could not abort an unfinished upload");
        }
    }

    async fn upload_part(&mut self) -> Result<(), S3Error> {
        let number = self.parts.len() as i32 + 1;
        let body = std::mem::replace(&mut self.part, Vec::with_capacity(PART_SIZE));
        let len = body.len() as u64;
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
        self.uploaded += len;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .build(),
        );
        Ok(())
    }
}
