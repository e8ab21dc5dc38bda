//! deploy/template.yaml wires what the handlers expect: the handler names
//! and environment variables they read, the queue's partial batch responses
//! and redrive policy, the progress table's stream of new images feeding the
//! finisher, the reader allowed to invoke itself. (`cfn-lint` checks the
//! template against CloudFormation's schemas in scripts/test.sh.)

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
    ];
    let cases = [
        (
            "ReaderFunction",
            HandlerKind::Reader,
            &[MAPPING, QUEUE_URL, PROGRESS_TABLE, SOURCE_PARAMETER][..],
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
