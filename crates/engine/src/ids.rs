//! Run ids, shared by every job that starts a run.

pub use sql2ddb_core::RunId;

/// A new run id: UTC time and a short random suffix (`20240501T100000Z-3f9a1c`).
pub fn new_run_id() -> RunId {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let short = uuid::Uuid::new_v4().simple().to_string();
    RunId::try_from(format!("{now}-{}", &short[..6])).expect("a time and hex digits are a run id")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_new_run_id_is_the_time_and_a_suffix() {
        let id = super::new_run_id();
        assert_eq!(id.len(), "20240501T100000Z-3f9a1c".len(), "{id}");
        assert_ne!(id, super::new_run_id());
    }
}
