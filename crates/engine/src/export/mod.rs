//! `sql2ddb export`: the items of a run written as files for DynamoDB's
//! import from S3 (a new table) or its bulk put items (an existing table,
//! [`bulk_put`]) instead of into a table.
//!
//! An export is a run whose sink writes files: the same reads, segments,
//! embeds, rejects, counts and report (see [`crate::run`]), with no DynamoDB
//! call at all. Each item is one `{"Item": {…}}` line of DynamoDB JSON in
//! one of a few compressed files chosen by a hash of its partition key
//! ([`files`]); pointer items are added at the end with their final values.
//! Beside the files: `manifest.json` (files, sizes, SHA-256, counts) and
//! `table-creation.json` (the parameters of `aws dynamodb import-table`).

use std::sync::Arc;

use serde::Serialize;
use sql2ddb_mapping::Plan;

pub mod bulk_put;
pub mod compression;
pub mod existing;
pub mod files;
pub mod manifest;
pub mod output;
pub mod pointer_file;
mod pointer_set;
#[cfg(test)]
mod tests;

pub use compression::Compression;
pub use existing::FileNames;
pub use files::{FileEntry, ItemFiles};
pub use manifest::{EntityCounts, Manifest, PointerCount};
pub use output::{Destination, S3Options};

use crate::error::EngineError;
use crate::progress::RunProgress;
use crate::report::{RunReport, RunStatus};
use crate::run::RunOptions;
use crate::sink::Destination as PagesTo;

/// Everything an export takes besides the mapping.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The run's options: source, run directory, page size, parallelism,
    /// stop signal. Its DynamoDB settings are unused (nothing is written
    /// there), and it is neither queued nor resumed.
    pub run: RunOptions,
    /// A directory, or `s3://bucket/prefix`.
    pub out: String,
    /// How the files are compressed.
    pub compression: Compression,
    /// Most items per file; default: about 1 GB of lines per file.
    pub items_per_file: Option<u64>,
    /// Where the S3 client connects.
    pub s3: S3Options,
    /// What loads the files.
    pub export_for: ExportFor,
    /// What the export does when the destination already holds an earlier
    /// export's files: refuse (the default), add its own beside them, or
    /// remove them first.
    pub if_not_empty: crate::if_not_empty::IfNotEmpty,
}

/// What loads an export's files into DynamoDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFor {
    /// Import from S3 (`import-table`): creates a new table.
    #[default]
    Import,
    /// Bulk put items (`start-bulk-put-items`): into an existing table;
    /// the pointer updates go to a file of their own, written afterwards by
    /// `sql2ddb pointers` ([`pointer_file`]).
    BulkPut,
}

impl ExportFor {
    /// The name `--for` and the manifest give it.
    pub fn name(self) -> &'static str {
        match self {
            ExportFor::Import => "import",
            ExportFor::BulkPut => "bulk-put",
        }
    }
}

/// What an export did: the run's report, the manifest, and how to import.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The run's report (its `items_written` are the items exported),
    /// its fields at the top level of the JSON as in `run`'s report.
    #[serde(flatten)]
    pub run: RunReport,
    /// Where the files are.
    pub out: String,
    /// The manifest (absent when the export did not finish).
    pub manifest: Option<Manifest>,
    /// Where `manifest.json` was written.
    pub manifest_file: Option<String>,
    /// `table-creation.json`, as written.
    pub table_creation: serde_json::Value,
    /// The local copy of `table-creation.json` the import command reads.
    pub table_creation_file: Option<String>,
    /// The `aws dynamodb import-table` command for the files (`--for import`).
    pub import_command: Option<String>,
    /// The `aws dynamodb start-bulk-put-items` command for the files
    /// (`--for bulk-put`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bulk_put_command: Option<String>,
    /// Where the pointer updates are (`--for bulk-put` with pointers): the
    /// file `sql2ddb pointers MAPPING --from FILE` writes once the bulk put
    /// has finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer_file: Option<String>,
}

/// Exports the items `plan` maps from its source into files at `opts.out`.
///
/// Errors as [`crate::run::run`]: a job that cannot start (a bad `--out`,
/// an S3 prefix that already holds data, a mapping that does not fit its
/// source) returns `Err`; a failure once it runs ends in the report, with
/// the unfinished files removed and no manifest.
pub async fn export(
    plan: &Plan,
    opts: &ExportOptions,
    progress: Arc<RunProgress>,
) -> Result<ExportReport, EngineError> {
    if opts.run.queue.is_some() || opts.run.resume || opts.run.only_rejects.is_some() {
        return Err(EngineError::Config(
            "export reads the whole source in this process: --queue, --resume and --only-rejects do not apply".into(),
        ));
    }
    let region = opts
        .s3
        .region
        .clone()
        .or_else(|| plan.target.region.clone());
    let aws = export_context(opts, region.as_deref()).await;
    let s3 = S3Options {
        region,
        aws: Some(aws.clone()),
        ..opts.s3.clone()
    };
    let dest = Arc::new(Destination::open(&opts.out, &s3).await?);
    let run_id = opts.run.run_id.clone().unwrap_or_else(crate::new_run_id);
    let names = dest.prepare(opts.if_not_empty, &run_id).await?;
    let keys = plan.key_attrs().into_iter().map(|k| k.name).collect();
    let files = ItemFiles::new(
        dest.clone(),
        opts.compression,
        opts.items_per_file,
        keys,
        progress.clone(),
    );
    let files = files.with_names(names.clone());
    let files = Arc::new(match opts.export_for {
        ExportFor::Import => files,
        ExportFor::BulkPut => files.with_pointer_file(names.beside(pointer_file::POINTER_FILE)),
    });
    let run_opts = RunOptions {
        run_id: Some(run_id),
        job_context: Some(crate::JobContext::new(aws)),
        dry_run: true,
        destination: PagesTo::Files(files.clone()),
        track_progress: false,
        progress_table: None,
        ..opts.run.clone()
    };
    let mut run = crate::run::run(plan, &run_opts, progress).await?;
    run.endpoint = format!("none (export to {})", dest.describe());
    let table_creation = manifest::table_creation(plan);
    let mut report = ExportReport {
        out: dest.describe(),
        manifest: None,
        manifest_file: None,
        table_creation: table_creation.clone(),
        table_creation_file: None,
        import_command: None,
        bulk_put_command: None,
        pointer_file: None,
        run,
    };
    if !matches!(report.run.status, RunStatus::Ok | RunStatus::Rejected) {
        files.abort().await;
        return Ok(report);
    }
    if let Err(e) = settle(plan, opts, &dest, &files, &names, &mut report).await {
        files.abort().await;
        report.run.status = RunStatus::Failed;
        if report.run.error.is_none() {
            report.run.error = Some(sql2ddb_core::redact_secrets(&e.to_string()));
            report.run.cause = Some(e.cause());
        }
    }
    Ok(report)
}

/// The export's one AWS context, for its S3 client and the run's
/// resources alike: the one given, else loaded with `region` (AWS's own
/// S3, with no endpoint named, may ask the SDK's chain for one).
async fn export_context(opts: &ExportOptions, region: Option<&str>) -> sql2ddb_aws::AwsContext {
    let given = opts.run.job_context.as_ref().map(|job| job.aws().clone());
    if let Some(aws) = opts.s3.aws.clone().or(given) {
        return aws;
    }
    let named = opts.s3.endpoint.is_some()
        || std::env::var("AWS_ENDPOINT_URL_S3").is_ok_and(|v| !v.trim().is_empty());
    let aws_s3 = opts.out.starts_with("s3://") && !named;
    sql2ddb_aws::AwsContext::load(region, aws_s3).await
}

/// Closes the files, writes the manifest and the table-creation
/// parameters, and says how to import.
async fn settle(
    plan: &Plan,
    opts: &ExportOptions,
    dest: &Destination,
    files: &ItemFiles,
    names: &FileNames,
    report: &mut ExportReport,
) -> Result<(), EngineError> {
    let manifest_name = names.beside("manifest.json");
    let creation_name = names.beside("table-creation.json");
    let written = files.finish().await?;
    let pointers = files
        .pointer_summary()
        .into_iter()
        .map(|(name, items)| PointerCount { name, items })
        .collect();
    let mut manifest = Manifest::new(plan, &report.run, opts.compression, written, pointers);
    manifest.export_for = opts.export_for.name();
    let region = opts.s3.region.as_deref().or(plan.target.region.as_deref());
    if opts.export_for == ExportFor::BulkPut {
        // Into an existing table: no table to create, so no parameters.
        if !plan.pointers().is_empty() {
            let name = names.beside(pointer_file::POINTER_FILE);
            report.pointer_file = Some(dest.place(&name));
            manifest.pointer_file = Some(name);
        }
        report.manifest_file = Some(dest.put(&manifest_name, pretty(&manifest)).await?);
        report.bulk_put_command = Some(bulk_put::bulk_put_command(
            opts.compression,
            &bulk_put::BulkPutTarget {
                table: &plan.target.table,
                place: dest.s3_place(),
                region,
                // The cap the export's writer settings resolved (flags over the mapping).
                max_wcu: opts.run.writer_settings(plan).max_wcu,
            },
        ));
        report.manifest = Some(manifest);
        return Ok(());
    }
    let creation = pretty(&report.table_creation);
    dest.put(&creation_name, creation.clone()).await?;
    // The import command reads the parameters from a local file: for an S3
    // export, the copy in the run directory.
    let local = match dest {
        Destination::Dir(dir) => dir.join(&creation_name),
        Destination::S3(_) => {
            let path = std::path::Path::new(&report.run.run_dir).join(&creation_name);
            std::fs::write(&path, &creation).map_err(|e| EngineError::io(&path, e))?;
            path
        }
    };
    report.manifest_file = Some(dest.put(&manifest_name, pretty(&manifest)).await?);
    report.import_command = Some(manifest::import_command(
        opts.compression,
        dest.s3_source(),
        &local.display().to_string(),
        region,
    ));
    report.table_creation_file = Some(local.display().to_string());
    report.manifest = Some(manifest);
    Ok(())
}

/// Pretty JSON and a newline, for the files beside the data.
fn pretty<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(value).expect("serialises");
    out.push(b'\n');
    out
}
