//! Loading the AWS configuration of a client, with the one region rule.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;

/// Region used to sign requests to a custom endpoint when none is set:
/// emulators accept any. AWS itself never gets a default.
pub const EMULATOR_REGION: &str = "us-east-1";

/// Whether the SDK retries a failed call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkRetry {
    /// No SDK retries: the caller's loop owns every retry.
    Off,
    /// The SDK's standard retry mode.
    Standard {
        /// Attempts per call, the first included.
        max_attempts: u32,
    },
}

/// How to build a client's configuration.
#[derive(Debug, Clone)]
pub struct ConfigOptions<'a> {
    /// A custom endpoint URL (an emulator); `None` for AWS itself.
    pub endpoint: Option<&'a str>,
    /// The region the user gave, if any.
    pub region: Option<&'a str>,
    /// A region the caller found elsewhere (an AWS queue URL's host), used
    /// when neither `region` nor the environment names one.
    pub region_hint: Option<String>,
    /// Whether the SDK retries.
    pub retry: SdkRetry,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one attempt of a call may take.
    pub attempt_timeout: Duration,
}

/// AWS is the target and no region is set anywhere: the caller says where
/// one can be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingRegion;

/// Loads the configuration of a client.
///
/// The region is `region` if given. For a custom endpoint it is else
/// `AWS_REGION`, `AWS_DEFAULT_REGION`, the hint, or [`EMULATOR_REGION`]
/// (asking the SDK's default chain would probe the instance metadata service
/// for nothing). For AWS it is else the SDK's default chain (environment,
/// profile, instance metadata), or the hint; without any, [`MissingRegion`]:
/// writing to a region nobody chose would put the data where nobody looks.
///
/// For a custom endpoint without AWS credentials in the environment,
/// placeholder credentials are used (emulators accept any).
pub async fn load(options: ConfigOptions<'_>) -> Result<SdkConfig, MissingRegion> {
    let retry = match options.retry {
        SdkRetry::Off => RetryConfig::disabled(),
        SdkRetry::Standard { max_attempts } => {
            RetryConfig::standard().with_max_attempts(max_attempts)
        }
    };
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .retry_config(retry)
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(options.connect_timeout)
                .operation_attempt_timeout(options.attempt_timeout)
                .build(),
        );
    let region = options.region.map(str::to_string).or_else(|| {
        options.endpoint.map(|_| {
            std::env::var("AWS_REGION")
                .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                .ok()
                .or_else(|| options.region_hint.clone())
                .unwrap_or_else(|| EMULATOR_REGION.to_string())
        })
    });
    if let Some(region) = region {
        loader = loader.region(Region::new(region));
    }
    if let Some(url) = options.endpoint {
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
    let config = loader.load().await;
    if config.region().is_some() {
        return Ok(config);
    }
    match options.region_hint {
        Some(region) => Ok(config.into_builder().region(Region::new(region)).build()),
        None => Err(MissingRegion),
    }
}
