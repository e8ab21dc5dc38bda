//! What a function is told by its environment (the SAM template sets it).

use std::path::PathBuf;
use std::time::Duration;

use sql2ddb_engine::serverless::{S3Options, MIN_MARGIN};
use sql2ddb_engine::{AwsContext, IfNotEmpty, JobContext, SdkConfig};

/// Which handler serves the function (`SQL2DDB_HANDLER`).
pub const HANDLER: &str = "SQL2DDB_HANDLER";
/// The mapping: inline TOML, a file path or an `s3://bucket/key` URL; an
/// event's `mapping` overrides it.
pub const MAPPING: &str = "SQL2DDB_MAPPING";
/// The work queue's URL (reader).
pub const QUEUE_URL: &str = "SQL2DDB_QUEUE_URL";
/// The progress table's name.
pub const PROGRESS_TABLE: &str = "SQL2DDB_PROGRESS_TABLE";
/// The name of the SSM parameter (SecureString) holding the source URL.
pub const SOURCE_PARAMETER: &str = "SQL2DDB_SOURCE_PARAMETER";
/// The SNS topic the finisher announces completed runs on (optional).
pub const TOPIC_ARN: &str = "SQL2DDB_TOPIC_ARN";
/// The reader's smallest margin before its deadline, in seconds (at least 10).
pub const READER_MARGIN: &str = "SQL2DDB_READER_MARGIN_SECONDS";
/// A DynamoDB endpoint URL other than AWS's (optional).
pub const ENDPOINT: &str = "SQL2DDB_ENDPOINT";
/// An SQS endpoint URL other than AWS's (optional).
pub const SQS_ENDPOINT: &str = "SQL2DDB_SQS_ENDPOINT";
/// An S3 endpoint URL other than AWS's, for `s3://` mappings (optional).
pub const S3_ENDPOINT: &str = "SQL2DDB_S3_ENDPOINT";
/// What the reader's first invocation does when the table already holds
/// items: `fail` (the default), `append` or `truncate` (`run --if-not-empty`).
pub const IF_NOT_EMPTY: &str = "SQL2DDB_IF_NOT_EMPTY";

/// The three handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// Reads and enqueues, time-boxed.
    Reader,
    /// Writes queue messages' batches.
    Worker,
    /// Announces completed runs.
    Finisher,
}

impl HandlerKind {
    /// Parses `reader`, `worker` or `finisher`.
    pub fn parse(text: &str) -> Result<HandlerKind, SettingsError> {
        match text.trim() {
            "reader" => Ok(HandlerKind::Reader),
            "worker" => Ok(HandlerKind::Worker),
            "finisher" => Ok(HandlerKind::Finisher),
            other => Err(SettingsError(format!(
                "{HANDLER}={other:?}: expected reader, worker or finisher"
            ))),
        }
    }
}

/// A function's settings are missing or wrong: the message says which and
/// what to set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// A function's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The default mapping (inline TOML, a path or an `s3://` URL).
    pub mapping: Option<String>,
    /// The work queue's URL.
    pub queue_url: Option<String>,
    /// The progress table.
    pub progress_table: Option<String>,
    /// The source URL (already read from its parameter); overrides the mapping's.
    pub source: Option<String>,
    /// The SNS topic of the finisher.
    pub topic_arn: Option<String>,
    /// The reader's smallest margin before its deadline.
    pub reader_margin: Duration,
    /// DynamoDB endpoint URL; default AWS.
    pub endpoint: Option<String>,
    /// SQS endpoint URL; default AWS.
    pub sqs_endpoint: Option<String>,
    /// S3 endpoint URL (of `s3://` mappings); default AWS.
    pub s3_endpoint: Option<String>,
    /// Where run directories (rejects files) go: Lambda's `/tmp`.
    pub runs_dir: PathBuf,
    /// The function's AWS context, loaded once at its cold start; every
    /// invocation's clients are made from it.
    pub aws: Option<AwsContext>,
    /// What a new run (the reader's first invocation) does when the table
    /// already holds items; the invocations that continue it are not asked.
    pub if_not_empty: IfNotEmpty,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mapping: None,
            queue_url: None,
            progress_table: None,
            source: None,
            topic_arn: None,
            reader_margin: MIN_MARGIN,
            endpoint: None,
            sqs_endpoint: None,
            s3_endpoint: None,
            runs_dir: std::env::temp_dir().join("sql2ddb-runs"),
            aws: None,
            if_not_empty: IfNotEmpty::default(),
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Settings {
    /// Reads the settings from the environment (the source URL is read
    /// separately, from its parameter: [`Settings::source_parameter`]).
    /// A margin under 10 seconds is raised to 10.
    pub fn from_env() -> Result<Settings, SettingsError> {
        let reader_margin = match var(READER_MARGIN) {
            Some(text) => {
                let secs: u64 = text.trim().parse().map_err(|_| {
                    SettingsError(format!(
                        "{READER_MARGIN}={text:?}: expected a whole number of seconds"
                    ))
                })?;
                MIN_MARGIN.max(Duration::from_secs(secs))
            }
            None => MIN_MARGIN,
        };
        let if_not_empty = match var(IF_NOT_EMPTY) {
            Some(text) => IfNotEmpty::parse(&text).ok_or_else(|| {
                SettingsError(format!(
                    "{IF_NOT_EMPTY}={text:?}: expected append, truncate or fail"
                ))
            })?,
            None => IfNotEmpty::default(),
        };
        Ok(Settings {
            mapping: var(MAPPING),
            queue_url: var(QUEUE_URL),
            progress_table: var(PROGRESS_TABLE),
            source: None,
            topic_arn: var(TOPIC_ARN),
            reader_margin,
            endpoint: var(ENDPOINT),
            sqs_endpoint: var(SQS_ENDPOINT),
            s3_endpoint: var(S3_ENDPOINT),
            if_not_empty,
            ..Settings::default()
        })
    }

    /// The name of the SSM parameter holding the source URL, if set.
    pub fn source_parameter() -> Option<String> {
        var(SOURCE_PARAMETER)
    }

    /// The mapping to use: the event's, else the function's.
    pub fn mapping_or<'a>(&'a self, event: Option<&'a str>) -> Result<&'a str, SettingsError> {
        event.or(self.mapping.as_deref()).ok_or_else(|| {
            SettingsError(format!(
                "no mapping: give one in the event or set {MAPPING}"
            ))
        })
    }

    /// How `s3://` mappings are read: the function's region and endpoint.
    pub fn s3_options(&self) -> S3Options {
        S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: None,
            aws: self.aws.clone(),
        }
    }

    /// The options of an update job's reader: endpoints, progress table,
    /// the work queue.
    pub fn update_options(&self) -> sql2ddb_engine::update::UpdateOptions {
        sql2ddb_engine::update::UpdateOptions {
            endpoint: self.endpoint.clone(),
            progress_table: self.progress_table.clone(),
            queue: self.queue_url.clone(),
            sqs_endpoint: self.sqs_endpoint.clone(),
            runs_dir: self.runs_dir.clone(),
            job_context: self.job_context(),
            ..sql2ddb_engine::update::UpdateOptions::default()
        }
    }

    /// The context of one invocation's job: the function's AWS context,
    /// and a DynamoDB handle every phase of the job shares.
    fn job_context(&self) -> Option<JobContext> {
        self.aws.clone().map(JobContext::new)
    }

    /// The run options of a function: endpoints, progress table, source.
    pub fn run_options(&self) -> sql2ddb_engine::RunOptions {
        sql2ddb_engine::RunOptions {
            source: self.source.clone(),
            endpoint: self.endpoint.clone(),
            progress_table: self.progress_table.clone(),
            queue: self.queue_url.clone(),
            sqs_endpoint: self.sqs_endpoint.clone(),
            runs_dir: self.runs_dir.clone(),
            track_progress: true,
            job_context: self.job_context(),
            if_not_empty: self.if_not_empty,
            ..sql2ddb_engine::RunOptions::default()
        }
    }
}

/// Reads the SSM parameter `name` (a SecureString, decrypted): the source
/// URL. The value is never logged; errors name the parameter only.
pub async fn read_parameter(aws: &SdkConfig, name: &str) -> Result<String, SettingsError> {
    let ssm = aws_sdk_ssm::Client::new(aws);
    let out = ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| {
            SettingsError(format!(
                "cannot read the SSM parameter {name} ({SOURCE_PARAMETER}): {}",
                sql2ddb_engine::serverless::redact_secrets(
                    &aws_sdk_ssm::error::DisplayErrorContext(&e).to_string()
                )
            ))
        })?;
    out.parameter
        .and_then(|p| p.value)
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| {
            SettingsError(format!(
                "the SSM parameter {name} ({SOURCE_PARAMETER}) is empty"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_names() {
        assert_eq!(HandlerKind::parse("reader"), Ok(HandlerKind::Reader));
        assert_eq!(HandlerKind::parse("finisher"), Ok(HandlerKind::Finisher));
        let e = HandlerKind::parse("writer").unwrap_err();
        assert!(e.to_string().contains("reader, worker or finisher"), "{e}");
    }
}
