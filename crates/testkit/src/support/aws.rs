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

/// An S3 bucket of the test's own and a client of its server.
pub struct Bucket {
    /// A client of the server (see [`s3_client`]).
    pub client: aws_sdk_s3::Client,
    /// The bucket's name, unique to the test.
    pub name: String,
}

impl Bucket {
    /// Creates a bucket named after `prefix` on the S3 server at `endpoint`.
    pub async fn create(endpoint: &str, prefix: &str) -> Bucket {
        let client = s3_client(endpoint);
        // Bucket names take no `_`.
        let name = super::unique_name(prefix).replace('_', "-");
        client
            .create_bucket()
            .bucket(&name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("bucket {name} at {endpoint}: {e:?}"));
        Bucket { client, name }
    }

    /// The bytes of object `key`.
    pub async fn get(&self, key: &str) -> Vec<u8> {
        let out = self
            .client
            .get_object()
            .bucket(&self.name)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("s3://{}/{key}: {e:?}", self.name));
        out.body
            .collect()
            .await
            .unwrap_or_else(|e| panic!("s3://{}/{key}: {e}", self.name))
            .into_bytes()
            .to_vec()
    }

    /// Puts `bytes` as object `key`.
    pub async fn put(&self, key: &str, bytes: &[u8]) {
        self.client
            .put_object()
            .bucket(&self.name)
            .key(key)
            .body(bytes.to_vec().into())
            .send()
            .await
            .unwrap_or_else(|e| panic!("s3://{}/{key}: {e:?}", self.name));
    }
}
