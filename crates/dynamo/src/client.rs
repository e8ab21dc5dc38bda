//! The DynamoDB handle of a process ([`Dynamo`]), made from its AWS context.

use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::config::StalledStreamProtectionConfig;
use aws_sdk_dynamodb::Client;
use aws_types::SdkConfig;
use sql2ddb_aws::{AwsContext, RetryPolicy, SdkRetry, ServiceOptions};
use sql2ddb_core::{redact_secrets, KeyAttr};

use crate::calls::{BatchCalls, TableWriter};
use crate::error::DynamoError;

/// Where requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// AWS itself, found by the default chain (env, profile, region).
    Aws,
    /// Any DynamoDB-compatible endpoint URL.
    Url(String),
}

/// The form an endpoint URL takes, shown when one is refused.
const ENDPOINT_FORM: &str = "http://host:port or https://host[:port], e.g. http://127.0.0.1:8000";

/// Region used to sign requests to a custom endpoint when none is set:
/// emulators accept any. AWS itself never gets a default.
pub use sql2ddb_aws::EMULATOR_REGION;

impl Endpoint {
    /// Reads an endpoint URL as a user wrote it (`--endpoint`, the mapping's
    /// `[target] endpoint`): `http://` or `https://`, a host, an optional
    /// numeric port, nothing else before the path.
    ///
    /// The word `local` (the embedded DynamoDB) is the caller's to handle
    /// before this. Other spellings of it (`Local`, `LOCAL`) are refused with a
    /// message that names `local`, as is any text without a scheme such as
    /// `127.0.0.1:8000`, with the form expected.
    pub fn parse(text: &str) -> Result<Endpoint, DynamoError> {
        let shown = redact_secrets(text);
        let refuse = |why: String| {
            Err(DynamoError::Config(format!(
                "endpoint `{shown}` {why}; expected {ENDPOINT_FORM}"
            )))
        };
        if text.eq_ignore_ascii_case("local") {
            return Err(DynamoError::Config(format!(
                "endpoint `{shown}` is not a URL: for the embedded DynamoDB write `local` \
                 (lower case), where a run starts it; otherwise give {ENDPOINT_FORM}"
            )));
        }
        if text.is_empty() {
            return refuse("is empty".into());
        }
        if text.chars().any(char::is_whitespace) {
            return refuse("contains white space".into());
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return refuse(format!("has no scheme (write http://{shown})"));
        };
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return refuse(format!("has scheme `{scheme}`, not http or https"));
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let (host, port) = match host_port.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, after)) => (host, after.strip_prefix(':')),
                None => return refuse("has an unclosed `[`".into()),
            },
            None => match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            },
        };
        if host.is_empty() {
            return refuse("has no host".into());
        }
        if let Some(port) = port {
            if port.parse::<u16>().is_err() {
                return refuse(format!("has port `{port}`, not a number up to 65535"));
            }
        }
        Ok(Endpoint::Url(text.to_string()))
    }
}

/// How long one attempt of a call may take before it counts as a (retryable) timeout.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What to do when AWS is the target and no region is set anywhere.
pub const NO_REGION_MESSAGE: &str = "no AWS region is set for DynamoDB: give --region, \
     `region` under [target] in the mapping, the AWS_REGION environment variable, \
     or a `region` in your AWS profile";

/// The DynamoDB of a process: the SDK's client, with its retries off (the
/// crate's loops own every retry), and the batch writer's calls through it.
/// Every call of this crate goes through one; cheap to clone, clones share
/// the client (its connections and cached credentials).
#[derive(Clone, Debug)]
pub struct Dynamo {
    client: Client,
    calls: BatchCalls,
    /// Made with the handle and cloned with it: which handle a clone is of
    /// ([`Dynamo::same_handle`]).
    identity: Arc<()>,
}

impl Dynamo {
    /// The handle for `endpoint`, made from the process's AWS context (its
    /// region, credentials and HTTP settings) with this crate's retry rule
    /// and timeouts. AWS itself without a region anywhere is a
    /// [`DynamoError::Config`] before any call is made: writing to a region
    /// nobody chose would put the data where nobody looks.
    pub fn new(aws: &AwsContext, endpoint: &Endpoint) -> Result<Dynamo, DynamoError> {
        let config = aws
            .service(ServiceOptions {
                endpoint: match endpoint {
                    Endpoint::Url(url) => Some(url),
                    Endpoint::Aws => None,
                },
                region_hint: None,
                retry: SdkRetry::Off,
                connect_timeout: CONNECT_TIMEOUT,
                attempt_timeout: ATTEMPT_TIMEOUT,
            })
            .map_err(|_| DynamoError::Config(NO_REGION_MESSAGE.to_string()))?;
        Ok(Dynamo::from_config(&config))
    }

    /// The handle of a service configuration made elsewhere (its retries
    /// are the caller's to turn off).
    pub fn from_config(config: &SdkConfig) -> Dynamo {
        // No stalled-stream protection: DynamoDB's bodies are small and whole,
        // and ATTEMPT_TIMEOUT already ends an attempt that stalls; the
        // protection's throughput checks cost every call about as much as
        // building its request.
        let config = aws_sdk_dynamodb::config::Builder::from(config)
            .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
            .build();
        Dynamo::of(Client::from_conf(config))
    }

    fn of(client: Client) -> Dynamo {
        Dynamo {
            calls: BatchCalls::new(client.clone()),
            client,
            identity: Arc::new(()),
        }
    }

    /// Whether `other` is a clone of this handle (sharing its client and
    /// connection pool) rather than a handle made apart, even for the same
    /// endpoint and context.
    pub fn same_handle(&self, other: &Dynamo) -> bool {
        Arc::ptr_eq(&self.identity, &other.identity)
    }

    /// The region requests are signed for.
    pub fn region(&self) -> Option<&str> {
        self.client.config().region().map(|r| r.as_ref())
    }

    /// The batch writer's `BatchWriteItem` calls.
    pub fn calls(&self) -> &BatchCalls {
        &self.calls
    }

    /// The writer of `table`, whose key attributes are `keys` (partition
    /// key first), retrying by `policy`.
    pub fn table_writer(
        &self,
        table: impl Into<String>,
        keys: Vec<KeyAttr>,
        policy: RetryPolicy,
    ) -> TableWriter {
        TableWriter::new(self.calls.clone(), table, keys, policy)
    }

    /// The SDK's client, for this crate's calls.
    pub(crate) fn sdk(&self) -> &Client {
        &self.client
    }
}

/// Connects to `endpoint` with a context of its own: for a process whose
/// only AWS service is DynamoDB (tools, tests). The region is `region` if
/// given, else the environment (and, for AWS, the SDK's default chain);
/// see [`Dynamo::new`].
pub async fn connect(endpoint: &Endpoint, region: Option<&str>) -> Result<Dynamo, DynamoError> {
    let aws = AwsContext::load(region, *endpoint == Endpoint::Aws).await;
    Dynamo::new(&aws, endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_client_leaves_stalls_to_the_attempt_timeout_and_retries_to_the_writer() {
        // Nothing is called: building a client makes no request.
        let dynamo = connect(
            &Endpoint::Url("http://127.0.0.1:9".into()),
            Some("eu-west-1"),
        )
        .await
        .unwrap();
        let config = dynamo.sdk().config();
        let stalls = config
            .stalled_stream_protection()
            .expect("stalled-stream protection is configured");
        assert!(!stalls.upload_enabled(), "upload checks are off");
        assert!(!stalls.download_enabled(), "download checks are off");
        let timeouts = config.timeout_config().expect("timeouts are configured");
        assert_eq!(timeouts.operation_attempt_timeout(), Some(ATTEMPT_TIMEOUT));
        assert_eq!(timeouts.connect_timeout(), Some(CONNECT_TIMEOUT));
        assert_eq!(config.retry_config().unwrap().max_attempts(), 1);
        assert_eq!(config.region().unwrap().as_ref(), "eu-west-1");
    }

    #[tokio::test]
    async fn a_clone_is_the_same_handle_and_a_second_handle_is_not() {
        let aws = AwsContext::load(Some("eu-west-1"), false).await;
        let endpoint = Endpoint::Url("http://127.0.0.1:9".into());
        let one = Dynamo::new(&aws, &endpoint).unwrap();
        let other = Dynamo::new(&aws, &endpoint).unwrap();
        assert!(one.same_handle(&one.clone()));
        assert!(!one.same_handle(&other), "made apart, though alike");
    }

    #[test]
    fn endpoint_urls_are_accepted() {
        for url in [
            "http://127.0.0.1:8000",
            "https://dynamodb.eu-west-1.amazonaws.com",
            "HTTP://localhost:8000/",
            "http://[::1]:8000",
        ] {
            assert_eq!(
                Endpoint::parse(url).unwrap(),
                Endpoint::Url(url.to_string())
            );
        }
    }

    #[test]
    fn nothing_lost_12_endpoint_parse_refuses_text_without_scheme() {
        for (text, says) in [
            (
                "127.0.0.1:8000",
                "has no scheme (write http://127.0.0.1:8000)",
            ),
            ("localhost:8000", "has no scheme"),
            ("Local", "write `local` (lower case)"),
            ("LOCAL", "write `local` (lower case)"),
            ("ftp://h:21", "not http or https"),
            ("http://", "has no host"),
            ("http://:8000", "has no host"),
            ("http://h:80x", "has port `80x`"),
            ("http://h :8000", "white space"),
            ("", "is empty"),
        ] {
            let err = Endpoint::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert!(err.contains("http://"), "{text}: {err}");
        }
    }
}
