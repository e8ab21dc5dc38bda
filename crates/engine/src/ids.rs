//! Run ids, shared by every job that starts a run.

/// A new run id: UTC time and a short random suffix (`20240501T100000Z-3f9a1c`).
pub fn new_run_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let short = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &short[..6])
}
