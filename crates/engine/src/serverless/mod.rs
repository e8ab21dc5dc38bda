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
pub use update::{update_until, UpdateStep};

use std::path::Path;

use crate::error::EngineError;

/// Loads a mapping given inline (TOML text) or as a file path; `env` looks
/// up `${VAR}`s. Text with a line break or a `[` is taken as inline TOML.
pub fn load_mapping(
    mapping: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, EngineError> {
    if mapping.starts_with("s3://") {
        return Err(EngineError::Config(format!(
            "mapping {mapping}: mappings in S3 are not supported yet; give the mapping inline (TOML text) or as a file packaged with the function"
        )));
    }
    if mapping.contains('\n') || mapping.trim_start().starts_with('[') {
        return Ok(Plan::parse(mapping, Path::new("(inline mapping)"), env)?);
    }
    let path = Path::new(mapping);
    let text = std::fs::read_to_string(path).map_err(|e| EngineError::io(path, e))?;
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

/// Loads a mapping or an update job (a file with an `[update]` table),
/// given inline (TOML text) or as a file path, as [`load_mapping`] does.
pub fn load_job(file: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<JobFile, EngineError> {
    let inline = file.contains('\n') || file.trim_start().starts_with('[');
    let (text, path) = match inline {
        true => (file.to_string(), Path::new("(inline)")),
        false if file.starts_with("s3://") => {
            return load_mapping(file, env).map(|p| JobFile::Mapping(Box::new(p)))
        }
        false => {
            let path = Path::new(file);
            let text = std::fs::read_to_string(path).map_err(|e| EngineError::io(path, e))?;
            (text, path)
        }
    };
    if UpdateJob::is_job_file(&text) {
        return Ok(JobFile::Update(Box::new(UpdateJob::parse(
            &text, path, env,
        )?)));
    }
    Ok(JobFile::Mapping(Box::new(Plan::parse(&text, path, env)?)))
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
