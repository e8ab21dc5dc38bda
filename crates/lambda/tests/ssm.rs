//! The source URL read from an SSM SecureString parameter (moto's SSM), as
//! a function does at its cold start: the value comes back decrypted; a
//! missing parameter is named, and the password is in no error's text.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sql2ddb_lambda::reader::{InvokeFuture, Invoker, Reader, ReaderEvent};
use sql2ddb_lambda::settings::read_parameter;
use sql2ddb_lambda::Settings;
use support::*;

const PASSWORD: &str = "Pw7-kq2Zx-not-for-logs";

/// The reader must not ask for another invocation here.
struct NoInvocation;

impl Invoker for NoInvocation {
    fn invoke(&self, event: &ReaderEvent) -> InvokeFuture<'_> {
        panic!("unexpected invocation: {event:?}")
    }
}

/// A loopback port nobody listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_url_comes_from_a_secure_string_and_its_password_stays_secret() {
    let moto = Moto::start();
    let aws = aws_config(moto.url()).await;
    let ssm = aws_sdk_ssm::Client::new(&aws);
    let name = unique("sql2ddb-source-url");
    let source = format!("postgres://app:{PASSWORD}@127.0.0.1:{}/shop", closed_port());
    ssm.put_parameter()
        .name(&name)
        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
        .value(&source)
        .send()
        .await
        .unwrap();
    // Stored encrypted: read without decryption, it is not the URL.
    let stored = ssm.get_parameter().name(&name).send().await.unwrap();
    assert_ne!(stored.parameter.unwrap().value.unwrap(), source);

    assert_eq!(read_parameter(&aws, &name).await.unwrap(), source);

    let missing = unique("sql2ddb-no-such-parameter");
    let e = read_parameter(&aws, &missing)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&missing), "{e}");
    assert!(e.contains("ParameterNotFound"), "{e}");
    assert!(!e.contains(PASSWORD) && !e.contains(&source), "{e}");

    // A reader whose source (the parameter's URL) cannot be reached fails
    // with an error naming the source, its password masked.
    let dynamo = Dynamo::start().await;
    let sqs = sqs(moto.url()).await;
    let table = unique("lambda_ssm");
    let urls = work_queue(&sqs, &table, Duration::from_secs(60)).await;
    let runs = tempfile::tempdir().unwrap();
    let reader = Reader {
        settings: Settings {
            mapping: Some(items_mapping("lambda_ssm", &table, &dynamo.url, 100)),
            source: Some(read_parameter(&aws, &name).await.unwrap()),
            queue_url: Some(urls.queue),
            sqs_endpoint: Some(moto.url().to_string()),
            runs_dir: runs.path().to_path_buf(),
            ..Settings::default()
        },
        invoker: Arc::new(NoInvocation),
    };
    let e = reader
        .handle(event(ReaderEvent::default(), Duration::from_secs(60)))
        .await
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert!(!e.contains(PASSWORD), "{e}");
    assert!(e.contains("127.0.0.1"), "the error names the source: {e}");
}
