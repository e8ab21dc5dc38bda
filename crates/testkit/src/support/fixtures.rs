//! Source data several tests migrate, and the head of their mappings,
//! written once.

/// SQL that creates `{schema}.items (id, name, qty)` with rows `1..=rows`:
/// row `i` is `(i, 'Name i', i % 100)`. `{schema}` stands for the test's
/// PostgreSQL schema ([`super::PgSchema::exec`] fills it in).
pub fn items_sql(rows: u64) -> String {
    format!(
        "CREATE TABLE {{schema}}.items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
         INSERT INTO {{schema}}.items SELECT i, 'Name ' || i, i % 100 FROM generate_series(1, {rows}) AS i;"
    )
}

/// A mapping's first lines: version, the local PostgreSQL read with
/// `source_options` (TOML lines of `[source]`), and `table` at `endpoint`
/// (created if missing, keyed by `PK` and `SK`); entities follow.
pub fn mapping_head(source_options: &str, table: &str, endpoint: &str) -> String {
    format!(
        r#"
version = 1
[source]
url = "{pg}"
{source_options}
[target]
table = "{table}"
endpoint = "{endpoint}"
region = "us-east-1"
create = true
pk = {{ name = "PK", type = "S" }}
sk = {{ name = "SK", type = "S" }}
"#,
        pg = super::pg_url()
    )
}
