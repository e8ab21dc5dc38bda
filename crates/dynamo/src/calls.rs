//! The writer's one call, `BatchWriteItem`, made with the SDK's parts but
//! without its per-call machinery.
//!
//! A call through the SDK's client costs about 215,000 instructions beside
//! the signature's hash: the configuration layers merged again for every
//! call, interceptors a client cannot turn off, auth and endpoint resolved
//! again, the SDK's serialiser run on an empty input before our body
//! replaced it, and the response's deserialiser. Every one of those answers
//! the same on every call of a writer. [`BatchCalls`] settles them once, when
//! it is made, and keeps the SDK for each part it is good at:
//!
//! - the endpoint: the DynamoDB client's own resolver (`DefaultResolver`),
//!   from the configuration's region, FIPS and dual-stack settings, or the
//!   custom URL; resolved once;
//! - credentials: the configuration's provider (the default chain: the
//!   environment, profiles, SSO, web identity, container and instance
//!   metadata), cached and fetched again 5 minutes before they expire (or
//!   halfway through a shorter lifetime), by one task at a time, and at
//!   once, for one more try of the call, when the service refuses cached
//!   ones as expired;
//! - signing: SigV4 as `aws-sigv4`, the SDK's signer, does it with its
//!   default settings and the SDK's headers for the call; the canonical
//!   request's fixed parts are settled once and the signing key kept per
//!   day and credentials (the `sign` module), with `aws-sigv4`'s HMAC, after
//!   a probe signed both ways agreed; else `aws-sigv4` signs every call;
//! - HTTP: the SDK's connector (hyper with its connection pool, rustls on
//!   aws-lc, the proxy settings of the environment, the connect timeout),
//!   each attempt bounded by the attempt timeout;
//! - clock skew: corrected from the service's `Date` header, as the SDK does,
//!   once it exceeds a minute; a call refused for its signature by an
//!   answer that moved the skew is signed again and made once more;
//! - errors: classified from the code and the HTTP status
//!   ([`Failure::of_service`]) and worded as the SDK's were.
//!
//! The request body is the items' own text ([`crate::body`]); the items
//! DynamoDB leaves unprocessed are found again among ours by value.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use aws_smithy_async::rt::sleep::TokioSleep;
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::{tls, Connector};
use aws_smithy_runtime_api::client::http::{HttpConnector, HttpConnectorSettings};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::http::Request;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::byte_stream::ByteStream;
use aws_smithy_types::date_time::{DateTime, Format};
use aws_types::service_config::ServiceConfigKey;
use aws_types::SdkConfig;
use bytes::Bytes;
use serde::Deserialize;
use sql2ddb_core::EncodedItem;

use crate::client::{ATTEMPT_TIMEOUT, CONNECT_TIMEOUT, NO_REGION_MESSAGE};
use crate::error::DynamoError;
use crate::failure::Failure;
use crate::headers::FixedHeaders;
use crate::sign::Signing;
use crate::writer::{BatchWriteApi, CallError};

/// The service name requests are signed for.
const SIGNING_NAME: &str = "dynamodb";
/// The body's media type for DynamoDB's JSON protocol.
const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// The operation, as the JSON protocol names it.
const TARGET: &str = "DynamoDB_20120810.BatchWriteItem";
/// The answer with nothing unprocessed, read without parsing.
const ALL_PROCESSED: &[u8] = br#"{"UnprocessedItems":{}}"#;
/// How long before credentials expire they are fetched again (at most).
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// A skew of the service's clock below this is left alone: the `Date`
/// header has whole seconds, and SigV4 allows 5 minutes.
const SKEW_THRESHOLD_MS: i64 = 60_000;

/// `BatchWriteItem` calls to one endpoint, in one region, with one
/// configuration's credentials: see the module's documentation. Cheap to
/// clone; clones share the connections and the cached credentials.
#[derive(Clone)]
pub struct BatchCalls {
    inner: Arc<Inner>,
    attempt_timeout: Duration,
}

struct Inner {
    /// The request URL: the endpoint with the operation's path, `/`.
    url: String,
    region: String,
    provider: SharedCredentialsProvider,
    cached: RwLock<Option<Cached>>,
    /// Held by the one task fetching credentials.
    fetching: tokio::sync::Mutex<()>,
    connector: Connector,
    /// Signs each request; holds the headers every request carries.
    signing: Signing,
    /// The `user-agent` header (not signed).
    user_agent: String,
    /// Inside AWS Lambda, each call passes on the invocation's trace id.
    in_lambda: bool,
    /// The service's clock minus ours, in milliseconds, once it is past
    /// [`SKEW_THRESHOLD_MS`]; else 0.
    skew_ms: AtomicI64,
}

struct Cached {
    identity: Identity,
    /// When to fetch again; never for credentials that do not expire.
    refresh_at: Option<SystemTime>,
    /// Which fetch these are (counted from 1), so that only the credentials
    /// a refused call used are forgotten, never newer ones.
    fetch: u64,
}

/// The credentials a call signs with.
struct Signer {
    identity: Identity,
    /// Which fetch they came from (see [`Cached::fetch`]).
    fetch: u64,
    /// Whether this call fetched them (else they came from the cache).
    fetched_now: bool,
}

/// The error codes that say the signing credentials are no longer valid.
const STALE_CREDENTIALS: &[&str] = &["ExpiredTokenException", "ExpiredToken"];
/// The error codes a request signed at the wrong time gets.
const SIGNED_OFF_CLOCK: &[&str] = &[
    "InvalidSignatureException",
    "RequestTimeTooSkewed",
    "RequestExpired",
];

/// What a refused attempt says about trying the call again at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// Nothing: the refusal stands.
    Stands,
    /// The credentials it was signed with were refused as expired.
    Credentials,
    /// It was refused for its signature, and its answer moved our idea of
    /// the service's clock: signed again, it may pass.
    Clock,
}

/// What to do before trying a refused call once more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Again {
    /// Forget the cached credentials of this fetch first.
    Refetch(u64),
    /// Sign again with the clock as it is now known.
    Resign,
}

impl fmt::Debug for BatchCalls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchCalls")
            .field("url", &self.inner.url)
            .field("region", &self.inner.region)
            .field("attempt_timeout", &self.attempt_timeout)
            .finish_non_exhaustive()
    }
}

impl BatchCalls {
    /// Calls with `config`'s endpoint (its `endpoint_url`, else DynamoDB's
    /// regional endpoint), region, credentials, timeouts and app name.
    /// Makes no request: the endpoint is resolved by rules, credentials are
    /// fetched by the first call.
    pub async fn new(config: &SdkConfig) -> Result<BatchCalls, DynamoError> {
        let region = config
            .region()
            .ok_or_else(|| DynamoError::Config(NO_REGION_MESSAGE.to_string()))?
            .to_string();
        let params = Params::builder()
            .region(region.clone())
            .use_fips(config.use_fips().unwrap_or(false))
            .use_dual_stack(config.use_dual_stack().unwrap_or(false))
            .set_endpoint(endpoint_url(config))
            .account_id_endpoint_mode("disabled")
            .build()
            .map_err(|e| DynamoError::Config(format!("DynamoDB endpoint: {e}")))?;
        let endpoint = DefaultResolver::new()
            .resolve_endpoint(&params)
            .await
            .map_err(|e| DynamoError::Config(format!("DynamoDB endpoint: {e}")))?;
        let provider = config.credentials_provider().ok_or_else(|| {
            DynamoError::Config("no AWS credentials provider is configured".into())
        })?;
        let timeouts = config.timeout_config();
        let connect = timeouts
            .and_then(|t| t.connect_timeout())
            .unwrap_or(CONNECT_TIMEOUT);
        let attempt_timeout = timeouts
            .and_then(|t| t.operation_attempt_timeout())
            .unwrap_or(ATTEMPT_TIMEOUT);
        let connector = Connector::builder()
            .connector_settings(
                HttpConnectorSettings::builder()
                    .connect_timeout(connect)
                    .build(),
            )
            .sleep_impl(TokioSleep::new())
            .proxy_config(ProxyConfig::from_env())
            .tls_provider(tls::Provider::Rustls(
                tls::rustls_provider::CryptoMode::AwsLc,
            ))
            .build();
        let url = request_url(endpoint.url());
        let headers = FixedHeaders::new(config.app_name());
        let signing = Signing::new(
            &url,
            &region,
            SIGNING_NAME,
            vec![
                ("content-type", CONTENT_TYPE.to_string()),
                ("x-amz-target", TARGET.to_string()),
                ("x-amz-user-agent", headers.x_amz_user_agent().to_string()),
            ],
        );
        Ok(BatchCalls {
            inner: Arc::new(Inner {
                url,
                region,
                provider,
                cached: RwLock::new(None),
                fetching: tokio::sync::Mutex::new(()),
                connector,
                signing,
                user_agent: headers.user_agent().to_string(),
                in_lambda: std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some(),
                skew_ms: AtomicI64::new(0),
            }),
            attempt_timeout,
        })
    }

    /// The same calls with another bound on each attempt.
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// The URL requests are sent to.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The region requests are signed for.
    pub fn region(&self) -> &str {
        &self.inner.region
    }

    /// Whether requests are signed from parts settled once (see
    /// the `sign` module), not by `aws-sigv4`'s general signer: true for an
    /// endpoint URL without a path, as every AWS endpoint is.
    pub fn signs_directly(&self) -> bool {
        self.inner.signing.is_direct()
    }

    /// The credentials to sign with: the cached ones while fresh, else
    /// fetched by one task while the others wait for its answer.
    async fn identity(&self) -> Result<Signer, CallError> {
        if let Some(signer) = self.fresh_identity() {
            return Ok(signer);
        }
        let _one = self.inner.fetching.lock().await;
        if let Some(signer) = self.fresh_identity() {
            return Ok(signer);
        }
        let fetch = self
            .inner
            .cached
            .read()
            .expect("credentials cache")
            .as_ref()
            .map_or(1, |c| c.fetch + 1);
        let fetched_at = SystemTime::now();
        let credentials = self
            .inner
            .provider
            .provide_credentials()
            .await
            .map_err(credentials_error)?;
        let refresh_at = credentials
            .expiry()
            .map(|expiry| refresh_time(fetched_at, expiry));
        let identity = Identity::from(credentials);
        *self.inner.cached.write().expect("credentials cache") = Some(Cached {
            identity: identity.clone(),
            refresh_at,
            fetch,
        });
        Ok(Signer {
            identity,
            fetch,
            fetched_now: true,
        })
    }

    fn fresh_identity(&self) -> Option<Signer> {
        let cached = self.inner.cached.read().expect("credentials cache");
        let c = cached.as_ref()?;
        match c.refresh_at {
            Some(at) if SystemTime::now() >= at => None,
            _ => Some(Signer {
                identity: c.identity.clone(),
                fetch: c.fetch,
                fetched_now: false,
            }),
        }
    }

    /// Forgets the credentials of `fetch`, if they are still the cached
    /// ones: the next call fetches new ones.
    fn forget(&self, fetch: u64) {
        let mut cached = self.inner.cached.write().expect("credentials cache");
        // Marked due rather than dropped, so the count of fetches goes on.
        if let Some(c) = cached.as_mut().filter(|c| c.fetch == fetch) {
            c.refresh_at = Some(SystemTime::UNIX_EPOCH);
        }
    }

    /// Now by the service's clock.
    fn now(&self) -> SystemTime {
        let skew = self.inner.skew_ms.load(Ordering::Relaxed);
        let now = SystemTime::now();
        if skew >= 0 {
            now + Duration::from_millis(skew as u64)
        } else {
            now - Duration::from_millis(skew.unsigned_abs())
        }
    }

    /// Notes the service's clock from a response's `Date` header; says
    /// whether that moved the skew kept by a minute or more.
    fn note_clock(&self, date: Option<&str>) -> bool {
        let Some(server) = date
            .and_then(|d| DateTime::from_str(d, Format::HttpDate).ok())
            .and_then(|d| SystemTime::try_from(d).ok())
        else {
            return false;
        };
        let skew_ms = match server.duration_since(SystemTime::now()) {
            Ok(ahead) => ahead.as_millis() as i64,
            Err(behind) => -(behind.duration().as_millis() as i64),
        };
        let kept = if skew_ms.abs() >= SKEW_THRESHOLD_MS {
            skew_ms
        } else {
            0
        };
        let before = self.inner.skew_ms.swap(kept, Ordering::Relaxed);
        (kept - before).abs() >= SKEW_THRESHOLD_MS
    }

    /// The signed request that puts `body` into the table.
    fn request(&self, body: Bytes, signer: &Signer) -> Result<Request, CallError> {
        let inner = &*self.inner;
        let length = body.len().to_string();
        let signature = inner
            .signing
            .sign(&signer.identity, signer.fetch, self.now(), &body, &length)
            .map_err(|e| CallError {
                failure: Failure::TableFault,
                message: format!("the request could not be signed: {e}"),
            })?;
        let mut request = Request::new(SdkBody::from(body));
        request.set_method("POST").expect("POST is a method");
        request
            .set_uri(inner.url.as_str())
            .expect("the endpoint's URL was checked when it was resolved");
        let out = request.headers_mut();
        for (name, value) in inner.signing.headers() {
            out.insert(*name, value.clone());
        }
        out.insert("content-length", length);
        out.insert("user-agent", inner.user_agent.clone());
        if inner.in_lambda {
            // Not signed: it changes with every invocation.
            if let Ok(id) = std::env::var("_X_AMZN_TRACE_ID") {
                out.insert("x-amzn-trace-id", crate::headers::header_safe(id));
            }
        }
        for (name, value) in signature {
            out.insert(name, value);
        }
        Ok(request)
    }

    /// One attempt, bounded by the attempt timeout. A refusal says whether
    /// trying once more at once may pass, and what to do first.
    async fn timed_attempt(
        &self,
        table: &str,
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, (CallError, Option<Again>)> {
        let attempt = async {
            let signer = self.identity().await.map_err(|e| (e, None))?;
            self.attempt(table, items, &signer)
                .await
                .map_err(|(e, refusal)| {
                    let again = match refusal {
                        Refusal::Credentials if !signer.fetched_now => {
                            Some(Again::Refetch(signer.fetch))
                        }
                        Refusal::Clock => Some(Again::Resign),
                        _ => None,
                    };
                    (e, again)
                })
        };
        match tokio::time::timeout(self.attempt_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err((
                CallError {
                    failure: Failure::Transient,
                    message: format!(
                        "timeout: the call took longer than its attempt timeout ({:?})",
                        self.attempt_timeout
                    ),
                },
                None,
            )),
        }
    }

    /// One attempt, unbounded in time.
    async fn attempt(
        &self,
        table: &str,
        items: &[&EncodedItem],
        signer: &Signer,
    ) -> Result<Vec<usize>, (CallError, Refusal)> {
        let stands = |e| (e, Refusal::Stands);
        let request = self
            .request(crate::body::batch_put_body(table, items), signer)
            .map_err(stands)?;
        let response = self
            .inner
            .connector
            .call(request)
            .await
            .map_err(|e| stands(transport_error(e)))?;
        let status = response.status().as_u16();
        let clock_moved = self.note_clock(response.headers().get("date"));
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .map(str::to_string);
        let body = ByteStream::new(response.into_body())
            .collect()
            .await
            .map_err(|e| {
                let message = format!("response error: the body could not be read: {e}");
                let failure = Failure::Transient;
                stands(CallError { failure, message })
            })?
            .into_bytes();
        if !(200..300).contains(&status) {
            let (error, code) = service_error(status, error_type.as_deref(), &body);
            let code = code.as_deref().unwrap_or("");
            let refusal = if STALE_CREDENTIALS.contains(&code) {
                Refusal::Credentials
            } else if clock_moved && SIGNED_OFF_CLOCK.contains(&code) {
                Refusal::Clock
            } else {
                Refusal::Stands
            };
            return Err((error, refusal));
        }
        unprocessed(table, items, &body).map_err(stands)
    }
}

impl BatchWriteApi for BatchCalls {
    async fn batch_put(
        &self,
        table: &str,
        items: &[&EncodedItem],
    ) -> Result<Vec<usize>, CallError> {
        match self.timed_attempt(table, items).await {
            // Cached credentials refused as expired (revoked, or expired
            // before their stated expiry) are fetched again; a signature
            // refused by a service whose clock we just learned is made again
            // at its time. Either way the call is made once more; refused
            // again, the refusal stands.
            Err((_, Some(again))) => {
                if let Again::Refetch(fetch) = again {
                    self.forget(fetch);
                }
                self.timed_attempt(table, items).await.map_err(|(e, _)| e)
            }
            other => other.map_err(|(e, _)| e),
        }
    }
}

/// The endpoint URL the SDK's DynamoDB client of `config` goes to, chosen
/// as that client chooses it: one set in code wins; else the service's own
/// setting (`AWS_ENDPOINT_URL_DYNAMODB`, or `endpoint_url` under `dynamodb`
/// in the profile's services), else the global one (`AWS_ENDPOINT_URL`).
fn endpoint_url(config: &SdkConfig) -> Option<String> {
    if config.get_origin("endpoint_url").is_client_config() {
        return config.endpoint_url().map(str::to_string);
    }
    let key = ServiceConfigKey::builder()
        .service_id("DynamoDB")
        .env("AWS_ENDPOINT_URL")
        .profile("endpoint_url")
        .build()
        .expect("every field is set");
    config
        .service_config()
        .and_then(|c| c.load_config(key))
        .or_else(|| config.endpoint_url().map(str::to_string))
}

/// `url` with the operation's path: `/` after the endpoint's own path.
fn request_url(url: &str) -> String {
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// When credentials fetched at `fetched_at` that expire at `expiry` are
/// fetched again: [`REFRESH_BEFORE_EXPIRY`] before, or halfway through a
/// lifetime shorter than twice that.
fn refresh_time(fetched_at: SystemTime, expiry: SystemTime) -> SystemTime {
    let lifetime = expiry.duration_since(fetched_at).unwrap_or_default();
    expiry - REFRESH_BEFORE_EXPIRY.min(lifetime / 2)
}

/// A credentials provider's failure: no credentials at all, or bad
/// configuration, is a fault of every call alike; a provider that timed out
/// or failed unexpectedly may answer next time.
fn credentials_error(e: CredentialsError) -> CallError {
    let failure = match e {
        CredentialsError::ProviderTimedOut(_) | CredentialsError::Unhandled(_) => {
            Failure::Transient
        }
        _ => Failure::TableFault,
    };
    CallError {
        failure,
        message: format!("no AWS credentials: {}", chain(&e)),
    }
}

/// A failure to send or to hear back: may succeed when tried again.
fn transport_error(e: ConnectorError) -> CallError {
    let kind = if e.is_timeout() {
        "timeout"
    } else {
        "dispatch failure"
    };
    CallError {
        failure: Failure::Transient,
        message: format!("{kind}: {}", chain(&e)),
    }
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The error body of DynamoDB's JSON protocol.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type")]
    code: Option<String>,
    #[serde(alias = "Message")]
    message: Option<String>,
}

/// A refusal by the service: its code (from `x-amzn-errortype`, else the
/// body's `__type`, without namespace or suffix) and message, classified.
/// Returns the error and its code.
pub(crate) fn service_error(
    status: u16,
    error_type: Option<&str>,
    body: &[u8],
) -> (CallError, Option<String>) {
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    let (body_code, message) = parsed.map_or((None, None), |b| (b.code, b.message));
    let code = error_type
        .map(str::to_string)
        .or(body_code)
        .map(|c| bare_code(&c).to_string())
        .filter(|c| !c.is_empty());
    let summary = || sql2ddb_aws::message::http_summary_of(status, body);
    let message = match (&code, message) {
        (code, Some(message)) => format!("{}: {message}", code.as_deref().unwrap_or("error")),
        (Some(code), None) => format!("{code}: {}", summary()),
        (None, None) => summary(),
    };
    let error = CallError {
        failure: Failure::of_service(code.as_deref().unwrap_or(""), status >= 500),
        message,
    };
    (error, code)
}

/// `com.amazonaws.dynamodb.v20120810#ResourceNotFoundException:http://…`
/// is `ResourceNotFoundException`.
fn bare_code(code: &str) -> &str {
    let code = code.rsplit_once('#').map_or(code, |(_, c)| c);
    code.split_once(':').map_or(code, |(c, _)| c).trim()
}

/// The part of a `BatchWriteItem` answer the writer reads.
#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "UnprocessedItems", default)]
    unprocessed: std::collections::HashMap<String, Vec<WriteRequest>>,
}

#[derive(Deserialize)]
struct WriteRequest {
    #[serde(rename = "PutRequest")]
    put: Option<PutRequest>,
}

#[derive(Deserialize)]
struct PutRequest {
    #[serde(rename = "Item")]
    item: serde_json::Value,
}

/// The indices of `items` that a successful answer returned unprocessed,
/// found by value (attribute order and spacing aside).
pub(crate) fn unprocessed(
    table: &str,
    items: &[&EncodedItem],
    body: &[u8],
) -> Result<Vec<usize>, CallError> {
    if body == ALL_PROCESSED {
        return Ok(Vec::new());
    }
    let mut answer: Answer = serde_json::from_slice(body).map_err(|e| CallError {
        failure: Failure::Transient,
        message: format!(
            "response error: the answer could not be read ({e}): {}",
            sql2ddb_aws::message::http_summary_of(200, body)
        ),
    })?;
    let back: Vec<serde_json::Value> = answer
        .unprocessed
        .remove(table)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| w.put.map(|p| p.item))
        .collect();
    if back.is_empty() {
        return Ok(Vec::new());
    }
    Ok(items
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            serde_json::from_str::<serde_json::Value>(m.item.get())
                .is_ok_and(|ours| back.contains(&ours))
        })
        .map(|(i, _)| i)
        .collect())
}

#[cfg(test)]
mod tests {
    use sql2ddb_core::{AttrValue, Item, KeyAttr, KeyType};

    use super::*;

    fn item(pk: &str, n: &str) -> EncodedItem {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S(pk.into()));
        item.insert("n".into(), AttrValue::N(n.into()));
        EncodedItem::new(
            &item,
            &[KeyAttr::new("PK", KeyType::S)],
            serde_json::Value::Null,
            1,
        )
    }

    #[test]
    fn unprocessed_items_are_found_again_by_value() {
        let (a, b, c) = (item("A", "1"), item("B", "2"), item("C", "3"));
        let items = [&a, &b, &c];
        assert!(unprocessed("t", &items, ALL_PROCESSED).unwrap().is_empty());
        // Attributes in another order, other spacing, another table's
        // items and a delete request are all told apart.
        let answer = br#"{"UnprocessedItems":{
            "t":[{"PutRequest":{"Item":{"n":{"N":"3"},"PK":{"S":"C"}}}},
                 {"DeleteRequest":{"Key":{"PK":{"S":"A"}}}},
                 {"PutRequest":{"Item":{ "PK" : {"S":"A"}, "n":{"N":"1"} }}}],
            "other":[{"PutRequest":{"Item":{"PK":{"S":"B"},"n":{"N":"2"}}}}]}}"#;
        assert_eq!(unprocessed("t", &items, answer).unwrap(), vec![0, 2]);
        let err = unprocessed("t", &items, b"Service busy").unwrap_err();
        assert_eq!(err.failure, Failure::Transient);
        assert!(
            err.message.ends_with("HTTP 200: Service busy"),
            "{}",
            err.message
        );
    }

    #[test]
    fn service_errors_are_classified_by_code_and_status() {
        for (status, header, body, failure, says) in [
            (
                400,
                None,
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}"#,
                Failure::Throttled,
                "ProvisionedThroughputExceededException: slow down",
            ),
            (
                400,
                Some("ResourceNotFoundException:http://internal.amazon.com/"),
                r#"{"Message":"Requested resource not found"}"#,
                Failure::TableFault,
                "ResourceNotFoundException: Requested resource not found",
            ),
            (
                400,
                None,
                r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad item"}"#,
                Failure::ItemRejected,
                "ValidationException: bad item",
            ),
            (
                500,
                None,
                r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError"}"#,
                Failure::Transient,
                "InternalServerError: HTTP 500",
            ),
            (
                502,
                None,
                "<html><body><h1>Bad gateway</h1></body></html>",
                Failure::Transient,
                "HTTP 502: Bad gateway",
            ),
        ] {
            let (e, _) = service_error(status, header, body.as_bytes());
            assert_eq!(e.failure, failure, "{body}");
            assert!(
                e.message.starts_with(says),
                "{} (expected {says})",
                e.message
            );
        }
    }

    #[test]
    fn credentials_are_fetched_again_before_they_expire() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(3600);
        assert_eq!(
            refresh_time(t0, t0 + hour),
            t0 + hour - REFRESH_BEFORE_EXPIRY
        );
        let short = Duration::from_secs(120);
        assert_eq!(refresh_time(t0, t0 + short), t0 + short / 2);
        assert_eq!(
            refresh_time(t0, t0),
            t0,
            "already expired: fetch every time"
        );
    }

    #[test]
    fn request_urls_end_in_the_operation_path() {
        assert_eq!(
            request_url("http://127.0.0.1:8000"),
            "http://127.0.0.1:8000/"
        );
        assert_eq!(
            request_url("https://dynamodb.eu-west-1.amazonaws.com/"),
            "https://dynamodb.eu-west-1.amazonaws.com/"
        );
    }
}
