//! Building the one SQS client of a process.
//!
//! Unlike the DynamoDB client (whose retries the batch writer owns), SQS calls
//! keep the SDK's standard retry: it is the only retry of a failed call
//! (throttling, 5xx, timeouts). The crate's own loop covers what arrives
//! inside a successful `SendMessageBatch`: the entries that failed, which it
//! re-sends with backoff. The two never wrap each other.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_sqs::config::Credentials;
use aws_sdk_sqs::Client;

/// Attempts per SQS call, the first included (the SDK's standard retry mode).
pub const CALL_ATTEMPTS: u32 = 3;
/// How long one attempt may take: above the longest long poll (20 s).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds a client for AWS (`endpoint` `None`: found by the default chain) or
/// any SQS-compatible endpoint URL. The region comes from `region`, else the
/// environment, else the queue URL's host (`sqs.<region>.amazonaws.com`) when
/// `queue_url` is given, else `us-east-1`. For a custom endpoint without AWS
/// credentials in the environment, placeholder credentials are used
/// (emulators accept any).
pub async fn connect(
    endpoint: Option<&str>,
    region: Option<&str>,
    queue_url: Option<&str>,
) -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::standard().with_max_attempts(CALL_ATTEMPTS))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build(),
        );
    if let Some(region) = region {
        loader = loader.region(Region::new(region.to_string()));
    }
    if let Some(url) = endpoint {
        loader = loader.endpoint_url(url);
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none()
            && std::env::var_os("AWS_PROFILE").is_none()
        {
            loader = loader.credentials_provider(Credentials::new(
                "local",
                "local",
                None,
                None,
                "sql2ddb-local",
            ));
        }
    }
    let mut config = loader.load().await;
    if config.region().is_none() {
        let region = queue_url
            .and_then(region_of_queue_url)
            .unwrap_or_else(|| "us-east-1".to_string());
        config = config.into_builder().region(Region::new(region)).build();
    }
    Client::new(&config)
}

/// The region in an AWS queue URL (`https://sqs.eu-west-1.amazonaws.com/123/q`).
pub fn region_of_queue_url(url: &str) -> Option<String> {
    let host = url.split("://").nth(1)?.split('/').next()?;
    let mut labels = host.split('.');
    match (labels.next(), labels.next()) {
        (Some("sqs"), Some(region)) if region.contains('-') => Some(region.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_is_read_from_aws_queue_urls_only() {
        assert_eq!(
            region_of_queue_url("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs").as_deref(),
            Some("eu-west-1")
        );
        assert_eq!(
            region_of_queue_url("http://127.0.0.1:5000/123456789012/jobs"),
            None
        );
        assert_eq!(region_of_queue_url("https://sqs.amazonaws.com/1/q"), None);
        assert_eq!(region_of_queue_url("not a url"), None);
    }
}
