//! `sql2ddb pointers MAPPING --from FILE`: the pointer step of an export for
//! bulk put items — the pointer updates the export wrote beside its data
//! files, written into the table with `run`'s conditional update once the
//! bulk put has finished.

use std::path::PathBuf;

use sql2ddb_core::shown::{count, thousands};
use sql2ddb_engine::export::pointer_file::{apply_pointers, PointerStepOptions, PointerStepReport};
use sql2ddb_engine::export::S3Options;
use sql2ddb_engine::{ResourceOptions, WriterFlags};

use crate::load;
use crate::outcome::{Ended, Output};

/// Exit codes of `pointers`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  every pointer update was written or the table's pointer was already as
     far along
  64 usage error: unknown option, missing argument
  69 DynamoDB or S3 could not be reached, or refused
  74 the mapping or the pointer file could not be read
  75 DynamoDB kept throttling past the retry budget: run the same command
     again (a pointer only moves forward, so writing it twice is harmless)
  78 the mapping is invalid, or the file is not a pointer file of this
     mapping (every line is checked before anything is written)";

/// The arguments of `pointers`.
#[derive(clap::Args)]
pub struct PointersArgs {
    /// The mapping the export was made with.
    pub mapping: PathBuf,
    /// The pointer file the export wrote beside `data/` (its report and
    /// manifest name it): a path, or s3://BUCKET/KEY.
    #[arg(long, value_name = "FILE|s3://BUCKET/KEY")]
    pub from: String,
    /// DynamoDB endpoint URL (overriding the mapping's; default AWS).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// AWS region, overriding the mapping's and the environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// S3 endpoint URL, for any S3-compatible server; default:
    /// AWS_ENDPOINT_URL_S3, else AWS.
    #[arg(long, value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// Updates in flight, over the mapping's [writer] concurrency.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: Option<u16>,
    /// Write units per second, over the mapping's [writer] max_wcu.
    #[arg(long, value_name = "WCU")]
    pub max_wcu: Option<u64>,
    #[command(flatten)]
    budget: crate::budget::RetryBudgetArg,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Runs `pointers`.
pub async fn pointers(args: PointersArgs) -> Ended {
    let plan = load(&args.mapping, None)?;
    let opts = PointerStepOptions {
        from: args.from.clone(),
        resources: ResourceOptions {
            endpoint: args.endpoint.clone(),
            region: args.region.clone(),
            ..ResourceOptions::default()
        },
        s3: S3Options {
            endpoint: args.s3_endpoint.clone(),
            region: args.region.clone(),
            aws: None,
        },
        flags: WriterFlags {
            concurrency: args.concurrency.map(usize::from),
            max_wcu: args.max_wcu,
            retry_budget: args.budget.retry_budget,
            ..WriterFlags::default()
        },
    };
    let report = apply_pointers(&plan, &opts).await?;
    let output = Output::new(args.json);
    output.say(&render(&report));
    output.json(&report);
    Ok(0)
}

/// The report for the terminal: per pointer, the updates that moved it and
/// those the table was already as far along as.
fn render(r: &PointerStepReport) -> String {
    let mut out = format!(
        "pointers from {} into table {} at {}: {}",
        r.from,
        r.table,
        r.endpoint,
        count(r.items, "pointer item", "pointer items")
    );
    for p in &r.pointers {
        out.push_str(&format!(
            "\n  {}: {} moved, {} already as far along",
            p.name,
            count(p.moved, "update", "updates"),
            thousands(p.already_newer)
        ));
    }
    out
}
