use std::collections::BTreeMap;

use sql2ddb_core::AttrValue;

use super::*;
use crate::ErrorKind;

const JOB: &str = r##"version = 1
[target]
table = "shop"
[update]
name = "close-stale-orders"
scan = { segments = 8 }
where = "begins_with(SK, :o) AND #st = :new AND created_at < :cutoff"
set = "SET #st = :closed, closed_at = :now REMOVE retry_count"
names = { "#st" = "status" }
values = { ":o" = "ORDER#", ":new" = "new", ":cutoff" = "2024-01-01", ":closed" = "closed", ":now" = "${NOW}" }
"##;

fn env(name: &str) -> Option<String> {
    (name == "NOW").then(|| "2024-06-01T00:00:00Z".to_string())
}

fn parse(text: &str) -> Result<UpdateJob, MappingError> {
    UpdateJob::parse(text, Path::new("job.toml"), &env)
}

/// `JOB` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> String {
    assert!(JOB.contains(from), "{from}");
    JOB.replace(from, to)
}

fn error(text: &str) -> MappingError {
    parse(text).expect_err("the job is invalid")
}

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}

#[test]
fn the_example_job_loads() {
    let job = parse(JOB).unwrap();
    assert_eq!(job.name, "close-stale-orders");
    assert_eq!(job.target.table, "shop");
    assert_eq!(job.read, JobRead::Scan { segments: 8 });
    assert_eq!(job.values[":now"], s("2024-06-01T00:00:00Z"));
    assert_eq!(job.names["#st"], "status");
    let written: Vec<&str> = job.written_attributes().collect();
    assert_eq!(written, ["status", "closed_at", "retry_count"]);
    assert_eq!(job.not_idempotent(), None);
    let (names, values) = job.read_placeholders();
    assert_eq!(names.len(), 1);
    let read: Vec<&str> = values.keys().map(String::as_str).collect();
    assert_eq!(
        read,
        [":cutoff", ":new", ":o"],
        "no value the read does not use"
    );
    let (_, values) = job.write_placeholders();
    assert_eq!(values.len(), 5);
}

#[test]
fn a_placeholder_used_but_not_defined_names_the_field_and_place() {
    let e = error(&edited(r#"":cutoff" = "2024-01-01", "#, ""));
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    let text = e.to_string();
    assert!(text.starts_with("job.toml:7:"), "{text}");
    assert!(
        text.contains("where uses :cutoff, which values does not define"),
        "{text}"
    );
    let at = e.location().col;
    let line = JOB.lines().nth(6).unwrap();
    assert_eq!(&line[at - 1..at - 1 + 7], ":cutoff", "{text}");
}

#[test]
fn an_attribute_name_placeholder_missing_from_names() {
    let e = error(&edited(r##"names = { "#st" = "status" }"##, ""));
    let text = e.to_string();
    assert!(
        text.contains("where uses #st, which names does not define"),
        "{text}"
    );
}

#[test]
fn a_placeholder_defined_but_unused() {
    let e = error(&edited(
        r#"":o" = "ORDER#","#,
        r#"":o" = "ORDER#", ":spare" = 1,"#,
    ));
    let text = e.to_string();
    assert!(text.starts_with("job.toml:10:"), "{text}");
    assert!(
        text.contains(":spare is defined in values but used in no expression"),
        "{text}"
    );
    let e = error(&edited(
        r##""#st" = "status""##,
        r##""#st" = "status", "#x" = "y""##,
    ));
    assert!(
        e.to_string().contains("#x is defined in names but used"),
        "{e}"
    );
}

#[test]
fn set_and_delete_together_or_neither() {
    let both = edited(
        "REMOVE retry_count\"\n",
        "REMOVE retry_count\"\ndelete = true\n",
    );
    let e = error(&both);
    assert!(
        e.to_string()
            .contains("either set (UPDATE) or delete = true"),
        "{e}"
    );
    assert!(e.to_string().starts_with("job.toml:9:"), "{e}");
    let neither = "version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"n\"\n";
    let e = error(neither);
    assert_eq!(e.kind(), ErrorKind::MissingKey);
    assert!(e.to_string().contains("give set"), "{e}");
}

#[test]
fn a_delete_job() {
    let text = "version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"purge\"\nwhere = \"#t = :x\"\ndelete = true\nnames = { \"#t\" = \"type\" }\nvalues = { \":x\" = \"cart\" }\n";
    let job = parse(text).unwrap();
    assert_eq!(job.action, JobAction::Delete);
    assert_eq!(job.written_attributes().count(), 0);
}

#[test]
fn updating_a_key_attribute_is_refused() {
    // Declared keys: at parse time, through a placeholder too.
    let declared = edited(
        "table = \"shop\"\n",
        "table = \"shop\"\npk = { name = \"PK\", type = \"S\" }\nsk = { name = \"SK\", type = \"S\" }\n",
    )
    .replace("closed_at = :now", "#sk = :now")
    .replace(r##""#st" = "status""##, r##""#st" = "status", "#sk" = "SK""##);
    let e = error(&declared);
    assert!(
        e.to_string()
            .contains("set writes SK, a key attribute of table shop"),
        "{e}"
    );
    assert!(e.to_string().starts_with("job.toml:10:"), "{e}");
    // Keys from the table's description.
    let job = parse(&edited("closed_at = :now", "PK = :now")).unwrap();
    let table = TableShape {
        keys: vec!["PK".into(), "SK".into()],
        indexes: Vec::new(),
    };
    let e = job.check_table(&table).unwrap_err();
    assert!(e.to_string().contains("set writes PK"), "{e}");
    assert!(parse(JOB).unwrap().check_table(&table).is_ok());
}

#[test]
fn a_query_on_an_index_the_table_lacks() {
    let text = edited(
        "scan = { segments = 8 }",
        r#"query = { index = "GSI9", key = "GSI1PK = :s", values = { ":s" = "STATUS#new" } }"#,
    );
    let job = parse(&text).unwrap();
    assert_eq!(
        job.read,
        JobRead::Query {
            index: "GSI9".into(),
            key: "GSI1PK = :s".into()
        }
    );
    let (_, values) = job.read_placeholders();
    assert_eq!(values[":s"], s("STATUS#new"));
    let table = TableShape {
        keys: vec!["PK".into()],
        indexes: vec![IndexShape {
            name: "GSI1".into(),
            keys: vec!["GSI1PK".into()],
            projection: Projection::All,
        }],
    };
    let e = job.check_table(&table).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("job.toml:6:"), "{text}");
    assert!(
        text.contains("query.index GSI9 is not an index of table shop (its indexes: GSI1)"),
        "{text}"
    );
}

#[test]
fn scan_and_query_together() {
    let text = edited(
        "scan = { segments = 8 }",
        "scan = { segments = 8 }\nquery = { index = \"GSI1\", key = \"GSI1PK = :o\" }",
    );
    assert!(error(&text).to_string().contains("either scan or query"));
}

#[test]
fn unknown_keys_and_bad_values_are_located() {
    let e = error(&edited("where =", "wher ="));
    assert_eq!(e.kind(), ErrorKind::UnknownKey);
    assert!(e.to_string().starts_with("job.toml:7:"), "{e}");
    let e = error(&edited("segments = 8", "segments = 0"));
    assert!(
        e.to_string().contains("scan.segments must be 1..=1000"),
        "{e}"
    );
    let e = error(&edited(r#"":now" = "${NOW}""#, r#"":now" = "${LATER}""#));
    assert_eq!(e.kind(), ErrorKind::Env);
    let e = error(&edited("version = 1", "version = 2"));
    assert!(
        e.to_string().contains("unsupported update job version 2"),
        "{e}"
    );
    let e = error(&edited("SET #st", "PUT #st"));
    assert!(
        e.to_string()
            .contains("set: an update expression starts with SET"),
        "{e}"
    );
    let e = error(&edited(r##"names = { "#st""##, r##"names = { "st""##));
    assert!(e.to_string().contains("\"st\" is not a placeholder"), "{e}");
    let e = error(&edited("#st = :new", "#st = :sql2ddb_run"));
    assert!(e.to_string().contains("is reserved"), "{e}");
}

#[test]
fn non_idempotent_updates_are_recognised() {
    for (set, why) in [
        ("ADD visits :one", "ADD"),
        ("SET visits = visits + :one", "`+` in SET"),
        ("SET tags = list_append(tags, :one)", "list_append"),
        ("SET n = if_not_exists(n, :one)", "if_not_exists"),
        ("DELETE labels :one", "DELETE from a set"),
        ("REMOVE tags[0] SET one = :one", "a list index, tags[0]"),
        ("SET a = b, b = a, one = :one", "SET reads b"),
    ] {
        let text = format!("version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"n\"\nset = \"{set}\"\nvalues = {{ \":one\" = 1 }}\n");
        assert_eq!(parse(&text).unwrap().not_idempotent(), Some(why), "{set}");
    }
}

#[test]
fn typed_and_nested_values() {
    let text = "version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"n\"\nset = \"SET a = :a, b = :b, c = :c, d = :d, e = :e, f = :f\"\nvalues = { \":a\" = 1.50, \":b\" = { N = \"7\" }, \":c\" = { SS = [\"x\", \"y\"] }, \":d\" = [true, \"${NOW}\"], \":e\" = { k = 2 }, \":f\" = { NULL = true } }\n";
    let job = parse(text).unwrap();
    assert_eq!(job.values[":a"], AttrValue::N("1.5".into()));
    assert_eq!(job.values[":b"], AttrValue::N("7".into()));
    assert_eq!(
        job.values[":c"],
        AttrValue::SS(vec!["x".into(), "y".into()])
    );
    assert_eq!(
        job.values[":d"],
        AttrValue::L(vec![AttrValue::Bool(true), s("2024-06-01T00:00:00Z")])
    );
    assert_eq!(
        job.values[":e"],
        AttrValue::M(BTreeMap::from([(
            "k".to_string(),
            AttrValue::N("2".into())
        )]))
    );
    assert_eq!(job.values[":f"], AttrValue::Null);
}

#[test]
fn the_run_marker_joins_the_set_clause_or_makes_one() {
    let add = "version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"n\"\nset = \"ADD visits :one\"\nvalues = { \":one\" = 1 }\n";
    assert_eq!(
        parse(add).unwrap().marked_expression().unwrap(),
        "ADD visits :one SET #sql2ddb_run = :sql2ddb_run"
    );
    let set = add.replace("ADD visits :one", "REMOVE x set visits = visits + :one");
    assert_eq!(
        parse(&set).unwrap().marked_expression().unwrap(),
        "REMOVE x set #sql2ddb_run = :sql2ddb_run, visits = visits + :one"
    );
    let index = add.replace("ADD visits :one", "REMOVE tags[0]");
    let index = index.replace("values = { \":one\" = 1 }\n", "");
    let job = parse(&index).unwrap();
    assert_eq!(job.not_idempotent(), Some("a list index, tags[0]"));
    assert_eq!(
        job.marked_expression().unwrap(),
        "REMOVE tags[0] SET #sql2ddb_run = :sql2ddb_run"
    );
}

#[test]
fn a_reserved_word_as_a_bare_attribute_name() {
    let e = error(&edited(
        "AND #st = :new",
        "AND status = :new AND #st = :new",
    ));
    let text = e.to_string();
    assert!(
        text.starts_with("job.toml:7:34: where: status is a reserved word"),
        "{text}"
    );
    assert!(
        text.contains("write #status instead and add \"#status\" = \"status\" to names"),
        "{text}"
    );
    let e = error(&edited("closed_at = :now", "comment = :now"));
    assert!(
        e.to_string().contains("set: comment is a reserved word"),
        "{e}"
    );
}

#[test]
fn batch_put_mode_takes_changes_sql2ddb_can_apply() {
    let job = parse(&JOB.replace("[update]\n", "[update]\nmode = \"batch-put\"\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.mode, JobMode::BatchPut);
    let mut item = sql2ddb_core::Item::from([
        ("status".to_string(), s("new")),
        ("retry_count".to_string(), AttrValue::N("2".into())),
    ]);
    job.apply_changes(&mut item);
    assert_eq!(item["status"], s("closed"));
    assert_eq!(item["closed_at"], s("2024-06-01T00:00:00Z"));
    assert!(!item.contains_key("retry_count"));
    let with = |set: &str| {
        format!("version = 1\n[target]\ntable = \"shop\"\n[update]\nname = \"n\"\nmode = \"batch-put\"\n{set}\nvalues = {{ \":one\" = 1 }}\n")
    };
    let e = error(&with("set = \"ADD visits :one\""));
    assert!(
        e.to_string()
            .contains("job.toml:7:12: set: with mode = \"batch-put\", set may only SET"),
        "{e}"
    );
    let e = error(&with("delete = true\nwhere = \"v = :one\""));
    assert!(
        e.to_string().contains("takes set, not delete = true"),
        "{e}"
    );
    let e = error(&with("set = \"SET v = :one\"").replace("batch-put", "batch"));
    assert!(e.to_string().contains("mode \"batch\" is not"), "{e}");
}

#[test]
fn batch_put_refuses_an_index_that_does_not_hold_whole_items() {
    let text = JOB
        .replace("[update]\n", "[update]\nmode = \"batch-put\"\n")
        .replace(
            "scan = { segments = 8 }",
            r##"query = { index = "BYSTATUS", key = "#st = :new" }"##,
        );
    let job = parse(&text).unwrap();
    let shape = |projection| TableShape {
        keys: vec!["PK".into(), "SK".into()],
        indexes: vec![IndexShape {
            name: "BYSTATUS".into(),
            keys: vec!["status".into()],
            projection,
        }],
    };
    let e = job.check_table(&shape(Projection::KeysOnly)).unwrap_err();
    assert!(
        e.to_string().contains("the rewrite would drop the others"),
        "{e}"
    );
    assert!(job.check_table(&shape(Projection::All)).is_ok());
}
