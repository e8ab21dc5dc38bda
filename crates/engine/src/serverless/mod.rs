//! The engine's seams for serverless deployments (AWS Lambda): the same
//! jobs as the processes, cut where a function's life ends.
//!
//! - [`read_until`]: a run cut at the queue (`run --queue`) that stops
//!   after the page which brings the time left under a safety margin, its
//!   cursors recorded, so the next invocation resumes it;
//! - [`MessageWriter`]: one queue message's batch written through the one
//!   write path and recorded, as `sql2ddb worker` does, with the outcome per
//!   message (the function reports the failed ones for redelivery);
//! - [`update_until`]: the same for an update job (`update --queue`);
//! - [`Finisher`]: the run's sums checked (one Query of its partition) and
//!   its `DONE` record written once, with a conditional put.

mod finish;
mod messages;
mod reader;
mod update;

pub use finish::{Completion, DoneRecord, Finisher};
pub use messages::{MessageOutcome, MessageWriter};
pub use reader::{read_until, run_is_read, ReaderOutcome, ReaderStep, MIN_MARGIN};
/// Secrets masked in text, as everywhere in sql2ddb.
pub use sql2ddb_core::{redact_secrets, redact_url};
/// A validated mapping, as the handlers load it.
pub use sql2ddb_mapping::Plan;
/// An update job, as the handlers load it.
pub use sql2ddb_mapping::UpdateJob;
/// Objects read from S3 (an `s3://` mapping), with the process's AWS settings.
pub use sql2ddb_s3::{read_object, S3Error, S3Options};
pub use update::{update_until, UpdateStep};

use std::path::Path;

use crate::error::EngineError;

/// Loads a mapping given inline (TOML text) or as a file path; `env` looks
/// up `${VAR}`s. Text with a line break or a `[` is taken as inline TOML.
pub fn load_mapping(
    mapping: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, EngineError> {
    let (text, path) = read_text(mapping, "(inline mapping)")?;
    Ok(Plan::parse(&text, path, env)?)
}

/// What a handler's file holds: a mapping (a migration) or an update job.
#[derive(Clone)]
pub enum JobFile {
    /// A mapping.
    Mapping(Box<Plan>),
    /// An update job (`sql2ddb update`).
    Update(Box<UpdateJob>),
}

impl JobFile {
    /// Parses `text` (named `path` in errors) as an update job when it has
    /// an `[update]` table, else as a mapping.
    pub fn parse(
        text: &str,
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<JobFile, EngineError> {
        Ok(match UpdateJob::is_job_file(text) {
            true => JobFile::Update(Box::new(UpdateJob::parse(text, path, env)?)),
            false => JobFile::Mapping(Box::new(Plan::parse(text, path, env)?)),
        })
    }
}

/// Loads a mapping or an update job (a file with an `[update]` table),
/// given inline (TOML text) or as a file path, as [`load_mapping`] does.
pub fn load_job(file: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<JobFile, EngineError> {
    let (text, path) = read_text(file, "(inline)")?;
    JobFile::parse(&text, path, env)
}

/// The text of `file` (inline TOML, named `inline` in errors, or a file
/// path) and the name errors give it. An `s3://` URL is refused: the
/// Lambda functions read such objects themselves.
fn read_text<'a>(
    file: &'a str,
    inline: &'static str,
) -> Result<(std::borrow::Cow<'a, str>, &'a Path), EngineError> {
    if file.contains('\n') || file.trim_start().starts_with('[') {
        return Ok((file.into(), Path::new(inline)));
    }
    if file.starts_with("s3://") {
        return Err(EngineError::Config(format!(
            "mapping {file}: this loader reads inline TOML text or a file; an S3 object is read by the Lambda functions (sql2ddb-lambda), not here"
        )));
    }
    let path = Path::new(file);
    let text = std::fs::read_to_string(path).map_err(|e| EngineError::io(path, e))?;
    Ok((text.into(), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_mapping_is_refused_with_what_to_do() {
        let e = load_mapping("s3://bucket/shop.toml", &|_| None).unwrap_err();
        assert!(e.to_string().contains("inline"), "{e}");
    }

    #[test]
    fn a_job_file_is_told_from_a_mapping() {
        let job = "version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"close\"\nwhere = \"#s = :new\"\nset = \"SET #s = :closed\"\nnames = { \"#s\" = \"status\" }\nvalues = { \":new\" = \"new\", \":closed\" = \"closed\" }\n";
        match load_job(job, &|_| None).unwrap() {
            JobFile::Update(j) => assert_eq!(j.name, "close"),
            JobFile::Mapping(_) => panic!("an update job taken for a mapping"),
        }
        let mapping = "version = 1\n[source]\nurl = \"postgres://u@h/db\"\n[target]\ntable = \"shop\"\npk = { name = \"PK\", type = \"S\" }\n[[entity]]\nname = \"c\"\nfrom = \"customers\"\npk = \"C#{id}\"\n";
        assert!(matches!(
            load_job(mapping, &|_| None).unwrap(),
            JobFile::Mapping(_)
        ));
        let bad = "version = 1\n[update]\nname = \"x\"\n";
        assert!(load_job(bad, &|_| None).is_err());
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = load_mapping("/no/such/mapping.toml", &|_| None).unwrap_err();
        assert!(e.to_string().contains("/no/such/mapping.toml"), "{e}");
    }
}
