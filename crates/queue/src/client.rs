//! The SQS client of a process, made from its AWS context.
//!
//! Unlike the DynamoDB client (whose every retry the retry engine owns), SQS
//! calls keep the SDK's standard retry: it is the only retry of a failed
//! call (throttling, 5xx, timeouts), but for `ReceiveMessage`, which the
//! SDK tries once and the retry engine retries (a worker waits out a longer
//! outage than three quick attempts). The engine also re-sends what arrives
//! inside a successful `SendMessageBatch`: the entries that failed. The two
//! never wrap each other (see `retry`).

use std::time::Duration;

use aws_sdk_sqs::Client;
use sql2ddb_aws::{AwsContext, SdkRetry, ServiceOptions};

use crate::QueueError;

/// Attempts per SQS call, the first included (the SDK's standard retry mode).
pub const CALL_ATTEMPTS: u32 = 3;
/// How long one attempt may take: above the longest long poll (20 s).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to do when AWS is the target and no region is set anywhere.
pub const NO_REGION_MESSAGE: &str = "no AWS region is set for SQS: give --region, \
     the AWS_REGION environment variable, a `region` in your AWS profile, \
     or the queue's AWS URL (https://sqs.<region>.amazonaws.com/…)";

/// Builds a client for AWS (`endpoint` `None`) or any SQS-compatible
/// endpoint URL with a context of its own: for a process whose only AWS
/// service is SQS (queue administration, tests). See [`client_of`].
pub async fn connect(
    endpoint: Option<&str>,
    region: Option<&str>,
    queue_url: Option<&str>,
) -> Result<Client, QueueError> {
    client_of(
        &AwsContext::load(region, endpoint.is_none()).await,
        endpoint,
        queue_url,
    )
}

/// The SQS client of the process's AWS context, for AWS (`endpoint` `None`)
/// or any SQS-compatible endpoint URL, with the SDK's standard retry. The
/// region is the context's (the region given, the environment, and for
/// AWS the profile), else the queue URL's host
/// (`sqs.<region>.amazonaws.com`) when `queue_url` is given. A custom
/// endpoint then falls back to [`sql2ddb_aws::EMULATOR_REGION`]; AWS itself
/// does not: that is a [`QueueError::Config`] before any call is made.
pub fn client_of(
    aws: &AwsContext,
    endpoint: Option<&str>,
    queue_url: Option<&str>,
) -> Result<Client, QueueError> {
    let config = aws
        .service(ServiceOptions {
            endpoint,
            region_hint: queue_url.and_then(region_of_queue_url),
            retry: SdkRetry::Standard {
                max_attempts: CALL_ATTEMPTS,
            },
            connect_timeout: CONNECT_TIMEOUT,
            attempt_timeout: ATTEMPT_TIMEOUT,
        })
        .map_err(|_| QueueError::Config {
            queue: queue_url.unwrap_or("SQS").to_string(),
            message: NO_REGION_MESSAGE.to_string(),
        })?;
    Ok(Client::new(&config))
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
