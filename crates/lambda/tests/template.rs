//! deploy/template.yaml wires what the handlers expect: the handler names
//! and environment variables they read, the queue's partial batch responses
//! and redrive policy, the progress table's stream of new images feeding the
//! finisher, the reader allowed to invoke itself, an `s3://` mapping readable
//! by the functions that load it, the worker allowed its fleet's beats.
//! (`cfn-lint` checks the template against CloudFormation's schemas in
//! scripts/test.sh.)

use serde_yaml_ng::Value;
use sql2ddb_lambda::settings::*;
use sql2ddb_lambda::HandlerKind;

fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/template.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

/// `node[a][b]…`, panicking with the path when absent.
fn at<'a>(node: &'a Value, path: &[&str]) -> &'a Value {
    let mut v = node;
    for (i, key) in path.iter().enumerate() {
        v = v
            .get(*key)
            .unwrap_or_else(|| panic!("template: no {}", path[..=i].join(".")));
    }
    v
}

/// The text of a CloudFormation tag (`!Ref X` → ("Ref", "X")).
fn tag(v: &Value) -> (String, String) {
    match v {
        Value::Tagged(t) => (
            t.tag.to_string().trim_start_matches('!').to_string(),
            t.value.as_str().unwrap_or_default().to_string(),
        ),
        other => panic!("expected a tag, found {other:?}"),
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str()
        .unwrap_or_else(|| panic!("expected text, found {v:?}"))
}

#[test]
fn functions_run_the_bootstrap_on_arm64_with_their_handler_and_settings() {
    let t = template();
    let globals = at(&t, &["Globals", "Function"]);
    assert_eq!(str_of(at(globals, &["Runtime"])), "provided.al2023");
    assert_eq!(str_of(at(globals, &["Handler"])), "bootstrap");
    assert_eq!(str_of(&at(globals, &["Architectures"])[0]), "arm64");
    let known = [
        HANDLER,
        MAPPING,
        QUEUE_URL,
        PROGRESS_TABLE,
        SOURCE_PARAMETER,
        TOPIC_ARN,
        READER_MARGIN,
        ENDPOINT,
        SQS_ENDPOINT,
        S3_ENDPOINT,
        IF_NOT_EMPTY,
    ];
    let cases = [
        (
            "ReaderFunction",
            HandlerKind::Reader,
            &[
                MAPPING,
                QUEUE_URL,
                PROGRESS_TABLE,
                SOURCE_PARAMETER,
                IF_NOT_EMPTY,
            ][..],
        ),
        (
            "WorkerFunction",
            HandlerKind::Worker,
            &[MAPPING, PROGRESS_TABLE][..],
        ),
        (
            "FinisherFunction",
            HandlerKind::Finisher,
            &[PROGRESS_TABLE, TOPIC_ARN][..],
        ),
    ];
    for (name, kind, needs) in cases {
        let f = at(&t, &["Resources", name]);
        assert_eq!(str_of(at(f, &["Type"])), "AWS::Serverless::Function");
        let vars = at(f, &["Properties", "Environment", "Variables"])
            .as_mapping()
            .unwrap();
        let handler = str_of(&vars[HANDLER]);
        assert_eq!(HandlerKind::parse(handler), Ok(kind), "{name}");
        for key in vars.keys() {
            assert!(
                known.contains(&str_of(key)),
                "{name}: {key:?} is read by no handler"
            );
        }
        for need in needs {
            assert!(vars.contains_key(*need), "{name} lacks {need}");
        }
        // The source URL never sits in a plain variable.
        assert!(!vars.keys().any(|k| str_of(k).contains("SOURCE_URL")));
    }
}

#[test]
fn the_worker_reports_partial_failures_and_the_queue_dead_letters() {
    let t = template();
    let esm = at(&t, &["Resources", "WorkerQueueMapping", "Properties"]);
    assert_eq!(
        tag(at(esm, &["FunctionName"])),
        ("Ref".into(), "WorkerFunction".into())
    );
    assert_eq!(
        tag(at(esm, &["EventSourceArn"])),
        ("GetAtt".into(), "WorkQueue.Arn".into())
    );
    let types = at(esm, &["FunctionResponseTypes"]).as_sequence().unwrap();
    assert_eq!(types, &vec![Value::from("ReportBatchItemFailures")]);
    assert_eq!(tag(at(esm, &["BatchSize"])).1, "BatchSize");
    assert_eq!(
        tag(at(esm, &["ScalingConfig", "MaximumConcurrency"])).1,
        "MaxConcurrency"
    );
    let redrive = at(
        &t,
        &["Resources", "WorkQueue", "Properties", "RedrivePolicy"],
    );
    assert_eq!(
        tag(at(redrive, &["deadLetterTargetArn"])).1,
        "DeadLetterQueue.Arn"
    );
    assert_eq!(tag(at(redrive, &["maxReceiveCount"])).1, "MaxReceiveCount");
}

#[test]
fn the_progress_table_streams_new_images_of_batches_and_totals_to_the_finisher() {
    let t = template();
    let table = at(&t, &["Resources", "ProgressTable", "Properties"]);
    assert_eq!(
        str_of(at(table, &["StreamSpecification", "StreamViewType"])),
        "NEW_IMAGE"
    );
    // The engine's default name of a target's progress table.
    let (_, name) = tag(at(table, &["TableName"]));
    assert_eq!(
        name.replace("${TargetTableName}", "T"),
        sql2ddb_dynamo::progress::default_table("T")
    );
    let esm = at(&t, &["Resources", "FinisherStreamMapping", "Properties"]);
    assert_eq!(tag(at(esm, &["FunctionName"])).1, "FinisherFunction");
    assert_eq!(
        tag(at(esm, &["EventSourceArn"])).1,
        "ProgressTable.StreamArn"
    );
    let pattern: serde_json::Value = serde_json::from_str(str_of(
        at(esm, &["FilterCriteria", "Filters"])[0]
            .get("Pattern")
            .unwrap(),
    ))
    .unwrap();
    let prefixes = &pattern["dynamodb"]["NewImage"]["SK"]["S"];
    assert_eq!(prefixes[0]["prefix"], "BATCH#");
    assert_eq!(prefixes[1]["prefix"], "TOTAL#");
}

#[test]
fn the_reader_may_invoke_itself_and_nothing_else() {
    let t = template();
    let name = tag(at(
        &t,
        &["Resources", "ReaderFunction", "Properties", "FunctionName"],
    ))
    .1;
    assert_eq!(name, "${AWS::StackName}-reader");
    let statements = at(&t, &["Resources", "ReaderRole", "Properties", "Policies"])[0]
        ["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap();
    let invoke: Vec<&Value> = statements
        .iter()
        .filter(|s| s["Action"].as_str() == Some("lambda:InvokeFunction"))
        .collect();
    assert_eq!(invoke.len(), 1);
    assert!(tag(&invoke[0]["Resource"])
        .1
        .ends_with(":function:${AWS::StackName}-reader"));
}

#[test]
fn the_worker_reads_and_writes_its_fleets_beats_in_the_progress_table() {
    let t = template();
    let statements = at(&t, &["Resources", "WorkerRole", "Properties", "Policies"])[0]
        ["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap();
    let progress: Vec<&Value> = statements
        .iter()
        .filter(|s| {
            s.get("Resource")
                .is_some_and(|r| matches!(r, Value::Tagged(_)) && tag(r).1 == "ProgressTable.Arn")
        })
        .collect();
    assert_eq!(progress.len(), 1);
    let actions: Vec<&str> = progress[0]["Action"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(str_of)
        .collect();
    // A batch's record is put; a beat is put, and the fleet's read back.
    assert_eq!(
        actions,
        ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"]
    );
}

/// Evaluates the intrinsic functions the template's S3 statements use
/// (`Ref`, `Split`, `Select`, `Sub`, `Equals`) with `Mapping` = `mapping`.
fn eval(v: &Value, mapping: &str) -> Value {
    let sub = |text: &str, vars: &[(String, String)]| {
        let mut out = text.replace("${Mapping}", mapping);
        out = out.replace("${AWS::Partition}", "aws");
        for (k, v) in vars {
            out = out.replace(&format!("${{{k}}}"), v);
        }
        Value::from(out)
    };
    let Value::Tagged(t) = v else {
        return v.clone();
    };
    let args = t.value.as_sequence();
    let arg = |i: usize| eval(&args.unwrap()[i], mapping);
    match t.tag.to_string().trim_start_matches('!') {
        "Ref" => {
            assert_eq!(t.value.as_str(), Some("Mapping"), "{v:?}");
            Value::from(mapping)
        }
        "Split" => {
            let (sep, text) = (arg(0), arg(1));
            let parts = str_of(&text).split(str_of(&sep)).map(Value::from);
            Value::Sequence(parts.collect())
        }
        "Select" => {
            let first = &args.unwrap()[0];
            let i = first.as_u64().map(|n| n as usize);
            let i = i.or_else(|| first.as_str()?.parse().ok()).unwrap();
            arg(1).as_sequence().unwrap()[i].clone()
        }
        "Equals" => Value::Bool(arg(0) == arg(1)),
        "Sub" => match &t.value {
            Value::String(text) => sub(text, &[]),
            _ => {
                let vars = args.unwrap()[1].as_mapping().unwrap();
                let vars: Vec<(String, String)> = vars
                    .iter()
                    .map(|(k, v)| (str_of(k).to_string(), str_of(&eval(v, mapping)).to_string()))
                    .collect();
                sub(str_of(&args.unwrap()[0]), &vars)
            }
        },
        other => panic!("not evaluated here: {other}"),
    }
}

#[test]
fn an_s3_mapping_may_be_read_by_the_reader_and_the_worker_only() {
    let t = template();
    let condition = at(&t, &["Conditions", "MappingInS3"]);
    for (mapping, in_s3) in [
        ("s3://shop-config/mappings/shop.toml", true),
        ("mappings/shop.toml", false),
        (
            "version = 1\n[source]\nurl = \"s3://not/a/mapping\"\n",
            false,
        ),
    ] {
        assert_eq!(eval(condition, mapping), Value::Bool(in_s3), "{mapping}");
    }
    for (role, expected) in [("ReaderRole", 1), ("WorkerRole", 1), ("FinisherRole", 0)] {
        let statements = at(&t, &["Resources", role, "Properties", "Policies"])[0]
            ["PolicyDocument"]["Statement"]
            .as_sequence()
            .unwrap();
        let reads: Vec<&Value> = statements
            .iter()
            .filter_map(|s| match s {
                Value::Tagged(t) if t.tag.to_string().trim_start_matches('!') == "If" => {
                    Some(&t.value)
                }
                _ => None,
            })
            .filter(|v| v[0].as_str() == Some("MappingInS3"))
            .collect();
        assert_eq!(reads.len(), expected, "{role}");
        for read in reads {
            let statement = &read[1];
            assert_eq!(str_of(&statement["Action"]), "s3:GetObject");
            let arn = eval(
                &statement["Resource"],
                "s3://shop-config/mappings/shop.toml",
            );
            assert_eq!(str_of(&arn), "arn:aws:s3:::shop-config/mappings/shop.toml");
            assert_eq!(tag(&read[2]), ("Ref".into(), "AWS::NoValue".into()));
        }
    }
}

/// The conditional statements of `role`'s policy under `condition`.
fn conditional<'a>(t: &'a Value, role: &str, condition: &str) -> Vec<&'a Value> {
    let statements = at(t, &["Resources", role, "Properties", "Policies"])[0]["PolicyDocument"]
        ["Statement"]
        .as_sequence()
        .unwrap();
    statements
        .iter()
        .filter_map(|s| match s {
            Value::Tagged(t) if t.tag.to_string().trim_start_matches('!') == "If" => Some(&t.value),
            _ => None,
        })
        .filter(|v| v[0].as_str() == Some(condition))
        .collect()
}

#[test]
fn update_jobs_add_the_reads_and_deletes_they_need_when_asked_only() {
    let t = template();
    assert_eq!(
        str_of(at(&t, &["Parameters", "UpdateJobs", "Default"])),
        "false"
    );
    let condition = at(&t, &["Conditions", "RunsUpdateJobs"]);
    let args = condition
        .as_sequence()
        .map(|_| condition)
        .unwrap_or(condition);
    assert!(format!("{args:?}").contains("UpdateJobs"), "{args:?}");
    let reader = conditional(&t, "ReaderRole", "RunsUpdateJobs");
    assert_eq!(reader.len(), 1);
    let actions: Vec<&str> = reader[0][1]["Action"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(str_of)
        .collect();
    assert_eq!(actions, ["dynamodb:Scan", "dynamodb:Query"]);
    let resources = format!("{:?}", reader[0][1]["Resource"]);
    assert!(
        resources.contains("table/${TargetTableName}/index/*"),
        "{resources}"
    );
    assert_eq!(tag(&reader[0][2]), ("Ref".into(), "AWS::NoValue".into()));
    let worker = conditional(&t, "WorkerRole", "RunsUpdateJobs");
    assert_eq!(worker.len(), 1);
    assert_eq!(str_of(&worker[0][1]["Action"]), "dynamodb:DeleteItem");
    assert!(conditional(&t, "FinisherRole", "RunsUpdateJobs").is_empty());
}

#[test]
fn the_reader_counts_the_target_and_deletes_from_it_only_when_told_to_truncate() {
    let t = template();
    let parameter = at(&t, &["Parameters", "IfNotEmpty"]);
    assert_eq!(str_of(at(parameter, &["Default"])), "fail");
    let allowed: Vec<&str> = at(parameter, &["AllowedValues"])
        .as_sequence()
        .unwrap()
        .iter()
        .map(str_of)
        .collect();
    assert_eq!(allowed, ["fail", "append", "truncate"]);
    let condition = format!("{:?}", at(&t, &["Conditions", "TruncatesTarget"]));
    assert!(
        condition.contains("IfNotEmpty") && condition.contains("truncate"),
        "{condition}"
    );
    // A new run counts the table's items: Scan, whatever the choice.
    let policy = at(&t, &["Resources", "ReaderRole", "Properties", "Policies"])[0]
        ["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap();
    let counts = policy.iter().any(|s| {
        format!("{:?}", s["Resource"]).contains("table/${TargetTableName}\"")
            && s["Action"]
                .as_sequence()
                .is_some_and(|a| a.iter().any(|a| a.as_str() == Some("dynamodb:Scan")))
    });
    assert!(
        counts,
        "the reader may not Scan the target table: {policy:?}"
    );
    let truncating = conditional(&t, "ReaderRole", "TruncatesTarget");
    assert_eq!(truncating.len(), 1);
    assert_eq!(
        str_of(&truncating[0][1]["Action"]),
        "dynamodb:BatchWriteItem"
    );
    assert_eq!(
        tag(&truncating[0][2]),
        ("Ref".into(), "AWS::NoValue".into())
    );
}
