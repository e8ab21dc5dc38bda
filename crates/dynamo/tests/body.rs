//! The writer's `BatchWriteItem` calls ([`BatchCalls`]): the body,
//! serialised once from our items, is the request the SDK itself would send
//! for the same items, with the SDK's headers, signed so that the signature
//! checks out from the bytes that arrived; credentials are cached until they
//! are about to expire; a skewed service clock is followed; and every kind
//! of answer comes back classified. Captured on the wire of loopback servers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::region::Region;
use aws_types::SdkConfig;
use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::convert::item_to_sdk;
use sql2ddb_dynamo::writer::BatchWriteApi;
use sql2ddb_dynamo::{connect_with_calls, BatchCalls, Endpoint, Failure};
use tokio::net::TcpListener;

mod common;

use common::{all_processed, answering_server, capture_server, Captured};

fn items() -> Vec<Item> {
    let mut a = Item::new();
    a.insert("PK".into(), AttrValue::S("ORDER#\"1\"\n€".into()));
    a.insert("n".into(), AttrValue::N("-12.5".into()));
    a.insert(
        "big".into(),
        AttrValue::N("1234567890123456789012345678901234567".into()),
    );
    a.insert("b".into(), AttrValue::B(vec![0, 1, 255]));
    a.insert("t".into(), AttrValue::Bool(true));
    a.insert("z".into(), AttrValue::Null);
    a.insert("ss".into(), AttrValue::SS(vec!["a".into(), "é".into()]));
    a.insert("ns".into(), AttrValue::NS(vec!["1".into(), "2.5".into()]));
    a.insert("bs".into(), AttrValue::BS(vec![vec![1], vec![2, 3]]));
    let mut inner = Item::new();
    inner.insert(
        "k".into(),
        AttrValue::L(vec![AttrValue::N("1".into()), AttrValue::Null]),
    );
    a.insert("m".into(), AttrValue::M(inner));
    let mut b = Item::new();
    b.insert("PK".into(), AttrValue::S("B".into()));
    b.insert("l".into(), AttrValue::L(vec![]));
    vec![a, b]
}

fn encoded(items: &[Item]) -> Vec<EncodedItem> {
    let keys = [KeyAttr::new("PK", KeyType::S)];
    items
        .iter()
        .map(|item| EncodedItem::new(item, &keys, serde_json::Value::Null, 0))
        .collect()
}

/// Calls to `url` signed with `credentials`, in us-east-1.
async fn calls_with(url: &str, credentials: impl ProvideCredentials + 'static) -> BatchCalls {
    let config = SdkConfig::builder()
        .region(Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .build();
    BatchCalls::new(&config).await.unwrap()
}

/// The headers the SDK would send for the same call, minus the two it
/// writes on every call that our client leaves out (see `headers`).
const PER_CALL: [&str; 2] = ["x-amz-date", "authorization"];

#[tokio::test]
async fn the_body_serialised_once_is_the_request_the_sdk_sends() {
    let (url, mut requests) = capture_server().await;
    let (client, calls) = connect_with_calls(&Endpoint::Url(url), Some("us-east-1"))
        .await
        .unwrap();
    let items = items();

    // The SDK's own request for these items.
    let puts: Vec<WriteRequest> = items
        .iter()
        .map(|item| {
            let put = PutRequest::builder()
                .set_item(Some(item_to_sdk(item)))
                .build()
                .unwrap();
            WriteRequest::builder().put_request(put).build()
        })
        .collect();
    client
        .batch_write_item()
        .request_items("shop-t", puts)
        .send()
        .await
        .unwrap();
    let sdk = requests.recv().await.unwrap();

    // The writer's, from the items' text serialised when they were mapped.
    let encoded = encoded(&items);
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let unprocessed = calls.batch_put("shop-t", &refs).await.unwrap();
    assert!(unprocessed.is_empty());
    let ours = requests.recv().await.unwrap();

    let json = |c: &Captured| serde_json::from_slice::<serde_json::Value>(&c.body).unwrap();
    assert_eq!(json(&ours), json(&sdk));
    assert_eq!(ours.path, sdk.path);
    assert_eq!(
        ours.headers["content-length"],
        ours.body.len().to_string(),
        "the length of the body sent"
    );
    // The same headers, with the same values but for the time and the
    // signature (and the length, should the two serialisations differ).
    let names = |c: &Captured| {
        let mut n: Vec<String> = c.headers.keys().cloned().collect();
        n.sort();
        n
    };
    assert_eq!(names(&ours), names(&sdk));
    for (name, value) in &ours.headers {
        if !PER_CALL.contains(&name.as_str()) && name != "content-length" {
            assert_eq!(value, &sdk.headers[name], "header {name}");
        }
    }
    assert_eq!(signed_headers(&ours), signed_headers(&sdk));
    assert_eq!(
        ours.headers["x-amz-target"],
        "DynamoDB_20120810.BatchWriteItem"
    );
}

/// The names in the `SignedHeaders=` list of a request's authorization.
fn signed_headers(c: &Captured) -> Vec<String> {
    let auth = &c.headers["authorization"];
    let list = auth
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap_or_else(|| panic!("no SignedHeaders in {auth}"));
    list.split(';').map(str::to_string).collect()
}

/// The time a request says it was signed at (`x-amz-date`).
fn signed_at(c: &Captured) -> SystemTime {
    let date = &c.headers["x-amz-date"];
    let time = aws_smithy_types::DateTime::from_str(
        &format!(
            "{}-{}-{}T{}:{}:{}Z",
            &date[0..4],
            &date[4..6],
            &date[6..8],
            &date[9..11],
            &date[11..13],
            &date[13..15]
        ),
        aws_smithy_types::date_time::Format::DateTime,
    )
    .unwrap();
    SystemTime::try_from(time).unwrap()
}

/// The `Authorization` header a SigV4 verifier holding `secret` expects for
/// the request as it arrived: the signed headers' values, the body, and the
/// time in `x-amz-date`.
fn expected_authorization(c: &Captured, access_key: &str, secret: &str) -> String {
    let time = signed_at(c);
    let token = c.headers.get("x-amz-security-token").cloned();
    let identity: Identity = Credentials::new(access_key, secret, token, None, "test").into();
    let signed = signed_headers(c);
    let headers: Vec<(&str, &str)> = signed
        .iter()
        .filter(|name| *name != "x-amz-date" && *name != "x-amz-security-token")
        .map(|name| (name.as_str(), c.headers[name].as_str()))
        .collect();
    let uri = format!("http://{}{}", c.headers["host"], c.path);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("dynamodb")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let request = SignableRequest::new(
        "POST",
        uri,
        headers.into_iter(),
        SignableBody::Bytes(&c.body),
    )
    .unwrap();
    let (instructions, _) = sign(request, &params).unwrap().into_parts();
    let (out, _) = instructions.into_parts();
    out.iter()
        .find(|h| h.name() == "authorization")
        .expect("an authorization header")
        .value()
        .to_string()
}

#[tokio::test]
async fn the_signature_checks_out_from_the_bytes_that_arrived() {
    let (url, mut requests) = capture_server().await;
    let calls = calls_with(
        &url,
        Credentials::new(
            "AKIDEXAMPLE",
            "the-secret",
            Some("the-token".into()),
            None,
            "test",
        ),
    )
    .await;
    // Signed from the parts settled once, not by aws-sigv4's general signer:
    // the check below is of that way.
    assert!(calls.signs_directly());
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    calls.batch_put("shop-t", &refs).await.unwrap();
    // A second call signs with the signing key kept from the first.
    calls.batch_put("shop-t", &refs[..1]).await.unwrap();
    let c = requests.recv().await.unwrap();
    let again = requests.recv().await.unwrap();
    assert_eq!(
        again.headers["authorization"],
        expected_authorization(&again, "AKIDEXAMPLE", "the-secret")
    );
    assert_eq!(c.headers["x-amz-security-token"], "the-token");
    assert!(signed_headers(&c).contains(&"x-amz-security-token".to_string()));
    assert!(
        c.headers["authorization"].starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/us-east-1/dynamodb/aws4_request",
            &c.headers["x-amz-date"][..8]
        )),
        "{}",
        c.headers["authorization"]
    );
    assert_eq!(
        c.headers["authorization"],
        expected_authorization(&c, "AKIDEXAMPLE", "the-secret")
    );
    // The check can fail: another secret gives another signature.
    assert_ne!(
        c.headers["authorization"],
        expected_authorization(&c, "AKIDEXAMPLE", "another-secret")
    );
}

/// A provider that counts its fetches and hands out credentials expiring
/// `lifetime` after each fetch.
#[derive(Debug)]
struct Counting {
    fetches: Arc<AtomicUsize>,
    lifetime: Duration,
}

impl ProvideCredentials for Counting {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let n = self.fetches.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new(
            format!("AKID{n}"),
            format!("secret{n}"),
            None,
            Some(SystemTime::now() + self.lifetime),
            "counting",
        )))
    }
}

/// Calls to `url` signing with [`Counting`] credentials of `lifetime`,
/// and the count of their fetches.
async fn counting_calls(url: &str, lifetime: Duration) -> (BatchCalls, Arc<AtomicUsize>) {
    let fetches = Arc::new(AtomicUsize::new(0));
    let counting = Counting {
        fetches: fetches.clone(),
        lifetime,
    };
    (calls_with(url, counting).await, fetches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_cached_until_they_are_about_to_expire() {
    let (url, mut requests) = capture_server().await;
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();

    // An hour's credentials: fetched once for many calls, even concurrent ones.
    let hour = Duration::from_secs(3600);
    let (calls, fetches) = counting_calls(&url, hour).await;
    let all = futures::future::join_all((0..8).map(|_| calls.batch_put("t", &refs))).await;
    assert!(all.into_iter().all(|r| r.unwrap().is_empty()));
    calls.batch_put("t", &refs).await.unwrap();
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    for _ in 0..9 {
        let c = requests.recv().await.unwrap();
        assert!(c.headers["authorization"].contains("Credential=AKID0/"));
    }

    // Credentials within minutes of expiring are fetched again for every
    // call, and each call is signed with the newest.
    let soon = Duration::from_secs(1);
    let (calls, fetches) = counting_calls(&url, soon).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    calls.batch_put("t", &refs).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    calls.batch_put("t", &refs).await.unwrap();
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    let first = requests.recv().await.unwrap();
    let second = requests.recv().await.unwrap();
    assert!(first.headers["authorization"].contains("Credential=AKID0/"));
    assert!(second.headers["authorization"].contains("Credential=AKID1/"));
    // Signed with each one's own secret: no signing key outlives its
    // credentials.
    assert_eq!(
        first.headers["authorization"],
        expected_authorization(&first, "AKID0", "secret0")
    );
    assert_eq!(
        second.headers["authorization"],
        expected_authorization(&second, "AKID1", "secret1")
    );
}

/// Answers `ExpiredTokenException` to every request signed with
/// `AKID0` after the first `allowed` of them, and nothing unprocessed to
/// every other request.
fn expires_akid0_after(allowed: usize) -> impl Fn(&Captured) -> common::Answer + Send + Sync {
    let seen = AtomicUsize::new(0);
    move |c| {
        let akid0 = c.headers["authorization"].contains("Credential=AKID0/");
        if akid0 && seen.fetch_add(1, Ordering::SeqCst) >= allowed {
            let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ExpiredTokenException","message":"The security token included in the request is expired"}"#;
            ("400 Bad Request", String::new(), body.to_string())
        } else {
            all_processed(c)
        }
    }
}

/// A provider that hands out the same credentials (`AKID0`, valid for an
/// hour by their own word) on every fetch, and counts the fetches.
#[derive(Debug)]
struct Same {
    fetches: Arc<AtomicUsize>,
}

impl ProvideCredentials for Same {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        future::ProvideCredentials::ready(Ok(Credentials::new(
            "AKID0",
            "secret",
            None,
            Some(SystemTime::now() + Duration::from_secs(3600)),
            "same",
        )))
    }
}

/// Calls that sign with [`Same`] credentials, to a server that refuses them
/// as expired after `allowed` requests; with the count of fetches and the
/// requests the server received.
async fn same_credentials_expiring_after(
    allowed: usize,
) -> (
    BatchCalls,
    Arc<AtomicUsize>,
    tokio::sync::mpsc::UnboundedReceiver<Captured>,
) {
    let (url, requests) = answering_server(expires_akid0_after(allowed)).await;
    let fetches = Arc::new(AtomicUsize::new(0));
    let same = Same {
        fetches: fetches.clone(),
    };
    (calls_with(&url, same).await, fetches, requests)
}

#[tokio::test]
async fn cached_credentials_refused_as_expired_are_fetched_again_once() {
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();

    // Credentials revoked before their stated expiry: the call that finds
    // out fetches new ones and succeeds with them.
    let (url, mut requests) = answering_server(expires_akid0_after(1)).await;
    let hour = Duration::from_secs(3600);
    let (calls, fetches) = counting_calls(&url, hour).await;
    assert!(calls.batch_put("t", &refs).await.unwrap().is_empty());
    assert!(calls.batch_put("t", &refs).await.unwrap().is_empty());
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    let credential = |c: Captured| {
        c.headers["authorization"]
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    let sent: Vec<String> = (0..3)
        .map(|_| credential(requests.try_recv().expect("three requests")))
        .collect();
    assert_eq!(
        sent,
        [
            "AWS4-HMAC-SHA256 Credential=AKID0",
            "AWS4-HMAC-SHA256 Credential=AKID0",
            "AWS4-HMAC-SHA256 Credential=AKID1"
        ]
    );
    assert!(requests.try_recv().is_err(), "no fourth request");

    // Credentials that are refused again when fetched anew: one more call,
    // then a fault of the table, not a loop.
    let (calls, fetches, mut requests) = same_credentials_expiring_after(1).await;
    assert!(calls.batch_put("t", &refs).await.unwrap().is_empty());
    let e = calls.batch_put("t", &refs).await.unwrap_err();
    assert_eq!(e.failure, Failure::TableFault, "{e:?}");
    assert!(
        e.message.starts_with("ExpiredTokenException: "),
        "{}",
        e.message
    );
    assert_eq!(fetches.load(Ordering::SeqCst), 2);
    for _ in 0..3 {
        requests.try_recv().expect("three requests");
    }
    assert!(requests.try_recv().is_err(), "no fourth request");

    // Credentials fetched for the call itself and refused: no second try.
    let (calls, fetches, mut requests) = same_credentials_expiring_after(0).await;
    let e = calls.batch_put("t", &refs).await.unwrap_err();
    assert_eq!(e.failure, Failure::TableFault, "{e:?}");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    requests.try_recv().expect("one request");
    assert!(requests.try_recv().is_err(), "no second request");
}

#[tokio::test]
async fn a_skewed_service_clock_is_followed() {
    // The service's clock is two hours ahead of ours.
    let (url, mut requests) = answering_server(|c| {
        let ahead = SystemTime::now() + Duration::from_secs(7200);
        let date = aws_smithy_types::DateTime::from(ahead)
            .fmt(aws_smithy_types::date_time::Format::HttpDate)
            .unwrap();
        let (status, _, body) = all_processed(c);
        (status, format!("Date: {date}\r\n"), body)
    })
    .await;
    let calls = calls_with(&url, Credentials::new("AKID", "secret", None, None, "t")).await;
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    calls.batch_put("t", &refs).await.unwrap();
    calls.batch_put("t", &refs).await.unwrap();
    let hour_of = |c: &Captured| -> i64 {
        let d = &c.headers["x-amz-date"];
        d[9..11].parse::<i64>().unwrap() * 60 + d[11..13].parse::<i64>().unwrap()
    };
    let first = requests.recv().await.unwrap();
    let second = requests.recv().await.unwrap();
    // Minutes past midnight, two hours apart (modulo a day).
    let apart = (hour_of(&second) - hour_of(&first)).rem_euclid(24 * 60);
    assert!((119..=121).contains(&apart), "{apart} minutes apart");
    // And the signature is the one for the corrected time.
    assert_eq!(
        second.headers["authorization"],
        expected_authorization(&second, "AKID", "secret")
    );
}

/// A service whose clock is `ahead` of ours, which refuses a signature
/// more than 5 minutes off its clock (or every one, if `always`) as
/// DynamoDB does.
fn refusing_signatures(
    ahead: Duration,
    always: bool,
) -> impl Fn(&Captured) -> common::Answer + Send + Sync {
    move |c| {
        let now = SystemTime::now() + ahead;
        let date = aws_smithy_types::DateTime::from(now)
            .fmt(aws_smithy_types::date_time::Format::HttpDate)
            .unwrap();
        let off = match now.duration_since(signed_at(c)) {
            Ok(d) => d,
            Err(e) => e.duration(),
        };
        if always || off > Duration::from_secs(300) {
            let body = r#"{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"Signature expired: the request was signed more than 5 minutes from now"}"#;
            (
                "400 Bad Request",
                format!("Date: {date}\r\n"),
                body.to_string(),
            )
        } else {
            let (status, _, body) = all_processed(c);
            (status, format!("Date: {date}\r\n"), body)
        }
    }
}

#[tokio::test]
async fn a_signature_refused_for_a_clock_just_learned_is_made_again() {
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let creds = || Credentials::new("AKID", "secret", None, None, "t");

    // The service's clock is two hours ahead: the first call, signed by
    // ours, is refused; its answer tells the service's time, and the call
    // signed again at that time passes.
    let two_hours = Duration::from_secs(7200);
    let (url, mut requests) = answering_server(refusing_signatures(two_hours, false)).await;
    let calls = calls_with(&url, creds()).await;
    assert!(calls.batch_put("t", &refs).await.unwrap().is_empty());
    let first = requests.try_recv().expect("the first request");
    let second = requests.try_recv().expect("the request signed again");
    let moved = signed_at(&second)
        .duration_since(signed_at(&first))
        .unwrap();
    assert!(moved > Duration::from_secs(7100), "signed {moved:?} later");
    assert!(requests.try_recv().is_err(), "no third request");
    // Later calls are signed at the service's time from the start.
    calls.batch_put("t", &refs).await.unwrap();
    requests.try_recv().expect("one request");
    assert!(requests.try_recv().is_err(), "no retry");

    // A signature refused by a service whose clock agrees with ours (a
    // wrong secret, say) is not tried again.
    let (url, mut requests) = answering_server(refusing_signatures(Duration::ZERO, true)).await;
    let e = calls_with(&url, creds())
        .await
        .batch_put("t", &refs)
        .await
        .unwrap_err();
    assert_eq!(e.failure, Failure::TableFault, "{e:?}");
    assert!(
        e.message.starts_with("InvalidSignatureException: "),
        "{}",
        e.message
    );
    requests.try_recv().expect("one request");
    assert!(requests.try_recv().is_err(), "no second request");
}

#[tokio::test]
async fn every_kind_of_answer_comes_back_classified() {
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let creds = || Credentials::new("AKID", "secret", None, None, "t");
    for (status, body, failure, says) in [
        (
            "400 Bad Request",
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}"#,
            Failure::Throttled,
            "ProvisionedThroughputExceededException: The level",
        ),
        (
            "400 Bad Request",
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}"#,
            Failure::TableFault,
            "ResourceNotFoundException: Requested resource not found",
        ),
        (
            "400 Bad Request",
            r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Item size has exceeded the maximum allowed size"}"#,
            Failure::ItemRejected,
            "ValidationException: Item size",
        ),
        (
            "500 Internal Server Error",
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#,
            Failure::Transient,
            "InternalServerError: Internal server error",
        ),
        (
            "503 Service Unavailable",
            "<html><body>Service Unavailable</body></html>",
            Failure::Transient,
            "HTTP 503: Service Unavailable",
        ),
    ] {
        let (url, _requests) =
            answering_server(move |_| (status, String::new(), body.to_string())).await;
        let calls = calls_with(&url, creds()).await;
        let e = calls.batch_put("t", &refs).await.unwrap_err();
        assert_eq!(e.failure, failure, "{status} {body}: {e:?}");
        assert!(e.message.starts_with(says), "{}", e.message);
    }

    // The second item comes back unprocessed, its attributes in another order.
    let back: serde_json::Value = serde_json::from_str(encoded[1].item.get()).unwrap();
    let mut reordered = serde_json::Map::new();
    for (k, v) in back.as_object().unwrap().iter().rev() {
        reordered.insert(k.clone(), v.clone());
    }
    let answer =
        serde_json::json!({"UnprocessedItems": {"t": [{"PutRequest": {"Item": reordered}}]}})
            .to_string();
    let (url, _requests) =
        answering_server(move |_| ("200 OK", String::new(), answer.clone())).await;
    let calls = calls_with(&url, creds()).await;
    assert_eq!(calls.batch_put("t", &refs).await.unwrap(), vec![1]);

    // A server that never answers: the attempt times out.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let calls = calls_with(&url, creds())
        .await
        .with_attempt_timeout(Duration::from_millis(300));
    let e = calls.batch_put("t", &refs).await.unwrap_err();
    assert_eq!(e.failure, Failure::Transient, "{e:?}");
    assert!(e.message.starts_with("timeout"), "{}", e.message);
    drop(silent);

    // Nobody listening: a dispatch failure, tried again.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let e = calls_with(&url, creds())
        .await
        .batch_put("t", &refs)
        .await
        .unwrap_err();
    assert_eq!(e.failure, Failure::Transient, "{e:?}");
    assert!(e.message.starts_with("dispatch failure"), "{}", e.message);
}

#[tokio::test]
async fn calls_carry_the_user_agent_built_once_and_no_per_call_telemetry() {
    let (url, mut requests) = capture_server().await;
    let (client, calls) = connect_with_calls(&Endpoint::Url(url.clone()), Some("us-east-1"))
        .await
        .unwrap();
    // A plain SDK client of the same configuration, for the headers the
    // SDK itself writes on every call.
    let plain_config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .endpoint_url(url)
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            None,
            None,
            "test",
        ))
        .build();
    let plain = aws_sdk_dynamodb::Client::from_conf(plain_config);

    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    for _ in 0..2 {
        assert!(calls.batch_put("shop-t", &refs).await.unwrap().is_empty());
    }
    let first = requests.recv().await.unwrap();
    let second = requests.recv().await.unwrap();
    // Other operations of the client carry the same headers.
    client.list_tables().send().await.ok();
    let other = requests.recv().await.unwrap();
    plain.list_tables().send().await.ok();
    let sdk = requests.recv().await.unwrap();

    for c in [&first, &second, &other] {
        assert!(
            !c.headers.contains_key("amz-sdk-invocation-id"),
            "no invocation id: {:?}",
            c.headers
        );
        assert!(
            !c.headers.contains_key("amz-sdk-request"),
            "no attempt header: {:?}",
            c.headers
        );
        assert_eq!(c.headers["user-agent"], first.headers["user-agent"]);
        assert_eq!(
            c.headers["x-amz-user-agent"],
            first.headers["x-amz-user-agent"]
        );
        // Written before signing: the signature covers it.
        assert!(
            signed_headers(c).contains(&"x-amz-user-agent".to_string()),
            "x-amz-user-agent is signed: {}",
            c.headers["authorization"]
        );
        // Every header sent is signed, but the two a signer leaves out.
        let mut sent: Vec<String> = c
            .headers
            .keys()
            .filter(|k| *k != "authorization" && *k != "user-agent")
            .cloned()
            .collect();
        sent.sort();
        assert_eq!(signed_headers(c), sent);
    }
    // What the SDK writes on every call, we write once: the same user agent
    // but for the per-call feature codes (`m/…`) and the HTTP client's name
    // (`md/…`).
    assert!(sdk.headers.contains_key("amz-sdk-invocation-id"));
    let without_per_call = |ua: &str| -> String {
        ua.split(' ')
            .filter(|part| !part.starts_with("m/") && !part.starts_with("md/"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for header in ["user-agent", "x-amz-user-agent"] {
        let ours = &first.headers[header];
        assert_eq!(ours, &without_per_call(&sdk.headers[header]), "{header}");
        let api = format!("api/dynamodb/{}", aws_sdk_dynamodb::meta::PKG_VERSION);
        assert!(ours.split(' ').any(|part| part == api), "{header}: {ours}");
    }
}
