//! Source data several tests migrate, written once.

/// SQL that creates `{schema}.items (id, name, qty)` with rows `1..=rows`:
/// row `i` is `(i, 'Name i', i % 100)`. `{schema}` stands for the test's
/// PostgreSQL schema ([`super::PgSchema::exec`] fills it in).
pub fn items_sql(rows: u64) -> String {
    format!(
        "CREATE TABLE {{schema}}.items (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
         INSERT INTO {{schema}}.items SELECT i, 'Name ' || i, i % 100 FROM generate_series(1, {rows}) AS i;"
    )
}
