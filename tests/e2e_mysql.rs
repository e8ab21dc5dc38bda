//! End to end, MariaDB → DynamoDB through the built binary: every MySQL type
//! arrives as the documented DynamoDB value, limits included; values that
//! cannot be written are rejected rows with a reason (exit 2) or, as the
//! mapping says, strings or NULLs; `timezone` and `ssl-mode` are honoured.

use sql2ddb_core::{AttrValue, Item};

use crate::common::*;

/// A mapping for one entity `e` reading `from`, written to `table`; `extra`
/// goes into `[source]`, `body` into the entity.
fn mapping(url: &str, table: &str, extra: &str, from: &str, body: &str) -> String {
    format!(
        r#"version = 1
[source]
url = "{url}"
page_size = 2
{extra}
[target]
table = "{table}"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}

[[entity]]
name = "e"
from = "{from}"
{body}
"#
    )
}

/// Runs the binary on mapping `text` in the scenario's directory.
async fn run(sc: &Scenario, text: &str) -> Run {
    let path = write_mapping(sc.path(), text);
    sc.run(&path, &["--json", "--quiet"]).await
}

/// A MariaDB database filled by `sql`, and a server.
async fn scenario(prefix: &str, sql: &str) -> Scenario {
    Scenario::new(prefix).mariadb(sql).start().await
}

const TYPES: &str = r#"
CREATE TABLE types (
  id INT PRIMARY KEY, flag TINYINT(1), flag_num TINYINT(1), flag_raw TINYINT(1),
  ti TINYINT, uti TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT, ui INT UNSIGNED,
  bi BIGINT, ubi BIGINT UNSIGNED, dm DECIMAL(10,3), dz DECIMAL(38,0), f FLOAT, d DOUBLE,
  c CHAR(5), vc VARCHAR(20), tx TEXT, lat VARCHAR(20) CHARACTER SET latin1,
  lat_tx TEXT CHARACTER SET latin1, bin BINARY(3), vb VARBINARY(10), bl BLOB,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME, yr YEAR,
  e ENUM('small', 'large'), st SET('a', 'b', 'c'), js JSON, bt BIT(10), b64 BIT(64)
) CHARACTER SET utf8mb4;
INSERT INTO types VALUES
 (1, 1, 1, 1, -128, 0, -32768, -8388608, -2147483648, 0,
  -9223372036854775808, 0, -9999999.999, 99999999999999999999999999999999999999, 0.1, -2.5e-7,
  'ab', 'héllo 🦀', 'Ünïcödé', 'àéîõü ÿ', 'Ça coûte cher, garçon',
  X'000102', X'CAFE', X'00FF',
  '1000-01-01', '1000-01-01 00:00:00.000001', '1970-01-01 00:00:01.000', '00:00:00', 1901,
  'small', 'c,a', '{"big": 123456789012345678901234567890.5, "l": [1, null, true], "s": "x", "o": {}}',
  b'0', b'0'),
 (2, 0, 7, 7, 127, 255, 32767, 8388607, 2147483647, 4294967295,
  9223372036854775807, 18446744073709551615, 0.500, -1, 3.4e38, 1e125,
  'abcde', '', '', 'Ærø', 'naïve', X'FF', X'', X'',
  '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999', '23:59:59', 2155,
  'large', '', '[]', b'1111111111', b'1111111111111111111111111111111111111111111111111111111111111111'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL);
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: the expected items, one attribute per MySQL type.
async fn every_mysql_type_arrives_as_documented() {
    let sc = scenario("e2e_my_types", TYPES).await;
    let text = mapping(
        &sc.my().url,
        &sc.table,
        "",
        "types",
        "pk = \"T#{id}\"\nsk = \"TYPES\"\n[entity.attributes]\nflag_num = { column = \"flag_num\", type = \"N\" }\n",
    );
    let run = run(&sc, &text).await;
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(run.entity("e")["items_written"], 3);

    let items = sc.items().await;
    assert_eq!(items.len(), 3);
    let b = |v: &[u8]| AttrValue::B(v.to_vec());
    let bool_ = AttrValue::Bool;
    let first = item(vec![
        ("PK", s("T#1")),
        ("SK", s("TYPES")),
        ("id", n(1)),
        ("flag", bool_(true)),
        ("flag_num", n(1)),
        ("flag_raw", bool_(true)),
        ("ti", n(-128)),
        ("uti", n(0)),
        ("si", n(-32768)),
        ("mi", n(-8388608)),
        ("i", n(-2147483648i64)),
        ("ui", n(0)),
        ("bi", n(i64::MIN)),
        ("ubi", n(0)),
        ("dm", n("-9999999.999")),
        ("dz", n("9".repeat(38))),
        ("f", n("0.1")),
        ("d", n("-0.00000025")),
        ("c", s("ab")),
        ("vc", s("héllo 🦀")),
        ("tx", s("Ünïcödé")),
        ("lat", s("àéîõü ÿ")),
        ("lat_tx", s("Ça coûte cher, garçon")),
        ("bin", b(&[0, 1, 2])),
        ("vb", b(&[0xca, 0xfe])),
        ("bl", b(&[0, 0xff])),
        ("dt", s("1000-01-01")),
        ("dtm", s("1000-01-01T00:00:00.000001Z")),
        ("ts", s("1970-01-01T00:00:01Z")),
        ("tm", s("00:00:00")),
        ("yr", n(1901)),
        ("e", s("small")),
        ("st", AttrValue::SS(vec!["a".into(), "c".into()])),
        (
            "js",
            AttrValue::M(item(vec![
                ("big", n("123456789012345678901234567890.5")),
                ("l", AttrValue::L(vec![n(1), AttrValue::Null, bool_(true)])),
                ("s", s("x")),
                ("o", AttrValue::M(Item::new())),
            ])),
        ),
        ("bt", n(0)),
        ("b64", n(0)),
    ]);
    assert_item(&key("T#1", "TYPES"), &items[&key("T#1", "TYPES")], &first);

    let second = item(vec![
        ("PK", s("T#2")),
        ("SK", s("TYPES")),
        ("id", n(2)),
        ("flag", bool_(false)),
        // TINYINT(1) used as a number: `type = "N"` or not, nothing is lost.
        ("flag_num", n(7)),
        ("flag_raw", n(7)),
        ("ti", n(127)),
        ("uti", n(255)),
        ("si", n(32767)),
        ("mi", n(8388607)),
        ("i", n(2147483647)),
        ("ui", n(4294967295u32)),
        ("bi", n(i64::MAX)),
        ("ubi", n(u64::MAX)),
        ("dm", n("0.5")),
        ("dz", n(-1)),
        ("f", n(format!("34{}", "0".repeat(37)))),
        ("d", n(format!("1{}", "0".repeat(125)))),
        ("c", s("abcde")),
        ("vc", s("")),
        ("tx", s("")),
        ("lat", s("Ærø")),
        ("lat_tx", s("naïve")),
        // BINARY(3) pads with zero bytes.
        ("bin", b(&[0xff, 0, 0])),
        ("vb", b(&[])),
        ("bl", b(&[])),
        ("dt", s("9999-12-31")),
        ("dtm", s("9999-12-31T23:59:59.999999Z")),
        ("ts", s("2038-01-19T03:14:07.999Z")),
        ("tm", s("23:59:59")),
        ("yr", n(2155)),
        ("e", s("large")),
        // The empty SET is left out: DynamoDB has no empty sets.
        ("js", AttrValue::L(vec![])),
        ("bt", n(1023)),
        ("b64", n(u64::MAX)),
    ]);
    assert_item(&key("T#2", "TYPES"), &items[&key("T#2", "TYPES")], &second);

    // NULLs are left out.
    let third = item(vec![("PK", s("T#3")), ("SK", s("TYPES")), ("id", n(3))]);
    assert_item(&key("T#3", "TYPES"), &items[&key("T#3", "TYPES")], &third);
}

const LIMITS: &str = r#"
CREATE TABLE limits (
  id INT PRIMARY KEY, wide DECIMAL(65,30), zd DATE, zdt DATETIME, tm TIME, tiny DOUBLE, js JSON
) CHARACTER SET utf8mb4;
SET SESSION sql_mode = '';
INSERT INTO limits VALUES
 (1, 1.5, '2024-01-01', '2024-01-01 00:00:00', '01:00:00', 1.0, '{"n": 1}'),
 (2, 12345678901234567890123456789012345.123456789012345678901234567890,
     '2024-01-01', '2024-01-01 00:00:00', '01:00:00', 1.0, '{"n": 1}'),
 (3, 1.5, '0000-00-00', '2024-01-01 00:00:00', '01:00:00', 1.0, '{"n": 1}'),
 (4, 1.5, '2024-01-01', '0000-00-00 00:00:00', '01:00:00', 1.0, '{"n": 1}'),
 (5, 1.5, '2024-01-01', '2024-01-01 00:00:00', '-01:00:00', 1.0, '{"n": 1}'),
 (6, 1.5, '2024-01-01', '2024-01-01 00:00:00', '01:00:00', 1e-300, '{"n": 1}'),
 (7, 1.5, '2024-01-01', '2024-01-01 00:00:00', '01:00:00', 1.0, '{"n": 1e200}');
"#;

const WIDE: &str = "12345678901234567890123456789012345.123456789012345678901234567890";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// Long on purpose: one scenario: strict, then lenient, each value checked.
async fn values_dynamodb_cannot_hold_are_rejected_or_mapped_as_configured() {
    let sc = scenario("e2e_my_limits", LIMITS).await;
    let db = sc.my();

    // By default: each such row is rejected alone, with its column and reason.
    let table = unique("my_limits");
    let keys = "pk = \"L#{id}\"\nsk = \"LIMITS\"\n";
    let strict = run(&sc, &mapping(&db.url, &table, "", "limits", keys)).await;
    assert_eq!(strict.code, 2, "stderr:\n{}", strict.stderr);
    let report = strict.report();
    assert_eq!(report["status"], "rejected");
    let e = strict.entity("e");
    assert_eq!(
        (e["rows_read"].as_u64(), e["items_written"].as_u64()),
        (Some(7), Some(1))
    );
    assert_eq!(e["rejected"], 6);
    let mut rejected = rejects_of(sc.path(), &report);
    rejected.sort_by_key(|r| r["key"]["id"].as_i64());
    let got: Vec<(i64, &str)> = rejected
        .iter()
        .map(|r| {
            (
                r["key"]["id"].as_i64().unwrap(),
                r["column"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (2, "wide"),
            (3, "zd"),
            (4, "zdt"),
            (5, "tm"),
            (6, "tiny"),
            (7, "js")
        ]
    );
    let reason = |i: usize| rejected[i]["reason"].as_str().unwrap().to_string();
    assert!(
        reason(0).contains("64 significant digits exceed DynamoDB's limit of 38"),
        "{}",
        reason(0)
    );
    assert!(reason(1).contains("zero date 0000-00-00"), "{}", reason(1));
    assert!(reason(2).contains("zero date 0000-00-00"), "{}", reason(2));
    assert!(reason(3).contains("not a time of day"), "{}", reason(3));
    assert!(
        reason(4).contains("outside DynamoDB's number range"),
        "{}",
        reason(4)
    );
    assert!(
        reason(5).contains("outside DynamoDB's number range"),
        "{}",
        reason(5)
    );
    // The reject carries the row as read, with its type.
    assert_eq!(
        rejected[0]["row"]["wide"],
        serde_json::json!({"$decimal": WIDE})
    );
    assert_eq!(sc.dynamo.scan(&table).await.len(), 1);

    // As configured: the wide decimal as an exact string, every other value
    // the mapping cannot write taken as NULL (omitted).
    let table = unique("my_limits_ok");
    let body = format!(
        "{keys}invalid = \"null\"\n[entity.attributes]\nwide = {{ column = \"wide\", numeric_as = \"string\" }}\n"
    );
    let lenient = run(&sc, &mapping(&db.url, &table, "", "limits", &body)).await;
    assert_eq!(lenient.code, 0, "stderr:\n{}", lenient.stderr);
    assert_eq!(lenient.entity("e")["items_written"], 7);
    let items = sc.dynamo.scan(&table).await;
    let get = |id: i64| &items[&key(&format!("L#{id}"), "LIMITS")];
    assert_eq!(get(2)["wide"], s(WIDE));
    assert_eq!(get(1)["wide"], s("1.500000000000000000000000000000"));
    for (id, column) in [(3, "zd"), (4, "zdt"), (5, "tm"), (6, "tiny"), (7, "js")] {
        assert!(!get(id).contains_key(column), "row {id}: {:?}", get(id));
    }
    assert_eq!(get(3)["zdt"], s("2024-01-01T00:00:00Z"));
    assert_eq!(get(7)["tiny"], n(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datetime_is_taken_in_the_mapping_timezone() {
    let sc = scenario(
        "e2e_my_tz",
        "CREATE TABLE times (id INT PRIMARY KEY, dtm DATETIME, ts TIMESTAMP NULL);
         SET time_zone = '+00:00';
         INSERT INTO times VALUES
           (1, '2024-01-15 12:00:00', '2024-01-15 12:00:00'),
           (2, '2024-07-15 12:00:00', '2024-07-15 12:00:00'),
           (3, '2024-03-31 02:30:00', '2024-03-31 02:30:00');",
    )
    .await;
    let db = sc.my();
    let body = "pk = \"AT#{dtm}\"\nsk = \"T#{id}\"\n[entity.attributes]\nepoch = { column = \"dtm\", format = \"epoch_seconds\" }\n";

    // Without `timezone`, DATETIME is UTC.
    let table = unique("my_tz_utc");
    let utc = run(&sc, &mapping(&db.url, &table, "", "times", body)).await;
    assert_eq!(utc.code, 0, "stderr:\n{}", utc.stderr);
    let items = sc.dynamo.scan(&table).await;
    let it = &items[&key("AT#2024-01-15T12:00:00Z", "T#1")];
    assert_eq!(it["dtm"], s("2024-01-15T12:00:00Z"));
    assert_eq!(it["epoch"], n(1705320000));

    // Europe/Paris: winter UTC+1, summer UTC+2; a TIMESTAMP is an instant
    // and does not move; 02:30 on 2024-03-31 never happened in Paris.
    let table = unique("my_tz_paris");
    let text = mapping(
        &db.url,
        &table,
        "timezone = \"Europe/Paris\"",
        "times",
        body,
    );
    let paris = run(&sc, &text).await;
    assert_eq!(paris.code, 2, "stderr:\n{}", paris.stderr);
    let items = sc.dynamo.scan(&table).await;
    assert_eq!(items.len(), 2);
    let winter = &items[&key("AT#2024-01-15T11:00:00Z", "T#1")];
    assert_eq!(winter["dtm"], s("2024-01-15T11:00:00Z"));
    assert_eq!(winter["epoch"], n(1705320000 - 3600));
    assert_eq!(winter["ts"], s("2024-01-15T12:00:00Z"));
    let summer = &items[&key("AT#2024-07-15T10:00:00Z", "T#2")];
    assert_eq!(summer["dtm"], s("2024-07-15T10:00:00Z"));
    assert_eq!(summer["ts"], s("2024-07-15T12:00:00Z"));
    let rejected = rejects_of(sc.path(), &paris.report());
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["key"]["id"], 3);
    assert!(
        rejected[0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not exist in time zone Europe/Paris"),
        "{}",
        rejected[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_mode_in_the_url_is_honoured() {
    let sc = scenario(
        "e2e_my_ssl",
        "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1);",
    )
    .await;
    let db = sc.my();
    let body = "pk = \"T#{id}\"\nsk = \"T\"\n";
    // The test server has TLS off: requiring it must fail, not fall back.
    let required = format!(
        "{}?ssl-mode=REQUIRED",
        db.url.replace("root@", "root:s3cret@")
    );
    let run_required = run(&sc, &mapping(&required, &unique("my_ssl"), "", "t", body)).await;
    // The server refuses the connection as asked.
    assert_eq!(
        run_required.code, EX_UNAVAILABLE,
        "stderr:\n{}",
        run_required.stderr
    );
    let stderr = run_required.stderr.to_ascii_lowercase();
    assert!(stderr.contains("tls") || stderr.contains("ssl"), "{stderr}");
    assert!(
        !run_required.stderr.contains("s3cret"),
        "{}",
        run_required.stderr
    );

    let disabled = format!("{}?ssl-mode=DISABLED", db.url);
    let table = unique("my_ssl_off");
    let run_disabled = run(&sc, &mapping(&disabled, &table, "", "t", body)).await;
    assert_eq!(run_disabled.code, 0, "stderr:\n{}", run_disabled.stderr);
    assert_eq!(sc.dynamo.scan(&table).await.len(), 1);
}
