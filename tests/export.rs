//! `sql2ddb export`: the example shop exported to a directory and to an S3
//! bucket (moto's server) holds exactly the items `run` writes to the table
//! (pointer item included), in files within their bound, listed by a
//! manifest whose counts and hashes are right, with the table-creation
//! parameters of the table `run` creates; rejected rows are the same as
//! `run`'s.

use std::collections::BTreeMap;
use std::io::Read;

use sha2::{Digest, Sha256};
use sql2ddb_core::Item;

use crate::common::*;
use sql2ddb_testkit::support::{Bucket, Moto};

/// The item digest of the mapping file at `path`.
fn digest(path: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let plan = sql2ddb_mapping::Plan::parse(&text, path.as_ref(), &|_| None).unwrap();
    plan.item_digest().hash()
}

/// One data file's bytes, uncompressed.
fn decompress(name: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if name.ends_with(".gz") {
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
    } else if name.ends_with(".zst") {
        out = zstd::decode_all(bytes).unwrap();
    } else {
        out = bytes.to_vec();
    }
    out
}

/// Checks every file the manifest lists against its bytes (size, SHA-256,
/// items, the bound) and returns the items, keyed as [`Items`].
fn check_files(manifest: &serde_json::Value, read: impl Fn(&str) -> Vec<u8>, bound: u64) -> Items {
    let mut items = Items::new();
    for f in manifest["files"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        assert!(name.starts_with("data/"), "{name}");
        let bytes = read(name);
        assert_eq!(f["compressed_bytes"], bytes.len() as u64, "{name}");
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(f["sha256"], sha, "{name}");
        let text = decompress(name, &bytes);
        assert_eq!(f["uncompressed_bytes"], text.len() as u64, "{name}");
        let lines: Vec<&[u8]> = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(f["items"], lines.len() as u64, "{name}");
        assert!(lines.len() as u64 <= bound, "{name}: {} items", lines.len());
        for line in lines {
            let mut object: BTreeMap<String, Item> = serde_json::from_slice(line).unwrap();
            assert_eq!(object.len(), 1, "one `Item` per line");
            let item = object.remove("Item").expect("an `Item` object");
            let key = key_of(&item);
            assert!(items.insert(key.clone(), item).is_none(), "{key:?} twice");
        }
    }
    assert_eq!(manifest["items"], items.len() as u64);
    items
}

/// The exported items equal the table's, as canonical JSON (sorted
/// attributes, DynamoDB JSON values).
fn assert_same_items(exported: &Items, table: &Items) {
    let canonical = |items: &Items| -> Vec<String> {
        items
            .values()
            .map(|i| serde_json::to_string(i).unwrap())
            .collect()
    };
    assert_eq!(exported.len(), table.len());
    assert_eq!(canonical(exported), canonical(table));
}

/// The manifest's per-entity counts add up and equal `run`'s report.
fn assert_counts(manifest: &serde_json::Value, run: &Run) {
    for e in manifest["entities"].as_array().unwrap() {
        let r = run.entity(e["name"].as_str().unwrap());
        let (read, exported, rejected) = (&e["rows_read"], &e["exported"], &e["rejected"]);
        assert_eq!(*read, r["rows_read"], "{e}");
        assert_eq!(*rejected, r["rejected"], "{e}");
        assert_eq!(*exported, r["items_written"], "{e}");
        assert_eq!(
            read.as_u64().unwrap(),
            exported.as_u64().unwrap() + rejected.as_u64().unwrap()
        );
    }
}

/// `table-creation.json` describes the table `run` created: keys, attribute
/// types, every GSI with its keys and projection.
async fn assert_table_creation(sc: &Scenario, params: &serde_json::Value) {
    let table = sc
        .dynamo
        .client
        .describe_table()
        .table_name(&sc.table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    assert_eq!(params["TableName"], sc.table);
    assert_eq!(params["BillingMode"], "PAY_PER_REQUEST");
    let schema = |keys: &[sql2ddb_testkit::sdk::types::KeySchemaElement]| -> serde_json::Value {
        keys.iter()
            .map(|k| serde_json::json!({"AttributeName": k.attribute_name(), "KeyType": k.key_type().as_str()}))
            .collect()
    };
    assert_eq!(params["KeySchema"], schema(table.key_schema()));
    let mut defined: Vec<(String, String)> = table
        .attribute_definitions()
        .iter()
        .map(|a| {
            (
                a.attribute_name().to_string(),
                a.attribute_type().as_str().to_string(),
            )
        })
        .collect();
    let mut written: Vec<(String, String)> = params["AttributeDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["AttributeName"].as_str().unwrap().into(),
                a["AttributeType"].as_str().unwrap().into(),
            )
        })
        .collect();
    defined.sort();
    written.sort();
    assert_eq!(written, defined);
    let gsis = table.global_secondary_indexes();
    assert_eq!(
        params["GlobalSecondaryIndexes"].as_array().unwrap().len(),
        gsis.len()
    );
    assert!(!gsis.is_empty(), "the shop has a GSI");
    for g in gsis {
        let name = g.index_name().unwrap();
        let p = params["GlobalSecondaryIndexes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["IndexName"] == name)
            .unwrap_or_else(|| panic!("GSI {name} in {params}"));
        assert_eq!(p["KeySchema"], schema(g.key_schema()), "{name}");
        let projection = g.projection().unwrap().projection_type().unwrap().as_str();
        assert_eq!(p["Projection"]["ProjectionType"], projection, "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_exported_to_a_directory_holds_the_items_run_writes() {
    let sc = Scenario::new("export_dir").start().await;
    let mapping = shop_mapping(&sc);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = sc.items().await;

    for (compression, bound) in [("gzip", 97), ("zstd", 1_000_000)] {
        let out = format!("out-{compression}");
        let mut args = vec![
            "export",
            &mapping,
            "--out",
            &out,
            "--compression",
            compression,
        ];
        let bound_text = bound.to_string();
        if bound < 1_000_000 {
            args.extend(["--items-per-file", &bound_text]);
        }
        args.extend(["--json", "--quiet"]);
        let export = sc.sql2ddb(&args).await;
        assert_eq!(export.code, 0, "{}", export.stderr);
        assert_eq!(export.report()["status"], "ok");
        let dir = sc.path().join(&out);
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["compression"], compression);
        assert_eq!(manifest["run_id"], export.report()["run_id"]);
        assert_eq!(manifest["mapping_digest"], digest(&mapping), "{manifest}");
        let exported = check_files(
            &manifest,
            |name| std::fs::read(dir.join(name)).unwrap(),
            bound,
        );
        assert_same_items(&exported, &table);
        assert_counts(&manifest, &export);
        let files = manifest["files"].as_array().unwrap();
        if bound < 1_000_000 {
            let slots: std::collections::BTreeSet<&str> = files
                .iter()
                .map(|f| f["name"].as_str().unwrap().split('-').nth(1).unwrap())
                .collect();
            assert!(
                slots.len() > 1,
                "items spread over several files by key: {slots:?}"
            );
        }

        let params: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("table-creation.json")).unwrap())
                .unwrap();
        assert_table_creation(&sc, &params).await;
        let command = export.report()["import_command"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(export.stderr.contains(&command), "{}", export.stderr);
        assert!(
            command.starts_with("aws dynamodb import-table"),
            "{command}"
        );
        for part in [
            "--input-format DYNAMODB_JSON".to_string(),
            format!("--input-compression-type {}", compression.to_uppercase()),
            format!("--table-creation-parameters file://{out}/table-creation.json"),
        ] {
            assert!(command.contains(&part), "{part} in {command}");
        }
    }

    let again = sc
        .sql2ddb(&["export", &mapping, "--out", "out-gzip", "--quiet"])
        .await;
    assert_eq!(
        again.code, EX_CONFIG,
        "an export into a used directory is refused"
    );
    assert!(
        again.stderr.contains("out-gzip already holds")
            && again.stderr.contains("export files")
            && again.stderr.contains("--if-not-empty truncate"),
        "{}",
        again.stderr
    );
}

/// `sql2ddb export MAPPING --out OUT --s3-endpoint URL EXTRA… --json --quiet`.
async fn export_to_s3(sc: &Scenario, mapping: &str, out: &str, url: &str, extra: &[&str]) -> Run {
    let mut args = vec!["export", mapping, "--out", out, "--s3-endpoint", url];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--quiet"]);
    sc.sql2ddb(&args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_exported_to_s3_holds_the_items_run_writes() {
    let moto = Moto::s3();
    let url = moto.url().to_string();
    let sc = Scenario::new("export_s3").start().await;
    let mapping = shop_mapping(&sc);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = sc.items().await;

    let bucket = Bucket::create(&url, "export").await;

    let out = format!("s3://{}/shop/2024", bucket.name);
    let export = export_to_s3(&sc, &mapping, &out, &url, &["--items-per-file", "150"]).await;
    assert_eq!(export.code, 0, "{}", export.stderr);
    let manifest: serde_json::Value =
        serde_json::from_slice(&bucket.get("shop/2024/manifest.json").await).unwrap();
    let mut files = BTreeMap::new();
    for f in manifest["files"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap().to_string();
        let bytes = bucket.get(&format!("shop/2024/{name}")).await;
        files.insert(name, bytes);
    }
    let listed = bucket
        .client
        .list_objects_v2()
        .bucket(&bucket.name)
        .prefix("shop/2024/data/")
        .send()
        .await
        .unwrap();
    assert_eq!(
        listed.contents().len(),
        files.len(),
        "the data prefix holds the files and nothing else"
    );
    let exported = check_files(&manifest, |name| files[name].clone(), 150);
    assert_same_items(&exported, &table);
    assert_counts(&manifest, &export);
    let params: serde_json::Value =
        serde_json::from_slice(&bucket.get("shop/2024/table-creation.json").await).unwrap();
    assert_table_creation(&sc, &params).await;
    let command = export.report()["import_command"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        command.contains(&format!(
            "--s3-bucket-source S3Bucket={},S3KeyPrefix=shop/2024/data/",
            bucket.name
        )),
        "{command}"
    );
    assert!(
        command.contains("--input-compression-type GZIP"),
        "{command}"
    );
    let local = export.report()["table_creation_file"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(command.contains(&format!("file://{local}")), "{command}");
    let copy: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sc.path().join(&local)).unwrap()).unwrap();
    assert_eq!(
        copy, params,
        "the command's local copy is the uploaded file"
    );

    let again = sc
        .sql2ddb(&[
            "export",
            &mapping,
            "--out",
            &out,
            "--s3-endpoint",
            &url,
            "--quiet",
        ])
        .await;
    assert_eq!(
        again.code, EX_CONFIG,
        "an export into a used prefix is refused"
    );
    assert!(
        again.stderr.contains(&format!("{out} already holds"))
            && again.stderr.contains("export files (data/part-")
            && again.stderr.contains("--if-not-empty append"),
        "{}",
        again.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_rejects_the_rows_run_rejects() {
    let sc = Scenario::new("export_rejects")
        .postgres(
            "CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL, amount numeric, body text);
             INSERT INTO {schema}.items SELECT i, 'n' || i, 1.5, 'x' FROM generate_series(1, 30) i;
             INSERT INTO {schema}.items VALUES
               (31, 'n31', 12345678901234567890123456789012345678901, 'x'),
               (32, '', 1.5, 'x'),
               (33, 'n33', 1.5, repeat('y', 500000));",
        )
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    let export = sc
        .sql2ddb(&[
            "export",
            &mapping,
            "--out",
            "out",
            "--compression",
            "none",
            "--json",
            "--quiet",
        ])
        .await;
    assert_eq!(
        export.code, 2,
        "exit 2 when rows were rejected: {}",
        export.stderr
    );
    assert_eq!(export.report()["status"], "rejected");

    let rejects = |r: &Run| -> Vec<String> {
        let mut lines: Vec<String> = rejects_of(sc.path(), &r.report())
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(rejects(&export).len(), 3);
    assert_eq!(
        rejects(&export),
        rejects(&run),
        "the same rows, keys and reasons"
    );

    let dir = sc.path().join("out");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_counts(&manifest, &export);
    assert_eq!(manifest["entities"][0]["exported"], 30);
    assert_eq!(manifest["entities"][0]["rejected"], 3);
    let exported = check_files(
        &manifest,
        |name| std::fs::read(dir.join(name)).unwrap(),
        u64::MAX,
    );
    assert_same_items(&exported, &sc.items().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_a_part_is_uploaded_in_several_parts() {
    let moto = Moto::s3();
    let url = moto.url().to_string();
    // About 13 MB of lines in one file: a part of exactly 8 MiB and the
    // rest, however the pages that filled it were sized.
    let sc = Scenario::new("export_parts")
        .postgres(
            "CREATE TABLE {schema}.items (id int PRIMARY KEY, name text NOT NULL, body text);
             INSERT INTO {schema}.items
             SELECT i, 'n' || i, repeat(md5(i::text), 32) FROM generate_series(1, 12000) i;",
        )
        .start()
        .await;
    let mapping = sc.mapping(ITEMS_MAPPING);
    let bucket = Bucket::create(&url, "parts").await;
    let out = format!("s3://{}/big", bucket.name);
    let export = export_to_s3(&sc, &mapping, &out, &url, &["--compression", "none"]).await;
    assert_eq!(export.code, 0, "{}", export.stderr);
    let manifest: serde_json::Value =
        serde_json::from_slice(&bucket.get("big/manifest.json").await).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "12,000 rows fit one file: {manifest}");
    let name = files[0]["name"].as_str().unwrap().to_string();
    let bytes = bucket.get(&format!("big/{name}")).await;
    assert!(bytes.len() > 8 * 1024 * 1024, "{} bytes", bytes.len());
    let head = bucket
        .client
        .head_object()
        .bucket(&bucket.name)
        .key(format!("big/{name}"))
        .send()
        .await
        .unwrap();
    let etag = head
        .e_tag()
        .unwrap_or_default()
        .trim_matches('"')
        .to_string();
    assert!(etag.ends_with("-2"), "uploaded in two parts: ETag {etag}");
    let exported = check_files(&manifest, |_| bytes.clone(), u64::MAX);
    assert_eq!(exported.len(), 12000);
    assert_counts(&manifest, &export);
}

/// `--for bulk-put`, line by line against the developer guide's "Amazon S3
/// input formats for bulk put items": input format DYNAMODB_JSON is JSON
/// Lines, one record per line, each record holding the item in DynamoDB
/// JSON and nothing else (no per-item condition, whose field names are not
/// confirmed); the pointer items are not in the files but in the pointer
/// file beside `data/`; the command names the bucket, the prefix, the
/// compression and the mapping's `max_wcu` as the write request units cap.
/// Then the bulk put, done as DynamoDB does it (each record put), and
/// `sql2ddb pointers`: the table equals what `run` writes, and a pointer
/// already further along is left where it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_exported_for_bulk_put_leaves_the_pointers_to_their_own_step() {
    let sc = Scenario::new("export_bulk").start().await;
    let mapping = shop_mapping(&sc);
    let run = sc.run(&mapping, &["--json", "--quiet"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = sc.items().await;
    let pointer_key = key("LAST_ORDER", "LAST_ORDER");
    assert!(table.contains_key(&pointer_key), "{:?}", table.keys());
    let text = std::fs::read_to_string(&mapping).unwrap().replacen(
        "[[entity]]",
        "[writer]\nmax_wcu = 500\n\n[[entity]]",
        1,
    );
    std::fs::write(&mapping, text).unwrap();

    let args = [
        "export",
        &mapping,
        "--for",
        "bulk-put",
        "--out",
        "bulk",
        "--compression",
        "none",
        "--json",
        "--quiet",
    ];
    let export = sc.sql2ddb(&args).await;
    assert_eq!(export.code, 0, "{}", export.stderr);
    let report = export.report();
    let dir = sc.path().join("bulk");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["for"], "bulk-put");
    assert_eq!(manifest["format"], "DYNAMODB_JSON");
    assert_eq!(manifest["pointer_file"], "pointers.json");
    // Where the user put it, as they named it (relative to where they are).
    assert_eq!(report["pointer_file"], "bulk/pointers.json");
    assert!(
        !dir.join("table-creation.json").exists(),
        "bulk put items loads an existing table: nothing to create"
    );

    let mut exported = Items::new();
    for f in manifest["files"].as_array().unwrap() {
        let name = f["name"].as_str().unwrap();
        assert!(
            name.starts_with("data/") && name.ends_with(".json"),
            "{name}"
        );
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert!(bytes.ends_with(b"\n"), "{name}: every record ends its line");
        let text = String::from_utf8(bytes).unwrap();
        for line in text.lines() {
            // One JSON record per line: an object holding the item under
            // `Item`, and nothing else.
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let fields: Vec<&str> = record
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(fields, ["Item"], "{line}");
            let item: Item = serde_json::from_value(record["Item"].clone()).unwrap();
            let key = key_of(&item);
            assert!(
                exported.insert(key.clone(), item).is_none(),
                "{key:?} twice"
            );
        }
    }
    let mut entities = table.clone();
    entities.remove(&pointer_key);
    assert_same_items(&exported, &entities);

    let command = report["bulk_put_command"].as_str().unwrap();
    assert!(report["import_command"].is_null(), "{report}");
    assert!(export.stderr.contains(command), "{}", export.stderr);
    assert!(
        command.starts_with("aws dynamodb start-bulk-put-items"),
        "{command}"
    );
    for part in [
        format!("--table-name {}", sc.table),
        "\"S3KeyPrefix\":\"PREFIX/data/\"".to_string(),
        "\"InputFormat\":\"DYNAMODB_JSON\"".to_string(),
        "\"InputCompressionType\":\"NONE\"".to_string(),
        "\"OutputType\":[\"ERROR\",\"CONDITION_CHECK_FAILURE\"]".to_string(),
        "--max-write-request-units 500".to_string(),
    ] {
        assert!(command.contains(&part), "{part} in {command}");
    }
    assert!(
        export.stderr.contains(&format!(
            "sql2ddb pointers {mapping} --from bulk/pointers.json"
        )),
        "{}",
        export.stderr
    );

    // The bulk put, as DynamoDB does it: every record put, into the table
    // emptied first (so only the files and the pointer step fill it).
    for key in table.keys() {
        sc.dynamo
            .client
            .delete_item()
            .table_name(&sc.table)
            .key("PK", sql2ddb_testkit::sdk::AttributeValue::S(key.0.clone()))
            .key("SK", sql2ddb_testkit::sdk::AttributeValue::S(key.1.clone()))
            .send()
            .await
            .unwrap();
    }
    for item in exported.values() {
        sc.put(item).await;
    }
    assert_eq!(sc.items().await.len(), table.len() - 1);

    let from = "bulk/pointers.json";
    assert_eq!(pointer_step(&sc, &mapping, from).await, (1, 0));
    assert_same_items(&sc.items().await, &table);
    // verify --deep counts and compares both: entity items and pointers.
    let verify = sc
        .sql2ddb(&[
            "verify",
            &mapping,
            "--deep",
            "--endpoint",
            &sc.dynamo.url,
            "--json",
        ])
        .await;
    assert_eq!(verify.code, 0, "{}{}", verify.stdout, verify.stderr);

    // Again: the pointer is already there, nothing moves. And a pointer
    // further along than the export's (a newer order written meanwhile)
    // stays where it is.
    assert_eq!(pointer_step(&sc, &mapping, from).await, (0, 1));
    let mut newer = table[&pointer_key].clone();
    newer.insert(
        "orderId".into(),
        sql2ddb_core::AttrValue::N("99999999".into()),
    );
    sc.put(&newer).await;
    assert_eq!(pointer_step(&sc, &mapping, from).await, (0, 1));
    assert_eq!(sc.items().await[&pointer_key], newer);
}

/// `sql2ddb pointers MAPPING --from FROM` against the scenario's server:
/// the updates that moved the pointer, and those it was already past.
async fn pointer_step(sc: &Scenario, mapping: &str, from: &str) -> (u64, u64) {
    let args = [
        "pointers",
        mapping,
        "--from",
        from,
        "--endpoint",
        &sc.dynamo.url,
        "--json",
    ];
    let out = sc.sql2ddb(&args).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.report();
    assert_eq!(r["items"], 1, "{r}");
    let p = &r["pointers"][0];
    (
        p["moved"].as_u64().unwrap(),
        p["already_newer"].as_u64().unwrap(),
    )
}
