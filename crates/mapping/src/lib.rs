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
//! | boolean | `BOOL` | `type = "N"`: `1`/`0`; `type = "S"`: `true`/`false` |
//! | integer (signed, unsigned) | `N` | `numeric_as = "string"`: `S` |
//! | float | `N` | Rust's shortest round-trip text, checked; NaN/±Infinity reject the row (DynamoDB has none); `numeric_as = "string"`: `S` |
//! | decimal / numeric | `N` | exact digits, normalised; over 38 significant digits or outside 1E-130..9.99E+125 rejects the row; `numeric_as = "string"`: `S` with the source's text (NaN too) |
//! | text, char, uuid, enum | `S` | empty string allowed outside keys |
//! | binary | `B` | |
//! | date | `S` `YYYY-MM-DD` | |
//! | time | `S` `HH:MM:SS[.fraction]` | |
//! | timestamp (no zone: taken in `[source] timezone`, UTC by default), timestamptz | `S` RFC 3339 UTC `2024-01-02T03:04:05[.f]Z` | `format = "epoch_seconds"`: `N` whole seconds; `"epoch_millis"`: `N` whole ms; `"rfc3339"`: the default |
//! | json / jsonb object | `M` | nested values by the same JSON rules |
//! | json array | `L` | |
//! | json string / number / boolean / null | `S` / `N` / `BOOL` / `NULL` | numbers keep their exact digits and are checked like decimals; JSON null is always `NULL`, never omitted |
//! | SQL array | `L` | elements by these rules; a NULL element is `NULL` |
//! | set of strings (MySQL `SET`) | `SS` | duplicates removed, sorted; an empty set is omitted (DynamoDB has no empty sets) |
//! | invalid value (e.g. MySQL zero date) | — | rejects the row, naming the column; `invalid = "null"`: taken as NULL |
//!
//! `format` is allowed only on timestamp columns (checked at bind from the
//! column's SQL type); a text value in such a column is parsed as RFC 3339 or
//! `YYYY-MM-DD HH:MM:SS[.f]` (SQLite's form), taken as UTC.
//!
//! # Options that change a value
//!
//! | Key | Where | Effect |
//! |---|---|---|
//! | `type = "S" \| "N" \| "BOOL"` | attribute table | the DynamoDB type to write, whatever the column's. `N`: booleans as `1`/`0`, integers, floats, decimals, JSON numbers, numeric text (checked like decimals); `S`: the value's text form (the template text forms; JSON objects and arrays as JSON text); `BOOL`: booleans and the integers `0`/`1`. Any other value rejects the row. Cannot be combined with `format` or `numeric_as`. The usual use: a MySQL `TINYINT(1)` that holds numbers, `{ column = "qty", type = "N" }` |
//! | `invalid = "reject" \| "null"` | entity (default of its attributes), attribute table | `null`: a value the mapping cannot write (an invalid value such as a zero date, NaN, a number outside DynamoDB's range, a daylight-saving gap) is taken as SQL NULL, so `nulls` decides (omitted, or `NULL`). Keys and templates that render text still reject the row (a key cannot be NULL) |
//! | `timezone = "Europe/Paris"` | `[source]` | IANA zone of zone-less timestamps (MySQL `DATETIME`, PostgreSQL `timestamp`, SQLite text without offset); they are converted to UTC before keys, templates and attributes see them. A local time that occurs twice is the earlier instant; one that never occurs is invalid. Zoned values (`timestamptz`, MySQL `TIMESTAMP`) are unchanged. An unknown name is a load error |
//! | `read_parallelism = N` | `[source]`, entity | segments each entity's key range is cut into and read concurrently, 1..=64 ([`Entity::read_parallelism`]); unset: chosen from the table's size |
//!
//! Each item is finally checked against DynamoDB's limits
//! ([`check_item`](sql2ddb_core::check_item)): key types, empty keys, key
//! lengths, nesting, 400 KB. A failing row is rejected with the problem as the
//! reason. A reject carries the row as JSON without excluded columns, and the
//! row's source key (the keyset key columns).
//!
//! # Single-table design
//!
//! **Embeds.** `[[entity.embed]]` (`name`, `from` | `query`, `parent_key`,
//! `order_by`, `exclude`, `nulls`, `attributes`, `as = "list"` (default) |
//! `"map"` with `map_key`, `key`, nested `[[entity.embed.embed]]`) nests the
//! child rows of each parent into one attribute: a list of maps in `order_by`
//! order, or a map keyed by the text of `map_key` (a duplicate key rejects the
//! parent). `parent_key` are the child columns holding the parent's key, as
//! many as the parent's key has; a nested embed matches its parent embed's
//! `key`. The engine reads children per page of parents
//! ([`Entity::embeds`]), binds with [`Entity::bind_with_children`] and maps
//! with [`BoundEntity::map_row_with_children`]; an item pushed over 400 KB by
//! its children is rejected, naming each embed and its child count.
//!
//! **Indexes and billing.** `[[target.gsi]]` (`name`, `pk`, `sk`,
//! `projection = "all" | "keys_only" | { include = [...] }`) and
//! `billing = "on-demand" | { read = N, write = N }` under `[target]`. An item
//! without an index key attribute is simply not in that index (sparse); one of
//! another type is rejected. An attribute template filling an index key
//! renders into the key's type, as `pk`/`sk` do, and is left out when one of
//! its columns is NULL (a sparse index) instead of rejecting the row.
//!
//! **Pointers.** `[[pointer]]` (`entity`, `pk`, `sk`, `max` | `min` =
//! `{ attribute, column, format }`, `attributes`, optional `name`): see
//! [`Pointer`] and [`BoundPointer::candidates`].
//!
//! **Lints.** [`Plan::lint`] and [`Entity::lint_keys`] warn about keys that
//! would overwrite items silently.

#![warn(missing_docs)]

// In layers: a module imports only from the groups above its own. Leaves;
// the raw TOML shapes; the validated plan types (and value conversions);
// loading raw → plan; binding a plan to the source's columns and mapping
// rows; what builds on those.
mod env;
mod error;
mod layout;
mod template;

mod spec;

mod convert;
mod plan;

mod load;

mod bind;

mod digest;
mod item_key;
mod lint;
mod update;

pub use bind::{BoundEntity, BoundPointer, ChildRow, ChildRows, ChildShape};
pub use digest::ItemDigest;
pub use error::{ErrorKind, Location, MappingError};
pub use lint::Lint;
pub use plan::MAX_READ_PARALLELISM;
pub use plan::MAX_WCU;
pub use plan::{Billing, Embed, Gsi, Pointer, Projection, MAX_GSIS};
pub use plan::{
    Entity, EntitySource, Plan, SourceSpec, TargetSpec, WriterSpec, DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_PAGE_SIZE, MAX_CONCURRENCY, SPEC_VERSION,
};
pub use template::MAX_PAD_WIDTH;

/// Whether `name` is a valid DynamoDB table (or index) name: 3 to 255
/// characters of a-z, A-Z, 0-9, `_`, `.` and `-`.
pub fn is_table_name(name: &str) -> bool {
    load::is_table_or_index_name(name)
}
pub use update::{
    IndexShape, JobAction, JobMode, JobRead, JobTarget, PutChange, TableShape, UpdateJob,
    DEFAULT_SEGMENTS, JOB_VERSION, MARKER_NAME, MARKER_VALUE, MAX_PAGE_SIZE, MAX_SEGMENTS,
    RUN_MARKER,
};
