//! `[[pointer]]`: parsing with its mistakes, and each batch's candidate.
#![allow(clippy::result_large_err)] // Reject is core's type; the shared helpers return it by value.

mod common;

use chrono::NaiveDate;
use sql2ddb_core::{AttrValue, Item, PointerUpdate, Row, SqlValue};
use sql2ddb_mapping::{BoundPointer, ErrorKind, MappingError};

use common::*;

/// An `order` entity, then a `[[pointer]]` whose body starts on line 16.
fn with_pointer(body: &str) -> String {
    format!(
        "{HEAD}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\npk = \"CUSTOMER#{{customer_id}}\"\nsk = \"ORDER#{{order_id}}\"\n\n[[pointer]]\n{body}"
    )
}

const LAST_ORDER: &str = r#"entity = "order"
pk = "LAST_ORDER"
sk = "LAST_ORDER"
max = { attribute = "orderId", column = "order_id" }
attributes = { createdAt = { column = "created_at", format = "rfc3339" }, customer = "C#{customer_id}" }
"#;

fn order_columns() -> Vec<sql2ddb_core::Column> {
    cols(&[
        ("order_id", "int8"),
        ("customer_id", "int8"),
        ("created_at", "timestamp"),
        ("code", "text"),
    ])
}

fn bound(body: &str) -> BoundPointer {
    let plan = parse(&with_pointer(body)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.pointers().len(), 1);
    plan.pointers()[0]
        .bind(&plan, &order_columns())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn order(id: i64, customer: i64, day: u32, code: &str) -> Row {
    vec![
        SqlValue::Int(id),
        SqlValue::Int(customer),
        SqlValue::Timestamp(
            NaiveDate::from_ymd_opt(2024, 1, day)
                .unwrap()
                .and_hms_opt(12, 0, 0)
                .unwrap(),
        ),
        SqlValue::Text(code.into()),
    ]
}

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}

#[test]
fn max_candidate_is_the_largest_number_with_its_row() {
    let plan = parse(&with_pointer(LAST_ORDER)).unwrap();
    let p = &plan.pointers()[0];
    assert_eq!(
        (p.name.as_str(), p.entity.as_str()),
        ("LAST_ORDER", "order")
    );
    assert_eq!(
        (p.attribute.as_str(), p.column.as_str(), p.is_max),
        ("orderId", "order_id", true)
    );

    let pointer = bound(LAST_ORDER);
    // 9 < 10 numerically although "9" > "10" as text.
    let rows = vec![
        order(9, 1, 3, "a"),
        order(10, 2, 1, "b"),
        order(2, 3, 9, "c"),
    ];
    let expected = PointerUpdate {
        name: "LAST_ORDER".into(),
        pk: s("LAST_ORDER"),
        sk: Some(s("LAST_ORDER")),
        attribute: "orderId".into(),
        value: AttrValue::N("10".into()),
        is_max: true,
        attributes: Item::from([
            ("createdAt".to_string(), s("2024-01-01T12:00:00Z")),
            ("customer".to_string(), s("C#2")),
        ]),
        cleared: Vec::new(),
    };
    assert_eq!(pointer.candidate(&rows), Some(expected.clone()));
    assert_eq!(pointer.candidates(&rows), vec![expected]);
    // NULL values are no candidates; nothing left is no candidate at all.
    let mut null = order(11, 4, 1, "d");
    null[0] = SqlValue::Null;
    assert_eq!(
        pointer
            .candidate(&[null.clone(), order(3, 1, 1, "e")])
            .unwrap()
            .value,
        AttrValue::N("3".into())
    );
    assert_eq!(pointer.candidate(&[null]), None);
    assert_eq!(pointer.candidate(&[]), None);
}

#[test]
fn a_null_carried_column_is_cleared_not_kept_from_an_older_row() {
    let pointer = bound(LAST_ORDER);
    let mut newest = order(12, 4, 1, "d");
    newest[2] = SqlValue::Null;
    let c = pointer
        .candidate(&[order(11, 3, 1, "c"), newest])
        .expect("a candidate");
    assert_eq!(c.value, AttrValue::N("12".into()));
    assert_eq!(
        c.attributes,
        Item::from([("customer".to_string(), s("C#4"))])
    );
    assert_eq!(c.cleared, vec!["createdAt".to_string()]);
    assert!(pointer
        .candidate(&[order(11, 3, 1, "c")])
        .unwrap()
        .cleared
        .is_empty());
}

#[test]
fn min_strings_timestamps_and_keys_per_parent() {
    let min = bound(&LAST_ORDER.replace("max =", "min ="));
    let rows = vec![
        order(9, 1, 3, "a"),
        order(10, 2, 1, "b"),
        order(2, 3, 9, "c"),
    ];
    let c = min.candidate(&rows).unwrap();
    assert_eq!((c.value, c.is_max), (AttrValue::N("2".into()), false));
    assert_eq!(c.attributes["customer"], s("C#3"));

    // Text compares by bytes: "b" > "a", "Z" < "a".
    let by_code = bound(&LAST_ORDER.replace("column = \"order_id\"", "column = \"code\""));
    let rows = vec![
        order(1, 1, 1, "a"),
        order(2, 1, 1, "b"),
        order(3, 1, 1, "Z"),
    ];
    assert_eq!(by_code.candidate(&rows).unwrap().value, s("b"));

    // Timestamps: a fixed-width fraction keeps text order equal to time order.
    let by_time = bound(&LAST_ORDER.replace("column = \"order_id\"", "column = \"created_at\""));
    let c = by_time
        .candidate(&[order(1, 1, 5, "a"), order(2, 1, 20, "b")])
        .unwrap();
    assert_eq!(c.value, s("2024-01-20T12:00:00.000000Z"));
    let millis = bound(&LAST_ORDER.replace(
        "column = \"order_id\"",
        "column = \"created_at\", format = \"epoch_millis\"",
    ));
    let c = millis.candidate(&[order(1, 1, 5, "a")]).unwrap();
    assert_eq!(c.value, AttrValue::N("1704456000000".into()));

    // A pointer per customer: one candidate per key, in order of appearance.
    let per_customer = bound(&LAST_ORDER.replace(
        "pk = \"LAST_ORDER\"",
        "name = \"last order of a customer\"\npk = \"CUSTOMER#{customer_id}\"",
    ));
    let rows = vec![
        order(5, 2, 1, "a"),
        order(4, 1, 1, "b"),
        order(8, 2, 1, "c"),
        order(6, 1, 1, "d"),
    ];
    let found: Vec<(AttrValue, AttrValue)> = per_customer
        .candidates(&rows)
        .into_iter()
        .map(|c| (c.pk, c.value))
        .collect();
    assert_eq!(
        found,
        vec![
            (s("CUSTOMER#2"), AttrValue::N("8".into())),
            (s("CUSTOMER#1"), AttrValue::N("6".into())),
        ]
    );
    assert_eq!(per_customer.name(), "last order of a customer");
}

#[test]
fn pointer_mistakes_name_line_and_column() {
    let at = |e: &MappingError| (e.kind(), e.location().line, e.location().col);
    let e = err(&with_pointer(
        &LAST_ORDER.replace("entity = \"order\"", "entity = \"orders\""),
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 16, 10));
    assert!(
        e.to_string().ends_with(
            "pointer names entity \"orders\", which the mapping does not define (entities: order)"
        ),
        "{e}"
    );

    let e = err(&with_pointer(&LAST_ORDER.replace("max =", "mx =")));
    assert_eq!(at(&e), (ErrorKind::UnknownKey, 19, 1));

    let e = err(&with_pointer(&LAST_ORDER.replace(
        "max = {",
        "min = { attribute = \"a\", column = \"b\" }\nmax = {",
    )));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 19, 7));

    let e = err(&with_pointer(
        "entity = \"order\"\npk = \"P\"\nsk = \"S\"\n",
    ));
    assert_eq!(at(&e), (ErrorKind::MissingKey, 15, 1));

    let e = err(&with_pointer(
        &LAST_ORDER.replace("sk = \"LAST_ORDER\"\n", ""),
    ));
    assert_eq!(e.kind(), ErrorKind::MissingKey);
    assert!(e.to_string().contains("pointer has no sk"), "{e}");

    let e = err(&with_pointer(
        &LAST_ORDER.replace("attribute = \"orderId\"", "attribute = \"PK\""),
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 19, 21));

    let e = err(&with_pointer(
        &LAST_ORDER.replace("createdAt =", "orderId ="),
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 20, 16));

    let e = err(&with_pointer(
        &LAST_ORDER.replace("pk = \"LAST_ORDER\"", "pk = \"LAST{\""),
    ));
    assert_eq!(at(&e), (ErrorKind::Template, 17, 11));

    // A column the entity's source does not return: found at bind, at its place.
    let plan = parse(&with_pointer(
        &LAST_ORDER.replace("column = \"order_id\"", "column = \"order_no\""),
    ))
    .unwrap();
    let e = plan.pointers()[0]
        .bind(&plan, &order_columns())
        .unwrap_err();
    assert_eq!(at(&e), (ErrorKind::Bind, 19, 41));
    assert!(
        e.to_string().starts_with(
            "shop.toml:19:41: entity order (pointer LAST_ORDER): the pointer value uses column \"order_no\", which the source does not return"
        ),
        "{e}"
    );
}
