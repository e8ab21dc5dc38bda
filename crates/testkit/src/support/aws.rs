//! Clients of a local AWS endpoint (moto's server, or a listener the test
//! plays the service with): region `us-east-1` and test credentials, so no
//! test reads the machine's AWS configuration.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;

/// The region every local endpoint is addressed in.
pub const TEST_REGION: &str = "us-east-1";

/// An AWS configuration whose every service is at `endpoint`, to build any
/// SDK client from (`aws_sdk_sns::Client::new(&config)`).
pub async fn aws_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(TEST_REGION))
        .credentials_provider(Credentials::for_tests())
        .load()
        .await
}

/// An S3 client of `endpoint` with path-style addressing (a local server
/// has no bucket subdomains), to create buckets and read or put objects.
pub fn s3_client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new(TEST_REGION))
        .endpoint_url(endpoint)
        .force_path_style(true)
        .credentials_provider(Credentials::for_tests())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}
