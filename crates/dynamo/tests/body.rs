//! The writer's `BatchWriteItem` calls ([`BatchCalls`]), made through the
//! SDK's client: the body, serialised once from our items, is the request
//! the SDK itself would send for the same items, with the SDK's headers,
//! signed so that the signature checks out from the bytes that arrived;
//! unprocessed items come back matched by key however they are re-encoded;
//! and every kind of answer comes back classified. Captured on the wire of
//! loopback servers.

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{future, ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_types::region::Region;
use aws_types::SdkConfig;
use sql2ddb_core::{AttrValue, EncodedItem, Item, KeyAttr, KeyType};
use sql2ddb_dynamo::writer::BatchWriteApi;
use sql2ddb_dynamo::{BatchCalls, Failure};
use tokio::net::TcpListener;

mod common;

use common::{answering_server, capture_server, Answer, Captured};

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

fn keys() -> Vec<KeyAttr> {
    vec![KeyAttr::new("PK", KeyType::S)]
}

/// Calls to `url` signed with `credentials`, in us-east-1.
async fn calls_with(url: &str, credentials: impl ProvideCredentials + 'static) -> BatchCalls {
    let config = SdkConfig::builder()
        .region(Region::new("us-east-1"))
        .endpoint_url(url)
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
        .build();
    sql2ddb_dynamo::Dynamo::from_config(&config).calls().clone()
}

/// The headers the SDK writes anew for every call.
const PER_CALL: [&str; 3] = ["x-amz-date", "authorization", "amz-sdk-invocation-id"];

#[tokio::test]
async fn the_body_serialised_once_is_the_request_the_sdk_sends() {
    let (url, mut requests) = capture_server().await;
    let (dynamo, client) = common::both(&url);
    let calls = dynamo.calls().clone();
    let items = items();

    // The SDK's own request for these items.
    let puts: Vec<WriteRequest> = items
        .iter()
        .map(|item| {
            let put = PutRequest::builder()
                .set_item(Some(common::item_to_sdk(item)))
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
    let unprocessed = calls.batch_put("shop-t", &keys(), &refs).await.unwrap();
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
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    calls.batch_put("shop-t", &keys(), &refs).await.unwrap();
    calls
        .batch_put("shop-t", &keys(), &refs[..1])
        .await
        .unwrap();
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

#[tokio::test]
async fn every_kind_of_answer_comes_back_classified() {
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let creds = || Credentials::new("AKID", "secret", None, None, "t");
    for (status, body, failure, says) in [
        (
            400,
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded."}"#,
            Failure::Throttled,
            "ProvisionedThroughputExceededException: The level",
        ),
        (
            400,
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}"#,
            Failure::TableFault,
            "ResourceNotFoundException: Requested resource not found",
        ),
        (
            400,
            r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"Item size has exceeded the maximum allowed size"}"#,
            Failure::ItemRejected,
            "ValidationException: Item size",
        ),
        (
            500,
            r#"{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}"#,
            Failure::Transient,
            "InternalServerError: Internal server error",
        ),
        (
            503,
            "<html><body>Service Unavailable</body></html>",
            Failure::Transient,
            "HTTP 503: Service Unavailable",
        ),
    ] {
        let (url, _requests) = answering_server(move |_| Answer::json(status, body)).await;
        let calls = calls_with(&url, creds()).await;
        let e = calls.batch_put("t", &keys(), &refs).await.unwrap_err();
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
    let (url, _requests) = answering_server(move |_| Answer::json(200, answer.clone())).await;
    let calls = calls_with(&url, creds()).await;
    assert_eq!(calls.batch_put("t", &keys(), &refs).await.unwrap(), vec![1]);

    // A server that never answers: the attempt times out.
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let calls = calls_with(&url, creds())
        .await
        .with_attempt_timeout(Duration::from_millis(300));
    let e = calls.batch_put("t", &keys(), &refs).await.unwrap_err();
    assert_eq!(e.failure, Failure::Transient, "{e:?}");
    assert!(e.message.contains("timed out"), "{}", e.message);
    drop(silent);

    // Nobody listening: a dispatch failure, tried again.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let e = calls_with(&url, creds())
        .await
        .batch_put("t", &keys(), &refs)
        .await
        .unwrap_err();
    assert_eq!(e.failure, Failure::Transient, "{e:?}");
    assert!(e.message.starts_with("dispatch failure"), "{}", e.message);
}

#[tokio::test]
async fn calls_carry_the_sdks_invocation_id_and_user_agent() {
    let (url, mut requests) = capture_server().await;
    let (dynamo, _) = common::both(&url);
    let calls = dynamo.calls().clone();
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    for _ in 0..2 {
        assert!(calls
            .batch_put("shop-t", &keys(), &refs)
            .await
            .unwrap()
            .is_empty());
    }
    let first = requests.recv().await.unwrap();
    let second = requests.recv().await.unwrap();
    // The id AWS support asks for, a new one for every call.
    let id = |c: &Captured| c.headers["amz-sdk-invocation-id"].clone();
    assert_eq!(id(&first).len(), 36, "a UUID: {}", id(&first));
    assert_ne!(id(&first), id(&second));
    let api = format!("api/dynamodb/{}", aws_sdk_dynamodb::meta::PKG_VERSION);
    assert!(
        first.headers["x-amz-user-agent"]
            .split(' ')
            .any(|p| p == api),
        "{}",
        first.headers["x-amz-user-agent"]
    );
    // Written before signing: the signature covers them.
    for name in ["x-amz-user-agent", "content-length"] {
        assert!(
            signed_headers(&first).contains(&name.to_string()),
            "{name} is signed"
        );
    }
}

/// `value` (an item's DynamoDB JSON) as the service may write it back:
/// attributes and set elements in reverse order, numbers in exponent form.
fn reencoded(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    let number = |n: &str| -> String {
        // 12.5 → 125E-1: the same number in another normal form.
        let (sign, digits) = n.strip_prefix('-').map_or(("", n), |d| ("-", d));
        match digits.split_once('.') {
            Some((int, frac)) => format!("{sign}{int}{frac}E-{}", frac.len()),
            None => format!("{sign}{digits}0E-1"),
        }
    };
    match value {
        Value::Object(m) if m.len() == 1 && m.contains_key("N") => {
            serde_json::json!({ "N": number(m["N"].as_str().unwrap()) })
        }
        Value::Object(m) if m.contains_key("NS") => {
            let ns: Vec<String> = m["NS"]
                .as_array()
                .unwrap()
                .iter()
                .rev()
                .map(|n| number(n.as_str().unwrap()))
                .collect();
            serde_json::json!({ "NS": ns })
        }
        Value::Object(m) if m.contains_key("SS") || m.contains_key("BS") => {
            let (kind, list) = m.iter().next().unwrap();
            let rev: Vec<Value> = list.as_array().unwrap().iter().rev().cloned().collect();
            serde_json::json!({ kind.clone(): rev })
        }
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.iter().rev() {
                out.insert(k.clone(), reencoded(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(reencoded).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn real_service_1_unprocessed_items_reencoded_are_matched_by_key() {
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    let creds = || Credentials::new("AKID", "secret", None, None, "t");
    let ours: serde_json::Value = serde_json::from_str(encoded[0].item.get()).unwrap();
    let back = reencoded(&ours);
    assert_ne!(back.to_string(), ours.to_string(), "another text");
    let answer = |items: Vec<serde_json::Value>| {
        let puts: Vec<serde_json::Value> = items
            .into_iter()
            .map(|i| serde_json::json!({"PutRequest": {"Item": i}}))
            .collect();
        serde_json::json!({"UnprocessedItems": {"t": puts}}).to_string()
    };
    // The calls and the server they call, which runs as long as it is kept.
    let calls_answering = |body: String| async move {
        let (url, server) = answering_server(move |_| Answer::json(200, body.clone())).await;
        (calls_with(&url, creds()).await, server)
    };

    // The first item back, re-encoded: it alone is sent again.
    let (calls, _server) = calls_answering(answer(vec![back.clone()])).await;
    assert_eq!(calls.batch_put("t", &keys(), &refs).await.unwrap(), vec![0]);

    // The same item twice, or an item nobody sent: the whole chunk again.
    let (calls, _server) = calls_answering(answer(vec![back.clone(), back.clone()])).await;
    assert_eq!(
        calls.batch_put("t", &keys(), &refs).await.unwrap(),
        vec![0, 1]
    );
    let stranger = serde_json::json!({"PK": {"S": "nobody"}});
    let (calls, _server) = calls_answering(answer(vec![stranger])).await;
    assert_eq!(
        calls.batch_put("t", &keys(), &refs).await.unwrap(),
        vec![0, 1]
    );
}

/// A credentials provider that always fails with `error`.
#[derive(Debug)]
struct Failing(fn() -> CredentialsError);

impl ProvideCredentials for Failing {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::ready(Err((self.0)()))
    }
}

#[tokio::test]
async fn real_service_4_a_credentials_hiccup_is_transient_and_no_credentials_a_table_fault() {
    let (url, mut requests) = capture_server().await;
    let encoded = encoded(&items());
    let refs: Vec<&EncodedItem> = encoded.iter().collect();
    for (error, failure) in [
        (
            (|| CredentialsError::provider_timed_out(Duration::from_secs(1)))
                as fn() -> CredentialsError,
            Failure::Transient,
        ),
        (
            || CredentialsError::provider_error("the metadata service answered 500"),
            Failure::Transient,
        ),
        (
            || CredentialsError::not_loaded("no credentials anywhere"),
            Failure::TableFault,
        ),
    ] {
        let calls = calls_with(&url, Failing(error)).await;
        let e = calls.batch_put("t", &keys(), &refs).await.unwrap_err();
        assert_eq!(e.failure, failure, "{e:?}");
    }
    assert!(requests.try_recv().is_none(), "nothing was sent unsigned");
}
