//! One AWS context per job: the region given to a job (`--region`) signs
//! its SQS calls as well as its DynamoDB calls. A listener on 127.0.0.1
//! stands in for SQS and keeps the `Authorization` header of the first
//! request, whose credential scope names the region the SDK signed for.
//! One DynamoDB handle per job: the phases opened with one job context
//! take the same handle.

use std::time::Duration;

use sql2ddb_engine::{Job, JobContext, ResourceOptions, Resources};
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
        job_context: None,
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
        job_context: None,
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
        job_context: Some(loaded.into()),
    };
    let resources = Resources::open(None, &opts, Job::Status).await.unwrap();
    assert_eq!(resources.aws().region(), Some("sa-east-1"));
    assert_eq!(resources.client().region(), Some("sa-east-1"));
    resources.close().await;
}

/// Options naming an endpoint that is never called (opening makes no
/// DynamoDB call), with `job_context`.
fn quiet_endpoint(job_context: Option<JobContext>) -> ResourceOptions {
    ResourceOptions {
        endpoint: Some("http://127.0.0.1:9".into()),
        region: Some("eu-west-1".into()),
        progress_table: Some("p".into()),
        sqs_endpoint: None,
        job_context,
    }
}

#[tokio::test]
async fn the_phases_of_one_job_take_one_dynamodb_handle() {
    let opts = quiet_endpoint(None).with_job_context(None).await;
    let check = Resources::open(None, &opts, Job::Status).await.unwrap();
    let load = Resources::open(None, &opts, Job::Worker).await.unwrap();
    assert!(check.client().same_handle(load.client()), "one handle");
    let job = opts.job_context.as_ref().unwrap();
    assert_eq!(job.dynamo_handles(), (1, 2), "made once, taken twice");
    check.close().await;
    load.close().await;
}

#[tokio::test]
async fn jobs_apart_make_handles_apart() {
    let one = Resources::open(None, &quiet_endpoint(None), Job::Status)
        .await
        .unwrap();
    let other = Resources::open(None, &quiet_endpoint(None), Job::Status)
        .await
        .unwrap();
    assert!(!one.client().same_handle(other.client()));
    // Two contexts of their own, even made of one AWS context.
    let aws = sql2ddb_engine::AwsContext::load(Some("eu-west-1"), false).await;
    let first = quiet_endpoint(Some(JobContext::new(aws.clone())));
    let second = quiet_endpoint(Some(JobContext::new(aws)));
    let a = Resources::open(None, &first, Job::Status).await.unwrap();
    let b = Resources::open(None, &second, Job::Status).await.unwrap();
    assert!(!a.client().same_handle(b.client()));
    for r in [one, other, a, b] {
        r.close().await;
    }
}

#[tokio::test]
async fn a_job_keeps_one_handle_per_endpoint_it_names() {
    let job = JobContext::new(sql2ddb_engine::AwsContext::load(Some("eu-west-1"), false).await);
    let first = quiet_endpoint(Some(job.clone()));
    let elsewhere = ResourceOptions {
        endpoint: Some("http://127.0.0.1:10".into()),
        ..first.clone()
    };
    let a = Resources::open(None, &first, Job::Status).await.unwrap();
    let b = Resources::open(None, &elsewhere, Job::Status)
        .await
        .unwrap();
    let c = Resources::open(None, &first, Job::Status).await.unwrap();
    assert!(!a.client().same_handle(b.client()), "another endpoint");
    assert!(
        a.client().same_handle(c.client()),
        "the first endpoint again"
    );
    assert_eq!(job.dynamo_handles(), (2, 3));
    for r in [a, b, c] {
        r.close().await;
    }
}

#[tokio::test]
async fn each_embedded_local_server_keeps_its_own_handle() {
    // A phase that starts the embedded server has it alone: its handle is
    // never the job's, nor kept for a later phase (whose server is another).
    let dir = tempfile::tempdir().unwrap();
    let job = JobContext::new(sql2ddb_engine::AwsContext::load(Some("eu-west-1"), false).await);
    let opts = ResourceOptions {
        endpoint: Some("local".into()),
        ..quiet_endpoint(Some(job.clone()))
    };
    let run = Job::Run {
        run_dir: dir.path(),
        dry_run: false,
    };
    let first = Resources::open(None, &opts, run).await.unwrap();
    let first_handle = first.client().clone();
    first.close().await;
    let second = Resources::open(None, &opts, run).await.unwrap();
    assert!(!second.client().same_handle(&first_handle));
    assert_eq!(job.dynamo_handles(), (0, 0), "the job's handles untouched");
    second.close().await;
}
