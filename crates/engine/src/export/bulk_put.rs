//! `export --for bulk-put`: the files for DynamoDB's bulk put items, which
//! loads S3 objects into an **existing** table (`StartBulkPutItems`).
//!
//! What the developer guide's "Amazon S3 input formats for bulk put items"
//! and the API reference say, and this module follows: input format
//! `DYNAMODB_JSON` is JSON Lines, one record per line; compression `GZIP`,
//! `ZSTD` or `NONE`; every object under the `S3KeyPrefix` is read; records
//! that fail validation are reported (output type `ERROR`) in the output
//! bucket, as are items whose per-item condition is false
//! (`CONDITION_CHECK_FAILURE`).
//!
//! A record is written as import from S3 writes it, `{"Item": {…}}`, and
//! carries no per-item condition: the names of a record's condition fields
//! could not be confirmed from an authoritative description. Pointer items,
//! which must only move forward, are not in the files: their updates go to
//! a file of their own, written after the bulk put by `run`'s conditional
//! updates ([`super::pointer_file`]).

use serde_json::json;

use super::compression::Compression;

/// The folder, beside `data/`, where DynamoDB writes the operation's report
/// of items it did not write (never under `data/`, which is its input).
pub const REPORT_DIR: &str = "bulk-put-report";

/// Where the files are and what loads them, for the command.
pub struct BulkPutTarget<'a> {
    /// The existing table.
    pub table: &'a str,
    /// The bucket and the key prefix of the export (`None`: a local export,
    /// with placeholders to fill once the files are uploaded).
    pub place: Option<(String, String)>,
    /// The region, when known.
    pub region: Option<&'a str>,
    /// The mapping's `max_wcu`: the operation's write request units cap.
    pub max_wcu: Option<u64>,
}

/// The `aws dynamodb start-bulk-put-items` command for the files: input
/// under `PREFIX/data/`, the report of items not written under
/// `PREFIX/bulk-put-report/`, both failure kinds reported.
pub fn bulk_put_command(compression: Compression, target: &BulkPutTarget<'_>) -> String {
    let (bucket, prefix) = target
        .place
        .clone()
        .unwrap_or_else(|| ("BUCKET".into(), "PREFIX".into()));
    let under = |dir: &str| match prefix.trim_end_matches('/') {
        "" => format!("{dir}/"),
        p => format!("{p}/{dir}/"),
    };
    let input = json!({
        "S3Bucket": bucket,
        "S3KeyPrefix": under(super::output::DATA_DIR),
        "InputFormat": "DYNAMODB_JSON",
        "InputCompressionType": compression.import_name(),
    });
    let output = json!({
        "S3Bucket": bucket,
        "S3KeyPrefix": under(REPORT_DIR),
        "OutputType": ["ERROR", "CONDITION_CHECK_FAILURE"],
    });
    let mut words = vec!["aws dynamodb start-bulk-put-items".to_string()];
    if let Some(r) = target.region {
        words.push(format!("--region {r}"));
    }
    words.push(format!("--table-name {}", target.table));
    words.push(format!("--input-s3-configuration '{input}'"));
    words.push(format!("--output-s3-configuration '{output}'"));
    if let Some(n) = target.max_wcu {
        words.push(format!("--max-write-request-units {n}"));
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_bucket_prefix_compression_and_the_cap() {
        let target = BulkPutTarget {
            table: "shop",
            place: Some(("my-bucket".into(), "loads/shop".into())),
            region: Some("eu-west-1"),
            max_wcu: Some(4000),
        };
        assert_eq!(
            bulk_put_command(Compression::Zstd, &target),
            "aws dynamodb start-bulk-put-items --region eu-west-1 --table-name shop \
             --input-s3-configuration '{\"S3Bucket\":\"my-bucket\",\"S3KeyPrefix\":\"loads/shop/data/\",\"InputFormat\":\"DYNAMODB_JSON\",\"InputCompressionType\":\"ZSTD\"}' \
             --output-s3-configuration '{\"S3Bucket\":\"my-bucket\",\"S3KeyPrefix\":\"loads/shop/bulk-put-report/\",\"OutputType\":[\"ERROR\",\"CONDITION_CHECK_FAILURE\"]}' \
             --max-write-request-units 4000"
        );
        let local = BulkPutTarget {
            place: None,
            region: None,
            max_wcu: None,
            ..target
        };
        let command = bulk_put_command(Compression::Gzip, &local);
        assert!(command.contains("\"S3Bucket\":\"BUCKET\""), "{command}");
        assert!(
            command.contains("\"S3KeyPrefix\":\"PREFIX/data/\""),
            "{command}"
        );
        assert!(
            command.contains("\"InputCompressionType\":\"GZIP\""),
            "{command}"
        );
        assert!(!command.contains("--max-write-request-units"), "{command}");
        assert!(!command.contains("--region"), "{command}");
    }
}
