//! `[[entity.embed]]`: child rows nested as a list or a map of maps, two
//! levels deep, the 400 KB limit, and the mistakes a mapping can make.
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use std::collections::BTreeMap;

use sql2ddb_core::{AttrValue, Item, SqlValue};
use sql2ddb_mapping::{BoundEntity, ChildRow, ChildRows, ChildShape, EntitySource, ErrorKind};

use common::*;

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}
fn n(v: &str) -> AttrValue {
    AttrValue::N(v.into())
}
fn m(pairs: &[(&str, AttrValue)]) -> AttrValue {
    AttrValue::M(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}
fn int(i: i64) -> SqlValue {
    SqlValue::Int(i)
}
fn text(v: &str) -> SqlValue {
    SqlValue::Text(v.into())
}

/// An `order` entity (key order_id) with `lines` embedded; `embed` is the
/// body of the `[[entity.embed]]` table after its name, from line 17 on.
fn orders(embed: &str) -> String {
    format!(
        "{HEAD}\n[[entity]]\nname = \"order\"\nfrom = \"orders\"\nkey = [\"order_id\"]\npk = \"CUSTOMER#{{customer_id}}\"\nsk = \"ORDER#{{order_id:010}}\"\n\n[[entity.embed]]\nname = \"lines\"\n{embed}"
    )
}

const LINES: &str = "from = \"order_lines\"\nparent_key = [\"order_id\"]\norder_by = [\"line_no\"]\nexclude = [\"order_id\"]\n";

fn line_shape() -> ChildShape {
    ChildShape {
        columns: cols(&[
            ("order_id", "int8"),
            ("line_no", "int4"),
            ("sku", "text"),
            ("qty", "int4"),
        ]),
        key: vec!["order_id".into(), "line_no".into()],
        children: Vec::new(),
    }
}

fn bind_orders(text: &str, shapes: &[ChildShape]) -> BoundEntity {
    let plan = parse(text).unwrap_or_else(|e| panic!("mapping should load: {e}"));
    plan.entities[0]
        .bind_with_children(
            &plan,
            &cols(&[("order_id", "int8"), ("customer_id", "int8")]),
            &["order_id".to_string()],
            shapes,
        )
        .unwrap_or_else(|e| panic!("bind: {e}"))
}

fn line(order: i64, no: i64, sku: &str, qty: i64) -> ChildRow {
    ChildRow::leaf(vec![int(order), int(no), text(sku), int(qty)])
}

fn children(rows: Vec<ChildRow>) -> ChildRows {
    ChildRows { embeds: vec![rows] }
}

#[test]
fn lists_children_in_their_order_without_excluded_columns() {
    let plan = parse(&orders(LINES)).unwrap();
    let embeds = plan.entities[0].embeds();
    assert_eq!(embeds.len(), 1);
    assert_eq!(embeds[0].name, "lines");
    assert_eq!(embeds[0].from, EntitySource::Table("order_lines".into()));
    assert_eq!(embeds[0].parent_key, ["order_id"]);
    assert_eq!(embeds[0].order_by, ["line_no"]);
    assert_eq!(embeds[0].map_key(), None);

    let bound = bind_orders(&orders(LINES), &[line_shape()]);
    let row = vec![int(7), int(42)];
    let kids = children(vec![line(7, 1, "A-1", 2), line(7, 2, "B-9", 1)]);
    let item = bound.map_both_with_children(&row, &kids).unwrap().item;
    assert_eq!(item["PK"], s("CUSTOMER#42"));
    assert_eq!(item["SK"], s("ORDER#0000000007"));
    assert_eq!(
        item["lines"],
        AttrValue::L(vec![
            m(&[("line_no", n("1")), ("sku", s("A-1")), ("qty", n("2"))]),
            m(&[("line_no", n("2")), ("sku", s("B-9")), ("qty", n("1"))]),
        ])
    );
    // A parent without children gets an empty list, not a missing attribute.
    let item = bound
        .map_both_with_children(&row, &children(Vec::new()))
        .unwrap()
        .item;
    assert_eq!(item["lines"], AttrValue::L(Vec::new()));
    // Mapping without the children is a reject, not an item missing its lines.
    let r = bound.map_both(&row).unwrap_err();
    assert!(r.reason.contains("children of 0 embeds"), "{}", r.reason);
}

#[test]
fn map_keyed_by_a_column_with_attributes_and_duplicates_rejected() {
    let body = format!(
        "{LINES}as = \"map\"\nmap_key = \"sku\"\n[entity.embed.attributes]\nlabel = \"#{{line_no}} {{sku}}\"\n"
    );
    let bound = bind_orders(&orders(&body), &[line_shape()]);
    let row = vec![int(7), int(42)];
    let kids = children(vec![line(7, 1, "A-1", 2), line(7, 2, "B-9", 1)]);
    let item = bound.map_both_with_children(&row, &kids).unwrap().item;
    let expected: BTreeMap<String, AttrValue> = [
        (
            "A-1".to_string(),
            m(&[
                ("line_no", n("1")),
                ("sku", s("A-1")),
                ("qty", n("2")),
                ("label", s("#1 A-1")),
            ]),
        ),
        (
            "B-9".to_string(),
            m(&[
                ("line_no", n("2")),
                ("sku", s("B-9")),
                ("qty", n("1")),
                ("label", s("#2 B-9")),
            ]),
        ),
    ]
    .into();
    assert_eq!(item["lines"], AttrValue::M(expected));

    let dup = children(vec![line(7, 1, "A-1", 2), line(7, 2, "A-1", 1)]);
    let r = bound.map_both_with_children(&row, &dup).unwrap_err();
    assert_eq!(r.entity, "order");
    assert!(
        r.reason
            .starts_with("embed lines, child row 2: map key \"A-1\" appears twice"),
        "{}",
        r.reason
    );
}

#[test]
fn a_bad_child_value_rejects_the_parent_naming_the_child_column() {
    let bound = bind_orders(&orders(LINES), &[line_shape()]);
    let kids = children(vec![
        line(7, 1, "A-1", 2),
        ChildRow::leaf(vec![
            int(7),
            int(2),
            SqlValue::Invalid("zero date".into()),
            int(1),
        ]),
    ]);
    let r = bound
        .map_both_with_children(&vec![int(7), int(42)], &kids)
        .unwrap_err();
    assert_eq!(r.column.as_deref(), Some("lines.sku"));
    assert_eq!(r.reason, "embed lines, child row 2: zero date");
    assert_eq!(r.key, serde_json::json!({"order_id": 7}));
}

#[test]
fn embeds_nest_two_levels() {
    let body = format!(
        "{LINES}key = [\"order_id\", \"line_no\"]\n\n[[entity.embed.embed]]\nname = \"discounts\"\nfrom = \"line_discounts\"\nparent_key = [\"order_id\", \"line_no\"]\nexclude = [\"order_id\", \"line_no\"]\n"
    );
    let plan = parse(&orders(&body)).unwrap();
    let nested = plan.entities[0].embeds()[0].embeds();
    assert_eq!(nested.len(), 1);
    assert_eq!(nested[0].parent_key, ["order_id", "line_no"]);
    let mut shape = line_shape();
    shape.children.push(ChildShape {
        columns: cols(&[
            ("order_id", "int8"),
            ("line_no", "int4"),
            ("code", "text"),
            ("pct", "numeric"),
        ]),
        key: Vec::new(),
        children: Vec::new(),
    });
    let bound = bind_orders(&orders(&body), &[shape]);
    let discount = |no: i64, code: &str, pct: &str| {
        ChildRow::leaf(vec![
            int(7),
            int(no),
            text(code),
            SqlValue::Decimal(pct.into()),
        ])
    };
    let with = |l: ChildRow, d: Vec<ChildRow>| ChildRow {
        row: l.row,
        children: ChildRows { embeds: vec![d] },
    };
    let kids = children(vec![
        with(
            line(7, 1, "A-1", 2),
            vec![discount(1, "SPRING", "10.00"), discount(1, "VIP", "2.5")],
        ),
        with(line(7, 2, "B-9", 1), Vec::new()),
    ]);
    let item = bound
        .map_both_with_children(&vec![int(7), int(42)], &kids)
        .unwrap()
        .item;
    assert_eq!(
        item["lines"],
        AttrValue::L(vec![
            m(&[
                ("line_no", n("1")),
                ("sku", s("A-1")),
                ("qty", n("2")),
                (
                    "discounts",
                    AttrValue::L(vec![
                        m(&[("code", s("SPRING")), ("pct", n("10"))]),
                        m(&[("code", s("VIP")), ("pct", n("2.5"))]),
                    ])
                ),
            ]),
            m(&[
                ("line_no", n("2")),
                ("sku", s("B-9")),
                ("qty", n("1")),
                ("discounts", AttrValue::L(Vec::new())),
            ]),
        ])
    );
    // A nested embed's child row with a bad value names the whole path.
    let kids = children(vec![with(
        line(7, 1, "A-1", 2),
        vec![discount(1, "X", "1e999")],
    )]);
    let r = bound
        .map_both_with_children(&vec![int(7), int(42)], &kids)
        .unwrap_err();
    assert!(
        r.reason
            .starts_with("embed lines, child row 1: embed discounts, child row 1: "),
        "{}",
        r.reason
    );
    assert_eq!(r.column.as_deref(), Some("lines.discounts.pct"));
}

#[test]
fn children_over_400_kb_reject_the_parent_with_the_count() {
    let bound = bind_orders(&orders(LINES), &[line_shape()]);
    let sku = "x".repeat(1000);
    let kids = children((1..=450).map(|i| line(7, i, &sku, 1)).collect());
    let r = bound
        .map_both_with_children(&vec![int(7), int(42)], &kids)
        .unwrap_err();
    assert!(
        r.reason.contains("over the 400 KB (409600 bytes) limit"),
        "{}",
        r.reason
    );
    assert!(
        r.reason.contains("; embed lines holds 450 child rows ("),
        "{}",
        r.reason
    );
    // 449 rows less: fits, and nothing is truncated.
    let kids = children((1..=300).map(|i| line(7, i, &sku, 1)).collect());
    let item: Item = bound
        .map_both_with_children(&vec![int(7), int(42)], &kids)
        .unwrap()
        .item;
    assert!(matches!(&item["lines"], AttrValue::L(l) if l.len() == 300));
}

#[test]
fn embed_mistakes_name_line_and_column() {
    let e = parse(&orders(
        "from = \"x\"\nparent_key = [\"a\"]\nsort = [\"b\"]\n",
    ))
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UnknownKey);
    assert_eq!((e.location().line, e.location().col), (20, 1));
    assert!(
        e.to_string()
            .starts_with("shop.toml:20:1: unknown field `sort`"),
        "{e}"
    );

    // The parent's key has one column.
    let e = parse(&orders("from = \"x\"\nparent_key = [\"a\", \"b\"]\n")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    assert_eq!((e.location().line, e.location().col), (19, 14));
    assert!(
        e.to_string()
            .contains("parent_key has 2 column(s), but the parent's key (order_id) has 1"),
        "{e}"
    );

    let e = parse(&orders(
        "from = \"x\"\nparent_key = [\"a\"]\nas = \"map\"\n",
    ))
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::MissingKey);
    assert_eq!((e.location().line, e.location().col), (20, 6));
    assert!(e.to_string().contains("no map_key"), "{e}");

    let e = parse(&orders(
        "from = \"x\"\nparent_key = [\"a\"]\nmap_key = \"a\"\n",
    ))
    .unwrap_err();
    assert_eq!(
        (e.kind(), e.location().line, e.location().col),
        (ErrorKind::InvalidValue, 20, 11)
    );

    let e = parse(&orders(
        "from = \"x\"\nparent_key = [\"a\"]\nas = \"set\"\n",
    ))
    .unwrap_err();
    assert_eq!(
        (e.kind(), e.location().line, e.location().col),
        (ErrorKind::Syntax, 20, 6)
    );

    let e = parse(&orders("parent_key = [\"a\"]\n")).unwrap_err();
    assert_eq!(
        (e.kind(), e.location().line, e.location().col),
        (ErrorKind::MissingKey, 16, 1)
    );
    assert!(e.to_string().contains("embed \"lines\" needs from"), "{e}");

    // An embed named like an attribute of its parent.
    let text = orders(LINES).replace(
        "\n[[entity.embed]]",
        "[entity.attributes]\nlines = \"x\"\n\n[[entity.embed]]",
    );
    let e = parse(&text).unwrap_err();
    assert_eq!(
        (e.kind(), e.location().line, e.location().col),
        (ErrorKind::InvalidValue, 19, 8)
    );
}

#[test]
fn bind_checks_child_columns_and_keys() {
    let plan = parse(&orders(
        "from = \"order_lines\"\nparent_key = [\"order_ref\"]\norder_by = [\"line_no\"]\n",
    ))
    .unwrap();
    let parent = cols(&[("order_id", "int8"), ("customer_id", "int8")]);
    let e = plan.entities[0]
        .bind_with_children(&plan, &parent, &["order_id".into()], &[line_shape()])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Bind);
    assert_eq!((e.location().line, e.location().col), (19, 14));
    assert!(
        e.to_string().starts_with(
            "shop.toml:19:14: entity order.lines: parent_key names column \"order_ref\", which the source does not return"
        ),
        "{e}"
    );
    // Without the children's columns.
    let e = plan.entities[0]
        .bind(&plan, &parent, &["order_id".into()])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("has 1 embeds, but the columns of 0 were given"),
        "{e}"
    );

    // An entity without `key` is checked against the key it is bound with.
    let text = orders(LINES).replace("\nkey = [\"order_id\"]\n", "\n");
    let plan = parse(&text).unwrap();
    let e = plan.entities[0]
        .bind_with_children(
            &plan,
            &parent,
            &["customer_id".into(), "order_id".into()],
            &[line_shape()],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains(
            "parent_key has 1 column(s), but the parent's key (customer_id, order_id) has 2"
        ),
        "{e}"
    );

    // Nested embeds need the children's key.
    let body = format!(
        "{LINES}\n[[entity.embed.embed]]\nname = \"d\"\nfrom = \"x\"\nparent_key = [\"order_id\", \"line_no\"]\n"
    );
    let plan = parse(&orders(&body)).unwrap();
    let mut shape = line_shape();
    shape.key.clear();
    shape.children.push(line_shape());
    let e = plan.entities[0]
        .bind_with_children(&plan, &parent, &["order_id".into()], &[shape])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("has nested embeds, so its rows need a key"),
        "{e}"
    );
}

#[test]
fn children_follow_the_source_timezone_and_the_invalid_default() {
    let text = orders(LINES)
        .replace(
            "url = \"${DB_URL}\"",
            "url = \"${DB_URL}\"\ntimezone = \"Europe/Paris\"",
        )
        .replacen(
            "key = [\"order_id\"]",
            "key = [\"order_id\"]\ninvalid = \"null\"",
            1,
        );
    let shape = ChildShape {
        columns: cols(&[
            ("order_id", "int8"),
            ("line_no", "int4"),
            ("shipped", "timestamp"),
            ("weight", "float8"),
        ]),
        key: vec!["order_id".into(), "line_no".into()],
        children: Vec::new(),
    };
    let bound = bind_orders(&text, &[shape]);
    let noon = chrono::NaiveDate::from_ymd_opt(2024, 1, 15)
        .unwrap()
        .and_hms_opt(12, 0, 0)
        .unwrap();
    let kids = children(vec![ChildRow::leaf(vec![
        int(7),
        int(1),
        SqlValue::Timestamp(noon),
        SqlValue::Float(f64::NAN),
    ])]);
    let item = bound
        .map_both_with_children(&vec![int(7), int(3)], &kids)
        .unwrap()
        .item;
    // Paris is UTC+1 in January; the NaN weight is treated as NULL, so omitted.
    assert_eq!(
        item["lines"],
        AttrValue::L(vec![m(&[
            ("line_no", n("1")),
            ("shipped", s("2024-01-15T11:00:00Z"))
        ])])
    );
}
