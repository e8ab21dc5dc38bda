//! Table admin: make sure the target table exists with the mapping's keys,
//! global secondary indexes and billing, before any item is written.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, GlobalSecondaryIndexDescription,
    IndexStatus, KeySchemaElement, KeyType as SdkKeyType, Projection as SdkProjection,
    ProjectionType, ProvisionedThroughput, ScalarAttributeType, TableDescription, TableStatus,
};
use aws_sdk_dynamodb::Client;
pub use sql2ddb_core::capacity::{Billing, Projection};
use sql2ddb_core::{KeyAttr, KeyType};

use crate::client::Dynamo;
use crate::error::{local_error, DynamoError};
use crate::retry::retried;
use crate::writer::RetryPolicy;

/// How long to wait for a new table and its indexes to become ACTIVE.
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(300);

/// The table the mapping writes to: keys, global secondary indexes, billing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// Partition key, then the sort key if any.
    pub keys: Vec<KeyAttr>,
    /// Global secondary indexes, in the mapping's order.
    pub gsis: Vec<GsiSpec>,
    /// How a created table (and its indexes) is billed.
    pub billing: Billing,
}

/// One global secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsiSpec {
    /// Index name.
    pub name: String,
    /// Partition key, then the sort key if any.
    pub keys: Vec<KeyAttr>,
    /// Which attributes the index holds.
    pub projection: Projection,
}

impl TableSpec {
    /// A table with `keys`, no indexes, on-demand billing.
    pub fn new(name: impl Into<String>, keys: Vec<KeyAttr>) -> Self {
        TableSpec {
            name: name.into(),
            keys,
            gsis: Vec::new(),
            billing: Billing::OnDemand,
        }
    }
}

/// A projection as DynamoDB names it, for a message.
fn describe(p: &Projection) -> String {
    match p {
        Projection::All => "ALL".into(),
        Projection::KeysOnly => "KEYS_ONLY".into(),
        Projection::Include(a) => format!("INCLUDE [{}]", a.join(", ")),
    }
}

fn scalar(kind: KeyType) -> ScalarAttributeType {
    match kind {
        KeyType::S => ScalarAttributeType::S,
        KeyType::N => ScalarAttributeType::N,
        KeyType::B => ScalarAttributeType::B,
    }
}

/// A key attribute as an existing table describes it: its type is `None`
/// when the table's attribute definitions do not give one of S, N or B.
type FoundKey = (String, Option<KeyType>);

fn found_from(keys: &[KeyAttr]) -> Vec<FoundKey> {
    keys.iter()
        .map(|k| (k.name.clone(), Some(k.kind)))
        .collect()
}

fn describe_keys(keys: &[FoundKey]) -> String {
    keys.iter()
        .map(|(name, kind)| match kind {
            Some(kind) => format!("{name} ({kind})"),
            None => format!("{name} (?)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `table` exists with exactly `keys` (partition key first) as
/// its key schema; creates it (on-demand billing) when missing and `create`
/// is set, and waits until it is ACTIVE. Returns whether it was created.
///
/// The table's global secondary indexes are not compared: use
/// [`ensure_table_spec`] for a mapping that declares them.
pub async fn ensure_table(
    dynamo: &Dynamo,
    table: &str,
    keys: &[KeyAttr],
    create: bool,
) -> Result<bool, DynamoError> {
    let client = dynamo.sdk();
    ensure(client, &TableSpec::new(table, keys.to_vec()), create, false).await
}

/// Checks that `spec.name` exists with exactly the key schema and global
/// secondary indexes (names, keys, projection type and attributes) of `spec`;
/// an index the table has but the spec lacks is a mismatch too, since items
/// are checked only against the declared ones. When the table is missing and
/// `create` is set, creates it with its indexes and billing and waits until
/// the table and every index are ACTIVE. Returns whether it was created.
pub async fn ensure_table_spec(
    dynamo: &Dynamo,
    spec: &TableSpec,
    create: bool,
) -> Result<bool, DynamoError> {
    let client = dynamo.sdk();
    ensure(client, spec, create, true).await
}

pub(crate) async fn ensure(
    client: &Client,
    spec: &TableSpec,
    create: bool,
    compare_gsis: bool,
) -> Result<bool, DynamoError> {
    let table = spec.name.as_str();
    let described = retried(&RetryPolicy::default(), "DescribeTable", || {
        client.describe_table().table_name(table).send()
    })
    .await;
    match described {
        Ok(out) => {
            let desc = out
                .table
                .unwrap_or_else(|| TableDescription::builder().build());
            compare(spec, &desc, compare_gsis)?;
            // A table created by someone else a moment ago may still be CREATING.
            wait_active(client, table, &spec.gsis).await?;
            Ok(false)
        }
        Err(e) => {
            let missing = e
                .error
                .as_service_error()
                .map(|s| s.is_resource_not_found_exception())
                .unwrap_or(false);
            if !missing {
                return Err(e.into_error("DescribeTable", table));
            }
            if !create {
                return Err(DynamoError::TableMissing {
                    table: table.to_string(),
                });
            }
            create_table(client, spec).await?;
            wait_active(client, table, &spec.gsis).await?;
            Ok(true)
        }
    }
}

fn key_schema(keys: &[KeyAttr]) -> Vec<KeySchemaElement> {
    keys.iter()
        .enumerate()
        .map(|(i, k)| {
            KeySchemaElement::builder()
                .attribute_name(&k.name)
                .key_type(if i == 0 {
                    SdkKeyType::Hash
                } else {
                    SdkKeyType::Range
                })
                .build()
                .expect("name and type are set")
        })
        .collect()
}

fn throughput(billing: Billing) -> Option<ProvisionedThroughput> {
    match billing {
        Billing::OnDemand => None,
        Billing::Provisioned { read, write } => Some(
            ProvisionedThroughput::builder()
                .read_capacity_units(i64::try_from(read).unwrap_or(i64::MAX))
                .write_capacity_units(i64::try_from(write).unwrap_or(i64::MAX))
                .build()
                .expect("read and write are set"),
        ),
    }
}

fn sdk_projection(p: &Projection) -> SdkProjection {
    match p {
        Projection::All => SdkProjection::builder()
            .projection_type(ProjectionType::All)
            .build(),
        Projection::KeysOnly => SdkProjection::builder()
            .projection_type(ProjectionType::KeysOnly)
            .build(),
        Projection::Include(attrs) => SdkProjection::builder()
            .projection_type(ProjectionType::Include)
            .set_non_key_attributes(Some(attrs.clone()))
            .build(),
    }
}

async fn create_table(client: &Client, spec: &TableSpec) -> Result<(), DynamoError> {
    let table = spec.name.as_str();
    // Every key attribute of the table and its indexes is defined once.
    let mut defined: Vec<&KeyAttr> = Vec::new();
    for k in spec
        .keys
        .iter()
        .chain(spec.gsis.iter().flat_map(|g| &g.keys))
    {
        match defined.iter().find(|d| d.name == k.name) {
            Some(d) if d.kind != k.kind => {
                return Err(local_error(
                    "CreateTable",
                    table,
                    format!(
                        "key attribute {} is declared both as {} and as {}",
                        k.name, d.kind, k.kind
                    ),
                ))
            }
            Some(_) => {}
            None => defined.push(k),
        }
    }
    let mut req = client
        .create_table()
        .table_name(table)
        .set_key_schema(Some(key_schema(&spec.keys)))
        .set_attribute_definitions(Some(
            defined
                .iter()
                .map(|k| {
                    AttributeDefinition::builder()
                        .attribute_name(&k.name)
                        .attribute_type(scalar(k.kind))
                        .build()
                        .expect("name and type are set")
                })
                .collect(),
        ));
    req = match throughput(spec.billing) {
        None => req.billing_mode(BillingMode::PayPerRequest),
        Some(t) => req
            .billing_mode(BillingMode::Provisioned)
            .provisioned_throughput(t),
    };
    for g in &spec.gsis {
        let index = GlobalSecondaryIndex::builder()
            .index_name(&g.name)
            .set_key_schema(Some(key_schema(&g.keys)))
            .projection(sdk_projection(&g.projection))
            .set_provisioned_throughput(throughput(spec.billing))
            .build()
            .map_err(|e| local_error("CreateTable", table, e.to_string()))?;
        req = req.global_secondary_indexes(index);
    }
    match retried(&RetryPolicy::default(), "CreateTable", || {
        req.clone().send()
    })
    .await
    {
        Ok(_) => Ok(()),
        // An attempt whose answer was lost may have created it.
        Err(e) if e.attempts > 1 && e.code() == Some("ResourceInUseException") => Ok(()),
        Err(e) => Err(e.into_error("CreateTable", table)),
    }
}

/// Keys of a key schema with their types from the attribute definitions, HASH first.
fn found_keys(schema: &[KeySchemaElement], types: &HashMap<&str, &str>) -> Vec<FoundKey> {
    let mut keys: Vec<(bool, FoundKey)> = schema
        .iter()
        .map(|k| {
            let kind = types.get(k.attribute_name()).and_then(|t| t.parse().ok());
            (
                k.key_type() != &SdkKeyType::Hash,
                (k.attribute_name().to_string(), kind),
            )
        })
        .collect();
    keys.sort_by_key(|(range, _)| *range);
    keys.into_iter().map(|(_, k)| k).collect()
}

fn found_projection(g: &GlobalSecondaryIndexDescription) -> Projection {
    let p = g.projection();
    match p.and_then(|p| p.projection_type()) {
        Some(ProjectionType::KeysOnly) => Projection::KeysOnly,
        Some(ProjectionType::Include) => {
            let mut attrs = p
                .map(|p| p.non_key_attributes().to_vec())
                .unwrap_or_default();
            attrs.sort();
            Projection::Include(attrs)
        }
        _ => Projection::All,
    }
}

/// Compares an existing table with the spec; the first difference is the error.
fn compare(
    spec: &TableSpec,
    desc: &TableDescription,
    compare_gsis: bool,
) -> Result<(), DynamoError> {
    let table = spec.name.as_str();
    let types: HashMap<&str, &str> = desc
        .attribute_definitions()
        .iter()
        .map(|d| (d.attribute_name(), d.attribute_type().as_str()))
        .collect();
    let found = found_keys(desc.key_schema(), &types);
    let expected = found_from(&spec.keys);
    if found != expected {
        return Err(DynamoError::KeySchemaMismatch {
            table: table.to_string(),
            expected: describe_keys(&expected),
            found: describe_keys(&found),
        });
    }
    if !compare_gsis {
        return Ok(());
    }
    let mismatch = |index: &str, message: String| DynamoError::IndexMismatch {
        table: table.to_string(),
        index: index.to_string(),
        message,
    };
    let existing = desc.global_secondary_indexes();
    for g in &spec.gsis {
        let Some(have) = existing
            .iter()
            .find(|e| e.index_name() == Some(g.name.as_str()))
        else {
            return Err(mismatch(
                &g.name,
                "the mapping declares it, the table has no such index (create it, or remove it from [[target.gsi]])".into(),
            ));
        };
        if let Some(why) = index_differs(g, have, &types) {
            return Err(mismatch(&g.name, why));
        }
    }
    if let Some(extra) = existing.iter().find_map(|e| {
        let name = e.index_name().unwrap_or_default();
        (!spec.gsis.iter().any(|g| g.name == name)).then_some(name)
    }) {
        return Err(mismatch(
            extra,
            "the table has this index, the mapping does not declare it: add it under [[target.gsi]] so items are checked against its key types".into(),
        ));
    }
    Ok(())
}

/// How an index of the table differs from the one the mapping declares
/// (its keys, then its projection), if it does.
fn index_differs(
    g: &GsiSpec,
    have: &GlobalSecondaryIndexDescription,
    types: &HashMap<&str, &str>,
) -> Option<String> {
    let keys = found_keys(have.key_schema(), types);
    let wanted = found_from(&g.keys);
    if keys != wanted {
        return Some(format!(
            "its keys are {}, the mapping declares {}",
            describe_keys(&keys),
            describe_keys(&wanted)
        ));
    }
    let projection = found_projection(have);
    let wanted = match &g.projection {
        Projection::Include(a) => {
            let set: BTreeSet<&String> = a.iter().collect();
            Projection::Include(set.into_iter().cloned().collect())
        }
        other => other.clone(),
    };
    (projection != wanted).then(|| {
        format!(
            "its projection is {}, the mapping declares {}",
            describe(&projection),
            describe(&wanted)
        )
    })
}

async fn wait_active(client: &Client, table: &str, gsis: &[GsiSpec]) -> Result<(), DynamoError> {
    let start = tokio::time::Instant::now();
    loop {
        let out = retried(&RetryPolicy::default(), "DescribeTable", || {
            client.describe_table().table_name(table).send()
        })
        .await
        .map_err(|e| e.into_error("DescribeTable", table))?;
        let desc = out.table();
        let table_active = desc.and_then(|t| t.table_status()) == Some(&TableStatus::Active);
        let indexes = desc
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default();
        let pending: Vec<&str> = gsis
            .iter()
            .filter(|g| {
                !indexes.iter().any(|i| {
                    i.index_name() == Some(g.name.as_str())
                        && i.index_status() == Some(&IndexStatus::Active)
                })
            })
            .map(|g| g.name.as_str())
            .collect();
        if table_active && pending.is_empty() {
            return Ok(());
        }
        if start.elapsed() > CREATE_TIMEOUT {
            let what = if table_active {
                format!("indexes {} not ACTIVE", pending.join(", "))
            } else {
                "table not ACTIVE".to_string()
            };
            return Err(local_error(
                "CreateTable",
                table,
                format!("{what} after {CREATE_TIMEOUT:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
