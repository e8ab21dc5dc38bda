//! `export --for bulk-put`: the files for DynamoDB's bulk put items, which
//! loads S3 objects into an **existing** table (`StartBulkPutItems`).
//!
//! What the developer guide's "Amazon S3 input formats for bulk put items"
//! and the API reference say, and this module follows: input format
//! `DYNAMODB_JSON` is JSON Lines, one record per line; compression `GZIP`,
//! `ZSTD` or `NONE`; every object under the `S3KeyPrefix` is read; each
//! record may carry a per-item condition expression; items whose condition
//! is false are reported (output type `CONDITION_CHECK_FAILURE`) in the
//! output bucket, as are records that fail validation (`ERROR`).
//!
//! What could not be read from an authoritative source at the time of
//! writing: the names of a record's condition fields. The record is written
//! as import from S3 writes it, `{"Item": {…}}`, and a pointer item adds
//! the condition under the names `PutItem`'s request gives them:
//! `ConditionExpression`, `ExpressionAttributeNames`,
//! `ExpressionAttributeValues` (docs/export.md says so too).

use serde_json::{json, Map, Value as Json};
use sql2ddb_core::{Item, PointerUpdate};

use super::compression::Compression;

/// The folder, beside `data/`, where DynamoDB writes the operation's report
/// of items it did not write (never under `data/`, which is its input).
pub const REPORT_DIR: &str = "bulk-put-report";

/// One pointer item as a bulk put record: the item, and the condition that
/// keeps the pointer monotonic, as `run`'s conditional update does:
/// `attribute_not_exists(#v) OR #v < :new` (`>` for a min pointer). An item
/// that holds several pointers is put only when every one of them moves
/// forward (their conditions joined by AND), since a put replaces the item.
pub fn pointer_record(item: &Item, updates: &[&PointerUpdate]) -> Json {
    let mut names = Map::new();
    let mut values = Map::new();
    let mut conditions = Vec::new();
    for (i, u) in updates.iter().enumerate() {
        let suffix = match updates.len() {
            1 => String::new(),
            _ => i.to_string(),
        };
        let op = if u.is_max { "<" } else { ">" };
        let (v, new) = (format!("#v{suffix}"), format!(":new{suffix}"));
        conditions.push(format!("attribute_not_exists({v}) OR {v} {op} {new}"));
        names.insert(v, Json::String(u.attribute.clone()));
        values.insert(
            new,
            serde_json::to_value(&u.value).expect("a value serialises"),
        );
    }
    let condition = match conditions.len() {
        1 => conditions.remove(0),
        _ => conditions
            .iter()
            .map(|c| format!("({c})"))
            .collect::<Vec<_>>()
            .join(" AND "),
    };
    json!({
        "Item": item,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    })
}

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
    use sql2ddb_core::AttrValue;

    fn update(name: &str, attribute: &str, value: &str, is_max: bool) -> PointerUpdate {
        PointerUpdate {
            name: name.into(),
            pk: AttrValue::S("LAST".into()),
            sk: None,
            attribute: attribute.into(),
            value: AttrValue::N(value.into()),
            is_max,
            attributes: Item::new(),
            cleared: Vec::new(),
        }
    }

    #[test]
    fn a_pointer_record_carries_run_s_condition() {
        let mut item = Item::new();
        item.insert("PK".into(), AttrValue::S("LAST".into()));
        item.insert("order_id".into(), AttrValue::N("2000".into()));
        let u = update("LAST_ORDER", "order_id", "2000", true);
        let record = pointer_record(&item, &[&u]);
        assert_eq!(
            record,
            json!({
                "Item": {"PK": {"S": "LAST"}, "order_id": {"N": "2000"}},
                "ConditionExpression": "attribute_not_exists(#v) OR #v < :new",
                "ExpressionAttributeNames": {"#v": "order_id"},
                "ExpressionAttributeValues": {":new": {"N": "2000"}},
            })
        );

        // A min pointer, and two pointers on one item: both must move.
        let first = update("FIRST", "lo", "3", false);
        let last = update("LAST", "hi", "9", true);
        let record = pointer_record(&item, &[&first, &last]);
        assert_eq!(
            record["ConditionExpression"],
            "(attribute_not_exists(#v0) OR #v0 > :new0) AND (attribute_not_exists(#v1) OR #v1 < :new1)"
        );
        assert_eq!(
            record["ExpressionAttributeNames"],
            json!({"#v0": "lo", "#v1": "hi"})
        );
    }

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
