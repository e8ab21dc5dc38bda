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

/// The variable that marks the child process of [`without_a_region`].
const NO_REGION_CHILD: &str = "SQL2DDB_TEST_NO_REGION_CHILD";

/// For a test of what happens when no AWS region is configured, whatever
/// the machine running it has set: in the test process, runs the test
/// named `test` (its full name in this test binary) again in a child
/// process with no region anywhere (no `AWS_REGION`, `AWS_DEFAULT_REGION`,
/// `AWS_PROFILE`, no configuration files, no instance metadata), asserts
/// that it passed, and returns `false`; in that child, returns `true`: the
/// test's body runs there.
///
/// ```no_run
/// # fn f() {
/// if !sql2ddb_testkit::support::without_a_region("my_test") {
///     return;
/// }
/// // … the body, with no region configured
/// # }
/// ```
pub fn without_a_region(test: &str) -> bool {
    if std::env::var_os(NO_REGION_CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads", "1"])
        .env(NO_REGION_CHILD, "1")
        .env_remove("AWS_REGION")
        .env_remove("AWS_DEFAULT_REGION")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_DEFAULT_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env("AWS_CONFIG_FILE", "/nonexistent/sql2ddb-test/config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/sql2ddb-test/credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run the test again without a region");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{test} without a region:\n{said}");
    // A filter that matched nothing passes too: make sure it ran.
    assert!(said.contains("1 passed"), "{test} did not run:\n{said}");
    false
}
