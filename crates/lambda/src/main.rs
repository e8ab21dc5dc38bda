//! `bootstrap`: the Lambda function binary; `SQL2DDB_HANDLER` chooses the
//! handler (reader, worker or finisher).

use std::sync::Arc;

// The allocator of the `sql2ddb` binary: a handler allocates and frees every
// item's text and key values, which the system allocator makes costly (see
// docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use lambda_runtime::{service_fn, LambdaEvent};
use sql2ddb_engine::serverless::{Finisher, JobFile, MessageWriter};
use sql2ddb_engine::worker::WorkerSetup;
use sql2ddb_lambda::finisher::FinisherHandler;
use sql2ddb_lambda::reader::{LambdaInvoker, Reader};
use sql2ddb_lambda::settings::HANDLER;
use sql2ddb_lambda::{Error, HandlerKind, Settings};

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .without_time()
        .with_ansi(false)
        .init();
    let kind = HandlerKind::parse(&std::env::var(HANDLER).unwrap_or_default())?;
    let mut settings = Settings::from_env()?;
    // The process's one AWS context: every client below is made from it.
    let aws = sql2ddb_engine::AwsContext::load(None, true).await;
    settings.aws = Some(aws.clone());
    if let Some(name) = Settings::source_parameter() {
        settings.source =
            Some(sql2ddb_lambda::settings::read_parameter(aws.sdk_config(), &name).await?);
    }
    match kind {
        HandlerKind::Reader => {
            let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME")
                .map_err(|_| "AWS_LAMBDA_FUNCTION_NAME is not set: not running on Lambda?")?;
            let reader = Arc::new(Reader {
                settings,
                invoker: Arc::new(LambdaInvoker::new(
                    aws_sdk_lambda::Client::new(aws.sdk_config()),
                    function,
                )),
            });
            lambda_runtime::run(service_fn(move |e: LambdaEvent<_>| {
                let reader = reader.clone();
                async move { reader.handle(e).await }
            }))
            .await
        }
        HandlerKind::Worker => {
            let env = |name: &str| std::env::var(name).ok();
            let mapping = settings.mapping_or(None)?;
            let file =
                sql2ddb_lambda::mapping::load_file(mapping, &settings.s3_options(), &env).await?;
            // The function's settings and its one AWS context (in them).
            let setup = WorkerSetup {
                run: settings.run_options(),
                ..WorkerSetup::default()
            };
            let writer = Arc::new(match file {
                JobFile::Mapping(plan) => MessageWriter::connect(&plan, &setup).await?,
                JobFile::Update(job) => MessageWriter::connect_job(&job, &setup).await?,
            });
            lambda_runtime::run(service_fn(move |e: LambdaEvent<_>| {
                let writer = writer.clone();
                async move { sql2ddb_lambda::worker::handle(&writer, e).await }
            }))
            .await
        }
        HandlerKind::Finisher => {
            let table = settings
                .progress_table
                .clone()
                .ok_or("the finisher needs SQL2DDB_PROGRESS_TABLE")?;
            let finisher = Finisher::connect(&aws, settings.endpoint.as_deref(), &table)?;
            let topic = settings
                .topic_arn
                .clone()
                .map(|arn| (aws_sdk_sns::Client::new(aws.sdk_config()), arn));
            let handler = Arc::new(FinisherHandler { finisher, topic });
            lambda_runtime::run(service_fn(move |e: LambdaEvent<_>| {
                let handler = handler.clone();
                async move { handler.handle(e).await }
            }))
            .await
        }
    }
}
