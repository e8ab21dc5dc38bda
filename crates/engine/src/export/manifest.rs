//! What an export writes beside its data files: `manifest.json` (the files,
//! their sizes and hashes, the counts) and `table-creation.json` (the
//! `--table-creation-parameters` of `aws dynamodb import-table`), and the
//! import command itself.

use serde::Serialize;
use serde_json::{json, Value as Json};
use sql2ddb_core::KeyAttr;
use sql2ddb_mapping::{Billing, Plan, Projection};

use super::compression::Compression;
use super::files::FileEntry;
use crate::ids::RunId;
use crate::report::RunReport;

/// `manifest.json`: what the export wrote and how the rows add up.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// The run id (its run directory holds the rejects file and the report).
    pub run_id: RunId,
    /// The digest of everything in the mapping that decides the items.
    pub mapping_digest: String,
    /// The table the mapping describes.
    pub table: String,
    /// What loads the files: `import` (a new table) or `bulk-put` (an
    /// existing table; the pointer updates in `pointer_file`).
    #[serde(rename = "for")]
    pub export_for: &'static str,
    /// `DYNAMODB_JSON`: one `{"Item": {…}}` object per line.
    pub format: &'static str,
    /// `gzip`, `zstd` or `none`.
    pub compression: &'static str,
    /// Items in all files (entity items and pointer items).
    pub items: u64,
    /// The data files, by name.
    pub files: Vec<FileEntry>,
    /// Per entity: `rows_read = exported + rejected`.
    pub entities: Vec<EntityCounts>,
    /// Pointer items written, per pointer.
    pub pointers: Vec<PointerCount>,
    /// For bulk put: the file beside `data/` that holds the pointer
    /// updates (`sql2ddb pointers` writes them after the bulk put); the
    /// data files then hold no pointer item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer_file: Option<String>,
    /// The run's rejects file; null when no row was rejected.
    pub rejects_file: Option<String>,
}

/// How one entity's rows add up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntityCounts {
    /// Entity name.
    pub name: String,
    /// Rows read from the source.
    pub rows_read: u64,
    /// Rows written to the files as items.
    pub exported: u64,
    /// Rows rejected, each in the rejects file with its reason.
    pub rejected: u64,
}

/// The pointer items of one pointer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PointerCount {
    /// The pointer's label.
    pub name: String,
    /// Distinct pointer items, each with its final value.
    pub items: u64,
}

impl Manifest {
    /// The manifest of a finished export.
    pub fn new(
        plan: &Plan,
        report: &RunReport,
        compression: Compression,
        files: Vec<FileEntry>,
        pointers: Vec<PointerCount>,
    ) -> Manifest {
        Manifest {
            run_id: report.run_id.clone(),
            mapping_digest: plan.item_digest().hash(),
            table: plan.target.table.clone(),
            export_for: "import",
            format: "DYNAMODB_JSON",
            compression: compression.name(),
            items: files.iter().map(|f| f.items).sum(),
            files,
            entities: report
                .entities
                .iter()
                .map(|e| EntityCounts {
                    name: e.name.clone(),
                    rows_read: e.rows_read,
                    exported: e.items_written + e.overwritten,
                    rejected: e.rejected,
                })
                .collect(),
            pointers,
            pointer_file: None,
            rejects_file: report.rejects_file.clone(),
        }
    }
}

/// The `--table-creation-parameters` of `aws dynamodb import-table` for the
/// table `plan` describes: key schema, attribute definitions, billing and
/// every GSI.
pub fn table_creation(plan: &Plan) -> Json {
    let t = &plan.target;
    let keys = plan.key_attrs();
    let mut defined: Vec<&KeyAttr> = Vec::new();
    for k in keys.iter().chain(
        t.gsis
            .iter()
            .flat_map(|g| [Some(&g.pk), g.sk.as_ref()].into_iter().flatten()),
    ) {
        if !defined.iter().any(|d| d.name == k.name) {
            defined.push(k);
        }
    }
    let throughput = match t.billing {
        Billing::OnDemand => None,
        Billing::Provisioned { read, write } => Some(json!({
            "ReadCapacityUnits": read,
            "WriteCapacityUnits": write,
        })),
    };
    let mut params = json!({
        "TableName": t.table,
        "AttributeDefinitions": defined
            .iter()
            .map(|k| json!({"AttributeName": k.name, "AttributeType": k.kind.as_str()}))
            .collect::<Vec<_>>(),
        "KeySchema": key_schema(&keys),
        "BillingMode": if throughput.is_some() { "PROVISIONED" } else { "PAY_PER_REQUEST" },
    });
    if let Some(p) = &throughput {
        params["ProvisionedThroughput"] = p.clone();
    }
    if !t.gsis.is_empty() {
        params["GlobalSecondaryIndexes"] = t
            .gsis
            .iter()
            .map(|g| {
                let mut gsi = json!({
                    "IndexName": g.name,
                    "KeySchema": key_schema(&g.keys()),
                    "Projection": match &g.projection {
                        Projection::All => json!({"ProjectionType": "ALL"}),
                        Projection::KeysOnly => json!({"ProjectionType": "KEYS_ONLY"}),
                        Projection::Include(a) => json!({"ProjectionType": "INCLUDE", "NonKeyAttributes": a}),
                    },
                });
                if let Some(p) = &throughput {
                    gsi["ProvisionedThroughput"] = p.clone();
                }
                gsi
            })
            .collect();
    }
    params
}

fn key_schema(keys: &[KeyAttr]) -> Json {
    keys.iter()
        .zip(["HASH", "RANGE"])
        .map(|(k, kind)| json!({"AttributeName": k.name, "KeyType": kind}))
        .collect()
}

/// The `aws dynamodb import-table` command that creates the table from the
/// files. `source` is the bucket and the data files' key prefix (`None`
/// for a local export: placeholders to fill once the files are uploaded);
/// `parameters` is the local path of `table-creation.json`.
pub fn import_command(
    compression: Compression,
    source: Option<(String, String)>,
    parameters: &str,
    region: Option<&str>,
) -> String {
    let (bucket, prefix) = source.unwrap_or_else(|| ("BUCKET".into(), "PREFIX/data/".into()));
    let region = region.map(|r| format!(" --region {r}")).unwrap_or_default();
    format!(
        "aws dynamodb import-table{region} --input-format DYNAMODB_JSON --input-compression-type {} --s3-bucket-source S3Bucket={bucket},S3KeyPrefix={prefix} --table-creation-parameters file://{parameters}",
        compression.import_name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(target: &str) -> Plan {
        let text = format!(
            "version = 1\n[source]\nurl = \"sqlite://x.db\"\n[target]\ntable = \"tbl\"\n{target}\n[[entity]]\nname = \"e\"\nfrom = \"e\"\npk = \"E#{{id}}\"\n"
        );
        Plan::parse(&text, "m.toml".as_ref(), &|_| None).unwrap()
    }

    #[test]
    fn provisioned_billing_and_every_projection_are_carried_over() {
        let p = plan(
            "pk = { name = \"PK\", type = \"S\" }\nbilling = { read = 5, write = 7 }\n\
             [[target.gsi]]\nname = \"GSI1\"\npk = { name = \"G1PK\", type = \"N\" }\nprojection = { include = [\"a\", \"b\"] }\n\
             [[target.gsi]]\nname = \"GSI2\"\npk = { name = \"PK\", type = \"S\" }\nsk = { name = \"G2SK\", type = \"B\" }\nprojection = \"keys_only\"",
        );
        let t = table_creation(&p);
        let units = json!({"ReadCapacityUnits": 5, "WriteCapacityUnits": 7});
        assert_eq!(t["BillingMode"], "PROVISIONED");
        assert_eq!(t["ProvisionedThroughput"], units);
        assert_eq!(
            t["KeySchema"],
            json!([{"AttributeName": "PK", "KeyType": "HASH"}])
        );
        assert_eq!(
            t["AttributeDefinitions"],
            json!([
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "G1PK", "AttributeType": "N"},
                {"AttributeName": "G2SK", "AttributeType": "B"},
            ]),
            "each key attribute once, the table's and the indexes'"
        );
        let g = &t["GlobalSecondaryIndexes"];
        assert_eq!(
            g[0]["Projection"],
            json!({"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "b"]})
        );
        assert_eq!(g[0]["ProvisionedThroughput"], units);
        assert_eq!(g[1]["Projection"], json!({"ProjectionType": "KEYS_ONLY"}));
        assert_eq!(
            g[1]["KeySchema"],
            json!([
                {"AttributeName": "PK", "KeyType": "HASH"},
                {"AttributeName": "G2SK", "KeyType": "RANGE"},
            ])
        );
    }

    #[test]
    fn on_demand_tables_have_no_throughput_and_a_local_export_has_placeholders() {
        let t = table_creation(&plan("pk = { name = \"PK\", type = \"S\" }"));
        assert_eq!(t["BillingMode"], "PAY_PER_REQUEST");
        assert!(t.get("ProvisionedThroughput").is_none());
        assert!(t.get("GlobalSecondaryIndexes").is_none());
        let command = import_command(Compression::Zstd, None, "out/table-creation.json", None);
        assert_eq!(
            command,
            "aws dynamodb import-table --input-format DYNAMODB_JSON --input-compression-type ZSTD \
             --s3-bucket-source S3Bucket=BUCKET,S3KeyPrefix=PREFIX/data/ \
             --table-creation-parameters file://out/table-creation.json"
        );
    }
}
