//! `sql2ddb export`: the run's items as files for DynamoDB's import from S3
//! (a new table) or its bulk put items (an existing table).

use std::path::PathBuf;

use crate::run::resume::shell_word;
use sql2ddb_core::redact_secrets;
use sql2ddb_core::shown::{self, count};
use sql2ddb_engine::export::{Compression, ExportFor, ExportOptions, ExportReport, S3Options};
use sql2ddb_engine::{RunOptions, RunProgress, RunStatus, StopSignal};

use crate::load_choice::{IfNotEmptyArg, SnapshotArg};
use crate::outcome::{Ended, Live, Output};
use crate::{limits, load, table};

pub const EXIT_CODES: &str = "\
Exit codes:
  0   every row was exported; the manifest and the import command are written
  1   the export failed: rows not read
  2   the export finished, but some rows were rejected (see the rejects file)
  64  usage error: unknown option, missing argument, value out of range;
      nothing was done
  69  the source could not be reached, or refused
  74  a file could not be read or written (the mapping, the runs directory,
      the data files, an S3 object)
  78  the mapping is invalid or does not fit its source, or the destination
      is a file, holds a file under data/ that no export wrote, or holds an
      earlier export's files and --if-not-empty does not say what to do
      with them
  On every failure no manifest is written and the files it wrote are removed.
  130 interrupted (Ctrl-C, SIGTERM): no manifest is written and the files
      it wrote are removed; run it again";

/// Arguments of `sql2ddb export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// The mapping spec (TOML).
    pub mapping: PathBuf,
    /// Where the files go: a directory, or `s3://BUCKET/PREFIX` (uploaded
    /// as they are written). Data files go under `data/`, which must be
    /// empty; `manifest.json` and `table-creation.json` beside it.
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub out: String,
    /// What loads the files: `import` (import from S3, which creates a new
    /// table; `table-creation.json` and the `import-table` command) or
    /// `bulk-put` (bulk put items, into an existing table; pointer items
    /// carry their condition; the `start-bulk-put-items` command).
    #[arg(
        long = "for",
        value_enum,
        default_value = "import",
        value_name = "LOADER"
    )]
    pub export_for: ExportForArg,
    /// How the data files are compressed.
    #[arg(long, value_enum, default_value = "gzip")]
    pub compression: CompressionArg,
    /// Most items per file (at least 1). Default: files of about 1 GB of
    /// uncompressed lines. An item is never split across files.
    #[arg(long, value_name = "N", value_parser = limits::positive::<u64>)]
    pub items_per_file: Option<u64>,
    /// Source URL, overriding the mapping's (postgres://, mysql://, sqlite://).
    #[arg(long)]
    pub source: Option<String>,
    /// S3 endpoint URL, for any S3-compatible server (path-style addressing);
    /// default: AWS_ENDPOINT_URL_S3, else AWS.
    #[arg(long, value_name = "URL")]
    pub s3_endpoint: Option<String>,
    /// AWS region of the bucket, overriding the mapping's and the environment's.
    #[arg(long)]
    pub region: Option<String>,
    /// Print the final report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where run directories (rejects file, report) are created.
    #[arg(long, default_value = "sql2ddb-runs")]
    pub runs_dir: PathBuf,
    /// Rows per source page, for every entity (at least 1).
    #[arg(long, value_parser = limits::positive::<usize>)]
    pub page_size: Option<usize>,
    /// Segments each entity's key range is cut into and read concurrently,
    /// 1..=64 (default: the mapping's `read_parallelism`, else one per
    /// 100,000 rows, at most 8).
    #[arg(long, value_parser = limits::read_parallelism())]
    pub read_parallelism: Option<u32>,
    /// Source connections, which is also how many segments are read at once.
    #[arg(
        long,
        value_parser = limits::positive::<u32>,
        default_value_t = sql2ddb_engine::run::DEFAULT_SOURCE_CONNECTIONS
    )]
    pub source_connections: u32,
    /// `consistent`: every read sees the source as it was at one moment;
    /// `none`: each read sees the source as it is then.
    #[arg(long, value_enum, default_value = "consistent")]
    pub snapshot: SnapshotArg,
    /// What to do when --out already holds an earlier export's files:
    /// `fail` refuses, naming them (the default); `append` adds this
    /// export's files beside them, named with its run id (an import or a
    /// bulk put reads every file under data/); `truncate` removes those
    /// files first (only files an export writes, never another).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub if_not_empty: Option<IfNotEmptyArg>,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--for`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum ExportForArg {
    Import,
    BulkPut,
}

/// `--compression`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum CompressionArg {
    Gzip,
    Zstd,
    None,
}

pub async fn export(args: ExportArgs) -> Ended {
    let plan = load(&args.mapping, args.source.as_deref())?;
    let stop = StopSignal::new();
    let opts = ExportOptions {
        run: RunOptions {
            source: args.source.clone(),
            region: args.region.clone(),
            runs_dir: args.runs_dir.clone(),
            page_size: args.page_size,
            read_parallelism: args.read_parallelism,
            source_connections: args.source_connections,
            snapshot: args.snapshot.resolve(),
            stop: Some(stop.clone()),
            ..RunOptions::default()
        },
        out: args.out.clone(),
        compression: match args.compression {
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zstd => Compression::Zstd,
            CompressionArg::None => Compression::None,
        },
        items_per_file: args.items_per_file,
        export_for: match args.export_for {
            ExportForArg::Import => ExportFor::Import,
            ExportForArg::BulkPut => ExportFor::BulkPut,
        },
        if_not_empty: IfNotEmptyArg::resolve(args.if_not_empty),
        s3: S3Options {
            endpoint: args.s3_endpoint.clone(),
            region: args.region.clone(),
            aws: None,
        },
    };
    eprintln!("export to {}", redact_secrets(&args.out));
    let progress = RunProgress::new();
    let notes = tokio::spawn(crate::live::print_notes(progress.clone()));
    let bars = (!args.quiet).then(|| tokio::spawn(crate::live::draw_progress(progress.clone())));
    let live = Live::start(stop, std::iter::once(notes).chain(bars).collect());
    let result = sql2ddb_engine::export::export(&plan, &opts, progress).await;
    live.end().await;
    let report = result?;
    crate::html::save_run(&report.run)?;
    let output = Output::new(args.json);
    output.say(&render(&report, &args.mapping));
    output.json(&report);
    Ok(crate::failure::run_ended(&report.run))
}

/// The run's table, then the files and how to import them (and, for bulk
/// put, how to write the pointers after it).
fn render(r: &ExportReport, mapping: &std::path::Path) -> String {
    let mut out = table::render(&r.run, table::Load::Export);
    if let Some(err) = &r.run.error {
        out.push_str(&format!("\nerror: {}", redact_secrets(err)));
    }
    let command = r.import_command.as_ref().or(r.bulk_put_command.as_ref());
    match (&r.manifest, command) {
        (Some(m), Some(command)) => {
            let bytes: u64 = m.files.iter().map(|f| f.uncompressed_bytes).sum();
            let compressed: u64 = m.files.iter().map(|f| f.compressed_bytes).sum();
            out.push_str(&format!(
                "\nexported {} ({}, {} compressed {}) in {} to {}/data/",
                count(m.items, "item", "items"),
                shown::bytes(bytes),
                shown::bytes(compressed),
                m.compression,
                count(m.files.len() as u64, "file", "files"),
                r.out
            ));
            if let Some(f) = &r.manifest_file {
                out.push_str(&format!("\nmanifest: {f}"));
            }
            if let (RunStatus::Rejected, Some(f)) = (r.run.status, &r.run.rejects_file) {
                out.push_str(&format!(
                    "\nrows rejected: see {f} (they are not in the files)"
                ));
            }
            let what = match r.bulk_put_command {
                Some(_) => "to load the files into the existing table (bulk put items)",
                None => "to create the table from the files",
            };
            if r.out.starts_with("s3://") {
                out.push_str(&format!("\n{what}:"));
            } else {
                out.push_str(&format!(
                    "\n{what}, upload {}/data/ to s3://BUCKET/PREFIX/data/, then:",
                    r.out
                ));
            }
            out.push_str(&format!("\n  {command}"));
            if let Some(file) = &r.pointer_file {
                let words = [
                    "sql2ddb pointers".to_string(),
                    shell_word(&mapping.display().to_string()),
                    format!("--from {}", shell_word(file)),
                ];
                out.push_str(&format!(
                    "\nthen, once the bulk put has finished, write the pointer items (conditionally, so each only moves forward):\n  {}",
                    words.join(" ")
                ));
            }
        }
        _ => out.push_str(
            "\nno manifest written: the export did not finish, and the files it wrote were removed; export again",
        ),
    }
    out
}
