//! sql2ddb mapping specs: TOML text → validated [`Plan`]; then, per entity and
//! once the source's columns are known, [`Entity::bind`] → [`BoundEntity`],
//! whose [`BoundEntity::map_row`] turns a source row into a DynamoDB item or a
//! [`Reject`](sql2ddb_core::Reject). No IO: the caller reads the file and
//! injects environment lookups.
//!
//! # Errors
//!
//! Every [`MappingError`] displays as `FILE:LINE:COL: message` (1-based), for
//! TOML syntax, unknown keys, wrong types, bad values, bad templates, missing
//! `${VAR}`s, and also for problems found at bind time (a template naming a
//! column the source does not return): those point at the template in the
//! mapping and list the columns available.
//!
//! # Templates
//!
//! `pk`, `sk` and string attributes are templates, parsed once at load:
//!
//! | Syntax | Meaning |
//! |---|---|
//! | `{col}` | the column's text form |
//! | `{col:08}` | zero-padded to 8 characters, the sign first (`-0000042`), so string order matches numeric order for non-negative integers of up to 8 digits |
//! | `{{`, `}}` | a literal `{`, `}` |
//! | no `{…}` | a literal string |
//!
//! Text forms: integers and decimals as digits, booleans `true`/`false`, dates
//! `YYYY-MM-DD`, times `HH:MM:SS[.f]`, timestamps RFC 3339 UTC `…Z`, JSON
//! strings/numbers/booleans as their value. A NULL, an invalid value, bytes,
//! arrays, sets and JSON objects/arrays/null in a template reject the row.
//!
//! Key attributes take the rendered string into the table's key type: `S` as
//! is; `N` must be a valid DynamoDB number, else the row is rejected; `B` takes
//! the column's bytes when the template is exactly `{col}` on a bytes column,
//! else the UTF-8 bytes of the rendered text. An empty key value is rejected.
//!
//! A non-key attribute that is exactly `{col}` copies the column with its
//! native type (like the default copy); any other template renders an `S`.
//!
//! # Row → item
//!
//! Every column that is not excluded becomes an attribute of the same name;
//! `[entity.attributes]` entries override a same-named column. The default
//! conversions:
//!
//! | SQL value ([`SqlValue`](sql2ddb_core::SqlValue)) | DynamoDB | Notes |
//! |---|---|---|
//! | NULL | *omitted* | `nulls = "null"` writes `NULL: true` instead |
//! | boolean | `BOOL` | |
//! | integer (signed, unsigned) | `N` | `numeric_as = "string"`: `S` |
//! | float | `N` | Rust's shortest round-trip text, checked; NaN/±Infinity reject the row (DynamoDB has none); `numeric_as = "string"`: `S` |
//! | decimal / numeric | `N` | exact digits, normalised; over 38 significant digits or outside 1E-130..9.99E+125 rejects the row; `numeric_as = "string"`: `S` with the source's text (NaN too) |
//! | text, char, uuid, enum | `S` | empty string allowed outside keys |
//! | binary | `B` | |
//! | date | `S` `YYYY-MM-DD` | |
//! | time | `S` `HH:MM:SS[.fraction]` | |
//! | timestamp (no zone, taken as UTC), timestamptz | `S` RFC 3339 UTC `2024-01-02T03:04:05[.f]Z` | `format = "epoch_seconds"`: `N` whole seconds; `"epoch_millis"`: `N` whole ms; `"rfc3339"`: the default |
//! | json / jsonb object | `M` | nested values by the same JSON rules |
//! | json array | `L` | |
//! | json string / number / boolean / null | `S` / `N` / `BOOL` / `NULL` | numbers keep their exact digits and are checked like decimals; JSON null is always `NULL`, never omitted |
//! | SQL array | `L` | elements by these rules; a NULL element is `NULL` |
//! | set of strings (MySQL `SET`) | `SS` | duplicates removed, sorted; an empty set is omitted (DynamoDB has no empty sets) |
//! | invalid value (e.g. MySQL zero date) | — | rejects the row, naming the column |
//!
//! `format` is allowed only on timestamp columns (checked at bind from the
//! column's SQL type); a text value in such a column is parsed as RFC 3339 or
//! `YYYY-MM-DD HH:MM:SS[.f]` (SQLite's form), taken as UTC.
//!
//! Each item is finally checked against DynamoDB's limits
//! ([`check_item`](sql2ddb_core::check_item)): key types, empty keys, key
//! lengths, nesting, 400 KB. A failing row is rejected with the problem as the
//! reason. A reject carries the row as JSON without excluded columns, and the
//! row's source key (the keyset key columns).

#![warn(missing_docs)]

mod bind;
mod convert;
mod env;
mod error;
mod plan;
mod spec;
mod template;

pub use bind::BoundEntity;
pub use error::{ErrorKind, Location, MappingError};
pub use plan::{
    Entity, EntitySource, Plan, SourceSpec, TargetSpec, WriterSpec, DEFAULT_CONCURRENCY,
    DEFAULT_PAGE_SIZE, MAX_CONCURRENCY, SPEC_VERSION,
};
pub use template::MAX_PAD_WIDTH;
