//! `check`'s static warnings: keys that drop a unique key column, and
//! entities or pointers whose keys can collide.
#![allow(clippy::result_large_err)] // Reject is core's type; the shared helpers return it by value.

mod common;

use sql2ddb_mapping::Lint;

use common::*;

/// `HEAD`, then one `[[entity]]` per (name, extra lines); each entity takes 5 lines.
fn entities(list: &[(&str, &str)]) -> String {
    let mut text = HEAD.to_string();
    for (name, body) in list {
        text.push_str(&format!(
            "\n[[entity]]\nname = \"{name}\"\nfrom = \"{name}s\"\n{body}"
        ));
    }
    text
}

fn lints(text: &str) -> Vec<Lint> {
    parse(text)
        .unwrap_or_else(|e| panic!("mapping should load: {e}"))
        .lint()
}

#[test]
fn key_templates_must_use_every_unique_key_column() {
    // Lines 8..: blank, [[entity]], name, from, key, pk (line 13), sk.
    let text = entities(&[(
        "line",
        "key = [\"order_id\", \"line_no\"]\npk = \"ORDER#{order_id}\"\nsk = \"LINE\"\n",
    )]);
    let found = lints(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].at.line, found[0].at.col), (13, 7));
    assert_eq!(
        found[0].to_string(),
        "shop.toml:13:7: entity \"line\": pk and sk do not use key column(s) line_no of its unique key (order_id, line_no): rows that differ only there map to the same item and overwrite each other silently; add them to pk or sk"
    );
    // Using it anywhere in pk or sk is enough.
    let ok = text.replace("sk = \"LINE\"", "sk = \"LINE#{line_no:05}\"");
    assert!(lints(&ok).is_empty());

    // Without `key`, the engine passes the primary key found by introspection.
    let text = entities(&[("customer", "pk = \"CUSTOMER#{email}\"\nsk = \"PROFILE\"\n")]);
    let plan = parse(&text).unwrap();
    assert!(plan.lint().is_empty());
    let e = &plan.entities[0];
    let lint = e.lint_keys(&["id".into()]).expect("id is not in the key");
    assert!(lint.message.contains("key column(s) id"), "{lint}");
    assert_eq!(e.lint_keys(&["email".into()]), None);
}

#[test]
fn entities_whose_keys_can_be_equal() {
    // Same pk prefix, sort keys that differ at the first character: no collision.
    let text = entities(&[
        ("customer", "pk = \"CUSTOMER#{id}\"\nsk = \"PROFILE\"\n"),
        (
            "order",
            "pk = \"CUSTOMER#{customer_id}\"\nsk = \"ORDER#{order_id}\"\n",
        ),
        (
            "address",
            "pk = \"CUSTOMER#{customer_id}\"\nsk = \"ADDRESS#{n}#HOME\"\n",
        ),
    ]);
    assert!(lints(&text).is_empty(), "{:?}", lints(&text));

    // Two entities both writing ORDER#… under CUSTOMER#…: they may overwrite each other.
    let text = entities(&[
        (
            "order",
            "pk = \"CUSTOMER#{customer_id}\"\nsk = \"ORDER#{order_id}\"\n",
        ),
        (
            "refund",
            "pk = \"CUSTOMER#{customer_id}\"\nsk = \"ORDER#{refund_id}#R\"\n",
        ),
    ]);
    let found = lints(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    // At the second entity's pk: lines 8..13 the first entity, 14 blank, 15.. the second.
    assert_eq!((found[0].at.line, found[0].at.col), (18, 7));
    assert!(
        found[0].message.starts_with(
            "entity \"refund\" (pk \"CUSTOMER#{customer_id}\", sk \"ORDER#{refund_id}#R\") can produce the same key as entity \"order\""
        ),
        "{}",
        found[0]
    );
    // Different suffixes after the placeholders keep them apart.
    let apart = text.replace("ORDER#{order_id}", "ORDER#{order_id}#O");
    assert!(lints(&apart).is_empty());

    // A literal key against a pattern: equal only if the pattern can produce it.
    let text = entities(&[
        ("a", "pk = \"TENANT\"\nsk = \"CONFIG\"\n"),
        ("b", "pk = \"T{x}\"\nsk = \"{y}\"\n"),
        ("c", "pk = \"TENANT#{x}\"\nsk = \"{y}\"\n"),
    ]);
    let found = lints(&text);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].message.contains("entity \"b\""), "{}", found[0]);
    assert!(found[0].message.contains("as entity \"a\""), "{}", found[0]);
    assert!(found[1].message.contains("entity \"c\""), "{}", found[1]);
    assert!(found[1].message.contains("as entity \"b\""), "{}", found[1]);
}

#[test]
fn pointers_collide_with_entities_too() {
    let pointer = "\n[[pointer]]\nentity = \"order\"\npk = \"LAST_ORDER\"\nsk = \"LAST_ORDER\"\nmax = { attribute = \"orderId\", column = \"id\" }\n";
    let text = entities(&[(
        "order",
        "pk = \"CUSTOMER#{customer_id}\"\nsk = \"ORDER#{id}\"\n",
    )]);
    assert!(lints(&format!("{text}{pointer}")).is_empty());
    let text = entities(&[("order", "pk = \"{customer_id}\"\nsk = \"{id}\"\n")]);
    let found = lints(&format!("{text}{pointer}"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .message
            .starts_with("pointer \"LAST_ORDER\" (pk \"LAST_ORDER\", sk \"LAST_ORDER\") can produce the same key as entity \"order\""),
        "{}",
        found[0]
    );
}

fn col(name: &str, sql_type: &str) -> sql2ddb_core::Column {
    sql2ddb_core::Column {
        name: name.into(),
        sql_type: sql_type.into(),
    }
}

#[test]
fn nothing_lost_02_touching_placeholders_collapse_rows() {
    // ('1','23') and ('12','3') both render C#123.
    let text = entities(&[("c", "key = [\"a\", \"b\"]\npk = \"C#{a}{b}\"\nsk = \"X\"\n")]);
    let found = lints(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .message
            .contains("{a} and {b} touch with no separator"),
        "{}",
        found[0]
    );
    assert_eq!((found[0].at.line, found[0].at.col), (13, 12));
    // The user says several rows per item is meant: no warning.
    let overwrite = text.replace("sk = \"X\"", "sk = \"X\"\noverwrite = true");
    let plan = parse(&overwrite).unwrap();
    assert!(plan.entities[0].overwrite);
    assert!(plan.lint().is_empty(), "{:?}", plan.lint());
    // A separator makes it unambiguous for columns that cannot contain it.
    let sep = text.replace("C#{a}{b}", "C#{a}#{b}");
    let plan = parse(&sep).unwrap();
    assert!(plan.lint().is_empty());
    let e = &plan.entities[0];
    let keys = ["a".to_string(), "b".to_string()];
    let ints = [col("a", "int8"), col("b", "int8")];
    assert!(e.collapse_lints(&keys, Some(&ints)).is_empty());
    let dates = [col("a", "DATE"), col("b", "TEXT")];
    assert!(e.collapse_lints(&keys, Some(&dates)).is_empty());
    // Text can hold '#': ('x#', 'y') and ('x', '#y') meet.
    let texts = [col("a", "text"), col("b", "int8")];
    let found = e.collapse_lints(&keys, Some(&texts));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .message
            .contains("the values of a (text) can contain the separator \"#\""),
        "{}",
        found[0]
    );
    // A negative integer renders a '-': not a safe separator after an integer.
    let dash = parse(&text.replace("C#{a}{b}", "C#{a}-{b}")).unwrap();
    assert_eq!(dash.entities[0].collapse_lints(&keys, Some(&ints)).len(), 1);
    // The last placeholder may hold anything: it runs to the end.
    let last = parse(&text.replace("C#{a}{b}", "C#{b}#{a}")).unwrap();
    assert!(last.entities[0]
        .collapse_lints(&keys, Some(&texts))
        .is_empty());
    // A key column left out is a collapse too.
    let missing = parse(&text.replace("C#{a}{b}", "C#{a}")).unwrap();
    let found = missing.entities[0].collapse_lints(&keys, Some(&ints));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].message.contains("key column(s) b"), "{}", found[0]);
}
