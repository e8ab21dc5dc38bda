//! Row → item: every default conversion and every option.
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use std::collections::BTreeMap;

use chrono::{NaiveDate, NaiveTime, TimeZone, Utc};
use serde_json::json;
use sql2ddb_core::{AttrValue, SqlValue};

use common::*;

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}
fn n(v: &str) -> AttrValue {
    AttrValue::N(v.into())
}

const KEYED: &str = "pk = \"C#{id}\"\nsk = \"X\"\n";

/// Maps a row `[id = 1, v = value]`, with `v` of SQL type `ty`, and returns attribute `v`.
fn one(extra: &str, ty: &str, value: SqlValue) -> Result<Option<AttrValue>, sql2ddb_core::Reject> {
    let body = format!("{KEYED}{extra}");
    map(
        &body,
        &[("id", "int8"), ("v", ty)],
        vec![SqlValue::Int(1), value],
    )
    .map(|m| m.item.get("v").cloned())
}

fn ok(extra: &str, ty: &str, value: SqlValue) -> Option<AttrValue> {
    one(extra, ty, value).unwrap_or_else(|r| panic!("rejected: {r:?}"))
}

#[test]
fn scalars() {
    assert_eq!(
        ok("", "bool", SqlValue::Bool(true)),
        Some(AttrValue::Bool(true))
    );
    assert_eq!(ok("", "int8", SqlValue::Int(-42)), Some(n("-42")));
    assert_eq!(
        ok("", "bigint unsigned", SqlValue::UInt(u64::MAX)),
        Some(n("18446744073709551615"))
    );
    assert_eq!(ok("", "float8", SqlValue::Float(0.1)), Some(n("0.1")));
    assert_eq!(
        ok("", "float8", SqlValue::Float(-2.5e-7)),
        Some(n("-0.00000025"))
    );
    assert_eq!(
        ok("", "numeric", SqlValue::Decimal("-0012.3400".into())),
        Some(n("-12.34"))
    );
    assert_eq!(ok("", "text", SqlValue::Text(String::new())), Some(s("")));
    assert_eq!(
        ok("", "bytea", SqlValue::Bytes(vec![0, 1, 255])),
        Some(AttrValue::B(vec![0, 1, 255]))
    );
    let date = NaiveDate::from_ymd_opt(2024, 2, 29).unwrap();
    assert_eq!(ok("", "date", SqlValue::Date(date)), Some(s("2024-02-29")));
    let time = NaiveTime::from_hms_milli_opt(13, 5, 9, 250).unwrap();
    assert_eq!(
        ok("", "time", SqlValue::Time(time)),
        Some(s("13:05:09.250"))
    );
    let naive = date.and_hms_opt(3, 4, 5).unwrap();
    assert_eq!(
        ok("", "timestamp", SqlValue::Timestamp(naive)),
        Some(s("2024-02-29T03:04:05Z"))
    );
    let tz = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
    assert_eq!(
        ok("", "timestamptz", SqlValue::TimestampTz(tz)),
        Some(s("2024-01-02T03:04:05Z"))
    );
}

#[test]
fn float_out_of_dynamodb_range_and_nan_are_rejected() {
    let r = one("", "float8", SqlValue::Float(1e300)).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert!(r.reason.contains("range"), "{}", r.reason);
    for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let r = one("", "float8", SqlValue::Float(f)).unwrap_err();
        assert_eq!(r.entity, "e");
        assert_eq!(r.column.as_deref(), Some("v"));
        assert!(
            r.reason.contains("DynamoDB has no NaN/Infinity"),
            "{}",
            r.reason
        );
        assert_eq!(r.key, json!({"id": 1}));
    }
}

#[test]
fn decimals_beyond_38_digits_are_rejected_or_kept_as_strings() {
    let big = "1".repeat(41);
    let r = one("", "numeric", SqlValue::Decimal(big.clone())).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert!(r.reason.contains("41 significant digits"), "{}", r.reason);
    assert!(r.reason.contains("numeric_as"), "{}", r.reason);
    let as_string = "[entity.attributes]\nv = { column = \"v\", numeric_as = \"string\" }\n";
    assert_eq!(
        ok(as_string, "numeric", SqlValue::Decimal(big.clone())),
        Some(s(&big))
    );
    assert_eq!(
        ok(as_string, "numeric", SqlValue::Decimal("NaN".into())),
        Some(s("NaN"))
    );
    assert_eq!(
        ok(as_string, "numeric", SqlValue::Decimal("1.50".into())),
        Some(s("1.50"))
    );
    assert!(one("", "numeric", SqlValue::Decimal("NaN".into())).is_err());
}

#[test]
fn epoch_formats() {
    let ts =
        Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::milliseconds(678);
    let attr =
        |f: &str| format!("[entity.attributes]\nv = {{ column = \"v\", format = \"{f}\" }}\n");
    assert_eq!(
        ok(
            &attr("epoch_seconds"),
            "timestamptz",
            SqlValue::TimestampTz(ts)
        ),
        Some(n("1704164645"))
    );
    assert_eq!(
        ok(
            &attr("epoch_millis"),
            "timestamptz",
            SqlValue::TimestampTz(ts)
        ),
        Some(n("1704164645678"))
    );
    assert_eq!(
        ok(&attr("rfc3339"), "timestamptz", SqlValue::TimestampTz(ts)),
        Some(s("2024-01-02T03:04:05.678Z"))
    );
    let naive = ts.naive_utc();
    assert_eq!(
        ok(
            &attr("epoch_seconds"),
            "timestamp",
            SqlValue::Timestamp(naive)
        ),
        Some(n("1704164645"))
    );
    // SQLite hands timestamps over as text.
    let text = SqlValue::Text("2024-01-02 03:04:05".into());
    assert_eq!(
        ok(&attr("epoch_seconds"), "DATETIME", text),
        Some(n("1704164645"))
    );
    let r = one(
        &attr("epoch_millis"),
        "DATETIME",
        SqlValue::Text("soon".into()),
    )
    .unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    // Renamed: attribute `signup` from column `v`; `v` is still copied as is.
    let body = format!(
        "{KEYED}[entity.attributes]\nsignup = {{ column = \"v\", format = \"epoch_seconds\" }}\n"
    );
    let m = map(
        &body,
        &[("id", "int8"), ("v", "timestamptz")],
        vec![SqlValue::Int(1), SqlValue::TimestampTz(ts)],
    )
    .unwrap();
    assert_eq!(m.item["signup"], n("1704164645"));
    assert_eq!(m.item["v"], s("2024-01-02T03:04:05.678Z"));
}

#[test]
fn nulls_omit_or_null() {
    assert_eq!(ok("", "text", SqlValue::Null), None);
    assert_eq!(ok("nulls = \"omit\"\n", "text", SqlValue::Null), None);
    assert_eq!(
        ok("nulls = \"null\"\n", "text", SqlValue::Null),
        Some(AttrValue::Null)
    );
    // Explicit attributes follow the entity's setting too.
    let attr = "nulls = \"null\"\n[entity.attributes]\nw = \"{v}\"\n";
    let m = map(
        &format!("{KEYED}{attr}"),
        &[("id", "int8"), ("v", "text")],
        vec![SqlValue::Int(1), SqlValue::Null],
    )
    .unwrap();
    assert_eq!(m.item["w"], AttrValue::Null);
}

#[test]
fn json_becomes_nested_maps_and_lists_with_exact_numbers() {
    let text = r#"{"a": {"b": [1, 2.50, "x", null, true]}, "pi": 3.14159265358979323846264338327950288, "e": {}}"#;
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    let got = ok("", "jsonb", SqlValue::Json(value)).unwrap();
    let expected = AttrValue::M(BTreeMap::from([
        (
            "a".to_string(),
            AttrValue::M(BTreeMap::from([(
                "b".to_string(),
                AttrValue::L(vec![
                    n("1"),
                    n("2.5"),
                    s("x"),
                    AttrValue::Null,
                    AttrValue::Bool(true),
                ]),
            )])),
        ),
        ("pi".to_string(), n("3.14159265358979323846264338327950288")),
        ("e".to_string(), AttrValue::M(BTreeMap::new())),
    ]));
    assert_eq!(got, expected);
    assert_eq!(ok("", "json", SqlValue::Json(json!("hi"))), Some(s("hi")));
    assert_eq!(
        ok("", "json", SqlValue::Json(json!(null))),
        Some(AttrValue::Null)
    );
    let huge: serde_json::Value = serde_json::from_str("[1e400]").unwrap();
    let r = one("", "json", SqlValue::Json(huge)).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert!(r.reason.contains("range"), "{}", r.reason);
}

#[test]
fn arrays_sets_and_invalid_values() {
    let arr = SqlValue::Array(vec![
        SqlValue::Int(1),
        SqlValue::Null,
        SqlValue::Text("a".into()),
    ]);
    assert_eq!(
        ok("", "int4[]", arr),
        Some(AttrValue::L(vec![n("1"), AttrValue::Null, s("a")]))
    );
    let nested = SqlValue::Array(vec![SqlValue::Array(vec![SqlValue::Decimal("1.0".into())])]);
    assert_eq!(
        ok("", "numeric[]", nested),
        Some(AttrValue::L(vec![AttrValue::L(vec![n("1")])]))
    );
    let set = SqlValue::TextSet(vec!["b".into(), "a".into(), "b".into()]);
    assert_eq!(
        ok("", "set", set),
        Some(AttrValue::SS(vec!["a".into(), "b".into()]))
    );
    assert_eq!(
        ok("nulls = \"null\"\n", "set", SqlValue::TextSet(vec![])),
        None
    );
    let r = one(
        "",
        "datetime",
        SqlValue::Invalid("zero date 0000-00-00".into()),
    )
    .unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert_eq!(r.reason, "zero date 0000-00-00");
    let r = one(
        "",
        "float8[]",
        SqlValue::Array(vec![SqlValue::Float(f64::NAN)]),
    )
    .unwrap_err();
    assert!(r.reason.contains("NaN"), "{}", r.reason);
}

#[test]
fn full_example_maps_a_customer() {
    let text = r#"version = 1
[source]
url = "${DB_URL}"
page_size = 2000
[target]
table = "shop"
endpoint = "local"
region = "${REGION}"
create = true
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }
[writer]
concurrency = 16

[[entity]]
name = "customer"
from = "public.customers"
key = ["customer_id"]
page_size = 1000
pk = "CUSTOMER#{customer_id}"
sk = "PROFILE"
exclude = ["password_hash"]
nulls = "omit"
[entity.attributes]
entity = "customer"
signup = { column = "created_at", format = "epoch_seconds" }
code = "C-{customer_id:08}"
total = { column = "total", numeric_as = "string" }
braces = "{{x}}"
"#;
    let plan = parse(text).unwrap();
    assert_eq!(plan.source.url, "postgres://app:secret@db/shop");
    assert!(
        !format!("{plan:?}").contains("secret"),
        "Debug must redact the URL"
    );
    assert_eq!(plan.source.page_size, 2000);
    assert_eq!(plan.target.endpoint.as_deref(), Some("local"));
    assert_eq!(plan.target.region.as_deref(), Some("eu-west-1"));
    assert!(plan.target.create);
    assert_eq!(plan.writer.concurrency, 16);
    assert_eq!(
        plan.key_attrs()
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        ["PK", "SK"]
    );
    let e = &plan.entities[0];
    assert_eq!(
        e.from,
        sql2ddb_mapping::EntitySource::Table("public.customers".into())
    );
    assert_eq!(e.key.as_deref(), Some(&["customer_id".to_string()][..]));
    assert_eq!(e.page_size(&plan), 1000);
    let columns = cols(&[
        ("customer_id", "int8"),
        ("email", "text"),
        ("password_hash", "text"),
        ("created_at", "timestamptz"),
        ("total", "numeric"),
        ("nickname", "text"),
    ]);
    let bound = e
        .bind(&plan, &columns, &["customer_id".to_string()])
        .unwrap();
    assert_eq!(bound.name(), "customer");
    let row = vec![
        SqlValue::Int(42),
        SqlValue::Text("a@b.c".into()),
        SqlValue::Text("hash".into()),
        SqlValue::TimestampTz(Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap()),
        SqlValue::Decimal("10.50".into()),
        SqlValue::Null,
    ];
    let m = bound.map_both(&row).unwrap();
    let expected = BTreeMap::from([
        ("PK".to_string(), s("CUSTOMER#42")),
        ("SK".to_string(), s("PROFILE")),
        ("customer_id".to_string(), n("42")),
        ("email".to_string(), s("a@b.c")),
        ("created_at".to_string(), s("2024-01-02T03:04:05Z")),
        ("total".to_string(), s("10.50")),
        ("entity".to_string(), s("customer")),
        ("signup".to_string(), n("1704164645")),
        ("code".to_string(), s("C-00000042")),
        ("braces".to_string(), s("{x}")),
    ]);
    assert_eq!(m.item, expected);
    assert_eq!(m.source_key, json!({"customer_id": 42}));
    assert_eq!(m.size, sql2ddb_core::item_size(&m.item));
    assert_eq!(bound.key_of(&row), json!({"customer_id": 42}));
}

#[test]
fn rejects_carry_the_row_without_excluded_columns() {
    let body = "pk = \"C#{id}\"\nsk = \"{nick}\"\nexclude = [\"secret\"]\n";
    let columns = [("id", "int8"), ("secret", "text"), ("nick", "text")];
    let r = map(
        body,
        &columns,
        vec![
            SqlValue::Int(7),
            SqlValue::Text("pw".into()),
            SqlValue::Null,
        ],
    )
    .unwrap_err();
    assert_eq!(r.entity, "e");
    assert_eq!(r.key, json!({"id": 7}));
    assert_eq!(r.column.as_deref(), Some("nick"));
    assert_eq!(
        r.reason,
        "column nick is NULL, used in template \"{nick}\" (sk)"
    );
    assert_eq!(r.row, json!({"id": 7, "nick": null}));
    let m = map(
        body,
        &columns,
        vec![
            SqlValue::Int(7),
            SqlValue::Text("pw".into()),
            SqlValue::Text("n".into()),
        ],
    )
    .unwrap();
    assert!(!m.item.contains_key("secret"));
    assert_eq!(m.item["SK"], s("n"));
}

#[test]
fn oversized_items_are_rejected() {
    let big = SqlValue::Text("x".repeat(410 * 1024));
    let r = one("", "text", big).unwrap_err();
    assert_eq!(r.column, None);
    assert!(r.reason.contains("400 KB"), "{}", r.reason);
}

#[test]
fn attributes_override_columns_and_copy_natively() {
    let body = format!(
        "{KEYED}[entity.attributes]\nv = \"V-{{v}}\"\ncopy = \"{{v}}\"\nboth = \"{{id}}/{{v}}\"\n"
    );
    let m = map(
        &body,
        &[("id", "int8"), ("v", "int8")],
        vec![SqlValue::Int(1), SqlValue::Int(5)],
    )
    .unwrap();
    assert_eq!(m.item["v"], s("V-5"));
    assert_eq!(m.item["copy"], n("5"));
    assert_eq!(m.item["both"], s("1/5"));
}

#[test]
fn bound_entity_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<sql2ddb_mapping::BoundEntity>();
    assert_send_sync::<sql2ddb_mapping::Plan>();
}
