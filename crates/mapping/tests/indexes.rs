//! `[[target.gsi]]` and `billing`: parsing, mistakes with their place, and
//! index key attributes checked on every item (missing is fine, sparse;
//! another type is a reject).
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use sql2ddb_core::{AttrValue, KeyAttr, SqlValue};
use sql2ddb_mapping::{Billing, ErrorKind, Gsi, MappingError, Projection};

use common::*;

/// `HEAD` plus `target` lines (from line 8), then entity `e` (pk/sk over `id`).
fn with_target(target: &str, attributes: &str) -> String {
    format!(
        "{HEAD}{target}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"E#{{id}}\"\nsk = \"X\"\n[entity.attributes]\n{attributes}"
    )
}

fn key(name: &str, kind: &str) -> KeyAttr {
    KeyAttr {
        name: name.into(),
        kind: kind.parse().unwrap(),
    }
}

const GSIS: &str = r#"billing = { read = 5, write = 10 }
[[target.gsi]]
name = "GSI1"
pk = { name = "GSI1PK", type = "S" }
sk = { name = "GSI1SK", type = "N" }
projection = "keys_only"
[[target.gsi]]
name = "inverted"
pk = { name = "SK", type = "S" }
sk = { name = "PK", type = "S" }
projection = { include = ["status", "total"] }
[[target.gsi]]
name = "by-bin"
pk = { name = "BIN", type = "B" }
"#;

#[test]
fn parses_indexes_and_billing() {
    let plan = parse(&with_target(GSIS, "")).unwrap();
    assert_eq!(
        plan.target.gsis,
        vec![
            Gsi {
                name: "GSI1".into(),
                pk: key("GSI1PK", "S"),
                sk: Some(key("GSI1SK", "N")),
                projection: Projection::KeysOnly,
            },
            Gsi {
                name: "inverted".into(),
                pk: key("SK", "S"),
                sk: Some(key("PK", "S")),
                projection: Projection::Include(vec!["status".into(), "total".into()]),
            },
            Gsi {
                name: "by-bin".into(),
                pk: key("BIN", "B"),
                sk: None,
                projection: Projection::All,
            },
        ]
    );
    assert_eq!(plan.target.gsis[0].keys().len(), 2);
    assert_eq!(
        plan.target.billing,
        Billing::Provisioned { read: 5, write: 10 }
    );
    let plan = parse(&with_target("billing = \"on-demand\"\n", "")).unwrap();
    assert_eq!(plan.target.billing, Billing::OnDemand);
    assert!(plan.target.gsis.is_empty());
}

#[test]
fn index_mistakes_name_line_and_column() {
    let at = |e: &MappingError| (e.kind(), e.location().line, e.location().col);
    let e = err(&with_target(
        "[[target.gsi]]\nname = \"G1\"\npk = { name = \"A\", type = \"S\" }\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 9, 8));
    assert!(e.to_string().contains("not a DynamoDB index name"), "{e}");

    let e = err(&with_target(
        "[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"A\", type = \"S\" }\nprojection = \"keys\"\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::Syntax, 11, 14));
    assert!(e.to_string().contains("\"keys_only\""), "{e}");

    let e = err(&with_target(
        "[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"A\", type = \"S\" }\nprojection = { include = [] }\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 11, 26));

    let e = err(&with_target(
        "[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"A\", type = \"S\", typo = 1 }\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::UnknownKey, 10, 32));

    // The table's PK is S; an index cannot declare it N.
    let e = err(&with_target(
        "[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"PK\", type = \"N\" }\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 10, 15));
    assert!(e.to_string().contains("one attribute has one type"), "{e}");

    let e = err(&with_target(
        "[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"A\", type = \"S\" }\n[[target.gsi]]\nname = \"GSI1\"\npk = { name = \"B\", type = \"S\" }\n",
        "",
    ));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 12, 8));

    let e = err(&with_target("billing = \"provisioned\"\n", ""));
    assert_eq!(at(&e), (ErrorKind::Syntax, 8, 11));
    let e = err(&with_target("billing = { read = 0, write = 1 }\n", ""));
    assert_eq!(at(&e), (ErrorKind::InvalidValue, 8, 20));
    let e = err(&with_target("billing = { read = 1 }\n", ""));
    assert_eq!(e.kind(), ErrorKind::MissingKey);
}

#[test]
fn index_keys_take_their_type_and_may_be_missing() {
    let columns = [
        ("id", "int8"),
        ("status", "text"),
        ("total", "numeric"),
        ("day", "int4"),
    ];
    let attrs = "GSI1PK = \"STATUS#{status}\"\nGSI1SK = \"{day}{id:04}\"\n";
    let text = with_target(GSIS, attrs);
    let bound = bind(&text, &cols(&columns)).unwrap();
    let row = vec![
        SqlValue::Int(7),
        SqlValue::Text("open".into()),
        SqlValue::Decimal("9.50".into()),
        SqlValue::Int(20240102),
    ];
    let item = bound.map_both(&row).unwrap().item;
    assert_eq!(item["GSI1PK"], AttrValue::S("STATUS#open".into()));
    // A template for an N index key renders a number, as an N pk would.
    assert_eq!(item["GSI1SK"], AttrValue::N("202401020007".into()));
    assert!(!item.contains_key("BIN"));

    // A NULL status: the item has no GSI1PK and is simply not in GSI1, for a
    // template as for a plain column.
    let mut no_status = row.clone();
    no_status[1] = SqlValue::Null;
    let item = bound.map_both(&no_status).unwrap().item;
    assert!(!item.contains_key("GSI1PK"));
    assert_eq!(item["GSI1SK"], AttrValue::N("202401020007".into()));
    let attrs_sparse = "GSI1PK = \"{status}\"\n";
    let bound_sparse = bind(&with_target(GSIS, attrs_sparse), &cols(&columns)).unwrap();
    let item = bound_sparse.map_both(&no_status).unwrap().item;
    assert!(!item.contains_key("GSI1PK"));

    // A column of another type copied into an index key: rejected, not failed at write.
    let bound = bind(
        &with_target(GSIS, "GSI1SK = { column = \"status\" }\n"),
        &cols(&columns),
    )
    .unwrap();
    let r = bound.map_both(&row).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("status"));
    assert_eq!(
        r.reason,
        "attribute GSI1SK is of type S, but it is the sort key of index GSI1, of type N"
    );
    // A template that does not render a number for an N index key.
    let bound = bind(&with_target(GSIS, "GSI1SK = \"D{day}\"\n"), &cols(&columns)).unwrap();
    let r = bound.map_both(&row).unwrap_err();
    assert!(r.reason.contains("is of type N"), "{}", r.reason);
    // An empty string in an index key.
    let mut empty = row.clone();
    empty[1] = SqlValue::Text(String::new());
    let r = bound_sparse.map_both(&empty).unwrap_err();
    assert!(
        r.reason
            .contains("is empty, but it is the partition key of index GSI1"),
        "{}",
        r.reason
    );
}
