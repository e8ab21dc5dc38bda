//! Key templates: padding, escapes, literals, key types, NULL and empty keys.
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use proptest::prelude::*;
use serde_json::json;
use sql2ddb_core::{AttrValue, SqlValue};

use common::*;

/// Target with pk of type `pk_type` and no sort key; entity `e` from `t`; body from line 10.
fn target(pk_type: &str, body: &str) -> String {
    format!(
        "version = 1\n[source]\nurl = \"x\"\n[target]\ntable = \"shop\"\npk = {{ name = \"PK\", type = \"{pk_type}\" }}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\n{body}"
    )
}

fn key_of(
    pk_type: &str,
    template: &str,
    columns: &[(&str, &str)],
    row: Vec<SqlValue>,
) -> Result<AttrValue, sql2ddb_core::Reject> {
    let text = target(pk_type, &format!("pk = {template:?}\n"));
    let bound = bind(&text, &cols(columns)).unwrap_or_else(|e| panic!("{e}"));
    bound.map_both(&row).map(|m| m.item["PK"].clone())
}

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}

#[test]
fn zero_padding_escapes_and_literals() {
    let c = [("id", "int8")];
    assert_eq!(
        key_of("S", "ORDER#{id:08}", &c, vec![SqlValue::Int(42)]).unwrap(),
        s("ORDER#00000042")
    );
    assert_eq!(
        key_of("S", "ORDER#{id:08}", &c, vec![SqlValue::Int(-42)]).unwrap(),
        s("ORDER#-0000042")
    );
    assert_eq!(
        key_of("S", "{id:03}", &c, vec![SqlValue::Int(123456)]).unwrap(),
        s("123456")
    );
    assert_eq!(
        key_of("S", "{id:04}", &c, vec![SqlValue::UInt(7)]).unwrap(),
        s("0007")
    );
    assert_eq!(
        key_of("S", "{{{id}}}", &c, vec![SqlValue::Int(1)]).unwrap(),
        s("{1}")
    );
    assert_eq!(
        key_of("S", "A}}B", &c, vec![SqlValue::Int(1)]).unwrap(),
        s("A}B")
    );
    assert_eq!(
        key_of("S", "CONFIG", &c, vec![SqlValue::Int(1)]).unwrap(),
        s("CONFIG")
    );
    let two = [("id", "int8"), ("day", "date")];
    let day = SqlValue::Date(chrono::NaiveDate::from_ymd_opt(2024, 3, 1).unwrap());
    assert_eq!(
        key_of("S", "{day}#{id}", &two, vec![SqlValue::Int(9), day]).unwrap(),
        s("2024-03-01#9")
    );
}

#[test]
fn number_keys() {
    let c = [("id", "numeric")];
    assert_eq!(
        key_of("N", "{id}", &c, vec![SqlValue::Decimal("007.50".into())]).unwrap(),
        AttrValue::N("7.5".into())
    );
    assert_eq!(
        key_of("N", "1{id}", &c, vec![SqlValue::Int(5)]).unwrap(),
        AttrValue::N("15".into())
    );
    let r = key_of(
        "N",
        "{id}",
        &[("id", "text")],
        vec![SqlValue::Text("abc".into())],
    )
    .unwrap_err();
    assert_eq!(r.column.as_deref(), Some("id"));
    assert!(r.reason.contains("type N"), "{}", r.reason);
    assert!(r.reason.contains("abc"), "{}", r.reason);
}

#[test]
fn binary_keys() {
    let c = [("id", "bytea")];
    assert_eq!(
        key_of("B", "{id}", &c, vec![SqlValue::Bytes(vec![1, 2])]).unwrap(),
        AttrValue::B(vec![1, 2])
    );
    let t = [("id", "text")];
    assert_eq!(
        key_of("B", "K{id}", &t, vec![SqlValue::Text("é".into())]).unwrap(),
        AttrValue::B("Ké".as_bytes().to_vec())
    );
    let r = key_of("B", "x{id}", &c, vec![SqlValue::Bytes(vec![1])]).unwrap_err();
    assert!(r.reason.contains("no text form"), "{}", r.reason);
}

#[test]
fn null_and_empty_keys_are_rejected() {
    let c = [("id", "int8"), ("name", "text")];
    let r = key_of("S", "C#{name}", &c, vec![SqlValue::Int(3), SqlValue::Null]).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("name"));
    assert_eq!(
        r.reason,
        "column name is NULL, used in template \"C#{name}\" (pk)"
    );
    assert_eq!(r.key, json!({"id": 3}));
    let r = key_of(
        "S",
        "{name}",
        &c,
        vec![SqlValue::Int(3), SqlValue::Text(String::new())],
    )
    .unwrap_err();
    assert_eq!(r.column.as_deref(), Some("name"));
    assert_eq!(
        r.reason,
        sql2ddb_core::ItemProblem::EmptyKey { attr: "PK".into() }.to_string()
    );
    let r = key_of(
        "S",
        "{name}",
        &c,
        vec![SqlValue::Int(3), SqlValue::Invalid("bad utf-8".into())],
    )
    .unwrap_err();
    assert!(r.reason.contains("bad utf-8"), "{}", r.reason);
    // Too long for a partition key.
    let r = key_of(
        "S",
        "{name}",
        &c,
        vec![SqlValue::Int(3), SqlValue::Text("k".repeat(2049))],
    )
    .unwrap_err();
    assert!(r.reason.contains("2048"), "{}", r.reason);
}

#[test]
fn composite_source_keys() {
    let text = target("S", "key = [\"a\", \"b\"]\npk = \"{a}#{b}\"\n");
    let plan = parse(&text).unwrap();
    let bound = plan.entities[0]
        .bind(
            &plan,
            &cols(&[("a", "int4"), ("b", "text")]),
            &["a".into(), "b".into()],
        )
        .unwrap();
    let m = bound
        .map_both(&vec![SqlValue::Int(1), SqlValue::Text("x".into())])
        .unwrap();
    assert_eq!(m.source_key, json!({"a": 1, "b": "x"}));
    assert_eq!(m.item["PK"], s("1#x"));
}

fn render(template: &str, v: i64) -> String {
    match key_of("S", template, &[("id", "int8")], vec![SqlValue::Int(v)]).unwrap() {
        AttrValue::S(s) => s,
        other => panic!("{other:?}"),
    }
}

proptest! {
    #[test]
    fn padded_keys_sort_like_numbers(a in 0i64..10_000_000_000, b in 0i64..10_000_000_000) {
        let (ka, kb) = (render("{id:010}", a), render("{id:010}", b));
        prop_assert_eq!(ka.len(), 10);
        prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
    }

    #[test]
    fn padded_keys_sort_like_numbers_over_all_non_negative_i64(a in 0i64.., b in 0i64..) {
        let (ka, kb) = (render("O#{id:019}", a), render("O#{id:019}", b));
        prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
    }

    #[test]
    fn padding_matches_rust_formatting(v in any::<i64>()) {
        prop_assert_eq!(render("{id:010}", v), format!("{v:010}"));
    }
}
