//! A progress store of the test's own, and a run's metadata to record in it.

use sql2ddb_dynamo::progress::{default_table, EntityMeta, ProgressStore, RunMeta};

use super::Dynamo;

/// A progress store on a new server in this process, in the table
/// [`default_table`] names for `name`; checks that `ensure` creates the
/// table once and keeps it the second time.
pub async fn progress_store(name: &str) -> (Dynamo, ProgressStore) {
    let dynamo = Dynamo::in_process().await;
    let store = ProgressStore::new(dynamo.handle.clone(), default_table(name));
    assert!(
        store.ensure().await.expect("the progress table"),
        "a new table is created"
    );
    assert!(
        !store.ensure().await.expect("the progress table"),
        "an existing one is kept"
    );
    (dynamo, store)
}

/// The metadata of a run of `mappings/shop.toml` with `entities` (name and
/// segments), as a run records it first.
pub fn run_meta(entities: &[(&str, u32)]) -> RunMeta {
    RunMeta {
        mapping: "mappings/shop.toml".into(),
        source: "postgres://root:hunter2@db/shop".into(),
        table: "shop".into(),
        entities: entities
            .iter()
            .map(|(name, segments)| EntityMeta {
                name: name.to_string(),
                segments: *segments,
                bounds: Vec::new(),
            })
            .collect(),
        started: "2024-05-01T10:00:00Z".into(),
        queue: None,
        snapshots: Vec::new(),
    }
}
