//! Source fixtures of the end-to-end tests: the test-support module's
//! PostgreSQL schemas, MariaDB databases and SQLite files.

pub use sql2ddb_testkit::support::{
    items_sql, mapping_head, pg_url, sqlite_file, unique_name as unique, MyDatabase, PgSchema,
    DEFAULT_PG_URL,
};
