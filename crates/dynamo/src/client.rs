//! Building the one DynamoDB client of a process.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_dynamodb::config::Credentials;
use aws_sdk_dynamodb::Client;

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// AWS itself, found by the default chain (env, profile, region).
    Aws,
    /// Any DynamoDB-compatible endpoint URL.
    Url(String),
}

/// How long one attempt of a call may take before it counts as a (retryable) timeout.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds a client. The SDK's retries are disabled: the writer owns every
/// retry. For a custom endpoint without AWS credentials in the environment,
/// placeholder credentials are used (emulators accept any).
pub async fn connect(endpoint: &Endpoint, region: Option<&str>) -> Client {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build(),
        );
    let region = region.map(str::to_string).or_else(|| match endpoint {
        // An emulator needs some region to sign with; asking the default
        // chain would probe the instance metadata service for nothing.
        Endpoint::Url(_) => Some(
            std::env::var("AWS_REGION")
                .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|_| "us-east-1".to_string()),
        ),
        Endpoint::Aws => None,
    });
    if let Some(region) = region {
        loader = loader.region(Region::new(region));
    }
    if let Endpoint::Url(url) = endpoint {
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
        // An endpoint URL needs a region to sign with; AWS needs the user's.
        config = config
            .into_builder()
            .region(Region::new("us-east-1"))
            .build();
    }
    Client::new(&config)
}
