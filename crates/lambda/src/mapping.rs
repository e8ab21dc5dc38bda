//! Where a function's mapping (or update job) comes from: TOML text, a
//! file packaged with the function, or an object in S3
//! (`s3://bucket/key.toml`), read at each load with the function's role
//! (`s3:GetObject`).

use std::path::Path;

use sql2ddb_engine::serverless::{load_job, load_mapping, read_object, JobFile, Plan, S3Options};

use crate::Error;

/// Loads `mapping` (inline TOML, a file path or an `s3://` URL); `env`
/// looks up `${VAR}`s. Errors name the URL; a mapping that does not parse
/// or validate is reported at `s3://bucket/key.toml:line:col`.
pub async fn load(
    mapping: &str,
    s3: &S3Options,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Plan, Error> {
    if !mapping.starts_with("s3://") {
        return Ok(load_mapping(mapping, env)?);
    }
    let (url, text) = read_s3(mapping, s3).await?;
    Ok(Plan::parse(&text, Path::new(url), env)?)
}

/// Loads a mapping or an update job (a file with an `[update]` table) from
/// the same places as [`load`]: the reader and the worker run either.
pub async fn load_file(
    file: &str,
    s3: &S3Options,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFile, Error> {
    if !file.starts_with("s3://") {
        return Ok(load_job(file, env)?);
    }
    let (url, text) = read_s3(file, s3).await?;
    Ok(JobFile::parse(&text, Path::new(url), env)?)
}

/// The text of the object at `mapping` (an `s3://` URL), and the URL.
async fn read_s3<'a>(mapping: &'a str, s3: &S3Options) -> Result<(&'a str, String), Error> {
    let url = mapping.trim_end();
    let bytes = read_object(url, s3).await.map_err(|e| {
        let said = e.to_string();
        // Most S3 errors start with the URL already.
        if said.starts_with(url) {
            format!("cannot read the mapping {said}")
        } else {
            format!("cannot read the mapping {url}: {said}")
        }
    })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("the mapping {url} is not UTF-8 text (a TOML file is expected)"))?;
    Ok((url, text))
}
