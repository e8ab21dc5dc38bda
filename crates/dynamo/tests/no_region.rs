//! Against AWS, a region nobody chose is an error, not a silent `us-east-1`.
//!
//! The AWS environment is process-wide, so this file is a test binary of its
//! own with a single test that sets it up first.

use std::time::{Duration, Instant};

use sql2ddb_dynamo::{connect, DynamoError, Endpoint, ErrorKind};

#[tokio::test]
async fn nothing_lost_06_aws_without_region_is_an_error() {
    // Empty profile files, so a developer's own ~/.aws/config is not read;
    // no metadata service, so nothing reaches the network.
    let dir = std::env::temp_dir().join(format!("sql2ddb-no-region-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config");
    let credentials = dir.join("credentials");
    std::fs::write(&config, "").unwrap();
    std::fs::write(&credentials, "").unwrap();
    for var in [
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
    ] {
        std::env::remove_var(var);
    }
    std::env::set_var("AWS_CONFIG_FILE", &config);
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &credentials);
    std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");

    let started = Instant::now();
    let err = connect(&Endpoint::Aws, None).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(matches!(err, DynamoError::Config(_)));
    let message = err.to_string();
    for hint in ["--region", "[target]", "AWS_REGION", "profile"] {
        assert!(message.contains(hint), "{hint} missing from: {message}");
    }

    // Any one source of a region is enough.
    assert!(connect(&Endpoint::Aws, Some("eu-west-1")).await.is_ok());
    std::env::set_var("AWS_REGION", "eu-west-1");
    assert!(connect(&Endpoint::Aws, None).await.is_ok());
    std::env::remove_var("AWS_REGION");
    std::fs::write(&config, "[default]\nregion = eu-central-1\n").unwrap();
    assert!(connect(&Endpoint::Aws, None).await.is_ok());
    std::fs::write(&config, "").unwrap();
    // A custom endpoint still gets a region to sign with.
    assert!(connect(&Endpoint::Url("http://127.0.0.1:9".into()), None)
        .await
        .is_ok());

    std::fs::remove_dir_all(&dir).unwrap();
}
