//! One AWS context per job: the region given to a job (`--region`) signs
//! its SQS calls as well as its DynamoDB calls. A listener on 127.0.0.1
//! stands in for SQS and keeps the `Authorization` header of the first
//! request, whose credential scope names the region the SDK signed for.

use std::time::Duration;

use sql2ddb_engine::{Job, ResourceOptions, Resources};
use sql2ddb_testkit::support::{answering_server, Answer, Requests};

/// An endpoint that answers every request with a 400; the test reads the
/// `Authorization` header of what it received.
async fn signature_catcher() -> (String, Requests) {
    answering_server(|_| {
        Answer::json(
            400,
            r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"no"}"#,
        )
        .closing()
    })
    .await
}

#[tokio::test]
async fn the_region_given_to_a_job_signs_its_sqs_calls() {
    let (sqs, mut signatures) = signature_catcher().await;
    let opts = ResourceOptions {
        // Opening makes no DynamoDB call.
        endpoint: Some("http://127.0.0.1:9".into()),
        region: Some("ap-southeast-2".into()),
        progress_table: Some("p".into()),
        sqs_endpoint: Some(sqs.clone()),
        aws: None,
    };
    let resources = Resources::open(None, &opts, Job::Worker).await.unwrap();
    assert_eq!(resources.aws().region(), Some("ap-southeast-2"));
    assert_eq!(resources.client().region(), Some("ap-southeast-2"));

    // Opening the queue asks SQS for its attributes.
    let url = format!("{sqs}/123456789012/jobs");
    assert!(resources.queue(&url).await.is_err(), "the catcher refuses");
    let request = tokio::time::timeout(Duration::from_secs(10), signatures.recv())
        .await
        .expect("the SQS call reached the endpoint")
        .unwrap();
    let signed = &request.headers["authorization"];
    assert!(
        signed.contains("/ap-southeast-2/sqs/aws4_request"),
        "signed for another region: {signed}"
    );
    resources.close().await;
}

#[tokio::test]
async fn without_a_region_an_aws_queue_url_names_it() {
    if !sql2ddb_testkit::support::without_a_region("without_a_region_an_aws_queue_url_names_it") {
        return;
    }
    let opts = ResourceOptions {
        endpoint: Some("http://127.0.0.1:9".into()),
        region: None,
        progress_table: Some("p".into()),
        sqs_endpoint: None,
        aws: None,
    };
    let resources = Resources::open(None, &opts, Job::Status).await.unwrap();
    let sqs = resources
        .sqs("https://sqs.eu-north-1.amazonaws.com/123456789012/jobs")
        .await
        .unwrap();
    assert_eq!(
        sqs.config().region().map(|r| r.as_ref()),
        Some("eu-north-1")
    );
    resources.close().await;
}

#[tokio::test]
async fn a_context_the_process_already_has_is_used_as_it_is() {
    // A Lambda function loads its context once, at its cold start; each
    // invocation's job must take it, not load another.
    let loaded = sql2ddb_engine::AwsContext::load(Some("sa-east-1"), false).await;
    let opts = ResourceOptions {
        endpoint: Some("http://127.0.0.1:9".into()),
        // Ignored: the context given is the process's.
        region: Some("eu-west-1".into()),
        progress_table: Some("p".into()),
        sqs_endpoint: None,
        aws: Some(loaded),
    };
    let resources = Resources::open(None, &opts, Job::Status).await.unwrap();
    assert_eq!(resources.aws().region(), Some("sa-east-1"));
    assert_eq!(resources.client().region(), Some("sa-east-1"));
    resources.close().await;
}
