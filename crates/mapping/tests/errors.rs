//! Bad mappings: every error names the file, the line and the column.
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use sql2ddb_core::{AttrValue, SqlValue};
use sql2ddb_mapping::{ErrorKind, MappingError};

use common::*;

#[test]
fn misspelled_key_names_line_column_and_key() {
    let text = with_entity("frm = \"x\"\npk = \"A\"\nsk = \"B\"\n");
    let e = err(&text);
    assert_eq!(e.kind(), ErrorKind::UnknownKey);
    assert_eq!(at(&e), (12, 1));
    let msg = e.to_string();
    assert!(
        msg.starts_with("shop.toml:12:1: unknown field `frm`"),
        "{msg}"
    );
    assert!(matches!(&e, MappingError::UnknownKey { key, .. } if key == "frm"));
    // In an inline table, deep inside an entity.
    let text = with_entity("pk = \"A\"\nsk = \"B\"\n[entity.attributes]\nx = { column = \"c\", fromat = \"rfc3339\" }\n");
    let e = err(&text);
    assert_eq!((e.kind(), at(&e)), (ErrorKind::UnknownKey, (15, 21)));
    assert!(e.to_string().contains("fromat"), "{e}");
}

#[test]
fn broken_templates_name_line_and_column() {
    let e = err(&with_entity("pk = \"ORDER#{order_id\"\nsk = \"B\"\n"));
    assert_eq!(e.kind(), ErrorKind::Template);
    assert_eq!(at(&e), (12, 13)); // the `{`
    let msg = e.to_string();
    assert!(
        msg.starts_with("shop.toml:12:13: bad template \"ORDER#{order_id\": unclosed `{`"),
        "{msg}"
    );
    let e = err(&with_entity("pk = \"A\"\nsk = \"X{}\"\n"));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::Template, (13, 8)));
    assert!(e.to_string().contains("empty placeholder"), "{e}");
    let e = err(&with_entity(
        "pk = \"A\"\nsk = \"B\"\n[entity.attributes]\ncode = \"{x:abc}\"\n",
    ));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::Template, (15, 12)));
    assert!(e.to_string().contains("bad format spec `abc`"), "{e}");
    let e = err(&with_entity("pk = \"A}\"\nsk = \"B\"\n"));
    assert_eq!(at(&e), (12, 8));
}

#[test]
fn unknown_column_at_bind_names_the_template() {
    let text = with_entity("pk = \"CUSTOMER#{customer_id}\"\nsk = \"P#{nope:04}\"\n");
    let columns = cols(&[("id", "int8"), ("customer_id", "int8"), ("name", "text")]);
    let e = bind(&text, &columns).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Bind);
    assert_eq!(at(&e), (13, 9));
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "shop.toml:13:9: entity e: sk template \"P#{nope:04}\" uses column \"nope\""
        ),
        "{msg}"
    );
    assert!(
        msg.ends_with("available columns: id, customer_id, name"),
        "{msg}"
    );
    assert!(matches!(&e, MappingError::Bind { column: Some(c), .. } if c == "nope"));
    // An attribute naming an excluded column.
    let text = with_entity("pk = \"A\"\nsk = \"B\"\nexclude = [\"name\"]\n[entity.attributes]\nn = { column = \"name\" }\n");
    let e = bind(&text, &columns).unwrap_err();
    assert_eq!(at(&e), (16, 16));
    assert!(e.to_string().contains("\"name\", which is excluded"), "{e}");
    assert!(
        e.to_string()
            .ends_with("available columns: id, customer_id"),
        "{e}"
    );
}

#[test]
fn other_bind_errors() {
    let columns = cols(&[("id", "int8"), ("PK", "text"), ("made", "date")]);
    let e = bind(&with_entity("pk = \"A\"\nsk = \"B\"\n"), &columns).unwrap_err();
    assert_eq!(at(&e), (9, 1));
    assert!(e.to_string().contains("key attribute"), "{e}");
    assert!(bind(
        &with_entity("pk = \"A\"\nsk = \"B\"\nexclude = [\"PK\"]\n"),
        &columns
    )
    .is_ok());
    let text = with_entity("pk = \"A\"\nsk = \"B\"\nexclude = [\"PK\"]\n[entity.attributes]\nm = { column = \"made\", format = \"epoch_seconds\" }\n");
    let e = bind(&text, &columns).unwrap_err();
    assert_eq!(at(&e), (16, 33));
    assert!(e.to_string().contains("not a timestamp"), "{e}");
    let e = bind(
        &with_entity("pk = \"A\"\nsk = \"B\"\nexclude = [\"PK\", \"pw\"]\n"),
        &columns,
    )
    .unwrap_err();
    assert_eq!(at(&e), (14, 18));
    let plan = parse(&with_entity(
        "key = [\"nope\"]\npk = \"A\"\nsk = \"B\"\nexclude = [\"PK\"]\n",
    ))
    .unwrap();
    let e = plan.entities[0]
        .bind(&plan, &columns, &["nope".into()])
        .unwrap_err();
    assert_eq!(at(&e), (12, 7));
}

#[test]
fn missing_environment_variable() {
    let text = "version = 1\n[source]\nurl = \"postgres://${DB_USER}@h/db\"\n";
    let e = err(text);
    // The target table is missing too, but env expansion is not reached before TOML checks.
    assert_eq!(e.kind(), ErrorKind::MissingKey);
    let text = HEAD.replace("${DB_URL}", "postgres://${DB_USER}@h/db")
        + "[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A\"\nsk = \"B\"\n";
    let e = err(&text);
    assert_eq!(e.kind(), ErrorKind::Env);
    assert_eq!(at(&e), (3, 19));
    assert_eq!(
        e.to_string(),
        "shop.toml:3:19: environment variable DB_USER is not set (write ${DB_USER:-default} to give a default)"
    );
    let ok = HEAD.replace("${DB_URL}", "${DB_USER:-sqlite://x.db}")
        + "[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A\"\nsk = \"B\"\n";
    assert_eq!(parse(&ok).unwrap().source.url, "sqlite://x.db");
    let table = HEAD.replace("\"shop\"", "\"${TABLE}\"")
        + "[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A\"\nsk = \"B\"\n";
    assert_eq!(at(&err(&table)), (5, 10));
}

#[test]
fn a_source_url_given_wins_over_an_unset_variable() {
    use sql2ddb_mapping::Plan;
    let text = HEAD.replace("${DB_URL}", "${DATABASE_URL}")
        + "[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A\"\nsk = \"B\"\n";
    let none = |_: &str| None;
    let e = Plan::parse(&text, "shop.toml".as_ref(), &none).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Env);
    let given = "postgres://root@127.0.0.1:5432/shop";
    let plan = Plan::parse_with_source(&text, "shop.toml".as_ref(), &none, Some(given)).unwrap();
    assert_eq!(plan.source.url, given);
    // A variable elsewhere in the spec is still expanded, and still needed.
    let table = text.replace("\"shop\"", "\"${TABLE}\"");
    let e = Plan::parse_with_source(&table, "shop.toml".as_ref(), &none, Some(given)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Env);
}

#[test]
fn a_number_key_with_text_around_its_columns_is_refused_without_a_connection() {
    let numeric = HEAD.replace("type = \"S\" }\nsk", "type = \"N\" }\nsk");
    let body = |pk: &str| {
        format!("{numeric}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"{pk}\"\nsk = \"B\"\n")
    };
    let e = err(&body("ORDER#{id}"));
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    assert_eq!(at(&e).0, 12, "{e}");
    assert!(
        e.to_string().contains("type N") && e.to_string().contains("'O'"),
        "{e}"
    );
    for fine in ["{id}", "{a}{b:04}", "-{id}", "{id}00", "7"] {
        parse(&body(fine)).unwrap_or_else(|e| panic!("{fine}: {e}"));
    }
}

#[test]
fn an_excluded_column_still_makes_a_key() {
    // `exclude` leaves the column out of the item's attributes; a key
    // template may still read it, as docs/mapping.md says.
    let text = with_entity("pk = \"C#{cust}\"\nsk = \"O#{id}\"\nexclude = [\"cust\"]\n");
    let columns = cols(&[("id", "int8"), ("cust", "int8"), ("note", "text")]);
    let bound = bind(&text, &columns).unwrap();
    let row = vec![
        SqlValue::Int(7),
        SqlValue::Int(42),
        SqlValue::Text("n".into()),
    ];
    let item = bound.map_both(&row).unwrap().item;
    assert_eq!(item.get("PK"), Some(&AttrValue::S("C#42".into())));
    assert_eq!(item.get("SK"), Some(&AttrValue::S("O#7".into())));
    assert_eq!(item.get("cust"), None, "{item:?}");
    assert_eq!(item.get("note"), Some(&AttrValue::S("n".into())));
}

#[test]
fn bad_values() {
    let cases: &[(&str, (usize, usize), &str)] = &[
        ("pk = \"A\"\nsk = \"B\"\nnulls = \"none\"\n", (14, 9), "unknown variant `none`"),
        ("pk = \"A\"\nsk = \"B\"\n[entity.attributes]\nx = { column = \"c\", format = \"iso\" }\n", (15, 30), "unknown variant `iso`"),
        ("pk = \"A\"\nsk = \"B\"\n[entity.attributes]\nx = 5\n", (15, 5), "invalid type"),
        ("pk = \"A\"\n", (9, 1), "has no sk"),
        ("pk = \"A\"\nsk = \"B\"\nquery = \"SELECT 1\"\n", (14, 9), "both from and query"),
        ("pk = \"A\"\nsk = \"B\"\n[entity.attributes]\nPK = \"x\"\n", (15, 1), "key attribute"),
        ("pk = \"A\"\nsk = \"B\"\npage_size = 0\n", (14, 13), "page_size must be"),
        ("pk = \"\"\nsk = \"B\"\n", (12, 6), "empty"),
        ("pk = \"A\"\nsk = \"B\"\n\n[[entity]]\nname = \"e\"\nfrom = \"u\"\npk = \"A\"\nsk = \"B\"\n", (16, 8), "duplicate entity name \"e\" (first defined at line 10)"),
        ("pk = \"A\"\nsk = \"B\"\nkey = []\n", (14, 7), "key is empty"),
    ];
    for (body, pos, needle) in cases {
        let e = err(&with_entity(body));
        assert_eq!(at(&e), *pos, "{e}");
        assert!(
            e.to_string().contains(needle),
            "{e} should contain {needle}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("shop.toml:{}:{}: ", pos.0, pos.1)),
            "{e}"
        );
    }
}

#[test]
fn bad_target_and_top_level() {
    let e = err(&HEAD.replace("type = \"S\" }\nsk", "type = \"X\" }\nsk"));
    assert_eq!(at(&e), (6, 28));
    assert!(e.to_string().contains("unknown variant `X`"), "{e}");
    let e = err(&HEAD.replace("pk = { name = \"PK\", type = \"S\" }", "pk = \"PK\""));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::Syntax, (6, 6)));
    assert!(
        e.to_string()
            .contains("expected a key table like { name = \"PK\", type = \"S\" }"),
        "{e}"
    );
    let e = err(&format!("{HEAD}[writer]\nconcurrency = 1000\n"));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::InvalidValue, (9, 15)));
    let e = err(&HEAD.replace("version = 1", "version = 2"));
    assert_eq!(at(&e), (1, 11));
    let e = err(&format!("{HEAD}[[entity]\n"));
    assert_eq!(e.kind(), ErrorKind::Syntax);
    assert_eq!(e.location().line, 8);
    let e = err(HEAD);
    assert_eq!(e.kind(), ErrorKind::MissingKey);
    // Neither from nor query: points at the entity header.
    let e = err(&format!(
        "{HEAD}[[entity]]\nname = \"e\"\npk = \"A\"\nsk = \"B\"\n"
    ));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::MissingKey, (8, 1)));
    let e = err(&format!(
        "{HEAD}[[entity]]\nname = \"e\"\nfrom = \"t\"\nsk = \"B\"\n"
    ));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::MissingKey, (8, 1)));
    assert!(e.to_string().contains("missing field `pk`"), "{e}");
    let no_sk = HEAD.replace("sk = { name = \"SK\", type = \"S\" }\n", "");
    let e = err(&format!(
        "{no_sk}[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"A\"\nsk = \"B\"\n"
    ));
    assert_eq!(at(&e), (11, 6));
    let e = err(&HEAD.replace("\"shop\"", "\"a b\""));
    assert_eq!(at(&e), (5, 9));
    let defaults = parse(&format!(
        "{no_sk}[[entity]]\nname = \"e\"\nquery = \"SELECT 1\"\npk = \"{{id}}\"\n"
    ))
    .unwrap();
    assert_eq!(defaults.source.page_size, 5000);
    assert_eq!(defaults.writer.concurrency, 8);
    assert_eq!(defaults.entities[0].page_size(&defaults), 5000);
    assert!(!defaults.target.create);
    assert_eq!(defaults.target.sk, None);
}
