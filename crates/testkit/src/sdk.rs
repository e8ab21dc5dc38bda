//! The bare DynamoDB SDK, for what sql2ddb's own API deliberately does not
//! offer: tests and benchmarks that look at a table directly (put an item
//! as another writer would, read one back), and the yardstick of
//! [`crate::sdk_load`]. sql2ddb itself reaches DynamoDB only through
//! `sql2ddb-dynamo`'s API; this is that crate's `bare` module (feature
//! `bare-sdk`), so no crate but `sql2ddb-dynamo` depends on the SDK.

pub use sql2ddb_dynamo::bare::*;
