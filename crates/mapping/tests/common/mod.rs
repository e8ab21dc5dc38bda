//! Helpers shared by the mapping tests.
#![allow(dead_code)]

use std::path::Path;

use sql2ddb_core::{Column, MappedItem, Reject, Row};
use sql2ddb_mapping::{BoundEntity, ChildRows, MappingError, Plan};

/// The mapping file name used in messages.
pub const FILE: &str = "shop.toml";

/// Source, and a target with pk and sk of type S (lines 1..=7).
pub const HEAD: &str = r#"version = 1
[source]
url = "${DB_URL}"
[target]
table = "shop"
pk = { name = "PK", type = "S" }
sk = { name = "SK", type = "S" }
"#;

pub fn env(name: &str) -> Option<String> {
    match name {
        "DB_URL" => Some("postgres://app:secret@db/shop".into()),
        "REGION" => Some("eu-west-1".into()),
        _ => None,
    }
}

pub fn parse(text: &str) -> Result<Plan, MappingError> {
    Plan::parse(text, Path::new(FILE), &env)
}

/// The error of a mapping that must not load.
pub fn err(text: &str) -> MappingError {
    match parse(text) {
        Ok(_) => panic!("mapping should not load:\n{text}"),
        Err(e) => e,
    }
}

/// An error's line and column.
pub fn at(e: &MappingError) -> (usize, usize) {
    (e.location().line, e.location().col)
}

/// `HEAD` plus one entity `e` reading table `t`; `body` starts on line 12.
pub fn with_entity(body: &str) -> String {
    format!("{HEAD}\n[[entity]]\nname = \"e\"\nfrom = \"t\"\n{body}")
}

pub fn cols(spec: &[(&str, &str)]) -> Vec<Column> {
    spec.iter()
        .map(|(n, t)| Column {
            name: n.to_string(),
            sql_type: t.to_string(),
        })
        .collect()
}

/// Parses `text` and binds its first entity to `columns`, key `["id"]`.
pub fn bind(text: &str, columns: &[Column]) -> Result<BoundEntity, MappingError> {
    let plan = parse(text).unwrap_or_else(|e| panic!("mapping should load: {e}"));
    plan.entities[0].bind(&plan, columns, &["id".to_string()])
}

/// Binds an entity whose body is `body` and maps `row`.
pub fn map(body: &str, columns: &[(&str, &str)], row: Row) -> Result<MappedItem, Reject> {
    let bound = bind(&with_entity(body), &cols(columns)).unwrap_or_else(|e| panic!("bind: {e}"));
    bound.map_both(&row)
}

/// Maps rows both ways the engine can: to an attribute map
/// (`map_row`, what samples and verification use) and straight to the
/// encoded item the write path sends (`encode_row`); asserts the two agree
/// (the same item text, key, size and source key, or the same reject) and
/// returns the map.
pub trait MapBothWays {
    fn map_both(&self, row: &Row) -> Result<MappedItem, Reject>;
    fn map_both_with_children(&self, row: &Row, children: &ChildRows)
        -> Result<MappedItem, Reject>;
}

impl MapBothWays for BoundEntity {
    fn map_both(&self, row: &Row) -> Result<MappedItem, Reject> {
        self.map_both_with_children(row, &ChildRows::default())
    }

    fn map_both_with_children(
        &self,
        row: &Row,
        children: &ChildRows,
    ) -> Result<MappedItem, Reject> {
        let mapped = self.map_row_with_children(row, children);
        let encoded = self.encode_row_with_children(row, children);
        match (&mapped, &encoded) {
            (Ok(m), Ok(e)) => {
                let text = serde_json::to_string(&m.item).expect("an item serialises");
                assert_eq!(e.item.get(), text, "item text");
                assert_eq!(
                    (e.source_key.get(), e.size),
                    (m.source_key.to_string().as_str(), m.size)
                );
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "the same reject"),
            _ => panic!("map_row gave {mapped:?}, encode_row {encoded:?}"),
        }
        mapped
    }
}
