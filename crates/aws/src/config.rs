//! The one AWS configuration of a process ([`AwsContext`]), and each
//! service's configuration made from it with the one region rule.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::SharedCredentialsProvider;
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

/// How one service's client is made from the context.
#[derive(Debug, Clone)]
pub struct ServiceOptions<'a> {
    /// A custom endpoint URL (an emulator); `None` for AWS itself.
    pub endpoint: Option<&'a str>,
    /// A region the caller found elsewhere (an AWS queue URL's host), used
    /// when the context has none.
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

/// The AWS configuration of a process — region, credentials chain, HTTP
/// settings — loaded once; every service client is made from it
/// ([`AwsContext::service`]) with its own endpoint, retry and timeouts.
/// Cloning shares the credentials cache, and the answer of
/// [`AwsContext::find_credentials`] once it found some.
#[derive(Debug, Clone)]
pub struct AwsContext {
    base: SdkConfig,
    /// Whether AWS credentials are named in the environment (a key or a
    /// profile); without them, custom endpoints get placeholders.
    named_credentials: bool,
    /// Set once the chain found credentials: each phase of a job asks, and
    /// only the first asks the chain (a `credential_process` runs once).
    found: Arc<OnceLock<()>>,
}

impl AwsContext {
    /// Loads the configuration once.
    ///
    /// The region is `region` if given, else `AWS_REGION` or
    /// `AWS_DEFAULT_REGION`. When `aws_target` (a service of the process is
    /// AWS itself) and neither is set, the SDK's default chain is asked too
    /// (profile, instance metadata); otherwise it is not, since probing the
    /// instance metadata service costs time for nothing when every service
    /// is an emulator.
    pub async fn load(region: Option<&str>, aws_target: bool) -> AwsContext {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        let chosen = region.map(str::to_string).or_else(|| {
            (!aws_target)
                .then(|| {
                    std::env::var("AWS_REGION")
                        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                        .ok()
                })
                .flatten()
        });
        match chosen {
            Some(r) => loader = loader.region(Region::new(r)),
            // No chain: a service that needs a region says so.
            None if !aws_target => loader = loader.region(None::<Region>),
            None => {}
        }
        AwsContext {
            base: loader.load().await,
            named_credentials: std::env::var_os("AWS_ACCESS_KEY_ID").is_some()
                || std::env::var_os("AWS_PROFILE").is_some(),
            found: Arc::default(),
        }
    }

    /// Whether the credentials chain finds credentials for AWS itself: the
    /// chain's own words when it finds none (no key, profile, role or
    /// instance metadata). Asked once before a job's work, so that a
    /// machine without credentials is told so in one line instead of
    /// through each call's retries. Once found, the context (and its
    /// clones) answers without asking again.
    pub async fn find_credentials(&self) -> Result<(), String> {
        use aws_credential_types::provider::ProvideCredentials;
        if self.found.get().is_some() {
            return Ok(());
        }
        let Some(provider) = self.base.credentials_provider() else {
            return Err("no credentials provider is configured".into());
        };
        match provider.provide_credentials().await {
            Ok(_) => {
                let _ = self.found.set(());
                Ok(())
            }
            Err(e) => {
                // The chain's message and its source's, in one line.
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    text.push_str(": ");
                    text.push_str(&s.to_string());
                    source = s.source();
                }
                // One line: the chain lists each provider on a line.
                let lines: Vec<&str> = text.lines().map(str::trim).collect();
                Err(lines.join(" "))
            }
        }
    }

    /// The region the context resolved, if any.
    pub fn region(&self) -> Option<&str> {
        self.base.region().map(Region::as_ref)
    }

    /// The configuration every client is made from, as loaded.
    pub fn sdk_config(&self) -> &SdkConfig {
        &self.base
    }

    /// The configuration of one service's client: the context's, with the
    /// service's endpoint, retry and timeouts.
    ///
    /// The region is the context's; else the hint; else, for a custom
    /// endpoint, [`EMULATOR_REGION`]. AWS itself gets no default:
    /// [`MissingRegion`], since writing to a region nobody chose would put
    /// the data where nobody looks. For a custom endpoint without AWS
    /// credentials in the environment, placeholder credentials are used
    /// (emulators accept any).
    pub fn service(&self, options: ServiceOptions<'_>) -> Result<SdkConfig, MissingRegion> {
        let retry = match options.retry {
            SdkRetry::Off => RetryConfig::disabled(),
            SdkRetry::Standard { max_attempts } => {
                RetryConfig::standard().with_max_attempts(max_attempts)
            }
        };
        let region = match (self.base.region(), options.region_hint, options.endpoint) {
            (Some(region), _, _) => region.clone(),
            (None, Some(hint), _) => Region::new(hint),
            (None, None, Some(_)) => Region::from_static(EMULATOR_REGION),
            (None, None, None) => return Err(MissingRegion),
        };
        let mut builder = self
            .base
            .clone()
            .into_builder()
            .region(region)
            .retry_config(retry)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(options.connect_timeout)
                    .operation_attempt_timeout(options.attempt_timeout)
                    .build(),
            );
        if let Some(url) = options.endpoint {
            builder = builder.endpoint_url(url);
            if !self.named_credentials {
                builder = builder.credentials_provider(SharedCredentialsProvider::new(
                    Credentials::new("local", "local", None, None, "sql2ddb-local"),
                ));
            }
        }
        Ok(builder.build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options<'a>(endpoint: Option<&'a str>, hint: Option<&str>) -> ServiceOptions<'a> {
        ServiceOptions {
            endpoint,
            region_hint: hint.map(str::to_string),
            retry: SdkRetry::Off,
            connect_timeout: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(2),
        }
    }

    #[tokio::test]
    async fn every_service_takes_the_given_region_and_its_own_endpoint() {
        let aws = AwsContext::load(Some("eu-west-3"), false).await;
        let dynamo = aws
            .service(options(Some("http://127.0.0.1:9"), None))
            .unwrap();
        let sqs = aws.service(options(None, Some("ap-south-1"))).unwrap();
        assert_eq!(dynamo.region().unwrap().as_ref(), "eu-west-3");
        assert_eq!(sqs.region().unwrap().as_ref(), "eu-west-3");
        assert_eq!(dynamo.endpoint_url(), Some("http://127.0.0.1:9"));
        assert_eq!(sqs.endpoint_url(), None);
        let timeouts = dynamo.timeout_config().unwrap();
        assert_eq!(timeouts.connect_timeout(), Some(Duration::from_secs(1)));
        assert_eq!(dynamo.retry_config().unwrap().max_attempts(), 1);
    }

    #[tokio::test]
    async fn without_a_region_aws_is_refused_and_emulators_get_a_default() {
        if !sql2ddb_testkit::support::without_a_region(
            "config::tests::without_a_region_aws_is_refused_and_emulators_get_a_default",
        ) {
            return;
        }
        let aws = AwsContext::load(None, false).await;
        assert_eq!(aws.region(), None);
        assert_eq!(aws.service(options(None, None)).unwrap_err(), MissingRegion);
        let hinted = aws.service(options(None, Some("eu-north-1"))).unwrap();
        assert_eq!(hinted.region().unwrap().as_ref(), "eu-north-1");
        let local = aws
            .service(options(Some("http://127.0.0.1:9"), None))
            .unwrap();
        assert_eq!(local.region().unwrap().as_ref(), EMULATOR_REGION);
    }
}
