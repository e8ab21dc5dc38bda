//! The options that change how values are read or written: `read_parallelism`,
//! `timezone`, an attribute's `type` and `invalid`.
#![allow(clippy::result_large_err)] // Reject is core's type; map_row returns it by value.

mod common;

use chrono::NaiveDate;
use serde_json::json;
use sql2ddb_core::{AttrValue, Reject, SqlValue};
use sql2ddb_mapping::{ErrorKind, MAX_READ_PARALLELISM};

use common::*;

const KEYED: &str = "pk = \"C#{id}\"\nsk = \"X\"\n";

fn s(v: &str) -> AttrValue {
    AttrValue::S(v.into())
}
fn n(v: &str) -> AttrValue {
    AttrValue::N(v.into())
}

/// `HEAD` with `extra` lines added to `[source]` (from line 4 on).
fn head_with(extra: &str) -> String {
    HEAD.replace(
        "url = \"${DB_URL}\"\n",
        &format!("url = \"${{DB_URL}}\"\n{extra}"),
    )
}

/// A mapping with `source` lines in `[source]` and `body` in entity `e`.
fn mapping(source: &str, body: &str) -> String {
    format!(
        "{}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\n{KEYED}{body}",
        head_with(source)
    )
}

/// Maps `[id = 1, v = value]` (`v` of SQL type `ty`) with `source` options
/// and entity `body`; returns the whole item or the reject.
fn map_v(
    source: &str,
    body: &str,
    ty: &str,
    value: SqlValue,
) -> Result<sql2ddb_core::Item, Reject> {
    let text = mapping(source, body);
    let bound =
        bind(&text, &cols(&[("id", "int8"), ("v", ty)])).unwrap_or_else(|e| panic!("bind: {e}"));
    bound
        .map_both(&vec![SqlValue::Int(1), value])
        .map(|m| m.item)
}

fn v_of(source: &str, body: &str, ty: &str, value: SqlValue) -> Option<AttrValue> {
    map_v(source, body, ty, value)
        .unwrap_or_else(|r| panic!("rejected: {r:?}"))
        .get("v")
        .cloned()
}

fn ts(y: i32, mo: u32, d: u32, h: u32, mi: u32, sec: u32) -> SqlValue {
    SqlValue::Timestamp(
        NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, sec)
            .unwrap(),
    )
}

#[test]
fn read_parallelism_from_source_and_entity() {
    let plan = parse(&mapping("", "")).unwrap();
    assert_eq!(plan.source.read_parallelism, None);
    assert_eq!(plan.entities[0].read_parallelism(&plan), None);

    let plan = parse(&mapping("read_parallelism = 4\n", "")).unwrap();
    assert_eq!(plan.source.read_parallelism, Some(4));
    assert_eq!(plan.entities[0].read_parallelism, None);
    assert_eq!(plan.entities[0].read_parallelism(&plan), Some(4));

    let plan = parse(&mapping(
        "read_parallelism = 4\n",
        "read_parallelism = 64\n",
    ))
    .unwrap();
    assert_eq!(plan.entities[0].read_parallelism, Some(64));
    assert_eq!(plan.entities[0].read_parallelism(&plan), Some(64));
    assert_eq!(MAX_READ_PARALLELISM, 64);
}

#[test]
fn read_parallelism_out_of_range_names_line_and_column() {
    let e = err(&mapping("read_parallelism = 0\n", ""));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::InvalidValue, (4, 20)));
    assert!(
        e.to_string()
            .ends_with("read_parallelism must be 1..=64, not 0"),
        "{e}"
    );
    // The entity's own, on the line after pk and sk (13, 14).
    let e = err(&mapping("", "read_parallelism = 65\n"));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::InvalidValue, (14, 20)));
    assert!(e.to_string().contains("not 65"), "{e}");
    let e = err(&mapping("read_parallelism = \"8\"\n", ""));
    assert_eq!(at(&e).0, 4, "{e}");
}

#[test]
fn timestamps_without_zone_are_utc_by_default() {
    assert_eq!(
        v_of("", "", "timestamp", ts(2024, 1, 15, 12, 0, 0)),
        Some(s("2024-01-15T12:00:00Z"))
    );
    let plan = parse(&mapping("", "")).unwrap();
    assert_eq!(plan.source.timezone, None);
}

#[test]
fn timezone_converts_zone_less_timestamps_to_utc() {
    let paris = "timezone = \"Europe/Paris\"\n";
    let plan = parse(&mapping(paris, "")).unwrap();
    assert_eq!(plan.source.timezone, Some(chrono_tz::Europe::Paris));
    // Winter: UTC+1; summer: UTC+2.
    assert_eq!(
        v_of(paris, "", "datetime", ts(2024, 1, 15, 12, 0, 0)),
        Some(s("2024-01-15T11:00:00Z"))
    );
    assert_eq!(
        v_of(paris, "", "datetime", ts(2024, 7, 15, 12, 0, 0)),
        Some(s("2024-07-15T10:00:00Z"))
    );
    // The epoch formats count from the same instant.
    let epoch = "[entity.attributes]\nv = { column = \"v\", format = \"epoch_seconds\" }\n";
    assert_eq!(
        v_of(paris, epoch, "datetime", ts(1970, 1, 1, 1, 0, 0)),
        Some(n("0"))
    );
    // Text parsed for a format is taken in the zone too, unless it has an offset.
    let millis = "[entity.attributes]\nv = { column = \"v\", format = \"epoch_millis\" }\n";
    assert_eq!(
        v_of(
            paris,
            millis,
            "",
            SqlValue::Text("1970-01-01 01:00:01".into())
        ),
        Some(n("1000"))
    );
    assert_eq!(
        v_of(
            paris,
            millis,
            "",
            SqlValue::Text("1970-01-01T00:00:01Z".into())
        ),
        Some(n("1000"))
    );
    // Timestamps that carry a zone are already UTC: unchanged.
    let tz = SqlValue::TimestampTz(
        NaiveDate::from_ymd_opt(2024, 1, 15)
            .unwrap()
            .and_hms_opt(12, 0, 0)
            .unwrap()
            .and_utc(),
    );
    assert_eq!(
        v_of(paris, "", "timestamptz", tz),
        Some(s("2024-01-15T12:00:00Z"))
    );
}

#[test]
fn timezone_applies_to_templates_and_keys() {
    let text = format!(
        "{}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\npk = \"AT#{{v}}\"\nsk = \"X\"\n[entity.attributes]\nlabel = \"at {{v}}\"\n",
        head_with("timezone = \"America/New_York\"\n")
    );
    let bound = bind(&text, &cols(&[("id", "int8"), ("v", "datetime")])).unwrap();
    let m = bound
        .map_both(&vec![SqlValue::Int(1), ts(2024, 1, 15, 7, 0, 0)])
        .unwrap();
    assert_eq!(m.item["PK"], s("AT#2024-01-15T12:00:00Z"));
    assert_eq!(m.item["label"], s("at 2024-01-15T12:00:00Z"));
    assert_eq!(m.item["v"], s("2024-01-15T12:00:00Z"));
}

#[test]
fn daylight_saving_gaps_and_overlaps() {
    let paris = "timezone = \"Europe/Paris\"\n";
    // 02:30 on 2024-03-31 never happens in Paris (02:00 → 03:00).
    let r = map_v(paris, "", "datetime", ts(2024, 3, 31, 2, 30, 0)).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert!(
        r.reason
            .contains("does not exist in time zone Europe/Paris"),
        "{}",
        r.reason
    );
    // The reject shows the row as read, not converted, with its type.
    assert_eq!(r.row["v"], json!({"$timestamp": "2024-03-31T02:30:00"}));
    // With invalid = "null" it is left out instead.
    let null = "[entity.attributes]\nv = { column = \"v\", invalid = \"null\" }\n";
    assert_eq!(
        v_of(paris, null, "datetime", ts(2024, 3, 31, 2, 30, 0)),
        None
    );
    // 02:30 on 2024-10-27 happens twice: the earlier one (still UTC+2).
    assert_eq!(
        v_of(paris, "", "datetime", ts(2024, 10, 27, 2, 30, 0)),
        Some(s("2024-10-27T00:30:00Z"))
    );
}

#[test]
fn bad_timezone_names_line_and_column() {
    let e = err(&mapping("timezone = \"Europe/Pariss\"\n", ""));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::InvalidValue, (4, 12)));
    let msg = e.to_string();
    assert!(
        msg.starts_with("shop.toml:4:12: timezone \"Europe/Pariss\" is not an IANA time zone name"),
        "{msg}"
    );
    let e = err(&mapping("timezone = \"+02:00\"\n", ""));
    assert_eq!(at(&e), (4, 12));
}

#[test]
fn type_n_writes_booleans_as_one_and_zero() {
    let as_n = "[entity.attributes]\nv = { column = \"v\", type = \"N\" }\n";
    assert_eq!(
        v_of("", as_n, "tinyint(1)", SqlValue::Bool(true)),
        Some(n("1"))
    );
    assert_eq!(
        v_of("", as_n, "tinyint(1)", SqlValue::Bool(false)),
        Some(n("0"))
    );
    // A TINYINT(1) used as a number keeps its other values.
    assert_eq!(v_of("", as_n, "tinyint(1)", SqlValue::Int(7)), Some(n("7")));
    assert_eq!(
        v_of("", as_n, "decimal", SqlValue::Decimal("0012.50".into())),
        Some(n("12.5"))
    );
    assert_eq!(
        v_of("", as_n, "text", SqlValue::Text("-3.0".into())),
        Some(n("-3"))
    );
    assert_eq!(v_of("", as_n, "int", SqlValue::Null), None);
    let r = map_v("", as_n, "text", SqlValue::Text("abc".into())).unwrap_err();
    assert!(
        r.reason.starts_with("text \"abc\" is not a number"),
        "{}",
        r.reason
    );
    let r = map_v("", as_n, "blob", SqlValue::Bytes(vec![1])).unwrap_err();
    assert_eq!(r.reason, "bytes cannot be written as N (its type)");
    assert_eq!(r.column.as_deref(), Some("v"));
    // Without `type`, a boolean is BOOL.
    assert_eq!(
        v_of("", "", "tinyint(1)", SqlValue::Bool(true)),
        Some(AttrValue::Bool(true))
    );
}

#[test]
fn type_s_and_bool() {
    let as_s = "[entity.attributes]\nv = { column = \"v\", type = \"S\" }\n";
    assert_eq!(
        v_of("", as_s, "bool", SqlValue::Bool(true)),
        Some(s("true"))
    );
    assert_eq!(v_of("", as_s, "bigint", SqlValue::Int(-5)), Some(s("-5")));
    assert_eq!(
        v_of("", as_s, "decimal", SqlValue::Decimal("1.50".into())),
        Some(s("1.50"))
    );
    assert_eq!(
        v_of("", as_s, "json", SqlValue::Json(json!({"a": [1, null]}))),
        Some(s(r#"{"a":[1,null]}"#))
    );
    assert_eq!(
        v_of(
            "timezone = \"Asia/Tokyo\"\n",
            as_s,
            "datetime",
            ts(2024, 1, 1, 9, 0, 0)
        ),
        Some(s("2024-01-01T00:00:00Z"))
    );
    let r = map_v("", as_s, "blob", SqlValue::Bytes(vec![1])).unwrap_err();
    assert_eq!(r.reason, "bytes cannot be written as S (its type)");

    let as_bool = "[entity.attributes]\nv = { column = \"v\", type = \"BOOL\" }\n";
    assert_eq!(
        v_of("", as_bool, "smallint", SqlValue::Int(1)),
        Some(AttrValue::Bool(true))
    );
    assert_eq!(
        v_of("", as_bool, "smallint", SqlValue::Int(0)),
        Some(AttrValue::Bool(false))
    );
    let r = map_v("", as_bool, "smallint", SqlValue::Int(2)).unwrap_err();
    assert_eq!(r.reason, "2 is not a boolean (0 or 1), needed by type BOOL");
    let r = map_v("", as_bool, "text", SqlValue::Text("yes".into())).unwrap_err();
    assert_eq!(r.reason, "text cannot be written as BOOL (its type)");
}

#[test]
fn type_conflicts_and_unknown_types_are_load_errors() {
    let e = err(&mapping(
        "",
        "[entity.attributes]\nv = { column = \"v\", type = \"N\", numeric_as = \"string\" }\n",
    ));
    assert_eq!((e.kind(), at(&e)), (ErrorKind::InvalidValue, (15, 28)));
    assert!(e.to_string().contains("type and numeric_as"), "{e}");
    let e = err(&mapping(
        "",
        "[entity.attributes]\nv = { column = \"v\", format = \"epoch_seconds\", type = \"N\" }\n",
    ));
    assert!(e.to_string().contains("type and format"), "{e}");
    let e = err(&mapping(
        "",
        "[entity.attributes]\nv = { column = \"v\", type = \"SS\" }\n",
    ));
    assert_eq!(at(&e).0, 15, "{e}");
    assert!(e.to_string().contains("SS"), "{e}");
}

#[test]
fn invalid_values_reject_by_default() {
    let zero = SqlValue::Invalid("zero date 0000-00-00 cannot be represented".into());
    let r = map_v("", "", "date", zero).unwrap_err();
    assert_eq!(r.column.as_deref(), Some("v"));
    assert_eq!(r.reason, "zero date 0000-00-00 cannot be represented");
    let r = map_v("", "", "double", SqlValue::Float(f64::NAN)).unwrap_err();
    assert!(r.reason.contains("NaN"), "{}", r.reason);
}

#[test]
fn invalid_null_takes_the_value_as_null() {
    let zero = || SqlValue::Invalid("zero date 0000-00-00 cannot be represented".into());
    let null = "[entity.attributes]\nv = { column = \"v\", invalid = \"null\" }\n";
    assert_eq!(v_of("", null, "date", zero()), None);
    // nulls = "null" writes it as NULL.
    let both = format!("nulls = \"null\"\n{null}");
    assert_eq!(v_of("", &both, "date", zero()), Some(AttrValue::Null));
    // Any value the mapping cannot write: NaN, a number beyond DynamoDB's.
    assert_eq!(v_of("", null, "double", SqlValue::Float(f64::NAN)), None);
    let wide = SqlValue::Decimal(
        "12345678901234567890123456789012345.123456789012345678901234567890".into(),
    );
    assert_eq!(v_of("", null, "decimal(65,30)", wide.clone()), None);
    let r = map_v("", "", "decimal(65,30)", wide.clone()).unwrap_err();
    assert!(r.reason.contains("38"), "{}", r.reason);
    // numeric_as = "string" keeps it exactly instead.
    let string = "[entity.attributes]\nv = { column = \"v\", numeric_as = \"string\" }\n";
    assert_eq!(
        v_of("", string, "decimal(65,30)", wide),
        Some(s(
            "12345678901234567890123456789012345.123456789012345678901234567890"
        ))
    );
    // Valid values are untouched.
    assert_eq!(v_of("", null, "int", SqlValue::Int(3)), Some(n("3")));
}

#[test]
fn entity_invalid_default_and_attribute_override() {
    let body = "invalid = \"null\"\n";
    let zero = || SqlValue::Invalid("zero date".into());
    assert_eq!(v_of("", body, "date", zero()), None);
    let strict =
        format!("{body}[entity.attributes]\nv = {{ column = \"v\", invalid = \"reject\" }}\n");
    let r = map_v("", &strict, "date", zero()).unwrap_err();
    assert_eq!(r.reason, "zero date");
    // A template never takes an invalid value as NULL: the key would be wrong.
    let text = format!(
        "{HEAD}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\ninvalid = \"null\"\npk = \"D#{{v}}\"\nsk = \"X\"\n"
    );
    let bound = bind(&text, &cols(&[("id", "int8"), ("v", "date")])).unwrap();
    let r = bound.map_both(&vec![SqlValue::Int(1), zero()]).unwrap_err();
    assert!(r.reason.contains("invalid"), "{}", r.reason);
    let e = err(&mapping("", "invalid = \"maybe\"\n"));
    assert_eq!(at(&e).0, 14, "{e}");
}
